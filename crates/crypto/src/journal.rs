//! The keys that authenticate what fsck and the rekey leave in CIPHERDIR to
//! be applied later: the rekey's undo journals (FORMAT.md 10.3) and fsck's
//! undo files (FORMAT.md 6b); and the state of versions seen a mount keeps
//! outside CIPHERDIR (FORMAT.md 16). Each is an HMAC-SHA256 tag under its own
//! HKDF-SHA256 subkey of the master key, so that a journal or undo file
//! someone without the master key wrote into CIPHERDIR (a forged record, a
//! record with its checksum recomputed) is refused, never applied.

use crate::keys::MasterKey;
use crate::locked::Locked;
use hkdf::hmac::{Hmac, KeyInit, Mac};
use hkdf::Hkdf;
use sha2::Sha256;

/// HKDF info string of the journal key.
pub const INFO_JOURNAL: &[u8] = b"warpfs v1 rekey journal";
/// HKDF info string of the fsck undo key.
pub const INFO_FSCK_UNDO: &[u8] = b"warpfs v1 fsck undo";
/// Length of a journal tag in bytes.
pub const JOURNAL_TAG_LEN: usize = 32;
/// Length of an undo file tag in bytes.
pub const UNDO_TAG_LEN: usize = 32;
/// HKDF info string of the key of the state of versions seen.
pub const INFO_SEEN: &[u8] = b"warpfs seen state";

/// A 32-byte HMAC-SHA256 key from HKDF-SHA256 of the master key (no
/// salt), in locked memory zeroized on drop.
struct HmacKey(Locked<[u8; 32]>);

impl HmacKey {
    fn derive(master: &MasterKey, info: &[u8]) -> Self {
        let mut k = Locked::new([0u8; 32]);
        Hkdf::<Sha256>::new(None, master.as_bytes())
            .expand(info, &mut *k)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Self(k)
    }

    fn mac(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&*self.0).expect("HMAC takes any key length");
        for p in parts {
            m.update(p);
        }
        m
    }
}

/// HKDF-SHA256 of the master key (no salt) under [`INFO_JOURNAL`], 32
/// bytes, in locked memory zeroized on drop; `Debug` never shows it.
pub struct JournalKey(HmacKey);

impl std::fmt::Debug for JournalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JournalKey(..)")
    }
}

impl JournalKey {
    /// The journal key of `master`.
    pub fn derive(master: &MasterKey) -> Self {
        Self(HmacKey::derive(master, INFO_JOURNAL))
    }

    /// HMAC-SHA256 of `data`.
    pub fn tag(&self, data: &[u8]) -> [u8; JOURNAL_TAG_LEN] {
        self.0.mac(&[data]).finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag of `data` (constant time).
    pub fn verify(&self, data: &[u8], tag: &[u8]) -> bool {
        self.0.mac(&[data]).verify_slice(tag).is_ok()
    }
}

/// The key of fsck's undo files: HKDF-SHA256 of the master key (no salt)
/// under [`INFO_FSCK_UNDO`], 32 bytes, in locked memory zeroized on drop;
/// `Debug` never shows it.
pub struct UndoKey(HmacKey);

impl std::fmt::Debug for UndoKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UndoKey(..)")
    }
}

impl UndoKey {
    /// The undo key of `master`.
    pub fn derive(master: &MasterKey) -> Self {
        Self(HmacKey::derive(master, INFO_FSCK_UNDO))
    }

    /// HMAC-SHA256 of the concatenation of `parts`.
    pub fn tag(&self, parts: &[&[u8]]) -> [u8; UNDO_TAG_LEN] {
        self.0.mac(parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag of the concatenation of `parts` (constant
    /// time).
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.0.mac(parts).verify_slice(tag).is_ok()
    }
}

/// The key of the state of versions seen (FORMAT.md 16): HKDF-SHA256 of
/// the master key (no salt) under [`INFO_SEEN`], 32 bytes, in locked
/// memory zeroized on drop; `Debug` never shows it.
pub struct SeenKey(HmacKey);

impl std::fmt::Debug for SeenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SeenKey(..)")
    }
}

impl SeenKey {
    /// The key of `master`.
    pub fn derive(master: &MasterKey) -> Self {
        Self(HmacKey::derive(master, INFO_SEEN))
    }

    /// HMAC-SHA256 of the concatenation of `parts`.
    pub fn tag(&self, parts: &[&[u8]]) -> [u8; 32] {
        self.0.mac(parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag of the concatenation of `parts` (constant
    /// time).
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.0.mac(parts).verify_slice(tag).is_ok()
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

    #[test]
    fn the_undo_key_is_its_own_hkdf_key() {
        let m = MasterKey::from_bytes(&[5u8; 32]).unwrap();
        let u = UndoKey::derive(&m);
        let prk = hmac(&[0u8; 32], &[&[5u8; 32]]);
        let k = hmac(&prk, &[INFO_FSCK_UNDO, &[1]]);
        assert_eq!(u.tag(&[b"rec", b"ord"])[..], hmac(&k, &[b"record"])[..]);
        let t = u.tag(&[b"record"]);
        assert!(u.verify(&[b"re", b"cord"], &t));
        assert!(!u.verify(&[b"recorD"], &t));
        assert!(!UndoKey::derive(&MasterKey::from_bytes(&[6u8; 32]).unwrap()).verify(&[b"record"], &t));
        // Domain separation: the journal key of the same master differs.
        assert_ne!(key(5).tag(b"record"), t);
        assert_eq!(format!("{u:?}"), "UndoKey(..)");
    }
}
