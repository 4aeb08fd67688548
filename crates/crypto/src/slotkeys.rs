//! Keys of a keyslot config (FORMAT.md 2.6): the recovery key a recovery
//! slot is opened with, the slot key that wraps the volume key in one slot
//! (from a password by Argon2id, from a recovery key by HKDF), the key
//! that authenticates the whole config (HMAC-SHA256 under a key derived
//! from the volume key, checked after any slot opened it), and the key the
//! previous volume key is kept under while a volume-key rekey runs.

use crate::kdf::{self, KdfParams, SALT_LEN};
use crate::keys::{MasterKey, MASTER_KEY_LEN};
use crate::locked::Locked;
use crate::wrap::{self, WrapError, Wrapped};
use hkdf::hmac::{Hmac, KeyInit, Mac};
use hkdf::Hkdf;
use sha2::Sha256;

/// HKDF info of a recovery slot's key (salt: the slot's salt).
pub const INFO_RECOVERY_SLOT: &[u8] = b"warpfs v3 recovery slot";
/// HKDF info of a FIDO2 slot's key (salt: the slot's hmac-secret salt,
/// IKM: the security key's hmac-secret output for it).
pub const INFO_FIDO2_SLOT: &[u8] = b"warpfs v3 fido2 slot";
/// HKDF info of the config MAC key (IKM: the volume key).
pub const INFO_CONFIG_MAC: &[u8] = b"warpfs v3 config mac";
/// HKDF info of the key the previous volume key is wrapped under during a
/// volume-key rekey (IKM: the new volume key).
pub const INFO_PREVIOUS_KEY: &[u8] = b"warpfs v3 previous volume key";
/// Length of the config MAC.
pub const CONFIG_MAC_LEN: usize = 32;

/// A recovery key: 256 random bits, shown once as 64 hex digits in 8
/// groups (the form of FORMAT.md 2.2), and never stored: a recovery slot
/// holds the volume key wrapped under a key derived from it. Locked in
/// memory, zeroized on drop; `Debug` shows nothing.
pub struct RecoveryKey(Locked<[u8; 32]>);

impl std::fmt::Debug for RecoveryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryKey(..)")
    }
}

impl RecoveryKey {
    /// A fresh random recovery key.
    pub fn generate() -> Self {
        let mut k = Locked::new([0u8; 32]);
        crate::rand::fill(&mut *k);
        Self(k)
    }

    /// The printable form: 8 groups of 8 lowercase hex digits.
    pub fn text(&self) -> String {
        self.as_key().recovery_text()
    }

    /// Parse the printable form (case, dashes and whitespace ignored).
    pub fn from_text(text: &str) -> crate::Result<Self> {
        Ok(Self::from_key(&MasterKey::from_recovery_text(text)?))
    }

    /// The same 32 bytes read as a volume key: the text a volume made
    /// before keyslots printed was the key itself.
    pub fn as_key(&self) -> MasterKey {
        MasterKey::from_bytes(&*self.0).expect("32 bytes")
    }

    fn from_key(k: &MasterKey) -> Self {
        Self(Locked::new(*k.as_bytes()))
    }
}

/// The key that wraps the volume key in one slot (AES-256-GCM, FORMAT.md
/// 2.6). On locked pages, zeroized on drop.
pub struct SlotKey(Locked<[u8; 32]>);

impl std::fmt::Debug for SlotKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SlotKey(..)")
    }
}

impl SlotKey {
    /// A slot key from a secret (a password, or the combination of a
    /// password and a keyfile) by Argon2id with the slot's parameters.
    pub fn from_secret(secret: &[u8], salt: &[u8; SALT_LEN], params: &KdfParams) -> crate::Result<Self> {
        let k = kdf::derive(secret, salt, params)?;
        Ok(Self(Locked::new(*k)))
    }

    /// A recovery slot's key: HKDF-SHA256(salt = the slot's salt, IKM =
    /// the recovery key, info [`INFO_RECOVERY_SLOT`]). The recovery key has
    /// 256 random bits: no slow KDF is needed.
    pub fn from_recovery(rk: &RecoveryKey, salt: &[u8; SALT_LEN]) -> Self {
        let mut k = Locked::new([0u8; 32]);
        Hkdf::<Sha256>::new(Some(salt), &*rk.0)
            .expand(INFO_RECOVERY_SLOT, &mut *k)
            .expect("32 bytes is a valid HKDF-SHA256 length");
        Self(k)
    }

    /// A FIDO2 slot's key: HKDF-SHA256(salt = the slot's salt, IKM = the
    /// security key's hmac-secret output for that salt, info
    /// [`INFO_FIDO2_SLOT`]).
    pub fn from_fido2(output: &[u8; 32], salt: &[u8; 32]) -> Self {
        let mut k = Locked::new([0u8; 32]);
        Hkdf::<Sha256>::new(Some(salt), output)
            .expand(INFO_FIDO2_SLOT, &mut *k)
            .expect("32 bytes is a valid HKDF-SHA256 length");
        Self(k)
    }

    /// A slot key from 32 bytes a device gave (the seam of the TPM2 and
    /// FIDO2 kinds).
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
        Self(Locked::new(*bytes))
    }

    /// The key the previous volume key is wrapped under while a
    /// volume-key rekey runs: HKDF-SHA256 of the new volume key (no salt)
    /// under [`INFO_PREVIOUS_KEY`]. The new key opens the old one, never
    /// the other way round.
    pub fn for_previous(new: &MasterKey) -> Self {
        let mut k = Locked::new([0u8; 32]);
        Hkdf::<Sha256>::new(None, new.as_bytes())
            .expand(INFO_PREVIOUS_KEY, &mut *k)
            .expect("32 bytes is a valid HKDF-SHA256 length");
        Self(k)
    }

    /// Wrap `key` (a volume key) with associated data `ad`.
    pub fn wrap(&self, key: &MasterKey, ad: &[u8]) -> Wrapped {
        wrap::wrap(&self.0, key, ad)
    }

    /// Unwrap a volume key; a wrong slot key or a changed byte or `ad`
    /// gives [`WrapError::WrongKey`].
    pub fn unwrap(&self, w: &Wrapped, ad: &[u8]) -> Result<MasterKey, WrapError> {
        wrap::unwrap(&self.0, w, ad)
    }
}

/// The key of the config MAC: HKDF-SHA256 of the volume key (no salt)
/// under [`INFO_CONFIG_MAC`], an HMAC-SHA256 key. Whoever opens any slot
/// can check (and make) the MAC; whoever has only CIPHERDIR can do
/// neither.
pub struct ConfigMacKey(Locked<[u8; 32]>);

impl std::fmt::Debug for ConfigMacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfigMacKey(..)")
    }
}

impl ConfigMacKey {
    /// The MAC key of volume key `vk`.
    pub fn derive(vk: &MasterKey) -> Self {
        let mut k = Locked::new([0u8; MASTER_KEY_LEN]);
        Hkdf::<Sha256>::new(None, vk.as_bytes())
            .expand(INFO_CONFIG_MAC, &mut *k)
            .expect("32 bytes is a valid HKDF-SHA256 length");
        Self(k)
    }

    fn mac(&self, data: &[u8]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&*self.0).expect("HMAC takes any key length");
        m.update(data);
        m
    }

    /// The MAC of `data`.
    pub fn tag(&self, data: &[u8]) -> [u8; CONFIG_MAC_LEN] {
        self.mac(data).finalize().into_bytes().into()
    }

    /// Whether `tag` is the MAC of `data` (constant time).
    pub fn verify(&self, data: &[u8], tag: &[u8]) -> bool {
        self.mac(data).verify_slice(tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_text_round_trips_and_hides_in_debug() {
        let r = RecoveryKey::generate();
        let t = r.text();
        assert_eq!(t.len(), 71);
        let back = RecoveryKey::from_text(&t.to_uppercase().replace('-', " ")).unwrap();
        assert_eq!(back.as_key(), r.as_key());
        assert_eq!(format!("{r:?}"), "RecoveryKey(..)");
        assert!(RecoveryKey::from_text("abc").is_err());
        assert_ne!(RecoveryKey::generate().as_key(), r.as_key());
    }

    #[test]
    fn recovery_slot_key_is_hkdf_with_the_slot_salt() {
        let r = RecoveryKey::from_text(&"ab".repeat(32)).unwrap();
        let k = SlotKey::from_recovery(&r, &[5; 32]);
        let mut want = [0u8; 32];
        Hkdf::<Sha256>::new(Some(&[5u8; 32]), &[0xab; 32])
            .expand(INFO_RECOVERY_SLOT, &mut want)
            .unwrap();
        assert_eq!(*k.0, want);
        assert_ne!(*SlotKey::from_recovery(&r, &[6; 32]).0, want);
    }

    #[test]
    fn fido2_slot_key_is_hkdf_of_the_output_with_the_slot_salt() {
        let k = SlotKey::from_fido2(&[0xcd; 32], &[5; 32]);
        let mut want = [0u8; 32];
        Hkdf::<Sha256>::new(Some(&[5u8; 32]), &[0xcd; 32])
            .expand(INFO_FIDO2_SLOT, &mut want)
            .unwrap();
        assert_eq!(*k.0, want);
        assert_ne!(*SlotKey::from_fido2(&[0xcd; 32], &[6; 32]).0, want);
        assert_ne!(*SlotKey::from_fido2(&[0xce; 32], &[5; 32]).0, want);
    }

    #[test]
    fn a_slot_key_wraps_and_nothing_else_unwraps() {
        let vk = MasterKey::generate();
        let a = SlotKey::from_bytes(&[1; 32]);
        let w = a.wrap(&vk, b"ad");
        assert_eq!(a.unwrap(&w, b"ad").unwrap(), vk);
        assert_eq!(a.unwrap(&w, b"ae"), Err(WrapError::WrongKey));
        assert_eq!(
            SlotKey::from_bytes(&[2; 32]).unwrap(&w, b"ad"),
            Err(WrapError::WrongKey)
        );
        // The previous key opens with the new key's derived key only.
        let new = MasterKey::generate();
        let p = SlotKey::for_previous(&new).wrap(&vk, b"p");
        assert_eq!(SlotKey::for_previous(&new).unwrap(&p, b"p").unwrap(), vk);
        assert!(SlotKey::for_previous(&vk).unwrap(&p, b"p").is_err());
    }

    #[test]
    fn config_mac_is_hmac_under_the_derived_key() {
        let vk = MasterKey::from_bytes(&[3; 32]).unwrap();
        let k = ConfigMacKey::derive(&vk);
        let t = k.tag(b"config");
        assert!(k.verify(b"config", &t));
        assert!(!k.verify(b"confih", &t));
        assert!(!k.verify(b"config", &t[..31]));
        assert!(!ConfigMacKey::derive(&MasterKey::from_bytes(&[4; 32]).unwrap()).verify(b"config", &t));
        let mut okm = [0u8; 32];
        Hkdf::<Sha256>::new(None, &[3u8; 32])
            .expand(INFO_CONFIG_MAC, &mut okm)
            .unwrap();
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&okm).unwrap();
        m.update(b"config");
        assert_eq!(&m.finalize().into_bytes()[..], &t[..]);
    }
}
