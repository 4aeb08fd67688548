//! The key side of a config: the canonical associated data of the key
//! wrapping (formats 1 and 2), unlocking, changing the password and
//! recording key generations. For a keyslot config (format 3) the same
//! calls work on the slot the password opens (`keyslots.rs`).

use super::mac::Fields;
use super::validate::check_generations;
use super::{Config, FeatureFlag, KeyStore, REKEY_ID_LEN};
use crate::error::{ConfigError, Result};
use crate::write::{write_atomic, Mode};
use crate::CONFIG_FILE;
use std::path::Path;
use warpfs_crypto::kdf;
use warpfs_crypto::wrap::{self, WrapError};
use warpfs_crypto::MasterKey;

/// Prefix of the canonical associated data (FORMAT.md 2.3).
const AAD_MAGIC: &[u8] = b"warpfs.conf aad v1";

impl Config {
    /// The canonical associated data of the key wrapping: every field except
    /// `wrapped_key`, length-prefixed (FORMAT.md 2.3). A keyslot config has
    /// none (its slots have their own, and a MAC covers the file): empty.
    pub fn aad(&self) -> Vec<u8> {
        let KeyStore::Single { kdf, salt, .. } = &self.store else {
            return Vec::new();
        };
        let mut f = Fields::new(AAD_MAGIC);
        self.head_fields(&mut f);
        f.str("kdf.algorithm", super::KDF_ALGORITHM);
        f.dec("kdf.memory_kib", kdf.memory_kib);
        f.dec("kdf.iterations", kdf.iterations);
        f.dec("kdf.parallelism", kdf.parallelism);
        f.bytes("kdf.salt", salt);
        // Present only after a rekey, so older volumes' AAD is unchanged.
        self.generation_fields(&mut f);
        f.into_bytes()
    }

    /// This config (not wrapped yet) with rekey ID `id`: the field and the
    /// `rekey-id` flag (last), or neither. Only while a rekey is under way.
    pub(crate) fn with_rekey_id(mut self, id: Option<[u8; REKEY_ID_LEN]>) -> Config {
        self.set_rekey_id(id);
        self
    }

    /// [`Config::with_rekey_id`] in place.
    pub(crate) fn set_rekey_id(&mut self, id: Option<[u8; REKEY_ID_LEN]>) {
        self.feature_flags.retain(|&f| f != FeatureFlag::RekeyId);
        self.rekey_id = id.filter(|_| self.rekey_target.is_some());
        if self.rekey_id.is_some() {
            self.feature_flags.push(FeatureFlag::RekeyId);
        }
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

    /// [`Config::add_rekey_id_at`] for a keyslot config already opened
    /// (`o`, from [`Config::open`]; a TPM2 slot has no password to give).
    pub fn add_rekey_id_opened_at(&self, path: &Path, o: &crate::Opened) -> Result<Config> {
        if self.rekey_target.is_none() || self.rekey_id.is_some() {
            return Ok(self.clone());
        }
        if !self.has_slots() {
            return Err(ConfigError::Slots(
                "a config without keyslots needs its password".into(),
            ));
        }
        let cfg = self.resealed(&o.key, o.slot, |c| c.set_rekey_id(Some(warpfs_crypto::rand::array())));
        cfg.save_at(path)?;
        Ok(cfg)
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
        let cfg = if self.has_slots() {
            let o = self.open(&Self::any_secret(password))?;
            self.resealed(&o.key, o.slot, |c| c.set_rekey_id(Some(warpfs_crypto::rand::array())))
        } else {
            let master = self.unlock(password)?;
            self.fresh_single((self.key_generation, self.rekey_target))?
                .with_rekey_id(Some(warpfs_crypto::rand::array()))
                .wrap_under(&master, password)?
        };
        cfg.save_at(path)?;
        Ok(cfg)
    }

    /// A copy of this format 1 or 2 config with a fresh salt and key
    /// generations `gens`, not wrapped yet.
    pub(crate) fn fresh_single(&self, gens: (u32, Option<u32>)) -> Result<Config> {
        Self::seal_gens(
            self.creator.clone(),
            self.content_mode,
            self.key_bits,
            self.feature_flags.clone(),
            self.kdf_params(),
            gens,
        )
    }

    pub(super) fn derive_kek(&self, password: &[u8]) -> Result<zeroize::Zeroizing<[u8; 32]>> {
        let KeyStore::Single { kdf, salt, .. } = &self.store else {
            return Err(ConfigError::parse("a keyslot config has no single key"));
        };
        kdf::derive(password, salt, kdf).map_err(|e| {
            if e.is_kdf_too_weak() {
                ConfigError::WeakKdf(e.to_string())
            } else {
                ConfigError::Unsupported(e.to_string())
            }
        })
    }

    /// Unwrap the master key with `password` (a password, or its
    /// combination with a keyfile). A wrong password, or any edited field,
    /// gives [`ConfigError::WrongPassword`]; in a keyslot config every
    /// password and keyfile slot is tried, and an opened config whose MAC
    /// fails gives [`ConfigError::Tampered`].
    pub fn unlock(&self, password: &[u8]) -> Result<MasterKey> {
        if self.has_slots() {
            return self.open(&Self::any_secret(password)).map(|o| o.key);
        }
        let KeyStore::Single { wrapped, .. } = &self.store else {
            unreachable!("not a keyslot config")
        };
        let kek = self.derive_kek(password)?;
        wrap::unwrap(&kek, wrapped, &self.aad()).map_err(|e| match e {
            WrapError::WrongKey => ConfigError::WrongPassword,
            WrapError::Malformed => ConfigError::parse("wrapped_key has the wrong length"),
        })
    }

    /// Rewrap the master key under `new` (fresh salt, same KDF parameters)
    /// and atomically replace `dir/warpfs.conf`. Writes nothing if `old`
    /// is wrong. Only this file changes; the data is untouched. In a
    /// keyslot config, the slot `old` opens gets `new`.
    pub fn change_password(&self, dir: &Path, old: &[u8], new: &[u8]) -> Result<()> {
        self.change_password_at(&dir.join(CONFIG_FILE), old, new)
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
        self.set_generations_at(&dir.join(CONFIG_FILE), password, key_generation, rekey_target)
    }

    /// The config with key generations `gens` (and the matching rekey
    /// ID), written for `password` (which must open it).
    pub(crate) fn with_generations(&self, password: &[u8], gens: (u32, Option<u32>)) -> Result<Config> {
        check_generations(gens.0, gens.1)?;
        if self.has_slots() {
            let o = self.open(&Self::any_secret(password))?;
            return Ok(self.with_generations_opened(&o, gens));
        }
        let master = self.unlock(password)?;
        self.fresh_single(gens)?
            .with_rekey_id(self.rekey_id_for(gens.1))
            .wrap_under(&master, password)
    }

    /// [`Config::with_generations`] of a keyslot config already opened.
    pub(crate) fn with_generations_opened(&self, o: &super::Opened, gens: (u32, Option<u32>)) -> Config {
        let id = self.rekey_id_for(gens.1);
        self.resealed(&o.key, o.slot, |c| {
            c.key_generation = gens.0;
            c.rekey_target = gens.1;
            c.set_rekey_id(id);
        })
    }

    /// Write this config to `path` (atomically replacing the file there).
    pub fn save_at(&self, path: &Path) -> Result<()> {
        let (dir, name) = crate::file::split(path)?;
        write_atomic(&dir, &name, self.to_json().as_bytes(), Mode::Replace)
    }
}
