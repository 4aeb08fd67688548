//! Shared helpers for the content integration tests.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::Arc;
use warpfs_content::{Cipher, CipherFile, Mode};
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

pub const KEY: [u8; 32] = [0x42; 32];

pub fn cipher(mode: Mode) -> Arc<Cipher> {
    let key = ContentKey::new(&KEY).unwrap();
    let tagger = GcmTagger::new(&key);
    if mode == Mode::Xts {
        let x = warpfs_crypto::XtsKey::new(warpfs_crypto::XtsCipher::Aes, &[0x43; 64]).unwrap();
        return Arc::new(Cipher::new_xts(x, Arc::new(Direct::new(key)), tagger));
    }
    Arc::new(Cipher::new(mode, Arc::new(Direct::new(key)), tagger))
}

/// An XChaCha20 cipher (FORMAT.md 15): `Mode::Gcm` is
/// `xchacha20-poly1305`, `Mode::Ctr` is `ctr-xchacha20`.
pub fn xchacha_cipher(mode: Mode) -> Arc<Cipher> {
    let key = warpfs_crypto::XChaChaKey::new(&KEY).unwrap();
    Arc::new(Cipher::new_xchacha(mode, Arc::new(Direct::xchacha(key))))
}

pub fn rw(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap()
}

pub fn open(path: &Path, c: &Arc<Cipher>) -> CipherFile {
    CipherFile::open(rw(path), c.clone(), path.display().to_string()).unwrap()
}

/// Deterministic pseudo-random bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
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

pub fn read_all(f: &CipherFile) -> Vec<u8> {
    let mut v = vec![0u8; f.size() as usize];
    let n = f.read_at(0, &mut v).unwrap();
    assert_eq!(n, v.len());
    v
}
