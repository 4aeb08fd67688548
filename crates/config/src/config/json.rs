//! The JSON model of `warpfs.conf` (field order = file order): loading
//! and validating the file (hostile input) and its written form. Formats
//! 1 and 2 hold `kdf` and `wrapped_key`; format 3 holds `revision`, the
//! `keyslots` and the `mac` instead (FORMAT.md 2.6).

use super::fields::{decode_fixed, show, WrappedJson};
use super::slots::{check_table, check_wrapped, Slot, SlotJson, SlotTable};
use super::validate::{check_generations, check_kdf, check_key_bits, check_rekey_id, check_version_flags};
use super::{Config, FeatureFlag, KeyStore, KDF_ALGORITHM, REKEY_ID_LEN};
use crate::error::{ConfigError, Result};
use crate::mode::ContentMode;
use crate::{BLOCK_SIZE, FORMAT_NAME, FORMAT_VERSION, MAX_CONFIG_SIZE, V1_FEATURE_FLAGS};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::path::Path;
use warpfs_crypto::kdf::{KdfParams, SALT_LEN};
use warpfs_crypto::wrap::{Wrapped, WRAPPED_LEN, WRAP_NONCE_LEN};

const MAX_CREATOR_LEN: usize = 256;

// ---- JSON model (field order = file order) ----

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileV1 {
    format: String,
    version: u32,
    creator: String,
    content_mode: String,
    key_bits: u32,
    block_size: u32,
    feature_flags: Vec<String>,
    /// Formats 1 and 2: the password's Argon2id parameters and salt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kdf: Option<KdfJson>,
    /// Key generation of the content key (FORMAT.md 10); absent = 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_generation: Option<u32>,
    /// Generation a rekey under way moves every file to; absent = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rekey_target: Option<u32>,
    /// The rekey's random ID (base64 of 16 bytes), with the `rekey-id` flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rekey_id: Option<String>,
    /// Format 3: counts the rewrites of the keyslot table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    revision: Option<u32>,
    /// Format 3, during a volume-key rekey: the previous volume key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous_volume_key: Option<PreviousJson>,
    /// Format 3: the keyslots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keyslots: Option<Vec<SlotJson>>,
    /// Formats 1 and 2: the master key wrapped under the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wrapped_key: Option<WrappedJson>,
    /// Format 3: HMAC-SHA256 of the config under the volume key's MAC key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mac: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviousJson {
    generation: u32,
    nonce: String,
    ciphertext: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KdfJson {
    algorithm: String,
    memory_kib: u32,
    iterations: u32,
    parallelism: u32,
    salt: String,
}

impl Config {
    /// Read and validate `dir/warpfs.conf` (treated as hostile input).
    pub fn load(dir: &Path) -> Result<Config> {
        let root = warpfs_backing::Root::open(dir).map_err(|e| ConfigError::io(dir, e.into()))?;
        Self::from_json(&crate::read::read_in(&root, std::ffi::OsStr::new(crate::CONFIG_FILE))?)
    }

    /// Parse and validate the bytes of a `warpfs.conf`. Never panics.
    pub fn from_json(bytes: &[u8]) -> Result<Config> {
        if bytes.len() > MAX_CONFIG_SIZE {
            return Err(ConfigError::parse("file is larger than 64 KiB"));
        }
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| ConfigError::parse(format!("not valid JSON ({e})")))?;
        let obj = value
            .as_object()
            .ok_or_else(|| ConfigError::parse("not a JSON object"))?;

        // Identify the file and its version before anything else, so a newer
        // format is reported as such rather than as a field error.
        if obj.get("format").and_then(|v| v.as_str()) != Some(FORMAT_NAME) {
            return Err(ConfigError::parse(
                "this is not a warpfs config (\"format\" is not \"warpfs\")",
            ));
        }
        let version = obj
            .get("version")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| ConfigError::parse("\"version\" is missing or not a number"))?;
        if !(1..=u64::from(FORMAT_VERSION)).contains(&version) {
            return Err(ConfigError::Unsupported(if version > u64::from(FORMAT_VERSION) {
                format!("config version {version}: this volume needs a newer warpfs (this one reads version {FORMAT_VERSION})")
            } else {
                format!("config version {version} is not supported (this warpfs reads version {FORMAT_VERSION})")
            }));
        }
        if let Some(flags) = obj.get("feature_flags").and_then(|v| v.as_array()) {
            for f in flags.iter().filter_map(|f| f.as_str()) {
                if FeatureFlag::from_name(f).is_none() {
                    return Err(ConfigError::Unsupported(format!(
                        "unknown feature flag {}: this volume needs a newer warpfs",
                        show(f)
                    )));
                }
            }
        }

        // Typed parse from the bytes (not the Value), so duplicate keys and
        // unknown fields are refused rather than silently resolved.
        let file: FileV1 = serde_json::from_slice(bytes).map_err(|e| ConfigError::parse(e.to_string()))?;
        Self::from_file(file)
    }

    fn from_file(f: FileV1) -> Result<Config> {
        if f.creator.len() > MAX_CREATOR_LEN || f.creator.chars().any(char::is_control) {
            return Err(ConfigError::parse("\"creator\" is too long or has control characters"));
        }
        let content_mode: ContentMode = f.content_mode.parse()?;
        check_key_bits(content_mode, f.key_bits)?;
        if f.block_size != BLOCK_SIZE {
            return Err(ConfigError::Unsupported(format!(
                "block size {} is not supported (only {BLOCK_SIZE})",
                f.block_size
            )));
        }
        let mut flags = Vec::with_capacity(f.feature_flags.len());
        for name in &f.feature_flags {
            // Unknown names were refused in from_json.
            let flag = FeatureFlag::from_name(name).ok_or_else(|| {
                ConfigError::Unsupported(format!(
                    "unknown feature flag {}: this volume needs a newer warpfs",
                    show(name)
                ))
            })?;
            if flags.contains(&flag) {
                return Err(ConfigError::parse(format!("feature flag {flag} appears twice")));
            }
            flags.push(flag);
        }
        for required in V1_FEATURE_FLAGS {
            if !flags.contains(&required) {
                return Err(ConfigError::Unsupported(format!(
                    "required feature flag {required} is missing: this config was not written by a compatible warpfs"
                )));
            }
        }
        check_version_flags(f.version, &flags, content_mode)?;
        if f.key_generation == Some(0) {
            return Err(ConfigError::parse("\"key_generation\" 0 must be omitted"));
        }
        let key_generation = f.key_generation.unwrap_or(0);
        check_generations(key_generation, f.rekey_target)?;
        let rekey_id = match f.rekey_id {
            Some(s) => Some(decode_fixed::<REKEY_ID_LEN>("rekey_id", &s)?),
            None => None,
        };
        check_rekey_id(rekey_id.is_some(), f.rekey_target, &flags)?;
        let slotted = flags.contains(&FeatureFlag::Keyslots);
        let store = if slotted {
            if f.kdf.is_some() || f.wrapped_key.is_some() {
                return Err(ConfigError::parse(
                    "a keyslot config has no \"kdf\" or \"wrapped_key\" of its own",
                ));
            }
            let (Some(slots), Some(revision), Some(mac)) = (f.keyslots, f.revision, f.mac) else {
                return Err(ConfigError::parse(
                    "a keyslot config needs \"revision\", \"keyslots\" and \"mac\"",
                ));
            };
            let slots = slots.into_iter().map(Slot::from_json).collect::<Result<Vec<_>>>()?;
            check_table(&slots)?;
            slots.iter().try_for_each(|s| check_wrapped(&s.wrapped))?;
            let previous = match f.previous_volume_key {
                None => None,
                Some(p) => {
                    if f.rekey_target.is_none() || p.generation != key_generation {
                        return Err(ConfigError::parse(
                            "\"previous_volume_key\" belongs to a rekey from \"key_generation\"",
                        ));
                    }
                    let nonce = decode_fixed::<WRAP_NONCE_LEN>("previous_volume_key.nonce", &p.nonce)?;
                    let ct = decode_fixed::<WRAPPED_LEN>("previous_volume_key.ciphertext", &p.ciphertext)?;
                    Some((
                        p.generation,
                        Wrapped {
                            nonce,
                            ciphertext: ct.to_vec(),
                        },
                    ))
                }
            };
            KeyStore::Slots(SlotTable {
                revision,
                previous,
                slots,
                mac: decode_fixed::<32>("mac", &mac)?,
            })
        } else {
            if f.keyslots.is_some() || f.revision.is_some() || f.mac.is_some() || f.previous_volume_key.is_some() {
                return Err(ConfigError::parse(
                    "\"keyslots\", \"revision\", \"previous_volume_key\" and \"mac\" need the feature flag keyslots",
                ));
            }
            let (Some(k), Some(w)) = (f.kdf, f.wrapped_key) else {
                return Err(ConfigError::parse("\"kdf\" or \"wrapped_key\" is missing"));
            };
            if k.algorithm != KDF_ALGORITHM {
                return Err(ConfigError::Unsupported(format!(
                    "password KDF {} is not supported (only {KDF_ALGORITHM})",
                    show(&k.algorithm)
                )));
            }
            let kdf = KdfParams {
                memory_kib: k.memory_kib,
                iterations: k.iterations,
                parallelism: k.parallelism,
            };
            check_kdf(&kdf)?;
            let salt = decode_fixed::<SALT_LEN>("kdf.salt", &k.salt)?;
            KeyStore::Single {
                kdf,
                salt,
                wrapped: w.parse("wrapped_key")?,
            }
        };
        Ok(Config {
            version: f.version,
            creator: f.creator,
            content_mode,
            key_bits: f.key_bits,
            block_size: f.block_size,
            feature_flags: flags,
            key_generation,
            rekey_target: f.rekey_target,
            rekey_id,
            store,
        })
    }

    /// The config as written to disk: pretty-printed JSON and a newline.
    pub fn to_json(&self) -> String {
        let (kdf, wrapped_key, revision, previous_volume_key, keyslots, mac) = match &self.store {
            KeyStore::Single { kdf, salt, wrapped } => (
                Some(KdfJson {
                    algorithm: KDF_ALGORITHM.to_owned(),
                    memory_kib: kdf.memory_kib,
                    iterations: kdf.iterations,
                    parallelism: kdf.parallelism,
                    salt: B64.encode(salt),
                }),
                Some(WrappedJson::of(wrapped)),
                None,
                None,
                None,
                None,
            ),
            KeyStore::Slots(t) => (
                None,
                None,
                Some(t.revision),
                t.previous.as_ref().map(|(g, w)| PreviousJson {
                    generation: *g,
                    nonce: B64.encode(w.nonce),
                    ciphertext: B64.encode(&w.ciphertext),
                }),
                Some(t.slots.iter().map(Slot::to_json).collect()),
                Some(B64.encode(t.mac)),
            ),
        };
        let file = FileV1 {
            format: FORMAT_NAME.to_owned(),
            version: self.version,
            creator: self.creator.clone(),
            content_mode: self.content_mode.as_str().to_owned(),
            key_bits: self.key_bits,
            block_size: self.block_size,
            feature_flags: self.feature_flags.iter().map(|f| f.as_str().to_owned()).collect(),
            kdf,
            key_generation: (self.key_generation > 0).then_some(self.key_generation),
            rekey_target: self.rekey_target,
            rekey_id: self.rekey_id.map(|id| B64.encode(id)),
            revision,
            previous_volume_key,
            keyslots,
            wrapped_key,
            mac,
        };
        let mut s = serde_json::to_string_pretty(&file).expect("config JSON serialises");
        s.push('\n');
        s
    }
}
