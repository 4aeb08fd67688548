//! Master-key wrapping: AES-256-GCM under the password-derived key, with a
//! random 96-bit nonce and caller-chosen associated data (the config fields).

use crate::keys::{MasterKey, MASTER_KEY_LEN};
use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::Aes256Gcm;
use zeroize::Zeroizing;

/// Length of the wrapping nonce.
pub const WRAP_NONCE_LEN: usize = 12;
/// Length of a wrapped key: the encrypted master key and the 16-byte tag.
pub const WRAPPED_LEN: usize = MASTER_KEY_LEN + 16;

/// A wrapped master key as stored in `warpfs.conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapped {
    /// Random GCM nonce.
    pub nonce: [u8; WRAP_NONCE_LEN],
    /// Encrypted key ‖ GCM tag ([`WRAPPED_LEN`] bytes).
    pub ciphertext: Vec<u8>,
}

/// Why a wrapped key could not be unwrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WrapError {
    /// The tag did not verify: wrong password (KEK), or the associated data
    /// or wrapped key was changed.
    #[error("wrong key, or the wrapped key or its associated data was changed")]
    WrongKey,
    /// The ciphertext does not have [`WRAPPED_LEN`] bytes.
    #[error("wrapped key has the wrong length")]
    Malformed,
}

/// Encrypt `master` under `kek` with associated data `aad`.
pub fn wrap(kek: &[u8; 32], master: &MasterKey, aad: &[u8]) -> Wrapped {
    let nonce: [u8; WRAP_NONCE_LEN] = crate::rand::array();
    let cipher = Aes256Gcm::new(kek.into());
    let mut buf = Zeroizing::new(*master.as_bytes());
    let tag = cipher
        .encrypt_inout_detached(&nonce.into(), aad, buf.as_mut_slice().into())
        .expect("AES-GCM accepts a 32-byte message");
    let mut ciphertext = Vec::with_capacity(WRAPPED_LEN);
    ciphertext.extend_from_slice(&buf[..]);
    ciphertext.extend_from_slice(&tag);
    Wrapped { nonce, ciphertext }
}

/// Decrypt a wrapped master key; any wrong key, changed byte or changed
/// `aad` gives [`WrapError::WrongKey`].
pub fn unwrap(kek: &[u8; 32], wrapped: &Wrapped, aad: &[u8]) -> Result<MasterKey, WrapError> {
    if wrapped.ciphertext.len() != WRAPPED_LEN {
        return Err(WrapError::Malformed);
    }
    let (ct, tag) = wrapped.ciphertext.split_at(MASTER_KEY_LEN);
    let tag: [u8; 16] = tag.try_into().map_err(|_| WrapError::Malformed)?;
    let mut buf = Zeroizing::new([0u8; MASTER_KEY_LEN]);
    buf.copy_from_slice(ct);
    Aes256Gcm::new(kek.into())
        .decrypt_inout_detached(&wrapped.nonce.into(), aad, buf.as_mut_slice().into(), &tag.into())
        .map_err(|_| WrapError::WrongKey)?;
    MasterKey::from_bytes(&buf[..]).map_err(|_| WrapError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let m = MasterKey::generate();
        let kek = [3u8; 32];
        let w = wrap(&kek, &m, b"aad");
        assert_eq!(w.ciphertext.len(), WRAPPED_LEN);
        assert_ne!(&w.ciphertext[..32], m.as_bytes());
        assert_eq!(unwrap(&kek, &w, b"aad").unwrap(), m);
        // Fresh nonce each time.
        assert_ne!(wrap(&kek, &m, b"aad").nonce, w.nonce);
    }

    #[test]
    fn wrong_key_aad_or_bytes() {
        let m = MasterKey::generate();
        let w = wrap(&[3; 32], &m, b"aad");
        assert_eq!(unwrap(&[4; 32], &w, b"aad"), Err(WrapError::WrongKey));
        assert_eq!(unwrap(&[3; 32], &w, b"aae"), Err(WrapError::WrongKey));
        for i in 0..WRAPPED_LEN {
            let mut t = w.clone();
            t.ciphertext[i] ^= 0x80;
            assert_eq!(unwrap(&[3; 32], &t, b"aad"), Err(WrapError::WrongKey));
        }
        let mut t = w.clone();
        t.nonce[0] ^= 1;
        assert_eq!(unwrap(&[3; 32], &t, b"aad"), Err(WrapError::WrongKey));
        let mut t = w.clone();
        t.ciphertext.pop();
        assert_eq!(unwrap(&[3; 32], &t, b"aad"), Err(WrapError::Malformed));
    }

    #[test]
    fn matches_standard_aes_gcm() {
        // Independent check: our wrapped key is plain AES-256-GCM(kek, nonce, aad, master).
        use aes_gcm::aead::{Aead, Payload};
        let m = MasterKey::from_bytes(&[9; 32]).unwrap();
        let kek = [1u8; 32];
        let w = wrap(&kek, &m, b"the aad");
        let pt = Aes256Gcm::new(&kek.into())
            .decrypt(
                &w.nonce.into(),
                Payload {
                    msg: &w.ciphertext,
                    aad: b"the aad",
                },
            )
            .unwrap();
        assert_eq!(pt, [9u8; 32]);
    }
}
