//! The direct backend: computes each mask on the calling thread when asked.
//! It is what `--speculation off` falls back to and the reference the
//! speculative engine is tested against.

use crate::{Keystream, NonceSource};
use warpfs_crypto::gcm::{DATA_COUNTER, J0_COUNTER};
use warpfs_crypto::{ContentKey, MaskLayout, Nonce, TagMask, XChaChaKey, TAG_MASK_LEN};

/// The content key: a 128-bit block cipher's or XChaCha20's.
#[derive(Debug)]
enum Key {
    Block(ContentKey),
    XChaCha(XChaChaKey),
}

/// Masks made on demand, on the caller's thread.
#[derive(Debug)]
pub struct Direct {
    key: Key,
    nonces: NonceSource,
}

impl Direct {
    /// A backend for one block-cipher content key (AES or Twofish) with a
    /// fresh nonce epoch.
    pub fn new(key: ContentKey) -> Self {
        Self {
            key: Key::Block(key),
            nonces: NonceSource::new(),
        }
    }

    /// A backend for one XChaCha20 content key (FORMAT.md 15) with a fresh
    /// nonce epoch.
    pub fn xchacha(key: XChaChaKey) -> Self {
        Self {
            key: Key::XChaCha(key),
            nonces: NonceSource::new(),
        }
    }

    /// Where the tag mask and the data lie in this key's masks.
    pub fn layout(&self) -> MaskLayout {
        match &self.key {
            Key::Block(_) => MaskLayout::BLOCK,
            Key::XChaCha(_) => MaskLayout::XCHACHA,
        }
    }
}

impl Keystream for Direct {
    fn seal(&self, buf: &mut [u8]) -> (Nonce, TagMask) {
        let nonce = self.nonces.next();
        let tm = self.open(&nonce, buf);
        (nonce, tm)
    }

    fn open(&self, nonce: &Nonce, buf: &mut [u8]) -> TagMask {
        match &self.key {
            Key::Block(k) => k.xor_keystream(nonce, DATA_COUNTER, buf),
            Key::XChaCha(k) => k.xor_at(nonce, 1, 0, buf),
        }
        self.tag_mask(nonce)
    }

    fn tag_mask(&self, nonce: &Nonce) -> TagMask {
        match &self.key {
            Key::Block(k) => {
                let mut m = [0u8; TAG_MASK_LEN];
                k.keystream(nonce, J0_COUNTER, &mut m[..16]);
                m
            }
            Key::XChaCha(k) => k.tag_mask(nonce),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_open_round_trips_and_matches_plain_ctr() {
        let key = ContentKey::new(&[3u8; 32]).unwrap();
        let d = Direct::new(key.clone());
        assert_eq!(d.layout(), MaskLayout::BLOCK);
        let pt: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        let mut buf = pt.clone();
        let (nonce, ej0) = d.seal(&mut buf);
        assert_ne!(buf, pt);
        let mut expect = pt.clone();
        key.xor_keystream(&nonce, DATA_COUNTER, &mut expect);
        assert_eq!(buf, expect);
        assert_eq!(&ej0[..16], &warpfs_crypto::gcm::tag_mask(&key, &nonce));
        assert_eq!(&ej0[16..], &[0u8; 16]);
        assert_eq!(d.open(&nonce, &mut buf), ej0);
        assert_eq!(buf, pt);
    }

    #[test]
    fn xchacha_masks_are_the_stream_from_block_0() {
        let key = XChaChaKey::new(&[4u8; 32]).unwrap();
        let d = Direct::xchacha(key.clone());
        assert_eq!(d.layout(), MaskLayout::XCHACHA);
        let pt: Vec<u8> = (0..4000u32).map(|i| (i * 5) as u8).collect();
        let mut buf = pt.clone();
        let (nonce, otk) = d.seal(&mut buf);
        let mut stream = vec![0u8; 64 + pt.len()];
        key.keystream(&nonce, 0, &mut stream);
        assert_eq!(&otk[..], &stream[..32]);
        let want: Vec<u8> = pt.iter().zip(&stream[64..]).map(|(a, b)| a ^ b).collect();
        assert_eq!(buf, want);
        assert_eq!(d.open(&nonce, &mut buf), otk);
        assert_eq!(buf, pt);
    }
}
