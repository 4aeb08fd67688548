//! Recovery slots (FORMAT.md 2.6): opened by a recovery key of 256 random
//! bits printed once when the slot is made. The slot key is HKDF-SHA256
//! of the recovery key with the slot's salt: no slow KDF, the key has
//! full strength.

use super::{Input, SlotKdfJson};
use crate::config::fields::decode_fixed;
use crate::config::fields::show;
use crate::config::mac::Fields;
use crate::error::{ConfigError, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use warpfs_crypto::kdf::SALT_LEN;
use warpfs_crypto::slotkeys::SlotKey;

const ALGORITHM: &str = "hkdf-sha256";

/// Public parameters of a recovery slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recovery {
    pub(crate) salt: [u8; SALT_LEN],
}

impl Recovery {
    /// A new recovery slot's parameters (fresh salt).
    pub(crate) fn new() -> Self {
        Recovery {
            salt: warpfs_crypto::rand::array(),
        }
    }

    pub(crate) fn slot_key(&self, input: &Input) -> Option<Result<SlotKey>> {
        let Input::Recovery(rk) = input else {
            return None;
        };
        Some(Ok(SlotKey::from_recovery(rk, &self.salt)))
    }

    pub(crate) fn fields(&self, f: &mut Fields) {
        f.str("kdf.algorithm", ALGORITHM);
        f.bytes("kdf.salt", &self.salt);
    }

    pub(crate) fn to_json(&self) -> SlotKdfJson {
        SlotKdfJson {
            algorithm: ALGORITHM.to_owned(),
            memory_kib: None,
            iterations: None,
            parallelism: None,
            salt: B64.encode(self.salt),
        }
    }

    pub(crate) fn from_json(j: &SlotKdfJson) -> Result<Self> {
        if j.algorithm != ALGORITHM {
            return Err(ConfigError::Unsupported(format!(
                "a recovery keyslot's KDF {} is not supported (only {ALGORITHM})",
                show(&j.algorithm)
            )));
        }
        if j.memory_kib.is_some() || j.iterations.is_some() || j.parallelism.is_some() {
            return Err(ConfigError::parse(
                "a recovery keyslot's KDF has no Argon2id parameters",
            ));
        }
        Ok(Recovery {
            salt: decode_fixed::<SALT_LEN>("keyslots[].kdf.salt", &j.salt)?,
        })
    }
}
