//! Per-thread reusable buffers (FUSE threads are long-lived), so a read or
//! write allocates nothing in the steady state.

use std::cell::Cell;
use warpfs_crypto::Nonce;

/// Buffers of one operation.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Nonce entries of one segment run (at most one page), or of a read's
    /// planned window (the request plus look-ahead).
    pub entries: Vec<u8>,
    /// (block, nonce) of the written blocks of a read's planned window.
    pub nonces: Vec<(u64, Nonce)>,
    /// Ciphertext of one segment run (at most 1 MiB).
    pub data: Vec<u8>,
    /// A partially requested first block.
    pub head: Vec<u8>,
    /// A partially requested last block.
    pub tail: Vec<u8>,
}

/// Retained capacity cap per buffer; larger ones are dropped after use.
const KEEP: usize = 2 << 20;

thread_local! {
    static SCRATCH: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

/// Grow `v` to at least `n` bytes (contents unspecified) and return `&mut v[..n]`.
pub(crate) fn sized(v: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if v.len() < n {
        v.resize(n, 0);
    }
    &mut v[..n]
}

/// Run `f` with this thread's scratch buffers (fresh ones if nested).
pub(crate) fn with<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let mut s = SCRATCH.with(|c| c.take()).unwrap_or_default();
    let r = f(&mut s);
    for v in [&mut s.entries, &mut s.data, &mut s.head, &mut s.tail] {
        if v.capacity() > KEEP {
            *v = Vec::new();
        }
    }
    if s.nonces.capacity() > KEEP / 16 {
        s.nonces = Vec::new();
    }
    s.nonces.clear();
    SCRATCH.with(|c| c.set(Some(s)));
    r
}
