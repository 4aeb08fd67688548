//! Concurrent writers and readers on one CipherFile whose masks come from
//! the speculative engine (write pool + read window): a reader must see
//! every block as one writer's whole block, never a block decrypted with a
//! mask made for another nonce of that block.
//!
//! Checked to fail (ctr, gcm: every run) when the read window looks a mask
//! up by block number alone, and (all modes) when a read does not hold its
//! blocks' range lock (nonce entry and ciphertext of different writes).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use warpfs_content::{Cipher, CipherFile, Mode};
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_engine::{Engine, EngineConfig, WritePool};

const BLOCKS: u64 = 300;
const BS: usize = 4096;

fn engine_cipher(mode: Mode) -> Arc<Cipher> {
    let key = ContentKey::new(&common::KEY).unwrap();
    let tagger = GcmTagger::new(&key);
    let engine = Engine::new(EngineConfig {
        threads: 2,
        pool_size: 64,
        ..EngineConfig::default()
    })
    .unwrap();
    let kid = engine.add_key(ContentKey::new(&common::KEY).unwrap());
    let pool = Arc::new(WritePool::new(engine, kid).unwrap());
    if mode == Mode::Xts {
        let x = warpfs_crypto::XtsKey::new(warpfs_crypto::XtsCipher::Aes, &[0x43; 64]).unwrap();
        return Arc::new(Cipher::new_xts(x, pool, tagger));
    }
    Arc::new(Cipher::new(mode, pool, tagger))
}

/// Writer `w`'s content of block `b` (writer 4: the initial content).
fn pat(w: u64, b: u64) -> Vec<u8> {
    let mut v = common::pattern(w * 1_000_003 + b + 1, BS);
    v[0] = w as u8;
    v
}

fn run(mode: Mode, rounds: usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let f = Arc::new(CipherFile::open(common::rw(&path), engine_cipher(mode), "f".into()).unwrap());
    let pats: Arc<Vec<Vec<Vec<u8>>>> = Arc::new((0..5).map(|w| (0..BLOCKS).map(|b| pat(w, b)).collect()).collect());
    f.write_at(0, &pats[4].concat()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    // Readers: sequential sweeps (the window's look-ahead) and random
    // 16-block reads (inline masks), like the kernel's read-ahead and a
    // reader dropping its cache.
    let readers: Vec<_> = (0..3u64)
        .map(|r| {
            let (f, stop, bad, pats) = (f.clone(), stop.clone(), bad.clone(), pats.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 32 * BS];
                let mut x = r * 7919 + 1;
                let mut b0 = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let n = if r == 2 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        b0 = (x >> 33) % (BLOCKS - 16);
                        16
                    } else {
                        // 32-block and 8-block sequential sweeps.
                        (32 - (r as usize * 24)).min((BLOCKS - b0) as usize)
                    };
                    let got = f.read_at(b0 * BS as u64, &mut buf[..n * BS]);
                    match got {
                        Err(e) => bad.lock().unwrap().push(format!("read at block {b0}: {e}")),
                        Ok(len) => {
                            for (k, blk) in buf[..len].chunks(BS).enumerate() {
                                let b = b0 + k as u64;
                                if !(0..5).any(|w| pats[w][b as usize] == blk) {
                                    bad.lock().unwrap().push(format!("block {b} is no writer's block"));
                                }
                            }
                        }
                    }
                    if r != 2 {
                        b0 += n as u64;
                        if b0 >= BLOCKS {
                            b0 = 0;
                        }
                    }
                }
            })
        })
        .collect();
    let barrier = Arc::new(Barrier::new(4));
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let (f, pats, barrier) = (f.clone(), pats.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut x = w * 104_729 + 3;
                barrier.wait();
                for _ in 0..rounds {
                    let mut b = 0u64;
                    while b < BLOCKS {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let n = (1 + (x >> 33) % 8).min(BLOCKS - b);
                        let data: Vec<u8> = (b..b + n).flat_map(|y| pats[w as usize][y as usize].clone()).collect();
                        f.write_at(b * BS as u64, &data).unwrap();
                        b += n;
                    }
                }
            })
        })
        .collect();
    for t in writers {
        t.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for t in readers {
        t.join().unwrap();
    }
    let bad = bad.lock().unwrap();
    assert!(
        bad.is_empty(),
        "{mode:?}: {} bad reads, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
}

#[test]
fn speculative_readers_never_see_a_foreign_mask_ctr() {
    run(Mode::Ctr, 20);
}

#[test]
fn speculative_readers_never_see_a_foreign_mask_gcm() {
    run(Mode::Gcm, 20);
}

#[test]
fn speculative_readers_never_see_a_foreign_mask_xts() {
    run(Mode::Xts, 20);
}
