//! The direct backend: computes each mask on the calling thread when asked.
//! It is what `--speculation off` falls back to and the reference the
//! speculative engine is tested against.

use crate::{Keystream, NonceSource};
use warpfs_crypto::gcm::{DATA_COUNTER, J0_COUNTER};
use warpfs_crypto::{ContentKey, Nonce};

/// Masks made on demand, on the caller's thread.
#[derive(Debug)]
pub struct Direct {
    key: ContentKey,
    nonces: NonceSource,
}

impl Direct {
    /// A backend for one content key with a fresh nonce epoch.
    pub fn new(key: ContentKey) -> Self {
        Self {
            key,
            nonces: NonceSource::new(),
        }
    }
}

impl Keystream for Direct {
    fn seal(&self, buf: &mut [u8]) -> (Nonce, [u8; 16]) {
        let nonce = self.nonces.next();
        let ej0 = self.open(&nonce, buf);
        (nonce, ej0)
    }

    fn open(&self, nonce: &Nonce, buf: &mut [u8]) -> [u8; 16] {
        self.key.xor_keystream(nonce, DATA_COUNTER, buf);
        self.tag_mask(nonce)
    }

    fn tag_mask(&self, nonce: &Nonce) -> [u8; 16] {
        let mut m = [0u8; 16];
        self.key.keystream(nonce, J0_COUNTER, &mut m);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_open_round_trips_and_matches_plain_ctr() {
        let key = ContentKey::new(&[3u8; 32]).unwrap();
        let d = Direct::new(key.clone());
        let pt: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        let mut buf = pt.clone();
        let (nonce, ej0) = d.seal(&mut buf);
        assert_ne!(buf, pt);
        let mut expect = pt.clone();
        key.xor_keystream(&nonce, DATA_COUNTER, &mut expect);
        assert_eq!(buf, expect);
        assert_eq!(d.open(&nonce, &mut buf), ej0);
        assert_eq!(buf, pt);
    }
}
