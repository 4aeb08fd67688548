//! The key that authenticates rekey undo journals (FORMAT.md 10.3): an
//! HMAC-SHA256 tag under an HKDF-SHA256 subkey of the master key, so that a
//! journal someone without the master key wrote into CIPHERDIR (a forged
//! record, a record with its checksum recomputed) is refused, never applied.

use crate::keys::MasterKey;
use crate::locked::Locked;
use hkdf::hmac::{Hmac, KeyInit, Mac};
use hkdf::Hkdf;
use sha2::Sha256;

/// HKDF info string of the journal key.
pub const INFO_JOURNAL: &[u8] = b"warpfs v1 rekey journal";
/// Length of a journal tag in bytes.
pub const JOURNAL_TAG_LEN: usize = 32;

/// HKDF-SHA256 of the master key (no salt) under [`INFO_JOURNAL`], 32
/// bytes, in locked memory zeroized on drop; `Debug` never shows it.
pub struct JournalKey(Locked<[u8; 32]>);

impl std::fmt::Debug for JournalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JournalKey(..)")
    }
}

impl JournalKey {
    /// The journal key of `master`.
    pub fn derive(master: &MasterKey) -> Self {
        let mut k = Locked::new([0u8; 32]);
        Hkdf::<Sha256>::new(None, master.as_bytes())
            .expand(INFO_JOURNAL, &mut *k)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Self(k)
    }

    fn mac(&self, data: &[u8]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&*self.0).expect("HMAC takes any key length");
        m.update(data);
        m
    }

    /// HMAC-SHA256 of `data`.
    pub fn tag(&self, data: &[u8]) -> [u8; JOURNAL_TAG_LEN] {
        self.mac(data).finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag of `data` (constant time).
    pub fn verify(&self, data: &[u8], tag: &[u8]) -> bool {
        self.mac(data).verify_slice(tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> JournalKey {
        JournalKey::derive(&MasterKey::from_bytes(&[b; 32]).unwrap())
    }

    fn hmac(k: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(k).unwrap();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().to_vec()
    }

    #[test]
    fn tag_is_hmac_under_the_hkdf_key() {
        // Independent computation (RFC 5869 with one output block):
        // PRK = HMAC(0^32, master), K = HMAC(PRK, info || 0x01).
        let prk = hmac(&[0u8; 32], &[&[5u8; 32]]);
        let k = hmac(&prk, &[INFO_JOURNAL, &[1]]);
        assert_eq!(key(5).tag(b"record")[..], hmac(&k, &[b"record"])[..]);
        // RFC 4231 test case 2 checks the HMAC itself ("Jefe").
        assert_eq!(
            hex::encode(hmac(b"Jefe", &[b"what do ya want for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn only_the_same_key_data_and_tag_verify() {
        let k = key(1);
        let t = k.tag(b"record");
        assert!(k.verify(b"record", &t));
        assert!(!key(2).verify(b"record", &t), "another master key");
        assert!(!k.verify(b"recorD", &t), "other data");
        let mut bad = t;
        bad[0] ^= 0x80;
        assert!(!k.verify(b"record", &bad), "a changed tag");
        assert!(!k.verify(b"record", &t[..31]), "a short tag");
        assert!(!k.verify(b"record", &[]), "no tag");
        assert_eq!(format!("{k:?}"), "JournalKey(..)");
    }
}
