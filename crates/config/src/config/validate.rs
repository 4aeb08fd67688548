//! Checks of hostile config values: key size, key generations, version
//! against flags, KDF strength.

use super::flags::version_of;
use super::flags::FeatureFlag;
use crate::error::{ConfigError, Result};
use crate::mode::ContentMode;
use warpfs_crypto::kdf::KdfParams;

/// 128 or 256 bits; 256 only for XChaCha20 (FORMAT.md 15), which has no
/// 128-bit key.
pub(super) fn check_key_bits(mode: ContentMode, bits: u32) -> Result<()> {
    if mode.cipher() == warpfs_crypto::ContentCipher::XChaCha20 && bits != 256 {
        return Err(ConfigError::Unsupported(format!(
            "key size {bits} bits is not supported by content mode {} (supported: 256)",
            mode.as_str()
        )));
    }
    if bits == 128 || bits == 256 {
        Ok(())
    } else {
        Err(ConfigError::Unsupported(format!(
            "key size {bits} bits is not supported (supported: 128, 256)"
        )))
    }
}

pub(crate) fn check_generations(key_generation: u32, rekey_target: Option<u32>) -> Result<()> {
    match rekey_target {
        Some(t) if Some(t) != key_generation.checked_add(1) => Err(ConfigError::parse(format!(
            "\"rekey_target\" {t} must be \"key_generation\" {key_generation} + 1"
        ))),
        _ => Ok(()),
    }
}

/// `rekey_id` exactly with the `rekey-id` flag, and only while a rekey is
/// under way.
pub(super) fn check_rekey_id(present: bool, rekey_target: Option<u32>, flags: &[FeatureFlag]) -> Result<()> {
    let flag = flags.contains(&FeatureFlag::RekeyId);
    if present != flag {
        return Err(ConfigError::parse(if present {
            "\"rekey_id\" needs the feature flag rekey-id"
        } else {
            "feature flag rekey-id needs \"rekey_id\""
        }));
    }
    if present && rekey_target.is_none() {
        return Err(ConfigError::parse("\"rekey_id\" without \"rekey_target\""));
    }
    Ok(())
}

/// Version 2 exactly when a version 2 flag is present; `file-summary` in
/// `gcm` and `xchacha20-poly1305` only, and `summary-upgrade` there too,
/// never beside `file-summary`.
pub(super) fn check_version_flags(version: u32, flags: &[FeatureFlag], mode: ContentMode) -> Result<()> {
    if version != version_of(flags) {
        return Err(ConfigError::parse(format!(
            "config version {version} does not match its feature flags"
        )));
    }
    if flags.contains(&FeatureFlag::FileSummary) && !mode.has_file_summaries() {
        return Err(ConfigError::Unsupported(format!(
            "feature flag file-summary needs content mode gcm or xchacha20-poly1305, not {}",
            mode.as_str()
        )));
    }
    if flags.contains(&FeatureFlag::SummaryUpgrade) {
        if !mode.has_file_summaries() {
            return Err(ConfigError::Unsupported(format!(
                "feature flag summary-upgrade needs content mode gcm or xchacha20-poly1305, not {}",
                mode.as_str()
            )));
        }
        if flags.contains(&FeatureFlag::FileSummary) {
            return Err(ConfigError::parse(
                "feature flags summary-upgrade and file-summary exclude each other",
            ));
        }
    }
    Ok(())
}

pub(super) fn check_kdf(p: &KdfParams) -> Result<()> {
    p.validate().map_err(|e| {
        if e.is_kdf_too_weak() {
            ConfigError::WeakKdf(e.to_string())
        } else {
            ConfigError::Unsupported(e.to_string())
        }
    })
}
