//! warpfs volume config: the `warpfs.conf` file in CIPHERDIR (FORMAT.md
//! section 2). It records the format version, content mode, key size, block
//! size, feature flags and Argon2id parameters, and holds the master key
//! wrapped with AES-256-GCM under the password-derived key (formats 1 and
//! 2, every field authenticated as the wrapping's associated data), or
//! wrapped in any number of keyslots with the whole file under a MAC
//! keyed from the master key (format 3). KDF parameters are
//! bounds-checked, so an edited config cannot weaken the volume.

mod config;
mod error;
mod file;
mod mode;
mod read;
mod write;

#[cfg(test)]
mod tests;

pub use config::{tcti_is_safe_hint, Tpm2Object, Unseal, TPM2_MAX_PCR};
pub use config::{
    Config, ContentMode, FeatureFlag, Fido2, Input, KeyState, NewSlot, Opened, Slot, SlotKind, UpgradeStage,
    FIDO2_RP_ID, FIDO2_SALT_LEN, MAX_LABEL_LEN, MAX_SLOTS, REKEY_ID_LEN,
};
pub use error::{ConfigError, DeviceError, DeviceFailure, Result};
pub use warpfs_crypto::{KdfParams, MasterKey};

/// Name of the config file in CIPHERDIR.
pub const CONFIG_FILE: &str = "warpfs.conf";
/// The `"format"` value of every warpfs config.
pub const FORMAT_NAME: &str = "warpfs";
/// The newest config version this warpfs reads and writes (FORMAT.md 6):
/// version 3 carries keyslots ([`V3_FEATURE_FLAGS`]), version 2 the flags
/// of [`V2_FEATURE_FLAGS`]; volumes of versions 1 and 2 keep mounting and
/// are written as they are.
pub const FORMAT_VERSION: u32 = 3;
/// Plaintext block size; the only value format 1 accepts.
pub const BLOCK_SIZE: u32 = 4096;
/// A config file larger than this is refused without parsing.
pub const MAX_CONFIG_SIZE: usize = 64 * 1024;
/// Feature flags a version 1 config carries (all required).
pub const V1_FEATURE_FLAGS: [FeatureFlag; 3] = [FeatureFlag::DirIv, FeatureFlag::LongNames, FeatureFlag::SivNames];
/// Feature flags a config of any version may carry besides those.
pub const OPTIONAL_FEATURE_FLAGS: [FeatureFlag; 3] =
    [FeatureFlag::Reverse, FeatureFlag::RekeyId, FeatureFlag::SummaryUpgrade];
/// Name of a reverse config inside PLAINDIR (FORMAT.md 14); a reverse view
/// shows it as `warpfs.conf`.
pub const REVERSE_CONFIG_FILE: &str = ".warpfs.reverse.conf";
/// Optional feature flags of a version 2 config (FORMAT.md 5, 12); a
/// version 3 config may carry them too.
pub const V2_FEATURE_FLAGS: [FeatureFlag; 2] = [FeatureFlag::BoundSeals, FeatureFlag::FileSummary];
/// The feature flag of a version 3 config (FORMAT.md 2.6).
pub const V3_FEATURE_FLAGS: [FeatureFlag; 1] = [FeatureFlag::Keyslots];

/// Path of the config file in `dir`.
pub fn config_path(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join(CONFIG_FILE)
}
