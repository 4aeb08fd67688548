//! The read side of the seam: one [`BlockReader`] per open file.
//!
//! Per read request the content layer calls, in this order:
//! 1. [`plan`](BlockReader::plan) with the request's blocks; the answer is
//!    the range of blocks the reader wants nonces for (the request, plus
//!    look-ahead when it speculates);
//! 2. [`prefetch`](BlockReader::prefetch) with the (block, nonce) pairs of
//!    the written blocks of that range, read from the nonce table (before
//!    the data is read, so masks are made while the data is on its way);
//! 3. [`open`](BlockReader::open) for each block of the request, with the
//!    nonce it read under the file's range lock. A reader must use a mask
//!    only when it was made for exactly that nonce;
//! 4. [`finish`](BlockReader::finish) with the same range as `plan`, also
//!    when the request failed.
//!
//! Several requests of one file may be between `plan` and `finish` at once
//! (from different threads).

use crate::{Keystream, Nonce, TagMask};
use std::ops::Range;
use std::sync::Arc;

/// Masks for the reads of one open file.
pub trait BlockReader: Send + Sync {
    /// A read of blocks `[start, start + count)` is coming. Returns the
    /// blocks whose nonces the reader wants; it always contains the request.
    fn plan(&self, start: u64, count: u64) -> Range<u64> {
        start..start.saturating_add(count.max(1))
    }

    /// Nonces of the written blocks of the planned range, in block order
    /// (holes left out). Only a hint: it may be ignored.
    fn prefetch(&self, blocks: &[(u64, Nonce)]) {
        let _ = blocks;
    }

    /// Decrypt (XOR) `buf`, the ciphertext of block `block` whose nonce is
    /// `nonce`, in place; returns the tag mask.
    fn open(&self, block: u64, nonce: &Nonce, buf: &mut [u8]) -> TagMask;

    /// The request `[start, start + count)` given to [`plan`](Self::plan)
    /// is done (or failed).
    fn finish(&self, start: u64, count: u64) {
        let _ = (start, count);
    }

    /// Drop every mask made ahead (e.g. after a truncation). Only a hint.
    fn clear(&self) {}
}

/// The reader without look-ahead: every block through [`Keystream::open`].
pub struct OnDemand<K: Keystream + ?Sized> {
    keystream: Arc<K>,
}

impl<K: Keystream + ?Sized> OnDemand<K> {
    /// A reader over `keystream`.
    pub fn new(keystream: Arc<K>) -> Self {
        Self { keystream }
    }
}

impl<K: Keystream + ?Sized> std::fmt::Debug for OnDemand<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnDemand")
    }
}

impl<K: Keystream + ?Sized> BlockReader for OnDemand<K> {
    fn open(&self, _block: u64, nonce: &Nonce, buf: &mut [u8]) -> TagMask {
        self.keystream.open(nonce, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Direct;
    use warpfs_crypto::ContentKey;

    #[test]
    fn default_reader_opens_like_the_keystream() {
        let ks: Arc<dyn Keystream> = Arc::new(Direct::new(ContentKey::new(&[9u8; 32]).unwrap()));
        let r = ks.clone().reader();
        assert_eq!(r.plan(7, 3), 7..10);
        assert_eq!(r.plan(7, 0), 7..8);
        let pt = vec![0x42u8; 4096];
        let mut buf = pt.clone();
        let (nonce, ej0) = ks.seal(&mut buf);
        r.prefetch(&[(7, nonce)]);
        assert_eq!(r.open(7, &nonce, &mut buf), ej0);
        assert_eq!(buf, pt);
        r.finish(7, 3);
        r.clear();
    }
}
