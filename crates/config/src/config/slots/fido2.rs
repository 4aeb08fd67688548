//! FIDO2 slots (FORMAT.md 2.6): opened by a FIDO2 security key's
//! `hmac-secret` extension. The slot holds a non-resident credential's ID
//! (for its relying party ID), a random salt and whether the credential is
//! used with user verification (the key's PIN); the key computes
//! HMAC-SHA256(a secret only it holds for that credential, salt), and the
//! slot key is HKDF-SHA256 of that output with the salt. Talking to the
//! device is not this crate's: the caller gives the output it got
//! ([`Input::Fido2`]).

use super::Input;
use crate::config::mac::Fields;
use crate::error::{ConfigError, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use warpfs_crypto::slotkeys::SlotKey;

/// Length of a FIDO2 slot's salt (one hmac-secret salt).
pub const FIDO2_SALT_LEN: usize = 32;
/// Longest credential ID a slot holds, in bytes (CTAP 2.1 bounds what
/// authenticators make well below this).
pub const MAX_CREDENTIAL_LEN: usize = 1023;
/// Longest relying party ID, in bytes.
pub const MAX_RP_ID_LEN: usize = 255;
/// Longest device hint, in bytes.
pub const MAX_DEVICE_LEN: usize = 64;
/// The relying party ID warpfs makes its credentials for.
pub const FIDO2_RP_ID: &str = "warpfs";

/// Public parameters of a FIDO2 slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fido2 {
    /// The relying party ID the credential was made for.
    pub rp_id: String,
    /// The credential ID the security key gave (it finds, or rebuilds, the
    /// credential from it).
    pub credential: Vec<u8>,
    /// The hmac-secret salt.
    pub salt: [u8; FIDO2_SALT_LEN],
    /// Whether the credential is used with user verification (the key's
    /// PIN): the key's output differs with and without it.
    pub user_verification: bool,
    /// The product name of the key the slot was made with, as it reported
    /// it (a hint for the user; public, not checked).
    pub device: Option<String>,
}

impl Fido2 {
    /// The parameters of a new slot for `credential` (of relying party
    /// `rp_id`), with a fresh salt: the caller then asks the key for its
    /// hmac-secret output for [`Fido2::salt`].
    pub fn new(rp_id: &str, credential: &[u8], user_verification: bool, device: Option<&str>) -> Result<Self> {
        let device = device.map(clean_device);
        let f = Fido2 {
            rp_id: rp_id.to_owned(),
            credential: credential.to_vec(),
            salt: warpfs_crypto::rand::array(),
            user_verification,
            device: device.filter(|d| !d.is_empty()),
        };
        f.check()?;
        Ok(f)
    }

    fn check(&self) -> Result<()> {
        if self.rp_id.is_empty() || self.rp_id.len() > MAX_RP_ID_LEN || self.rp_id.chars().any(char::is_control) {
            return Err(ConfigError::parse(format!(
                "a fido2 keyslot's rp_id is 1 to {MAX_RP_ID_LEN} bytes without control characters"
            )));
        }
        if self.credential.is_empty() || self.credential.len() > MAX_CREDENTIAL_LEN {
            return Err(ConfigError::parse(format!(
                "a fido2 keyslot's credential is 1 to {MAX_CREDENTIAL_LEN} bytes"
            )));
        }
        if let Some(d) = &self.device {
            if d.is_empty() || d.len() > MAX_DEVICE_LEN || d.chars().any(char::is_control) {
                return Err(ConfigError::parse(format!(
                    "a fido2 keyslot's device is 1 to {MAX_DEVICE_LEN} bytes without control characters"
                )));
            }
        }
        Ok(())
    }

    /// The slot key from the key's output for this slot's credential and
    /// salt; `None` when the input is not for this slot.
    pub(crate) fn slot_key(&self, input: &Input) -> Option<Result<SlotKey>> {
        let Input::Fido2 { credential, output } = input else {
            return None;
        };
        if *credential != self.credential.as_slice() {
            return None;
        }
        Some(Ok(SlotKey::from_fido2(output, &self.salt)))
    }

    pub(crate) fn fields(&self, f: &mut Fields) {
        f.str("fido2.rp_id", &self.rp_id);
        f.bytes("fido2.credential", &self.credential);
        f.bytes("fido2.salt", &self.salt);
        f.str(
            "fido2.user_verification",
            if self.user_verification { "true" } else { "false" },
        );
        if let Some(d) = &self.device {
            f.str("fido2.device", d);
        }
    }

    pub(crate) fn to_json(&self) -> Fido2Json {
        Fido2Json {
            rp_id: self.rp_id.clone(),
            credential: B64.encode(&self.credential),
            salt: B64.encode(self.salt),
            user_verification: self.user_verification,
            device: self.device.clone(),
        }
    }

    pub(crate) fn from_json(j: &Fido2Json) -> Result<Self> {
        if j.credential.len() > 4 * MAX_CREDENTIAL_LEN.div_ceil(3) {
            return Err(ConfigError::parse("keyslots[].fido2.credential is too long"));
        }
        let credential = B64
            .decode(&j.credential)
            .map_err(|_| ConfigError::parse("keyslots[].fido2.credential is not valid base64"))?;
        let f = Fido2 {
            rp_id: j.rp_id.clone(),
            credential,
            salt: crate::config::fields::decode_fixed::<FIDO2_SALT_LEN>("keyslots[].fido2.salt", &j.salt)?,
            user_verification: j.user_verification,
            device: j.device.clone(),
        };
        f.check()?;
        Ok(f)
    }
}

/// A device's product name as a hint: control characters dropped, cut to
/// [`MAX_DEVICE_LEN`] bytes at a character boundary, trimmed.
fn clean_device(d: &str) -> String {
    let mut s = String::new();
    for c in d.chars().filter(|c| !c.is_control()) {
        if s.len() + c.len_utf8() > MAX_DEVICE_LEN {
            break;
        }
        s.push(c);
    }
    s.trim().to_owned()
}

/// A FIDO2 slot's member as written (FORMAT.md 2.6).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Fido2Json {
    rp_id: String,
    credential: String,
    salt: String,
    user_verification: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    device: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_checked_and_round_trip() {
        let f = Fido2::new(FIDO2_RP_ID, &[9; 64], true, Some("Key\u{7}  ")).unwrap();
        assert_eq!(f.device.as_deref(), Some("Key"));
        assert_eq!(Fido2::from_json(&f.to_json()).unwrap(), f);
        assert_ne!(Fido2::new(FIDO2_RP_ID, &[9; 64], true, None).unwrap().salt, f.salt);
        assert!(Fido2::new("", &[1], false, None).is_err());
        assert!(Fido2::new("a\nb", &[1], false, None).is_err());
        assert!(Fido2::new(FIDO2_RP_ID, &[], false, None).is_err());
        assert!(Fido2::new(FIDO2_RP_ID, &[1; MAX_CREDENTIAL_LEN + 1], false, None).is_err());
        let long = "é".repeat(40);
        let d = Fido2::new(FIDO2_RP_ID, &[1], false, Some(&long))
            .unwrap()
            .device
            .unwrap();
        assert!(d.len() <= MAX_DEVICE_LEN && long.starts_with(&d), "{d}");
        assert_eq!(Fido2::new(FIDO2_RP_ID, &[1], false, Some(" \t")).unwrap().device, None);
    }

    #[test]
    fn only_the_slots_own_credential_gives_a_key_and_it_depends_on_output_and_salt() {
        let f = Fido2::new(FIDO2_RP_ID, &[7; 32], false, None).unwrap();
        let out = [3u8; 32];
        let other = Input::Fido2 {
            credential: &[8; 32],
            output: &out,
        };
        assert!(f.slot_key(&other).is_none());
        assert!(f
            .slot_key(&Input::Secret {
                bytes: b"x",
                kind: None
            })
            .is_none());
        let mine = Input::Fido2 {
            credential: &[7; 32],
            output: &out,
        };
        let k = f.slot_key(&mine).unwrap().unwrap();
        let vk = warpfs_crypto::MasterKey::generate();
        let w = k.wrap(&vk, b"ad");
        assert_eq!(SlotKey::from_fido2(&out, &f.salt).unwrap(&w, b"ad").unwrap(), vk);
        assert!(SlotKey::from_fido2(&[4; 32], &f.salt).unwrap(&w, b"ad").is_err());
        assert!(SlotKey::from_fido2(&out, &[0; 32]).unwrap(&w, b"ad").is_err());
    }
}
