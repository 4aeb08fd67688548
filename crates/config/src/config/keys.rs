//! The key side of a config: the canonical associated data of the key
//! wrapping, unlocking, changing the password and recording key
//! generations.

use super::validate::check_generations;
use super::{Config, FeatureFlag, KDF_ALGORITHM, REKEY_ID_LEN};
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
        if let Some(id) = &self.rekey_id {
            field(&mut a, "rekey_id", id);
        }
        a
    }

    /// This config (not wrapped yet) with rekey ID `id`: the field and the
    /// `rekey-id` flag (last), or neither. Only while a rekey is under way.
    pub(crate) fn with_rekey_id(mut self, id: Option<[u8; REKEY_ID_LEN]>) -> Config {
        self.feature_flags.retain(|&f| f != FeatureFlag::RekeyId);
        self.rekey_id = id.filter(|_| self.rekey_target.is_some());
        if self.rekey_id.is_some() {
            self.feature_flags.push(FeatureFlag::RekeyId);
        }
        self
    }

    /// The rekey ID a rewrite of this config with rekey target `target`
    /// carries: this one's for the same rekey, a fresh random one for a
    /// rekey that starts, none outside a rekey.
    pub(crate) fn rekey_id_for(&self, target: Option<u32>) -> Option<[u8; REKEY_ID_LEN]> {
        match target {
            None => None,
            Some(_) if target == self.rekey_target => self.rekey_id,
            Some(_) => Some(warpfs_crypto::rand::array()),
        }
    }

    /// Give the rekey under way a rekey ID when it has none (one started by
    /// an earlier warpfs): rewrap the master key under `password` (which
    /// must unlock this config; fresh salt) and atomically replace the
    /// config at `path`. Call only once no undo journal without an ID is
    /// left (they would be refused). Returns the new config (this one when
    /// there is nothing to do).
    pub fn add_rekey_id_at(&self, path: &Path, password: &[u8]) -> Result<Config> {
        if self.rekey_target.is_none() || self.rekey_id.is_some() {
            return Ok(self.clone());
        }
        let master = self.unlock(password)?;
        let cfg = Self::seal_gens(
            self.creator.clone(),
            self.content_mode,
            self.key_bits,
            self.feature_flags.clone(),
            self.kdf,
            (self.key_generation, self.rekey_target),
        )?
        .with_rekey_id(Some(warpfs_crypto::rand::array()))
        .wrap_under(&master, password)?;
        let (dir, name) = crate::file::split(path)?;
        write_atomic(&dir, &name, cfg.to_json().as_bytes(), Mode::Replace)?;
        Ok(cfg)
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
        .with_rekey_id(self.rekey_id)
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
        .with_rekey_id(self.rekey_id_for(rekey_target))
        .wrap_under(&master, password)?;
        write_atomic(dir, CONFIG_FILE, cfg.to_json().as_bytes(), Mode::Replace)?;
        Ok(cfg)
    }
}
