//! Concurrent writers and readers on one CipherFile.

mod common;

use common::*;
use std::sync::Arc;
use warpfs_content::Mode;

const BLOCKS: u64 = 300;

/// Block content written by `writer` in its `seq`-th write: recognisable.
fn block_of(writer: u8, seq: u32) -> Vec<u8> {
    let mut v = pattern(((writer as u64) << 32) | seq as u64, 4096);
    v[0] = writer;
    v[1..5].copy_from_slice(&seq.to_le_bytes());
    v
}

fn valid(block: &[u8]) -> bool {
    if block.iter().all(|&x| x == 0) {
        return true;
    }
    let w = block[0];
    let seq = u32::from_le_bytes(block[1..5].try_into().unwrap());
    w < 4 && block_of(w, seq) == block
}

#[test]
fn four_writers_overlapping_block_aligned() {
    for mode in [Mode::Gcm, Mode::Ctr, Mode::Xts] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = Arc::new(open(&path, &cipher(mode)));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (f, stop) = (f.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 40 * 4096];
                    let mut i = r as u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let start = (i * 37) % BLOCKS;
                        let n = f.read_at(start * 4096, &mut buf).unwrap();
                        for blk in buf[..n].chunks(4096) {
                            assert!(blk.len() < 4096 || valid(blk), "torn block seen by reader");
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        let writers: Vec<_> = (0..4u8)
            .map(|w| {
                let f = f.clone();
                std::thread::spawn(move || {
                    for seq in 0..60u32 {
                        // mix of disjoint (per-writer stripes) and overlapping ranges,
                        // some crossing the nnode/page boundary, some extending
                        let start = match seq % 3 {
                            0 => w as u64 * 70 + seq as u64 % 50,
                            1 => 10 + (seq as u64 * 7) % 20,
                            _ => 260 + (seq as u64 % 30),
                        };
                        let n = 1 + (seq as u64 * 13 + w as u64) % 24;
                        let mut data = Vec::with_capacity(n as usize * 4096);
                        for _ in 0..n {
                            data.extend_from_slice(&block_of(w, seq));
                        }
                        f.write_at(start * 4096, &data).unwrap();
                    }
                })
            })
            .collect();
        for t in writers {
            t.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in readers {
            t.join().unwrap();
        }
        let all = read_all(&f);
        assert_eq!(all.len() % 4096, 0);
        for (b, blk) in all.chunks(4096).enumerate() {
            assert!(valid(blk), "block {b} is not one writer's block");
        }
        drop(f);
        let f = open(&path, &cipher(mode));
        assert_eq!(read_all(&f), all);
    }
}

#[test]
fn unaligned_writers_keep_every_tag_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let f = Arc::new(open(&path, &cipher(Mode::Gcm)));
    let ts: Vec<_> = (0..4u64)
        .map(|w| {
            let f = f.clone();
            std::thread::spawn(move || {
                for i in 0..80u64 {
                    let off = (w * 1_000_003 + i * 77_777) % (3 << 20);
                    let len = 1 + ((w * 31 + i * 1009) % 70_000) as usize;
                    f.write_at(off, &vec![(w as u8 + 1) * 16 + (i as u8 % 16); len])
                        .unwrap();
                    if i % 20 == 19 {
                        f.punch_hole(off / 2, 5000).unwrap();
                    }
                    if w == 3 && i % 25 == 24 {
                        f.set_len(f.size() - 1234).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    // every block authenticates, and bytes are only values some writer wrote
    let all = read_all(&f);
    assert!(all.iter().all(|&x| x == 0 || (16..80).contains(&x)));
    drop(f);
    let f = open(&path, &cipher(Mode::Gcm));
    assert_eq!(read_all(&f), all);
}
