//! File content I/O through a real mount: random writes, sparse files,
//! truncation, append, big sequential I/O, concurrent writers. One test
//! binary (`cargo test -p warpfs --test io`): the reference model and its
//! checks here, one module per kind of I/O.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod concurrent;
mod direct;
mod kernel;
mod seek;
mod sizes;
mod writes;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};

/// Apply a write to the reference model.
fn model_write(model: &mut Vec<u8>, off: u64, data: &[u8]) {
    let end = off as usize + data.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[off as usize..end].copy_from_slice(data);
}

/// Read the whole file through a fresh descriptor after dropping its cached
/// pages, and compare with the model (also a few random sub-range reads).
fn verify(path: &Path, model: &[u8], rng: &mut Rng, ctx: &str) {
    let f = File::open(path).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    drop_cache(&f);
    let len = f.metadata().unwrap().len();
    assert_eq!(len, model.len() as u64, "{ctx}: st_size");
    let all = read_at(&f, 0, model.len() + 10).unwrap_or_else(|e| panic!("{ctx}: read: {e}"));
    assert_bytes_eq(&all, model, ctx);
    for _ in 0..8 {
        if model.is_empty() {
            break;
        }
        let off = rng.below(model.len() as u64);
        let n = rng.range(1, 70_000) as usize;
        let got = read_at(&f, off, n).unwrap_or_else(|e| panic!("{ctx}: read_at {off}+{n}: {e}"));
        let end = (off as usize + n).min(model.len());
        assert_bytes_eq(&got, &model[off as usize..end], &format!("{ctx}: read_at({off}, {n})"));
    }
}

/// Check the backing length of the only cipher file in the root against
/// FORMAT.md 3.4 (call while unmounted).
fn check_backing_len(v: &Volume, size: u64, ctx: &str) {
    let b = v.single_backing_file();
    let got = fs::metadata(&b).unwrap().len();
    assert_eq!(
        got,
        v.mode.backing_len(size),
        "{ctx}: backing length for plaintext size {size} (FORMAT.md 3.4)"
    );
}
