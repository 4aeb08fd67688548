//! The content layer driven by the speculative engine, as a mount drives it:
//! one `WritePool` per volume for every seal, one read window per open
//! `CipherFile` (through the `Keystream::reader` seam). Checked against a
//! reference model with speculation on and off, with concurrent readers and
//! writers, across backends (files written through the pool read back with
//! the direct backend and vice versa), and for GCM's verify-before-release
//! when a tampered block's mask was made ahead.

use proptest::prelude::*;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use warpfs_content::{layout, Cipher, CipherFile, ContentError, Mode};
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_engine::{Engine, EngineConfig, WritePool};
use warpfs_keystream::{Direct, Keystream};

const KEY: [u8; 32] = [0x42; 32];
const MB: u64 = 1 << 20;

fn engine(speculation: bool) -> Arc<Engine> {
    Engine::new(EngineConfig {
        threads: 2,
        speculation,
        pool_size: 16,
        window_max: 16,
        ..EngineConfig::default()
    })
    .unwrap()
}

fn pool_cipher(mode: Mode, e: &Arc<Engine>) -> Arc<Cipher> {
    let key = ContentKey::new(&KEY).unwrap();
    let id = e.add_key(key.clone());
    let ks: Arc<dyn Keystream> = Arc::new(WritePool::new(e.clone(), id).unwrap());
    Arc::new(Cipher::new(mode, ks, GcmTagger::new(&key)))
}

fn direct_cipher(mode: Mode) -> Arc<Cipher> {
    let key = ContentKey::new(&KEY).unwrap();
    Arc::new(Cipher::new(
        mode,
        Arc::new(Direct::new(key.clone())),
        GcmTagger::new(&key),
    ))
}

fn rw(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(p)
        .unwrap()
}

fn open(p: &Path, c: &Arc<Cipher>) -> CipherFile {
    CipherFile::open(rw(p), c.clone(), p.display().to_string()).unwrap()
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn read_all(f: &CipherFile, chunk: usize) -> Vec<u8> {
    let mut v = vec![0u8; f.size() as usize];
    for (i, c) in v.chunks_mut(chunk).enumerate() {
        assert_eq!(f.read_at((i * chunk) as u64, c).unwrap(), c.len());
    }
    v
}

#[derive(Debug, Clone)]
enum Op {
    Write(u64, usize, u64),
    Truncate(u64),
    Read(u64, usize),
    /// Read the whole file sequentially in chunks of this many bytes.
    Scan(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let off = prop_oneof![0u64..3 * MB, (0u64..4).prop_map(|k| 65536 + k * MB - 4096)];
    let len = prop_oneof![1usize..9000, 4096usize..(MB as usize + 8192)];
    prop_oneof![
        5 => (off.clone(), len.clone(), any::<u64>()).prop_map(|(o, l, s)| Op::Write(o, l, s)),
        1 => off.clone().prop_map(Op::Truncate),
        3 => (off, len).prop_map(|(o, l)| Op::Read(o, l)),
        2 => prop_oneof![Just(4096usize), Just(131072), Just(MB as usize), Just(10_000)].prop_map(Op::Scan),
    ]
}

fn run(mode: Mode, speculation: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let e = engine(speculation);
    let c = pool_cipher(mode, &e);
    let f = open(&path, &c);
    let mut model: Vec<u8> = Vec::new();
    for op in ops {
        match *op {
            Op::Write(o, l, s) => {
                let d = pattern(s, l);
                f.write_at(o, &d).unwrap();
                let end = o as usize + l;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[o as usize..end].copy_from_slice(&d);
            }
            Op::Truncate(n) => {
                f.set_len(n).unwrap();
                model.resize(n as usize, 0);
            }
            Op::Read(o, l) => {
                let mut b = vec![0xAAu8; l];
                let n = f.read_at(o, &mut b).unwrap();
                let s = (o as usize).min(model.len());
                let t = (o as usize + l).min(model.len());
                prop_assert_eq!(n, t - s);
                prop_assert!(b[..n] == model[s..t], "read mismatch at {} len {}", o, l);
            }
            Op::Scan(chunk) => prop_assert!(read_all(&f, chunk) == model, "scan mismatch"),
        }
    }
    drop(f);
    // The same bytes through the direct backend (same key): the format is one.
    let g = open(&path, &direct_cipher(mode));
    prop_assert!(read_all(&g, MB as usize) == model, "direct backend disagrees");
    let s = e.stats();
    prop_assert_eq!(s.speculation, speculation);
    if !speculation {
        prop_assert_eq!((s.ready_hits, s.made_by_workers), (0, 0));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: warpfs_testkit::cases(24), ..ProptestConfig::default() })]

    #[test]
    fn pool_and_windows_match_model(
        gcm in any::<bool>(),
        speculation in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..12),
    ) {
        run(if gcm { Mode::Gcm } else { Mode::Ctr }, speculation, &ops)?;
    }
}

#[test]
fn sequential_reads_hit_masks_made_ahead() {
    for mode in [Mode::Gcm, Mode::Ctr] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data = pattern(1, 4 * MB as usize + 777);
        std::fs::write(&path, []).unwrap();
        open(&path, &direct_cipher(mode)).write_at(0, &data).unwrap();
        let e = engine(true);
        let f = open(&path, &pool_cipher(mode, &e));
        // Let the workers finish the look-ahead between reads, so the test
        // does not depend on how the threads are scheduled.
        let mut got = vec![0u8; data.len()];
        for (i, c) in got.chunks_mut(128 * 1024).enumerate() {
            assert_eq!(f.read_at((i * 128 * 1024) as u64, c).unwrap(), c.len());
            e.quiesce();
        }
        assert_eq!(got, data);
        let s = e.stats();
        let blocks = data.len().div_ceil(4096) as u64;
        assert_eq!(s.applies, blocks, "every block through the window:\n{s}");
        assert_eq!(s.direct, 0, "{s}");
        assert!(s.window_reused > 0, "the look-ahead was used:\n{s}");
        // Every read after the first finds (at least) its first blocks made.
        assert!(s.ready_hits >= 32, "{s}");
    }
}

#[test]
fn concurrent_readers_and_writers_of_one_file() {
    for speculation in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let e = engine(speculation);
        let c = pool_cipher(Mode::Gcm, &e);
        let f = Arc::new(open(&path, &c));
        let base = pattern(7, 4 * MB as usize);
        f.write_at(0, &base).unwrap();
        // Readers scan the first 2 MiB in 64 KiB reads while writers rewrite
        // blocks of the last 2 MiB with the byte of their round.
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (f, base) = (f.clone(), base.clone());
                std::thread::spawn(move || {
                    for round in 0..6u8 {
                        if t < 2 {
                            let mut b = vec![0u8; 64 * 1024];
                            for i in 0..32u64 {
                                f.read_at(i * 65536, &mut b).unwrap();
                                assert!(b[..] == base[(i * 65536) as usize..][..65536], "reader {t}");
                            }
                        } else {
                            for i in 0..64u64 {
                                let blk = 512 + (i * 4 + t as u64) % 512;
                                f.write_at(blk * 4096, &[round; 4096]).unwrap();
                                let mut b = vec![0u8; 4096];
                                f.read_at(blk * 4096, &mut b).unwrap();
                                // Another writer never touches this block.
                                assert_eq!(b, vec![round; 4096], "writer {t}");
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}

#[test]
fn gcm_tampered_block_fails_even_with_its_mask_made_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let e = engine(true);
    let c = pool_cipher(Mode::Gcm, &e);
    let data = pattern(3, 64 * 4096);
    let f = open(&path, &c);
    f.write_at(0, &data).unwrap();
    // Sequential reads of blocks 20.. make the window look ahead past 28.
    let mut b = vec![0u8; 4 * 4096];
    f.read_at(20 * 4096, &mut b).unwrap();
    f.read_at(24 * 4096, &mut b).unwrap();
    e.quiesce();
    // Flip one ciphertext byte of block 29 on disk.
    let raw = rw(&path);
    let off = layout::data_offset(Mode::Gcm, 29) + 100;
    let mut x = [0u8; 1];
    raw.read_exact_at(&mut x, off).unwrap();
    raw.write_all_at(&[x[0] ^ 1], off).unwrap();
    let mut b = vec![0x55u8; 4 * 4096];
    let err = f.read_at(28 * 4096, &mut b).unwrap_err();
    assert!(matches!(err, ContentError::BadTag { block: 29 }), "{err:?}");
    assert!(b.iter().all(|&v| v == 0), "nothing of a failed read is returned");
    // The untouched blocks around it still read.
    let mut one = vec![0u8; 4096];
    f.read_at(28 * 4096, &mut one).unwrap();
    assert_eq!(one, data[28 * 4096..29 * 4096]);
    f.read_at(30 * 4096, &mut one).unwrap();
    assert_eq!(one, data[30 * 4096..31 * 4096]);
}
