//! A config kept at any path (`--config FILE`), not only as
//! `CIPHERDIR/warpfs.conf`: load, create, change the password, record key
//! generations, and reset the password with the master key (the old file
//! kept as a backup beside it). Writes are crash-safe as in FORMAT.md 2.4,
//! with the temp file beside the target.

use crate::error::{ConfigError, Result};
use crate::write::{write_atomic, Mode};
use crate::{Config, ContentMode};
use std::path::{Path, PathBuf};
use warpfs_crypto::kdf::KdfParams;
use warpfs_crypto::MasterKey;

/// The directory and file name of `path` (a bare name lies in `.`).
pub(crate) fn split(path: &Path) -> Result<(PathBuf, String)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| ConfigError::io(path, std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_string()))
}

impl Config {
    /// Read and validate the config at `path` (hostile input, as
    /// [`Config::load`]).
    pub fn load_file(path: &Path) -> Result<Config> {
        Self::from_json(&crate::read::read_path(path)?)
    }

    /// [`Config::create`] writing the config to `path`; refuses if it exists.
    pub fn create_at(
        path: &Path,
        password: &[u8],
        mode: ContentMode,
        key_bits: u32,
        kdf: KdfParams,
    ) -> Result<(Config, MasterKey)> {
        let (dir, name) = split(path)?;
        let (cfg, master) = Self::new_detached(password, mode, key_bits, kdf)?;
        write_atomic(&dir, &name, cfg.to_json().as_bytes(), Mode::CreateNew)?;
        Ok((cfg, master))
    }

    /// A copy of this format 1 or 2 config with the master key wrapped
    /// under `password` (fresh salt; every other field kept).
    fn rewrapped(&self, master: &MasterKey, password: &[u8], gens: (u32, Option<u32>)) -> Result<Config> {
        self.fresh_single(gens)?
            .with_rekey_id(self.rekey_id_for(gens.1))
            .wrap_under(master, password)
    }

    /// [`Config::change_password`] for the config at `path`.
    pub fn change_password_at(&self, path: &Path, old: &[u8], new: &[u8]) -> Result<()> {
        let cfg = if self.has_slots() {
            let o = self.open(&crate::Input::Secret { bytes: old, kind: None })?;
            let id = o
                .slot
                .ok_or_else(|| ConfigError::Slots("no keyslot opened with this password".into()))?;
            self.with_new_secret(&o, id, new)?
        } else {
            let master = self.unlock(old)?;
            self.rewrapped(&master, new, (self.key_generation(), self.rekey_target()))?
        };
        cfg.save_at(path)
    }

    /// [`Config::set_generations`] for the config at `path`.
    pub fn set_generations_at(
        &self,
        path: &Path,
        password: &[u8],
        key_generation: u32,
        rekey_target: Option<u32>,
    ) -> Result<Config> {
        let cfg = self.with_generations(password, (key_generation, rekey_target))?;
        cfg.save_at(path)?;
        Ok(cfg)
    }

    /// [`Config::set_generations_at`] for a config already opened (`o`,
    /// from [`Config::open`]): a keyslot config needs no secret again.
    pub fn set_generations_opened_at(
        &self,
        path: &Path,
        o: &crate::Opened,
        key_generation: u32,
        rekey_target: Option<u32>,
    ) -> Result<Config> {
        if !self.has_slots() {
            return Err(ConfigError::Slots(
                "a config without keyslots needs its password".into(),
            ));
        }
        super::config::check_gens(key_generation, rekey_target)?;
        let cfg = self.with_generations_opened(o, (key_generation, rekey_target));
        cfg.save_at(path)?;
        Ok(cfg)
    }

    /// A forgotten password: wrap `master` (the key `init` printed; the
    /// caller checks that it is this volume's) under `new`, keeping every
    /// other field. The old file is first copied to `PATH.bak` (or
    /// `PATH.bak.N`, the first free N), which is returned. In a keyslot
    /// config (`master` from [`Config::open`] with a recovery key) the
    /// one password or keyfile slot gets `new`.
    pub fn reset_password(&self, path: &Path, master: &MasterKey, new: &[u8]) -> Result<PathBuf> {
        self.reset_password_slot(
            path,
            &crate::Opened {
                key: master.clone(),
                slot: None,
                verified: true,
                slot_key: None,
            },
            None,
            new,
        )
    }

    /// [`Config::reset_password`] of keyslot `slot` (`None`: the only
    /// password or keyfile slot), opened as `o`.
    pub fn reset_password_slot(
        &self,
        path: &Path,
        o: &crate::Opened,
        slot: Option<u32>,
        new: &[u8],
    ) -> Result<PathBuf> {
        let cfg = if self.has_slots() {
            let id = match slot {
                Some(id) => id,
                None => {
                    let secret: Vec<u32> = self
                        .slots()
                        .iter()
                        .filter(|s| s.kind().is_secret())
                        .map(|s| s.id)
                        .collect();
                    match secret.as_slice() {
                        [id] => *id,
                        [] => {
                            return Err(ConfigError::Slots(
                                "this config has no password or keyfile slot: add one with warpfs key add".into(),
                            ))
                        }
                        _ => {
                            return Err(ConfigError::Slots(format!(
                                "this config has {} password or keyfile slots: name the one to reset with --key-slot",
                                secret.len()
                            )))
                        }
                    }
                }
            };
            self.with_new_secret(o, id, new)?
        } else {
            self.rewrapped(&o.key, new, (self.key_generation(), self.rekey_target()))?
        };
        let old = crate::read::read_path(path)?;
        let (dir, name) = split(path)?;
        let mut n = 0u32;
        let backup = loop {
            let b = if n == 0 {
                format!("{name}.bak")
            } else {
                format!("{name}.bak.{n}")
            };
            match write_atomic(&dir, &b, &old, Mode::CreateNew) {
                Ok(()) => break dir.join(b),
                Err(ConfigError::AlreadyExists { .. }) if n < 1000 => n += 1,
                Err(e) => return Err(e),
            }
        };
        write_atomic(&dir, &name, cfg.to_json().as_bytes(), Mode::Replace)?;
        Ok(backup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KDF: KdfParams = KdfParams::MIN;

    #[test]
    fn a_config_elsewhere_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vol.conf");
        let (cfg, master) = Config::create_at(&p, b"pw", ContentMode::Gcm, 256, KDF).unwrap();
        assert!(
            Config::create_at(&p, b"pw", ContentMode::Gcm, 256, KDF).is_err(),
            "never overwrites"
        );
        let loaded = Config::load_file(&p).unwrap();
        assert_eq!(loaded, cfg);
        assert_eq!(loaded.unlock(b"pw").unwrap().as_bytes(), master.as_bytes());
        loaded.change_password_at(&p, b"pw", b"new").unwrap();
        let changed = Config::load_file(&p).unwrap();
        assert!(matches!(changed.unlock(b"pw"), Err(ConfigError::WrongPassword)));
        assert_eq!(changed.unlock(b"new").unwrap().as_bytes(), master.as_bytes());
        let g = changed.set_generations_at(&p, b"new", 0, Some(1)).unwrap();
        assert_eq!(Config::load_file(&p).unwrap().rekey_target(), Some(1));
        assert!(g.set_generations_at(&p, b"new", 0, Some(5)).is_err());
        // Nothing but the config (no temp file) is left beside it.
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["vol.conf"]);
    }

    #[test]
    fn reset_keeps_a_backup_and_every_setting() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("warpfs.conf");
        let (cfg, master) = Config::create_at(&p, b"forgotten", ContentMode::Ctr, 128, KDF).unwrap();
        let before = std::fs::read(&p).unwrap();
        let b1 = cfg.reset_password(&p, &master, b"fresh").unwrap();
        assert_eq!(b1, d.path().join("warpfs.conf.bak"));
        assert_eq!(std::fs::read(&b1).unwrap(), before, "the backup is the old file");
        let now = Config::load_file(&p).unwrap();
        assert_eq!(now.unlock(b"fresh").unwrap().as_bytes(), master.as_bytes());
        assert_eq!((now.content_mode(), now.key_bits()), (ContentMode::Ctr, 128));
        assert_eq!(now.creator(), cfg.creator());
        // The old password still opens the backup, not the new file.
        assert!(Config::load_file(&b1).unwrap().unlock(b"forgotten").is_ok());
        assert!(now.unlock(b"forgotten").is_err());
        let b2 = now.reset_password(&p, &master, b"again").unwrap();
        assert_eq!(
            b2,
            d.path().join("warpfs.conf.bak.1"),
            "an older backup is never overwritten"
        );
    }
}
