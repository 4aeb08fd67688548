//! Reverse configs (FORMAT.md 14): the config of a reverse view, written
//! as one file anywhere (by default `PLAINDIR/.warpfs.reverse.conf`) and
//! read from there.

use super::{Config, ContentMode, FeatureFlag};
use crate::error::{ConfigError, Result};
use crate::write::{write_atomic, Mode};
use crate::V1_FEATURE_FLAGS;
use std::path::Path;
use warpfs_crypto::{KdfParams, MasterKey};

impl Config {
    /// Make a reverse config at `path` (a new file; its directory must
    /// exist) with a fresh master key: content mode `gcm`, the feature
    /// flags of format 1, `reverse` and `bound-seals`, and `file-summary`
    /// when `summary` (config version 2). Reverse configs of format 1
    /// (without `bound-seals`) stay as they are: their views keep their
    /// bytes.
    pub fn create_reverse(
        path: &Path,
        password: &[u8],
        key_bits: u32,
        kdf: KdfParams,
        summary: bool,
    ) -> Result<(Config, MasterKey)> {
        let (dir, name) = split(path)?;
        let (cfg, master) = Self::reverse_sealed(password, key_bits, kdf, summary)?;
        write_atomic(dir, name, cfg.to_json().as_bytes(), Mode::CreateNew)?;
        Ok((cfg, master))
    }

    /// A new reverse config and its fresh master key, not written yet.
    fn reverse_sealed(password: &[u8], key_bits: u32, kdf: KdfParams, summary: bool) -> Result<(Config, MasterKey)> {
        super::validate::check_key_bits(ContentMode::Gcm, key_bits)?;
        super::validate::check_kdf(&kdf)?;
        let mut flags = V1_FEATURE_FLAGS.to_vec();
        flags.extend([FeatureFlag::Reverse, FeatureFlag::BoundSeals]);
        if summary {
            flags.push(FeatureFlag::FileSummary);
        }
        let master = MasterKey::generate();
        let cfg = Self::seal(
            format!("warpfs {}", env!("CARGO_PKG_VERSION")),
            ContentMode::Gcm,
            key_bits,
            flags,
            kdf,
            &master,
            password,
        )?;
        Ok((cfg, master))
    }

    /// Why [`Config::renew_reverse`] refuses this config, if it does: not
    /// a reverse config, summaries there already, or keyslots.
    pub fn renew_reverse_refused(&self) -> Option<&'static str> {
        if !self.has_feature(FeatureFlag::Reverse) {
            Some("not a reverse config")
        } else if self.has_feature(FeatureFlag::FileSummary) {
            Some("the view has file summaries already")
        } else if self.has_feature(FeatureFlag::Keyslots) {
            Some("a reverse config with keyslots: make a new one with warpfs init --reverse --file-summary on")
        } else {
            None
        }
    }

    /// Replace this reverse config, at `path`, with a new one with file
    /// summaries (`warpfs upgrade --reverse`, FORMAT.md 14): a fresh
    /// master key, the flags of [`Config::create_reverse`] with
    /// `file-summary`, this config's key size and KDF cost, wrapped under
    /// `password` (which must open this config). The old file stays as
    /// `aside` (a name in the same directory, never overwritten): it is
    /// linked there first, then the new config replaces it atomically.
    pub fn renew_reverse(&self, path: &Path, aside: &str, password: &[u8]) -> Result<(Config, MasterKey)> {
        if let Some(why) = self.renew_reverse_refused() {
            return Err(ConfigError::Unsupported(why.into()));
        }
        drop(self.unlock(password)?);
        let (dir, name) = split(path)?;
        let (cfg, master) = Self::reverse_sealed(password, self.key_bits(), self.kdf_params(), true)?;
        let root = warpfs_backing::Root::open(dir).map_err(|e| ConfigError::io(dir, e.into()))?;
        let top = root.top();
        let (from, to) = (top.entry(name.as_ref()), top.entry(aside.as_ref()));
        warpfs_backing::link(&from, &to).map_err(|e| ConfigError::io(to.shown(), e.into()))?;
        top.sync().map_err(|e| ConfigError::io(dir, e.into()))?;
        crate::write::write_atomic_in(&root, name.as_ref(), cfg.to_json().as_bytes(), Mode::Replace)?;
        Ok((cfg, master))
    }

    /// Read and validate the config file at `path` (hostile input), and
    /// its bytes as they are (a reverse view shows them).
    pub fn load_file_bytes(path: &Path) -> Result<(Config, Vec<u8>)> {
        let buf = crate::read::read_path(path)?;
        let cfg = Self::from_json(&buf)?;
        Ok((cfg, buf))
    }
}

fn split(path: &Path) -> Result<(&Path, &str)> {
    let name = path.file_name().and_then(|n| n.to_str());
    match name {
        Some(n) => {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            Ok((dir, n))
        }
        None => Err(ConfigError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fast() -> KdfParams {
        KdfParams {
            memory_kib: 32768,
            iterations: 2,
            parallelism: 1,
        }
    }

    #[test]
    fn reverse_config_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(crate::REVERSE_CONFIG_FILE);
        let (cfg, master) = Config::create_reverse(&p, b"pw", 256, fast(), false).unwrap();
        assert!(cfg.has_feature(FeatureFlag::Reverse));
        assert_eq!(cfg.content_mode(), ContentMode::Gcm);
        // The current format: symlink targets bound to their entry.
        assert!(cfg.has_feature(FeatureFlag::BoundSeals));
        assert_eq!(cfg.version(), 2);
        assert!(!cfg.has_feature(FeatureFlag::FileSummary));
        let (back, bytes) = Config::load_file_bytes(&p).unwrap();
        assert_eq!(back, cfg);
        assert_eq!(bytes, std::fs::read(&p).unwrap());
        assert_eq!(back.unlock(b"pw").unwrap(), master);
        assert!(String::from_utf8(bytes).unwrap().contains("\"reverse\""));
        // Never overwritten.
        assert!(matches!(
            Config::create_reverse(&p, b"pw", 256, fast(), false),
            Err(ConfigError::AlreadyExists { .. })
        ));
        // A forward reader (the copy of a view names it warpfs.conf) takes it.
        std::fs::copy(&p, d.path().join(crate::CONFIG_FILE)).unwrap();
        assert!(Config::load(d.path()).unwrap().has_feature(FeatureFlag::Reverse));
    }

    #[test]
    fn a_format_1_reverse_config_keeps_loading_as_it_is() {
        // Frozen by an earlier warpfs (crates/warpfs/tests/revkit/freeze.sh).
        let text = include_str!("../../../warpfs/tests/revkit/v1/plain/.warpfs.reverse.conf");
        let cfg = Config::from_json(text.as_bytes()).unwrap();
        assert_eq!(cfg.version(), 1);
        assert!(cfg.has_feature(FeatureFlag::Reverse));
        assert!(!cfg.has_feature(FeatureFlag::BoundSeals));
        cfg.unlock(b"frozen reverse view v1").unwrap();
        assert_eq!(cfg.to_json(), text, "written back byte for byte");
    }

    #[test]
    fn the_reverse_flag_is_authenticated() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.conf");
        Config::create_reverse(&p, b"pw", 256, fast(), false).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let edited = text.replace(",\n    \"reverse\"", "");
        assert_ne!(edited, text);
        let cfg = Config::from_json(edited.as_bytes()).unwrap();
        assert!(!cfg.has_feature(FeatureFlag::Reverse));
        assert!(cfg.unlock(b"pw").is_err());
    }

    #[test]
    fn renewing_gives_summaries_under_a_new_key_and_keeps_the_old_file_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(crate::REVERSE_CONFIG_FILE);
        let aside = ".warpfs.reverse.conf.old-1";
        let (old, old_key) = Config::create_reverse(&p, b"pw", 128, fast(), false).unwrap();
        let old_bytes = std::fs::read(&p).unwrap();
        // A wrong password changes nothing.
        assert!(matches!(
            old.renew_reverse(&p, aside, b"nope"),
            Err(ConfigError::WrongPassword)
        ));
        assert!(!d.path().join(aside).exists());
        let (new, key) = old.renew_reverse(&p, aside, b"pw").unwrap();
        assert!(new.has_feature(FeatureFlag::FileSummary) && new.has_feature(FeatureFlag::Reverse));
        assert!(new.has_feature(FeatureFlag::BoundSeals));
        assert_eq!((new.version(), new.key_bits()), (2, 128));
        assert_ne!(key, old_key);
        assert_eq!(std::fs::read(d.path().join(aside)).unwrap(), old_bytes);
        let (back, _) = Config::load_file_bytes(&p).unwrap();
        assert_eq!(back, new);
        assert_eq!(back.unlock(b"pw").unwrap(), key);
        // Once is enough; the aside name is never overwritten.
        assert!(matches!(
            back.renew_reverse(&p, "other", b"pw"),
            Err(ConfigError::Unsupported(_))
        ));
        assert!(old.renew_reverse(&p, aside, b"pw").is_err());
        assert_eq!(Config::load_file_bytes(&p).unwrap().0, new);
    }
}
