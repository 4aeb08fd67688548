//! Making configs: a new volume's config with a fresh salt and master
//! key (written crash-safe, never over an existing file), detached
//! configs, and wrapping the master key under a password.

use super::flags::version_of;
use super::validate::{check_kdf, check_key_bits, check_version_flags};
use super::{Config, FeatureFlag, KeyStore, NewSlot, SlotKind};
use crate::error::{ConfigError, Result};
use crate::mode::ContentMode;
use crate::write::{write_atomic, Mode};
use crate::{BLOCK_SIZE, CONFIG_FILE, V1_FEATURE_FLAGS};
use std::path::Path;
use warpfs_crypto::kdf::KdfParams;
use warpfs_crypto::slotkeys::RecoveryKey;
use warpfs_crypto::wrap::{self, Wrapped, WRAP_NONCE_LEN};
use warpfs_crypto::MasterKey;

impl Config {
    /// Make a new volume config in `dir` with a fresh random master key;
    /// returns the config and the master key. Writes `dir/warpfs.conf`
    /// atomically (mode 0400); refuses if it already exists.
    pub fn create(
        dir: &Path,
        password: &[u8],
        mode: ContentMode,
        key_bits: u32,
        kdf: KdfParams,
    ) -> Result<(Config, MasterKey)> {
        let master = MasterKey::generate();
        let cfg = Self::create_with_key(dir, &master, password, mode, key_bits, kdf)?;
        Ok((cfg, master))
    }

    /// Like [`Config::create`] with a given master key (recovery: a new
    /// config for an existing volume whose config was lost).
    pub fn create_with_key(
        dir: &Path,
        master: &MasterKey,
        password: &[u8],
        mode: ContentMode,
        key_bits: u32,
        kdf: KdfParams,
    ) -> Result<Config> {
        check_key_bits(mode, key_bits)?;
        check_kdf(&kdf)?;
        let path = crate::config_path(dir);
        if crate::read::exists(&path) {
            return Err(ConfigError::AlreadyExists { path });
        }
        let cfg = Self::seal(
            format!("warpfs {}", env!("CARGO_PKG_VERSION")),
            mode,
            key_bits,
            V1_FEATURE_FLAGS.to_vec(),
            kdf,
            master,
            password,
        )?;
        write_atomic(dir, CONFIG_FILE, cfg.to_json().as_bytes(), Mode::CreateNew)?;
        Ok(cfg)
    }

    /// Like [`Config::create`] with the optional flags `extra` (of
    /// [`V2_FEATURE_FLAGS`]): a version 2 config when there are any.
    pub fn create_with_features(
        dir: &Path,
        password: &[u8],
        mode: ContentMode,
        key_bits: u32,
        kdf: KdfParams,
        extra: &[FeatureFlag],
    ) -> Result<(Config, MasterKey)> {
        Self::create_with_features_at(&crate::config_path(dir), password, mode, key_bits, kdf, extra)
    }

    /// [`Config::create_with_features`] writing the config to `path`
    /// (`--config FILE`, FORMAT.md 2.5); refuses if it exists.
    pub fn create_with_features_at(
        path: &Path,
        password: &[u8],
        mode: ContentMode,
        key_bits: u32,
        kdf: KdfParams,
        extra: &[FeatureFlag],
    ) -> Result<(Config, MasterKey)> {
        check_key_bits(mode, key_bits)?;
        check_kdf(&kdf)?;
        let master = MasterKey::generate();
        if crate::read::exists(path) {
            return Err(ConfigError::AlreadyExists {
                path: path.to_path_buf(),
            });
        }
        let mut flags = V1_FEATURE_FLAGS.to_vec();
        flags.extend(extra.iter().copied().filter(|f| !V1_FEATURE_FLAGS.contains(f)));
        check_version_flags(version_of(&flags), &flags, mode)?;
        let cfg = Self::seal_gens(
            format!("warpfs {}", env!("CARGO_PKG_VERSION")),
            mode,
            key_bits,
            flags,
            kdf,
            (0, None),
        )?;
        let cfg = cfg.wrap_under(&master, password)?;
        let (dir, name) = crate::file::split(path)?;
        write_atomic(&dir, &name, cfg.to_json().as_bytes(), Mode::CreateNew)?;
        Ok((cfg, master))
    }

    /// A new keyslot config (format 3, FORMAT.md 2.6) at `path` with a
    /// fresh random volume key: slot 0 opens with `secret` (a password, or
    /// its combination with a keyfile, as `kind` says), and slot 1 with
    /// `recovery` when one is given. `extra` are optional flags of
    /// [`V2_FEATURE_FLAGS`](crate::V2_FEATURE_FLAGS). Refuses if the file
    /// exists.
    #[allow(clippy::too_many_arguments)]
    pub fn create_slots_at(
        path: &Path,
        secret: &[u8],
        kind: SlotKind,
        mode: ContentMode,
        key_bits: u32,
        kdf: KdfParams,
        extra: &[FeatureFlag],
        recovery: Option<&RecoveryKey>,
    ) -> Result<(Config, MasterKey)> {
        check_key_bits(mode, key_bits)?;
        check_kdf(&kdf)?;
        if crate::read::exists(path) {
            return Err(ConfigError::AlreadyExists {
                path: path.to_path_buf(),
            });
        }
        let mut flags = V1_FEATURE_FLAGS.to_vec();
        flags.extend(extra.iter().copied().filter(|f| !V1_FEATURE_FLAGS.contains(f)));
        flags.retain(|&f| f != FeatureFlag::Keyslots && f != FeatureFlag::RekeyId);
        flags.push(FeatureFlag::Keyslots);
        check_version_flags(version_of(&flags), &flags, mode)?;
        let base = Self::seal_gens(
            format!("warpfs {}", env!("CARGO_PKG_VERSION")),
            mode,
            key_bits,
            flags,
            kdf,
            (0, None),
        )?;
        let vk = MasterKey::generate();
        let (cfg, _) = base.with_first_slot(secret, kind, kdf, &vk, None)?;
        let cfg = match recovery {
            Some(rk) => cfg.with_slot(&vk, None, &NewSlot::Recovery(rk), "")?.0,
            None => cfg,
        };
        cfg.save_new_at(path)?;
        Ok((cfg, vk))
    }

    /// A config that is not written to a CIPHERDIR (an encrypted container's
    /// header, FORMAT.md 9): a fresh master key wrapped under `password`.
    pub fn new_detached(
        password: &[u8],
        mode: ContentMode,
        key_bits: u32,
        kdf: KdfParams,
    ) -> Result<(Config, MasterKey)> {
        check_key_bits(mode, key_bits)?;
        check_kdf(&kdf)?;
        let master = MasterKey::generate();
        let cfg = Self::seal(
            format!("warpfs {}", env!("CARGO_PKG_VERSION")),
            mode,
            key_bits,
            V1_FEATURE_FLAGS.to_vec(),
            kdf,
            &master,
            password,
        )?;
        Ok((cfg, master))
    }

    /// A config with a fresh salt and the master key wrapped under `password`.
    pub(super) fn seal(
        creator: String,
        content_mode: ContentMode,
        key_bits: u32,
        feature_flags: Vec<FeatureFlag>,
        kdf: KdfParams,
        master: &MasterKey,
        password: &[u8],
    ) -> Result<Config> {
        Self::seal_gens(creator, content_mode, key_bits, feature_flags, kdf, (0, None))?.wrap_under(master, password)
    }

    /// A config with a fresh salt and the given key generations, master key
    /// not wrapped yet (see [`Config::wrap_under`]), and no rekey ID (the
    /// `rekey-id` flag dropped; [`Config::with_rekey_id`] sets one).
    pub(crate) fn seal_gens(
        creator: String,
        content_mode: ContentMode,
        key_bits: u32,
        feature_flags: Vec<FeatureFlag>,
        kdf: KdfParams,
        gens: (u32, Option<u32>),
    ) -> Result<Config> {
        let mut feature_flags = feature_flags;
        feature_flags.retain(|&f| f != FeatureFlag::RekeyId);
        Ok(Config {
            key_generation: gens.0,
            rekey_target: gens.1,
            rekey_id: None,
            version: version_of(&feature_flags),
            creator,
            content_mode,
            key_bits,
            block_size: BLOCK_SIZE,
            feature_flags,
            store: KeyStore::Single {
                kdf,
                salt: warpfs_crypto::rand::array(),
                wrapped: Wrapped {
                    nonce: [0; WRAP_NONCE_LEN],
                    ciphertext: Vec::new(),
                },
            },
        })
    }

    /// Wrap `master` under `password` with this config's AAD (formats 1
    /// and 2).
    pub(crate) fn wrap_under(mut self, master: &MasterKey, password: &[u8]) -> Result<Config> {
        let kek = self.derive_kek(password)?;
        let w = wrap::wrap(&kek, master, &self.aad());
        if let KeyStore::Single { wrapped, .. } = &mut self.store {
            *wrapped = w;
        }
        Ok(self)
    }
}
