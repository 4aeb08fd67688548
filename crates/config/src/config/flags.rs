//! Feature flags: the names a config may carry and the config version
//! they imply.

use crate::{FORMAT_VERSION, V1_FEATURE_FLAGS, V2_FEATURE_FLAGS, V3_FEATURE_FLAGS};
use std::fmt;

/// A feature a volume relies on. A reader refuses flags it does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeatureFlag {
    /// Every directory has a `warpfs.diriv` name IV.
    DirIv,
    /// Long encrypted names go to `warpfs.long.*` plus a sidecar.
    LongNames,
    /// Names are encrypted with AES-SIV.
    SivNames,
    /// Written by `warpfs init --reverse`: the view of a plaintext tree,
    /// with deterministic IDs and synthetic nonces (FORMAT.md 14).
    Reverse,
    /// Symlink targets and xattr values are sealed with associated data
    /// naming their entry (FORMAT.md 5; config version 2).
    BoundSeals,
    /// `gcm` files carry an authenticated summary of their nonce entries
    /// (FORMAT.md 12; config version 2).
    FileSummary,
    /// The rekey under way has a random ID (`rekey_id`) that its undo
    /// journal records carry (FORMAT.md 10.1, 10.3). Present only while a
    /// rekey is under way; any config version.
    RekeyId,
    /// `warpfs upgrade` is turning file summaries on: some cipher files
    /// have one, some not yet (FORMAT.md 12.6). Present only while the
    /// upgrade is under way; any config version. Until it ends only
    /// `warpfs upgrade` uses the volume.
    SummaryUpgrade,
    /// The volume key is wrapped in any number of keyslots and the config
    /// is authenticated by a MAC (FORMAT.md 2.6; config version 3).
    Keyslots,
}

impl FeatureFlag {
    /// The flag as written in `warpfs.conf`.
    pub fn as_str(self) -> &'static str {
        match self {
            FeatureFlag::DirIv => "dir-iv",
            FeatureFlag::LongNames => "long-names",
            FeatureFlag::SivNames => "siv-names",
            FeatureFlag::Reverse => "reverse",
            FeatureFlag::BoundSeals => "bound-seals",
            FeatureFlag::FileSummary => "file-summary",
            FeatureFlag::RekeyId => "rekey-id",
            FeatureFlag::SummaryUpgrade => "summary-upgrade",
            FeatureFlag::Keyslots => "keyslots",
        }
    }

    /// The flag named `s`, if this warpfs knows it.
    pub fn from_name(s: &str) -> Option<Self> {
        V1_FEATURE_FLAGS
            .into_iter()
            .chain(crate::OPTIONAL_FEATURE_FLAGS)
            .chain(V2_FEATURE_FLAGS)
            .chain(V3_FEATURE_FLAGS)
            .find(|f| f.as_str() == s)
    }
}

impl fmt::Display for FeatureFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The config version of a volume with `flags`: 3 with `keyslots`, else
/// 2 with any flag of [`V2_FEATURE_FLAGS`], else 1.
pub(super) fn version_of(flags: &[FeatureFlag]) -> u32 {
    if flags.iter().any(|f| V3_FEATURE_FLAGS.contains(f)) {
        FORMAT_VERSION
    } else if flags.iter().any(|f| V2_FEATURE_FLAGS.contains(f)) {
        2
    } else {
        1
    }
}
