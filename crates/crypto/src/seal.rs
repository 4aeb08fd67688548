//! Randomised authenticated encryption of small values (symlink targets,
//! xattr values): sealed = 16-byte random nonce ‖ AES-SIV(key, AD = [ad, nonce], pt).

use crate::error::{Error, Result};
use aes_siv::siv::Aes256Siv;
use aes_siv::KeyInit;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// Length of the random nonce in front of every sealed value.
pub const SEAL_NONCE_LEN: usize = 16;
/// Bytes a sealed value adds to its plaintext (nonce + SIV tag).
pub const SEAL_OVERHEAD: usize = SEAL_NONCE_LEN + 16;
/// Suggested associated data for symlink targets.
pub const SYMLINK_AD: &[u8] = b"warpfs symlink";

/// Seals and opens values with AES-SIV (64-byte key) and a random nonce, so
/// equal plaintexts give unrelated ciphertexts.
#[derive(Clone)]
pub struct Sealer {
    /// The AES-SIV key, on locked pages zeroed on drop.
    key: crate::locked::Locked<[u8; 64]>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// A sealer from its 64-byte AES-SIV key.
    pub fn new(key: &[u8; 64]) -> Self {
        Self {
            key: crate::locked::Locked::new(*key),
        }
    }

    fn siv(&self) -> Aes256Siv {
        Aes256Siv::new((&*self.key).into())
    }

    /// Seal `pt` (may be empty) bound to `ad`: nonce ‖ SIV tag ‖ ciphertext,
    /// `pt.len() + 32` bytes.
    pub fn seal(&self, ad: &[u8], pt: &[u8]) -> Vec<u8> {
        self.seal_with_nonce(ad, &crate::rand::array(), pt)
    }

    /// [`Self::seal`] with a given nonce instead of a random one (a reverse
    /// view derives it from the path and the value, so that the same value
    /// seals to the same bytes on every mount).
    pub fn seal_with_nonce(&self, ad: &[u8], nonce: &[u8; SEAL_NONCE_LEN], pt: &[u8]) -> Vec<u8> {
        let ct = self
            .siv()
            .encrypt([ad, &nonce[..]], pt)
            .expect("two AES-SIV headers are within MAX_HEADERS");
        let mut out = Vec::with_capacity(SEAL_NONCE_LEN + ct.len());
        out.extend_from_slice(nonce);
        out.extend_from_slice(&ct);
        out
    }

    /// Open a sealed value (hostile input): too short → `Malformed`, wrong
    /// key, AD or any changed byte → `Auth`.
    pub fn open(&self, ad: &[u8], sealed: &[u8]) -> Result<Vec<u8>> {
        if sealed.len() < SEAL_OVERHEAD {
            return Err(Error::Malformed("sealed value is too short"));
        }
        let (nonce, ct) = sealed.split_at(SEAL_NONCE_LEN);
        self.siv().decrypt([ad, nonce], ct).map_err(|_| Error::Auth)
    }

    /// [`Self::seal`], encoded base64url without padding (a backing symlink target).
    pub fn seal_b64(&self, ad: &[u8], pt: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.seal(ad, pt))
    }

    /// [`Self::seal_with_nonce`], encoded base64url without padding.
    pub fn seal_b64_with_nonce(&self, ad: &[u8], nonce: &[u8; SEAL_NONCE_LEN], pt: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.seal_with_nonce(ad, nonce, pt))
    }

    /// Decode and open a value made by [`Self::seal_b64`] (hostile input).
    pub fn open_b64(&self, ad: &[u8], encoded: &str) -> Result<Vec<u8>> {
        let raw = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| Error::Malformed("sealed value is not base64url"))?;
        self.open(ad, &raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s() -> Sealer {
        Sealer::new(&[5; 64])
    }

    #[test]
    fn round_trip_randomised() {
        let s = s();
        let a = s.seal(b"ad", b"../target/file");
        let b = s.seal(b"ad", b"../target/file");
        assert_ne!(a, b);
        assert_eq!(a.len(), 14 + SEAL_OVERHEAD);
        assert_eq!(s.open(b"ad", &a).unwrap(), b"../target/file");
        assert_eq!(s.open(b"ad", &b).unwrap(), b"../target/file");
        let e = s.seal(b"", b"");
        assert_eq!(e.len(), SEAL_OVERHEAD);
        assert_eq!(s.open(b"", &e).unwrap(), b"");
    }

    #[test]
    fn ad_and_key_are_bound() {
        let s = s();
        let a = s.seal(b"ad", b"x");
        assert_eq!(s.open(b"ae", &a), Err(Error::Auth));
        assert_eq!(Sealer::new(&[6; 64]).open(b"ad", &a), Err(Error::Auth));
        // Moving the AD into the nonce position does not verify either.
        assert_eq!(s.open(b"", &a), Err(Error::Auth));
    }

    #[test]
    fn hostile_input() {
        let s = s();
        assert!(matches!(s.open(b"", &[]), Err(Error::Malformed(_))));
        assert!(matches!(s.open(b"", &[0; 31]), Err(Error::Malformed(_))));
        assert_eq!(s.open(b"", &[0; 32]), Err(Error::Auth));
        assert!(matches!(s.open_b64(b"", "a.b"), Err(Error::Malformed(_))));
        assert!(matches!(s.open_b64(b"", ""), Err(Error::Malformed(_))));
    }

    #[test]
    fn b64_round_trip() {
        let s = s();
        let e = s.seal_b64(SYMLINK_AD, b"/etc/passwd");
        assert!(e.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(s.open_b64(SYMLINK_AD, &e).unwrap(), b"/etc/passwd");
    }

    proptest! {
        #[test]
        fn any_change_fails(pt in proptest::collection::vec(0u8.., 0..200), pos in 0usize..1000, bit in 0usize..8) {
            let s = s();
            let mut v = s.seal(b"k", &pt);
            prop_assert_eq!(s.open(b"k", &v).unwrap(), pt);
            let p = pos % v.len();
            v[p] ^= 1 << bit;
            prop_assert_eq!(s.open(b"k", &v), Err(Error::Auth));
            prop_assert!(s.open(b"k", &v[..v.len() - 1]).is_err());
        }

        #[test]
        fn garbage_never_panics(g in proptest::collection::vec(0u8.., 0..200), t in "\\PC{0,200}") {
            let s = s();
            prop_assert!(s.open(b"", &g).is_err());
            let _ = s.open_b64(b"", &t);
        }
    }
}
