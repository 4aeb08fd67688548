//! Turning file summaries on for a volume made without them (`warpfs
//! upgrade`, FORMAT.md 12.6): the flag `summary-upgrade` marks the walk
//! over the cipher files under way, and one last write sets
//! `file-summary` and drops it. Every other field is kept; a format 1
//! config becomes format 2 at that last write (the version follows the
//! flags, FORMAT.md 2.1), a keyslot config stays format 3.

use super::flags::version_of;
use super::validate::check_version_flags;
use super::{Config, FeatureFlag, Opened};
use crate::error::{ConfigError, Result};
use std::path::Path;

/// The two config writes of an upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeStage {
    /// The walk starts: `summary-upgrade` is set.
    Start,
    /// Every file has its summary: `file-summary` set and
    /// `summary-upgrade` dropped, in one write.
    Finish,
}

/// The flags of `flags` at `stage`: `summary-upgrade` appended at the
/// start; at the finish it is gone and `file-summary` sits where `init`
/// puts it (before `keyslots` and `rekey-id`).
fn staged(flags: &[FeatureFlag], stage: UpgradeStage) -> Vec<FeatureFlag> {
    let mut f: Vec<FeatureFlag> = flags
        .iter()
        .copied()
        .filter(|&f| f != FeatureFlag::SummaryUpgrade)
        .collect();
    let tail = |f: &[FeatureFlag]| {
        f.iter()
            .position(|&x| x == FeatureFlag::Keyslots || x == FeatureFlag::RekeyId)
            .unwrap_or(f.len())
    };
    match stage {
        UpgradeStage::Start => {
            let at = f.iter().position(|&x| x == FeatureFlag::RekeyId).unwrap_or(f.len());
            f.insert(at, FeatureFlag::SummaryUpgrade);
        }
        UpgradeStage::Finish if !f.contains(&FeatureFlag::FileSummary) => {
            let at = tail(&f);
            f.insert(at, FeatureFlag::FileSummary);
        }
        UpgradeStage::Finish => {}
    }
    f
}

impl Config {
    /// Whether `warpfs upgrade` is under way (flag `summary-upgrade`):
    /// only it may use the volume until it finishes.
    pub fn summary_upgrade_under_way(&self) -> bool {
        self.has_feature(FeatureFlag::SummaryUpgrade)
    }

    /// Why this volume cannot be given file summaries, if it cannot:
    /// a reverse view, a mode without them, summaries already on, a rekey
    /// under way.
    pub fn summary_upgrade_refused(&self) -> Option<String> {
        let mode = self.content_mode;
        if self.has_feature(FeatureFlag::Reverse) {
            return Some(
                "a reverse view's config: its cipher files are made on the fly from plaintext, there are none to give a summary"
                    .into(),
            );
        }
        if !mode.is_authenticated() {
            return Some(format!(
                "content mode {} has no authentication to build on: file summaries need an authenticated mode (gcm or xchacha20-poly1305)",
                mode.as_str()
            ));
        }
        if !mode.has_file_summaries() {
            return Some(format!(
                "content mode {} has no file summaries (they exist in gcm and xchacha20-poly1305)",
                mode.as_str()
            ));
        }
        if self.has_feature(FeatureFlag::FileSummary) {
            return Some(
                "this volume already detects rolled-back or mixed blocks (feature flag file-summary): nothing to upgrade"
                    .into(),
            );
        }
        if self.volume_rekey_under_way() || self.rekey_target.is_some() {
            return Some("a rekey is unfinished: run warpfs rekey to finish it first".into());
        }
        None
    }

    /// This config at `stage` of an upgrade, checked, not wrapped yet.
    fn staged(&self, stage: UpgradeStage) -> Result<Config> {
        if let Some(why) = self.summary_upgrade_refused() {
            return Err(ConfigError::Unsupported(why));
        }
        let mut c = self.clone();
        c.feature_flags = staged(&self.feature_flags, stage);
        c.version = version_of(&c.feature_flags);
        check_version_flags(c.version, &c.feature_flags, c.content_mode)?;
        Ok(c)
    }

    /// Write the config of `stage` to `path` for `password` (which must
    /// open this config; a format 1 or 2 config gets a fresh salt, a
    /// keyslot config a new MAC). Returns the new config.
    pub fn set_summary_upgrade_at(&self, path: &Path, password: &[u8], stage: UpgradeStage) -> Result<Config> {
        if self.has_slots() {
            let o = self.open(&Self::any_secret(password))?;
            return self.set_summary_upgrade_opened_at(path, &o, stage);
        }
        let master = self.unlock(password)?;
        let c = self.staged(stage)?;
        let mut fresh = self.fresh_single((self.key_generation, None))?;
        fresh.feature_flags = c.feature_flags;
        fresh.version = c.version;
        let cfg = fresh.wrap_under(&master, password)?;
        cfg.save_at(path)?;
        Ok(cfg)
    }

    /// [`Config::set_summary_upgrade_at`] for a keyslot config already
    /// opened (a TPM2 or FIDO2 slot gives no password).
    pub fn set_summary_upgrade_opened_at(&self, path: &Path, o: &Opened, stage: UpgradeStage) -> Result<Config> {
        if !self.has_slots() {
            return Err(ConfigError::Slots(
                "a config without keyslots needs its password".into(),
            ));
        }
        let c = self.staged(stage)?;
        let cfg = self.resealed(&o.key, o.slot, |x| {
            x.feature_flags = c.feature_flags.clone();
            x.version = c.version;
        });
        cfg.save_at(path)?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentMode, Input, SlotKind};
    use warpfs_crypto::KdfParams;

    const PW: &[u8] = b"pw";

    #[test]
    fn a_format_1_config_is_format_2_once_upgraded() {
        let d = tempfile::tempdir().unwrap();
        let p = crate::config_path(d.path());
        let (c, master) = Config::create(d.path(), PW, ContentMode::Gcm, 256, KdfParams::MIN).unwrap();
        assert!(c.summary_upgrade_refused().is_none());
        let mid = c.set_summary_upgrade_at(&p, PW, UpgradeStage::Start).unwrap();
        assert!(mid.summary_upgrade_under_way());
        assert_eq!(mid.version(), 1, "the flag does not change the version");
        assert_eq!(Config::load(d.path()).unwrap(), mid);
        assert_eq!(mid.unlock(PW).unwrap(), master);
        // Resuming writes the same flags again.
        let again = mid.set_summary_upgrade_at(&p, PW, UpgradeStage::Start).unwrap();
        assert_eq!(again.feature_flags(), mid.feature_flags());
        let done = again.set_summary_upgrade_at(&p, PW, UpgradeStage::Finish).unwrap();
        assert!(!done.summary_upgrade_under_way() && done.has_feature(FeatureFlag::FileSummary));
        assert_eq!(done.version(), 2);
        let names: Vec<&str> = done.feature_flags().iter().map(|f| f.as_str()).collect();
        assert_eq!(names, ["dir-iv", "long-names", "siv-names", "file-summary"]);
        assert_eq!(Config::load(d.path()).unwrap(), done);
        assert_eq!(done.unlock(PW).unwrap(), master);
        assert!(done.summary_upgrade_refused().unwrap().contains("already detects"));
        assert!(done.set_summary_upgrade_at(&p, PW, UpgradeStage::Start).is_err());
        // A wrong password writes nothing.
        assert!(matches!(
            c.set_summary_upgrade_at(&p, b"wrong", UpgradeStage::Start),
            Err(ConfigError::WrongPassword)
        ));
        assert_eq!(Config::load(d.path()).unwrap(), done);
    }

    #[test]
    fn a_keyslot_config_stays_format_3_and_keeps_its_slots() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.conf");
        let (c, vk) = Config::create_slots_at(
            &p,
            PW,
            SlotKind::Password,
            ContentMode::XChaCha20Poly1305,
            256,
            KdfParams::MIN,
            &[FeatureFlag::BoundSeals],
            None,
        )
        .unwrap();
        let o = c.open(&Input::Secret { bytes: PW, kind: None }).unwrap();
        let mid = c.set_summary_upgrade_opened_at(&p, &o, UpgradeStage::Start).unwrap();
        assert_eq!(mid.version(), 3);
        assert_eq!(mid.revision(), c.revision());
        let done = Config::load_file(&p)
            .unwrap()
            .set_summary_upgrade_at(&p, PW, UpgradeStage::Finish)
            .unwrap();
        let names: Vec<&str> = done.feature_flags().iter().map(|f| f.as_str()).collect();
        assert_eq!(
            names,
            [
                "dir-iv",
                "long-names",
                "siv-names",
                "bound-seals",
                "file-summary",
                "keyslots"
            ]
        );
        assert_eq!(done.version(), 3);
        let back = Config::load_file(&p).unwrap();
        assert_eq!(back.open(&Input::Secret { bytes: PW, kind: None }).unwrap().key, vk);
    }

    #[test]
    fn modes_without_summaries_and_rekeys_are_refused() {
        for (mode, why) in [
            (ContentMode::Ctr, "no authentication to build on"),
            (ContentMode::Xts, "no authentication to build on"),
            (ContentMode::GcmTwofish, "has no file summaries"),
        ] {
            let d = tempfile::tempdir().unwrap();
            let p = crate::config_path(d.path());
            let (c, _) = Config::create(d.path(), PW, mode, 256, KdfParams::MIN).unwrap();
            assert!(c.summary_upgrade_refused().unwrap().contains(why), "{mode}");
            assert!(c.set_summary_upgrade_at(&p, PW, UpgradeStage::Start).is_err());
            assert_eq!(Config::load(d.path()).unwrap(), c, "nothing written");
        }
        let d = tempfile::tempdir().unwrap();
        let (c, _) = Config::create(d.path(), PW, ContentMode::Gcm, 256, KdfParams::MIN).unwrap();
        let mid = c.set_generations(d.path(), PW, 0, Some(1)).unwrap();
        assert!(mid.summary_upgrade_refused().unwrap().contains("rekey"));
        let p = d.path().join("reverse.conf");
        let (r, _) = Config::create_reverse(&p, PW, 256, KdfParams::MIN, false).unwrap();
        assert!(r.summary_upgrade_refused().unwrap().contains("reverse view"));
        assert!(r.set_summary_upgrade_at(&p, PW, UpgradeStage::Start).is_err());
    }

    #[test]
    fn the_flag_is_checked_when_read() {
        let d = tempfile::tempdir().unwrap();
        let (c, _) = Config::create(d.path(), PW, ContentMode::Gcm, 256, KdfParams::MIN).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
        v["feature_flags"] = serde_json::json!(["dir-iv", "long-names", "siv-names", "summary-upgrade"]);
        assert!(Config::from_json(v.to_string().as_bytes())
            .unwrap()
            .summary_upgrade_under_way());
        v["version"] = serde_json::json!(2);
        v["feature_flags"] =
            serde_json::json!(["dir-iv", "long-names", "siv-names", "file-summary", "summary-upgrade"]);
        assert!(Config::from_json(v.to_string().as_bytes()).is_err());
        v["content_mode"] = serde_json::json!("ctr");
        v["version"] = serde_json::json!(1);
        v["feature_flags"] = serde_json::json!(["dir-iv", "long-names", "siv-names", "summary-upgrade"]);
        assert!(Config::from_json(v.to_string().as_bytes()).is_err());
    }
}
