//! Hostile cipher files: tampered, moved, swapped or foreign blocks are
//! detected (gcm over AES, and xchacha20-poly1305: FORMAT.md 15); broken
//! headers and entries are errors, never panics.

mod common;

use common::*;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use warpfs_content::layout::{data_offset, entry_offset, header_len};
use warpfs_content::{Cipher, CipherFile, ContentError, Mode};

const G: Mode = Mode::Gcm;

/// The authenticated layout over each cipher: `gcm` (AES-GCM) and
/// `xchacha20-poly1305` (the same layout, Poly1305 tags).
type Make = fn(Mode) -> Arc<Cipher>;
const CIPHERS: [(&str, Make); 2] = [("aes", cipher), ("xchacha20", xchacha_cipher)];

fn setup(blocks: usize, mk: Make) -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let data = pattern(5, blocks * 4096 + 100);
    open(&path, &mk(G)).write_at(0, &data).unwrap();
    (dir, path, data)
}

fn patch(path: &Path, off: u64, bytes: &[u8]) {
    rw(path).write_all_at(bytes, off).unwrap();
}

fn get(path: &Path, off: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rw(path).read_exact_at(&mut v, off).unwrap();
    v
}

fn read_block(f: &CipherFile, b: u64) -> Result<Vec<u8>, ContentError> {
    let mut v = vec![0x77u8; 4096];
    match f.read_at(b * 4096, &mut v) {
        Ok(n) => {
            v.truncate(n);
            Ok(v)
        }
        Err(e) => {
            assert!(v.iter().all(|&x| x == 0), "failed read returned bytes");
            Err(e)
        }
    }
}

fn assert_bad(r: Result<Vec<u8>, ContentError>, block: u64) {
    match r {
        Err(ContentError::BadTag { block: b }) => assert_eq!(b, block),
        other => panic!("expected BadTag({block}), got {other:?}"),
    }
}

/// Runs `t` once per cipher of [`CIPHERS`]; a failure names the cipher.
fn each_cipher(t: impl Fn(Make)) {
    for (name, mk) in CIPHERS {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t(mk)));
        if let Err(e) = r {
            eprintln!("failed with cipher {name}");
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn flipped_data_byte_fails_only_that_block() {
    each_cipher(|mk| {
        for k in [0u64, 7, 15, 16, 100, 271, 272, 300] {
            let (_d, path, data) = setup(300, mk);
            let off = data_offset(G, k) + 123.min(if k == 300 { 99 } else { 4095 });
            let mut b = get(&path, off, 1);
            b[0] ^= 0x01;
            patch(&path, off, &b);
            let f = open(&path, &mk(G));
            assert_bad(read_block(&f, k), k);
            assert_eq!(ContentError::BadTag { block: k }.errno(), 5);
            for other in [0u64, 1, 15, 16, 17, 271, 272, 299, 300] {
                if other != k {
                    let got = read_block(&f, other).unwrap();
                    assert_eq!(got, &data[other as usize * 4096..][..got.len()]);
                }
            }
            // a big read across it fails as a whole and returns nothing
            let mut big = vec![1u8; 2 << 20];
            assert!(f.read_at(0, &mut big).is_err());
            assert!(big.iter().all(|&x| x == 0));
            // a partial overwrite of the bad block cannot read-modify-write it
            assert!(f.write_at(k * 4096 + 1, b"x").is_err());
            // a full overwrite heals it (unless it is the short last block)
            if k < 300 {
                f.write_at(k * 4096, &[3u8; 4096]).unwrap();
                assert_eq!(read_block(&f, k).unwrap(), vec![3u8; 4096]);
            }
        }
    });
}

#[test]
fn flipped_tag_or_nonce_is_detected() {
    each_cipher(|mk| {
        for field in [0u64, 11, 16, 31] {
            let (_d, path, _) = setup(20, mk);
            let off = entry_offset(G, 17) + field;
            let mut b = get(&path, off, 1);
            b[0] ^= 0x80;
            patch(&path, off, &b);
            let f = open(&path, &mk(G));
            assert_bad(read_block(&f, 17), 17);
        }
    });
}

#[test]
fn block_copied_within_file_is_detected() {
    each_cipher(|mk| {
        for (src, dst) in [(2u64, 9u64), (3, 20), (20, 280), (280, 5)] {
            let (_d, path, _) = setup(300, mk);
            let ent = get(&path, entry_offset(G, src), 32);
            let dat = get(&path, data_offset(G, src), 4096);
            patch(&path, entry_offset(G, dst), &ent);
            patch(&path, data_offset(G, dst), &dat);
            let f = open(&path, &mk(G));
            assert_bad(read_block(&f, dst), dst);
            read_block(&f, src).unwrap();
        }
    });
}

#[test]
fn swapped_entries_are_detected() {
    each_cipher(|mk| {
        let (_d, path, _) = setup(40, mk);
        let (a, b) = (entry_offset(G, 4), entry_offset(G, 30));
        let (ea, eb) = (get(&path, a, 32), get(&path, b, 32));
        patch(&path, a, &eb);
        patch(&path, b, &ea);
        let f = open(&path, &mk(G));
        assert_bad(read_block(&f, 4), 4);
        assert_bad(read_block(&f, 30), 30);
        read_block(&f, 5).unwrap();
    });
}

#[test]
fn block_from_another_file_is_detected() {
    each_cipher(|mk| {
        // Same key, same block number, different file ID.
        let (_d1, p1, _) = setup(20, mk);
        let (_d2, p2, _) = setup(20, mk);
        for k in [3u64, 18] {
            let ent = get(&p2, entry_offset(G, k), 32);
            let dat = get(&p2, data_offset(G, k), 4096);
            patch(&p1, entry_offset(G, k), &ent);
            patch(&p1, data_offset(G, k), &dat);
            let f = open(&p1, &mk(G));
            assert_bad(read_block(&f, k), k);
        }
        // Swapping the whole header (file ID) breaks every block.
        let h2 = get(&p2, 0, 32);
        patch(&p1, 0, &h2);
        let f = open(&p1, &mk(G));
        assert_bad(read_block(&f, 0), 0);
    });
}

#[test]
fn torn_write_reads_as_error_in_gcm() {
    each_cipher(|mk| {
        // data rewritten but entry not (crash between the two)
        let (_d, path, _) = setup(4, mk);
        patch(&path, data_offset(G, 1), &[9u8; 4096]);
        let f = open(&path, &mk(G));
        assert_bad(read_block(&f, 1), 1);
    });
}

#[test]
fn broken_headers_are_errors() {
    each_cipher(|mk| {
        let c = mk(G);
        let (_d, path, _) = setup(2, mk);
        let good = get(&path, 0, 32);
        let try_open = |p: &Path| CipherFile::open(rw(p), c.clone(), "t".into());
        // bad magic, version, mode, flags, reserved
        for (i, v) in [(0usize, b'w'), (4, 9), (6, 1), (6, 7), (7, 1), (24, 1), (31, 0x80)] {
            let mut h = good.clone();
            h[i] = v;
            patch(&path, 0, &h);
            let e = try_open(&path).unwrap_err();
            assert!(matches!(e, ContentError::Corrupt { .. }), "byte {i}: {e:?}");
            assert_eq!(e.errno(), 5);
        }
        patch(&path, 0, &good);
        assert!(try_open(&path).is_ok());
        // lengths inside the header: truncated header / nnode
        for len in [1u64, 16, 31, 32, 100, header_len(G) - 1] {
            let f = rw(&path);
            f.set_len(len).unwrap();
            assert!(
                matches!(try_open(&path), Err(ContentError::Corrupt { .. })),
                "len {len}"
            );
        }
        // exactly the header: an empty file with a header
        rw(&path).set_len(header_len(G)).unwrap();
        patch(&path, 0, &good);
        let f = try_open(&path).unwrap();
        assert_eq!(f.size(), 0);
        f.write_at(5, b"abc").unwrap();
        let mut b = [1u8; 8];
        assert_eq!(f.read_at(0, &mut b).unwrap(), 8);
        assert_eq!(&b, b"\0\0\0\0\0abc");
        // an empty file is fine
        rw(&path).set_len(0).unwrap();
        assert_eq!(try_open(&path).unwrap().size(), 0);
        // random garbage never panics
        for seed in 0..50u64 {
            let g = pattern(seed, (seed as usize * 997) % 70_000);
            std::fs::write(&path, &g).unwrap();
            if let Ok(f) = try_open(&path) {
                let mut b = vec![0u8; 70_000];
                let _ = f.read_at(0, &mut b);
            }
        }
    });
}

#[test]
fn ctr_file_refused_by_gcm_volume() {
    each_cipher(|mk| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        open(&path, &mk(Mode::Ctr)).write_at(0, b"x").unwrap();
        assert!(CipherFile::open(rw(&path), mk(G), "t".into()).is_err());
    });
}

#[test]
fn hostile_entries_are_errors() {
    each_cipher(|mk| {
        for mode in [Mode::Ctr, Mode::Gcm] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f");
            let c = mk(mode);
            open(&path, &c).write_at(0, &[1u8; 3 * 4096]).unwrap();
            // key generation 1
            patch(&path, entry_offset(mode, 1) + 12, &[1]);
            // zero nonce with nonzero rest
            patch(&path, entry_offset(mode, 2), &[0u8; 12]);
            let f = open(&path, &c);
            let mut b = [0u8; 4096];
            f.read_at(0, &mut b).unwrap();
            let e = f.read_at(4096, &mut b).unwrap_err();
            assert!(matches!(e, ContentError::Corrupt { .. }), "{e:?}");
            let r = f.read_at(2 * 4096, &mut b);
            if mode == Mode::Gcm {
                // zero nonce but a tag: not a valid entry
                assert!(matches!(r, Err(ContentError::Corrupt { .. })), "{r:?}");
            } else {
                // ctr: the entry is now all zeros, i.e. never written
                assert_eq!(r.unwrap(), 4096);
                assert_eq!(b, [0u8; 4096]);
            }
        }
    });
}

#[test]
fn backing_file_shrunk_under_us_is_an_error() {
    each_cipher(|mk| {
        let (_d, path, _) = setup(10, mk);
        let f = open(&path, &mk(G));
        rw(&path).set_len(data_offset(G, 5)).unwrap();
        let mut b = vec![0u8; 4096];
        assert!(f.read_at(8 * 4096, &mut b).is_err());
        f.read_at(0, &mut b).unwrap();
    });
}

#[test]
fn a_file_of_the_other_cipher_fails_every_block() {
    // gcm and xchacha20-poly1305 share the layout and header mode byte:
    // a file written under one (same key bytes) opens under the other, but
    // no block's tag verifies, and nothing of its plaintext comes back.
    for (from, to) in [(CIPHERS[0], CIPHERS[1]), (CIPHERS[1], CIPHERS[0])] {
        let (_d, path, _) = setup(3, from.1);
        let f = open(&path, &to.1(G));
        for k in 0..4u64 {
            assert_bad(read_block(&f, k), k);
        }
    }
}
