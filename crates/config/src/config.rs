//! The volume config: the validated `Config` and its accessors and
//! summary. `flags` (feature flags and the version they imply),
//! `fields` (hostile strings shown, base64 fields, a wrapped key's JSON:
//! below everything else), `validate` (checks of hostile values), `json` (the file's JSON model,
//! load and write form), `create` (new configs, sealing the master key),
//! `keys` (associated data, unlock, password change, key generations),
//! `state` (a config's place in the key history) and `reverse` (reverse
//! configs) add the rest; `slots`, `mac` and `keyslots` hold the keyslot
//! table of format 3 (FORMAT.md 2.6).

pub use crate::mode::ContentMode;
use std::fmt;
use warpfs_crypto::kdf::{KdfParams, SALT_LEN};
use warpfs_crypto::wrap::Wrapped;

const KDF_ALGORITHM: &str = "argon2id";
use fields::WRAP_ALGORITHM;

pub use flags::FeatureFlag;
pub use state::KeyState;
pub use upgrade::UpgradeStage;
pub(crate) use validate::check_generations as check_gens;

/// A loaded (validated) volume config. Holds no secret: the master key
/// (the volume key) stays wrapped until [`Config::unlock`] or
/// [`Config::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    version: u32,
    creator: String,
    content_mode: ContentMode,
    key_bits: u32,
    block_size: u32,
    feature_flags: Vec<FeatureFlag>,
    key_generation: u32,
    rekey_target: Option<u32>,
    /// The random ID of the rekey under way (with the `rekey-id` flag).
    rekey_id: Option<[u8; REKEY_ID_LEN]>,
    /// Where the master key is wrapped.
    store: KeyStore,
}

/// How a config holds its master key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyStore {
    /// Formats 1 and 2: one key wrapped under one password (FORMAT.md 2.2).
    Single {
        kdf: KdfParams,
        salt: [u8; SALT_LEN],
        wrapped: Wrapped,
    },
    /// Format 3 (`keyslots`): the volume key wrapped in every slot, the
    /// whole config under a MAC (FORMAT.md 2.6).
    Slots(slots::SlotTable),
}

/// Bytes of a rekey ID (FORMAT.md 10.1).
pub const REKEY_ID_LEN: usize = 16;

impl Config {
    /// How file contents are encrypted.
    pub fn content_mode(&self) -> ContentMode {
        self.content_mode
    }
    /// Content key size in bits (128 or 256).
    pub fn key_bits(&self) -> u32 {
        self.key_bits
    }
    /// Argon2id parameters: the config's, or in a keyslot config those of
    /// its first password slot (the default when it has none). New
    /// password slots take them.
    pub fn kdf_params(&self) -> KdfParams {
        match &self.store {
            KeyStore::Single { kdf, .. } => *kdf,
            KeyStore::Slots(t) => t.first_kdf().unwrap_or(KdfParams::DEFAULT),
        }
    }
    /// Config format version (1, 2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }
    /// Plaintext block size (4096).
    pub fn block_size(&self) -> u32 {
        self.block_size
    }
    /// Feature flags, in file order.
    pub fn feature_flags(&self) -> &[FeatureFlag] {
        &self.feature_flags
    }
    /// Whether `flag` is set.
    pub fn has_feature(&self, flag: FeatureFlag) -> bool {
        self.feature_flags.contains(&flag)
    }
    /// Key generation of the content key (0 until the first rekey).
    pub fn key_generation(&self) -> u32 {
        self.key_generation
    }
    /// The generation an unfinished rekey moves files to, if one is under way.
    pub fn rekey_target(&self) -> Option<u32> {
        self.rekey_target
    }
    /// The random ID of the rekey under way, which its undo journal
    /// records carry (FORMAT.md 10.1); `None` outside a rekey, and for a
    /// rekey an earlier warpfs started.
    pub fn rekey_id(&self) -> Option<[u8; REKEY_ID_LEN]> {
        self.rekey_id
    }
    /// The generation new files get: the rekey target while a rekey is under
    /// way, else the key generation.
    pub fn write_generation(&self) -> u32 {
        self.rekey_target.unwrap_or(self.key_generation)
    }
    /// The program that created the volume, e.g. `warpfs 0.1.0`.
    pub fn creator(&self) -> &str {
        &self.creator
    }
}

/// Summary for `warpfs info`; shows no salt or key material.
impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags: Vec<&str> = self.feature_flags.iter().map(|f| f.as_str()).collect();
        let mode = self.content_mode.description();
        writeln!(f, "format:        warpfs config version {}", self.version)?;
        writeln!(f, "created by:    {}", self.creator)?;
        writeln!(f, "content mode:  {} ({mode})", self.content_mode)?;
        if self.content_mode.xts_cipher().is_some() {
            writeln!(
                f,
                "key size:      {}-{} (XTS key K1 ‖ K2: {} bits)",
                self.content_mode.cipher_name(),
                self.key_bits,
                2 * self.key_bits
            )?;
        } else {
            writeln!(
                f,
                "key size:      {}-{}",
                self.content_mode.cipher_name(),
                self.key_bits
            )?;
        }
        writeln!(f, "cipher:        {}", self.content_mode.cipher_name())?;
        writeln!(f, "block size:    {} bytes", self.block_size)?;
        writeln!(f, "features:      {}", flags.join(", "))?;
        if let KeyStore::Single { kdf, .. } = &self.store {
            writeln!(
                f,
                "password KDF:  argon2id, {} KiB memory, {} iterations, parallelism {}",
                kdf.memory_kib, kdf.iterations, kdf.parallelism
            )?;
        }
        if self.volume_rekey_under_way() {
            writeln!(
                f,
                "volume key:    a rekey to a new volume key is unfinished: run warpfs rekey to finish it"
            )?;
        }
        if self.summary_upgrade_under_way() {
            writeln!(
                f,
                "file summary:  an upgrade is unfinished: run warpfs upgrade again to finish it"
            )?;
        }
        match self.rekey_target {
            Some(t) => writeln!(
                f,
                "key generation: {} (rekey to {t} unfinished: run warpfs rekey again)",
                self.key_generation
            )?,
            None => writeln!(f, "key generation: {}", self.key_generation)?,
        }
        match &self.store {
            KeyStore::Single { .. } => write!(f, "key wrapping:  {WRAP_ALGORITHM}"),
            KeyStore::Slots(t) => {
                write!(
                    f,
                    "key wrapping:  {WRAP_ALGORITHM} per keyslot, config MAC HMAC-SHA256 (revision {})",
                    t.revision
                )?;
                write!(
                    f,
                    "\nkeyslots:      {} (as the file says: a secret that opens one checks them all)",
                    t.slots.len()
                )
            }
        }
    }
}

mod create;
pub(crate) mod fields;
mod flags;
mod json;
mod keys;
mod keyslots;
mod mac;
mod reverse;
mod slots;
mod state;
mod upgrade;
mod validate;

pub use keyslots::{NewSlot, Opened};
pub use slots::{tcti_is_safe_hint, Tpm2Object, Unseal, TPM2_MAX_PCR};
pub use slots::{Fido2, Input, Slot, SlotKind, FIDO2_RP_ID, FIDO2_SALT_LEN, MAX_LABEL_LEN, MAX_SLOTS};
