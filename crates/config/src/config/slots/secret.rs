//! Slots opened by a secret: `password`, `keyfile` and
//! `password+keyfile` (FORMAT.md 2.6). The slot key is Argon2id of the
//! secret bytes (a password, or its combination with a keyfile, FORMAT.md
//! 8) with the slot's own salt and parameters, bounds-checked as in 2.1.

use super::{Input, SlotKdfJson, SlotKind};
use crate::config::fields::decode_fixed;
use crate::config::fields::show;
use crate::config::mac::Fields;
use crate::config::validate::check_kdf;
use crate::error::{ConfigError, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use warpfs_crypto::kdf::{KdfParams, SALT_LEN};
use warpfs_crypto::slotkeys::SlotKey;

const ALGORITHM: &str = "argon2id";

/// Public parameters of a secret slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Secret {
    pub(crate) kind: SlotKind,
    pub(crate) kdf: KdfParams,
    pub(crate) salt: [u8; SALT_LEN],
}

impl Secret {
    /// A new slot of `kind` with a fresh salt.
    pub(crate) fn new(kind: SlotKind, kdf: KdfParams) -> Self {
        Secret {
            kind,
            kdf,
            salt: warpfs_crypto::rand::array(),
        }
    }

    pub(crate) fn slot_key(&self, input: &Input) -> Option<Result<SlotKey>> {
        let Input::Secret { bytes, kind } = input else {
            return None;
        };
        if kind.is_some_and(|k| k != self.kind) {
            return None;
        }
        Some(SlotKey::from_secret(bytes, &self.salt, &self.kdf).map_err(|e| {
            if e.is_kdf_too_weak() {
                ConfigError::WeakKdf(e.to_string())
            } else {
                ConfigError::Unsupported(e.to_string())
            }
        }))
    }

    pub(crate) fn fields(&self, f: &mut Fields) {
        f.str("kdf.algorithm", ALGORITHM);
        f.dec("kdf.memory_kib", self.kdf.memory_kib);
        f.dec("kdf.iterations", self.kdf.iterations);
        f.dec("kdf.parallelism", self.kdf.parallelism);
        f.bytes("kdf.salt", &self.salt);
    }

    pub(crate) fn to_json(&self) -> SlotKdfJson {
        SlotKdfJson {
            algorithm: ALGORITHM.to_owned(),
            memory_kib: Some(self.kdf.memory_kib),
            iterations: Some(self.kdf.iterations),
            parallelism: Some(self.kdf.parallelism),
            salt: B64.encode(self.salt),
        }
    }

    pub(crate) fn from_json(kind: SlotKind, j: &SlotKdfJson) -> Result<Self> {
        if j.algorithm != ALGORITHM {
            return Err(ConfigError::Unsupported(format!(
                "a {kind} keyslot's KDF {} is not supported (only {ALGORITHM})",
                show(&j.algorithm)
            )));
        }
        let (Some(memory_kib), Some(iterations), Some(parallelism)) = (j.memory_kib, j.iterations, j.parallelism)
        else {
            return Err(ConfigError::parse(
                "a keyslot's argon2id KDF needs memory_kib, iterations and parallelism",
            ));
        };
        let kdf = KdfParams {
            memory_kib,
            iterations,
            parallelism,
        };
        check_kdf(&kdf)?;
        Ok(Secret {
            kind,
            kdf,
            salt: decode_fixed::<SALT_LEN>("keyslots[].kdf.salt", &j.salt)?,
        })
    }
}
