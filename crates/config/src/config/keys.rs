//! The key side of a config: the canonical associated data of the key
//! wrapping, unlocking, changing the password and recording key
//! generations.

use super::validate::check_generations;
use super::{Config, KDF_ALGORITHM};
use crate::error::{ConfigError, Result};
use crate::write::{write_atomic, Mode};
use crate::{CONFIG_FILE, FORMAT_NAME};
use std::path::Path;
use warpfs_crypto::kdf;
use warpfs_crypto::wrap::{self, WrapError};
use warpfs_crypto::MasterKey;

/// Prefix of the canonical associated data (FORMAT.md 2.3).
const AAD_MAGIC: &[u8] = b"warpfs.conf aad v1";

impl Config {
    /// The canonical associated data of the key wrapping: every field except
    /// `wrapped_key`, length-prefixed (FORMAT.md 2.3).
    pub fn aad(&self) -> Vec<u8> {
        fn field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
            // Names and values are far below 4 GiB (the file is ≤ 64 KiB).
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
        let flags = self
            .feature_flags
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let mut a = Vec::with_capacity(512);
        a.extend_from_slice(AAD_MAGIC);
        field(&mut a, "format", FORMAT_NAME.as_bytes());
        field(&mut a, "version", self.version.to_string().as_bytes());
        field(&mut a, "creator", self.creator.as_bytes());
        field(&mut a, "content_mode", self.content_mode.as_str().as_bytes());
        field(&mut a, "key_bits", self.key_bits.to_string().as_bytes());
        field(&mut a, "block_size", self.block_size.to_string().as_bytes());
        field(&mut a, "feature_flags", flags.as_bytes());
        field(&mut a, "kdf.algorithm", KDF_ALGORITHM.as_bytes());
        field(&mut a, "kdf.memory_kib", self.kdf.memory_kib.to_string().as_bytes());
        field(&mut a, "kdf.iterations", self.kdf.iterations.to_string().as_bytes());
        field(&mut a, "kdf.parallelism", self.kdf.parallelism.to_string().as_bytes());
        field(&mut a, "kdf.salt", &self.salt);
        // Present only after a rekey, so older volumes' AAD is unchanged.
        if self.key_generation > 0 {
            field(&mut a, "key_generation", self.key_generation.to_string().as_bytes());
        }
        if let Some(t) = self.rekey_target {
            field(&mut a, "rekey_target", t.to_string().as_bytes());
        }
        a
    }

    pub(super) fn derive_kek(&self, password: &[u8]) -> Result<zeroize::Zeroizing<[u8; 32]>> {
        kdf::derive(password, &self.salt, &self.kdf).map_err(|e| {
            if e.is_kdf_too_weak() {
                ConfigError::WeakKdf(e.to_string())
            } else {
                ConfigError::Unsupported(e.to_string())
            }
        })
    }

    /// Unwrap the master key with `password`. A wrong password, or any
    /// edited field, gives [`ConfigError::WrongPassword`].
    pub fn unlock(&self, password: &[u8]) -> Result<MasterKey> {
        let kek = self.derive_kek(password)?;
        wrap::unwrap(&kek, &self.wrapped, &self.aad()).map_err(|e| match e {
            WrapError::WrongKey => ConfigError::WrongPassword,
            WrapError::Malformed => ConfigError::parse("wrapped_key has the wrong length"),
        })
    }

    /// Rewrap the master key under `new` (fresh salt, same KDF parameters)
    /// and atomically replace `dir/warpfs.conf`. Writes nothing if `old`
    /// is wrong. Only this file changes; the data is untouched.
    pub fn change_password(&self, dir: &Path, old: &[u8], new: &[u8]) -> Result<()> {
        let master = self.unlock(old)?;
        let cfg = Self::seal_gens(
            self.creator.clone(),
            self.content_mode,
            self.key_bits,
            self.feature_flags.clone(),
            self.kdf,
            (self.key_generation, self.rekey_target),
        )?
        .wrap_under(&master, new)?;
        write_atomic(dir, CONFIG_FILE, cfg.to_json().as_bytes(), Mode::Replace)
    }

    /// Record new key generations (FORMAT.md 10): rewrap the master key under
    /// `password` (which must unlock this config; fresh salt) with
    /// `key_generation` and `rekey_target` and atomically replace
    /// `dir/warpfs.conf`. Returns the new config.
    pub fn set_generations(
        &self,
        dir: &Path,
        password: &[u8],
        key_generation: u32,
        rekey_target: Option<u32>,
    ) -> Result<Config> {
        let master = self.unlock(password)?;
        check_generations(key_generation, rekey_target)?;
        let cfg = Self::seal_gens(
            self.creator.clone(),
            self.content_mode,
            self.key_bits,
            self.feature_flags.clone(),
            self.kdf,
            (key_generation, rekey_target),
        )?
        .wrap_under(&master, password)?;
        write_atomic(dir, CONFIG_FILE, cfg.to_json().as_bytes(), Mode::Replace)?;
        Ok(cfg)
    }
}
