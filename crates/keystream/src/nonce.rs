//! Block nonces: a random 64-bit epoch per mount ‖ a 32-bit counter; a fresh
//! epoch when the counter wraps. See docs/decisions/0036-random-nonce-epochs.md
//! for why not a persisted global counter.

use std::sync::Mutex;
use warpfs_crypto::Nonce;

/// Hands out each nonce exactly once for the life of the process.
#[derive(Debug)]
pub struct NonceSource {
    state: Mutex<(u64, u32)>,
}

impl Default for NonceSource {
    fn default() -> Self {
        Self::new()
    }
}

impl NonceSource {
    /// A source with a fresh random epoch.
    pub fn new() -> Self {
        Self {
            state: Mutex::new((fresh_epoch(), 0)),
        }
    }

    /// The next unused nonce.
    pub fn next(&self) -> Nonce {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.1 == u32::MAX {
            *s = (fresh_epoch(), 0);
        }
        let n = compose(s.0, s.1);
        s.1 += 1;
        n
    }

    /// The current epoch (for stats and tests).
    pub fn epoch(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0
    }
}

/// nonce = epoch (8 bytes, big-endian) ‖ counter (4 bytes, big-endian).
pub fn compose(epoch: u64, counter: u32) -> Nonce {
    let mut n = [0u8; 12];
    n[..8].copy_from_slice(&epoch.to_be_bytes());
    n[8..].copy_from_slice(&counter.to_be_bytes());
    n
}

/// A random epoch that is never zero, so no nonce is all zeros (an all-zero
/// nonce entry means "never written").
fn fresh_epoch() -> u64 {
    loop {
        let e = warpfs_crypto::rand::u64();
        if e != 0 {
            return e;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn nonces_are_unique_and_nonzero() {
        let s = NonceSource::new();
        let mut seen = HashSet::new();
        for _ in 0..10_000 {
            let n = s.next();
            assert_ne!(n, [0u8; 12]);
            assert!(seen.insert(n));
        }
    }

    #[test]
    fn counter_wrap_takes_a_new_epoch() {
        let s = NonceSource::new();
        let e0 = s.epoch();
        *s.state.lock().unwrap() = (e0, u32::MAX - 1);
        let a = s.next();
        assert_eq!(&a[..8], &e0.to_be_bytes());
        let b = s.next();
        assert_ne!(&b[..8], &e0.to_be_bytes());
        assert_eq!(&b[8..], &[0, 0, 0, 0]);
    }

    #[test]
    fn two_sources_have_different_epochs() {
        assert_ne!(NonceSource::new().epoch(), NonceSource::new().epoch());
    }
}
