//! The config itself: JSON model, validation, canonical associated data,
//! create / load / unlock / change_password.

use crate::error::{ConfigError, Result};
pub use crate::mode::ContentMode;
use crate::write::{write_atomic, Mode};
use crate::{
    BLOCK_SIZE, CONFIG_FILE, FORMAT_NAME, FORMAT_VERSION, MAX_CONFIG_SIZE, V1_FEATURE_FLAGS, V2_FEATURE_FLAGS,
};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Read;
use std::path::Path;
use warpfs_crypto::kdf::{self, KdfParams, SALT_LEN};
use warpfs_crypto::wrap::{self, WrapError, Wrapped, WRAPPED_LEN, WRAP_NONCE_LEN};
use warpfs_crypto::MasterKey;

const KDF_ALGORITHM: &str = "argon2id";
const WRAP_ALGORITHM: &str = "aes-256-gcm";
/// Prefix of the canonical associated data (FORMAT.md 2.3).
const AAD_MAGIC: &[u8] = b"warpfs.conf aad v1";
const MAX_CREATOR_LEN: usize = 256;

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
        }
    }

    /// The flag named `s`, if this warpfs knows it.
    pub fn from_name(s: &str) -> Option<Self> {
        V1_FEATURE_FLAGS
            .into_iter()
            .chain(crate::OPTIONAL_FEATURE_FLAGS)
            .chain(V2_FEATURE_FLAGS)
            .find(|f| f.as_str() == s)
    }
}

impl fmt::Display for FeatureFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    kdf: KdfJson,
    /// Key generation of the content key (FORMAT.md 10); absent = 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_generation: Option<u32>,
    /// Generation a rekey under way moves every file to; absent = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rekey_target: Option<u32>,
    wrapped_key: WrappedJson,
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

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WrappedJson {
    algorithm: String,
    nonce: String,
    ciphertext: String,
}

/// A loaded (validated) volume config. Holds no secret: the master key
/// stays wrapped until [`Config::unlock`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    version: u32,
    creator: String,
    content_mode: ContentMode,
    key_bits: u32,
    block_size: u32,
    feature_flags: Vec<FeatureFlag>,
    kdf: KdfParams,
    salt: [u8; SALT_LEN],
    key_generation: u32,
    rekey_target: Option<u32>,
    wrapped: Wrapped,
}

/// Printable form of a hostile string for an error message: escaped and cut.
pub(crate) fn show(s: &str) -> String {
    let mut out: String = s.chars().take(64).flat_map(char::escape_debug).collect();
    if s.chars().count() > 64 {
        out.push('…');
    }
    format!("\"{out}\"")
}

fn check_key_bits(bits: u32) -> Result<()> {
    if bits == 128 || bits == 256 {
        Ok(())
    } else {
        Err(ConfigError::Unsupported(format!(
            "key size {bits} bits is not supported (supported: 128, 256)"
        )))
    }
}

fn check_generations(key_generation: u32, rekey_target: Option<u32>) -> Result<()> {
    match rekey_target {
        Some(t) if Some(t) != key_generation.checked_add(1) => Err(ConfigError::parse(format!(
            "\"rekey_target\" {t} must be \"key_generation\" {key_generation} + 1"
        ))),
        _ => Ok(()),
    }
}

/// The config version of a volume with `flags`: 2 with any flag of
/// [`V2_FEATURE_FLAGS`], else 1.
fn version_of(flags: &[FeatureFlag]) -> u32 {
    if flags.iter().any(|f| V2_FEATURE_FLAGS.contains(f)) {
        FORMAT_VERSION
    } else {
        1
    }
}

/// Version 2 exactly when a version 2 flag is present; `file-summary` in
/// `gcm` only.
fn check_version_flags(version: u32, flags: &[FeatureFlag], mode: ContentMode) -> Result<()> {
    if version != version_of(flags) {
        return Err(ConfigError::parse(format!(
            "config version {version} does not match its feature flags"
        )));
    }
    if flags.contains(&FeatureFlag::FileSummary) && mode != ContentMode::Gcm {
        return Err(ConfigError::Unsupported(format!(
            "feature flag file-summary needs content mode gcm, not {}",
            mode.as_str()
        )));
    }
    Ok(())
}

fn check_kdf(p: &KdfParams) -> Result<()> {
    p.validate().map_err(|e| {
        if e.is_kdf_too_weak() {
            ConfigError::WeakKdf(e.to_string())
        } else {
            ConfigError::Unsupported(e.to_string())
        }
    })
}

fn decode_fixed<const N: usize>(field: &str, s: &str) -> Result<[u8; N]> {
    // Refuse absurd lengths before decoding.
    if s.len() > 4 * N.div_ceil(3) {
        return Err(ConfigError::parse(format!("{field} must be {N} bytes of base64")));
    }
    let v = B64
        .decode(s)
        .map_err(|_| ConfigError::parse(format!("{field} is not valid base64")))?;
    v.try_into()
        .map_err(|_| ConfigError::parse(format!("{field} must be {N} bytes of base64")))
}

impl Config {
    // ---- creating ----

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
        check_key_bits(key_bits)?;
        check_kdf(&kdf)?;
        let path = crate::config_path(dir);
        if path.symlink_metadata().is_ok() {
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
        check_key_bits(key_bits)?;
        check_kdf(&kdf)?;
        let master = MasterKey::generate();
        if path.symlink_metadata().is_ok() {
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

    /// A config that is not written to a CIPHERDIR (an encrypted container's
    /// header, FORMAT.md 9): a fresh master key wrapped under `password`.
    pub fn new_detached(
        password: &[u8],
        mode: ContentMode,
        key_bits: u32,
        kdf: KdfParams,
    ) -> Result<(Config, MasterKey)> {
        check_key_bits(key_bits)?;
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
    fn seal(
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
    /// not wrapped yet (see [`Config::wrap_under`]).
    pub(crate) fn seal_gens(
        creator: String,
        content_mode: ContentMode,
        key_bits: u32,
        feature_flags: Vec<FeatureFlag>,
        kdf: KdfParams,
        gens: (u32, Option<u32>),
    ) -> Result<Config> {
        Ok(Config {
            key_generation: gens.0,
            rekey_target: gens.1,
            version: version_of(&feature_flags),
            creator,
            content_mode,
            key_bits,
            block_size: BLOCK_SIZE,
            feature_flags,
            kdf,
            salt: warpfs_crypto::rand::array(),
            wrapped: Wrapped {
                nonce: [0; WRAP_NONCE_LEN],
                ciphertext: Vec::new(),
            },
        })
    }

    /// Wrap `master` under `password` with this config's AAD.
    pub(crate) fn wrap_under(mut self, master: &MasterKey, password: &[u8]) -> Result<Config> {
        let kek = self.derive_kek(password)?;
        self.wrapped = wrap::wrap(&kek, master, &self.aad());
        Ok(self)
    }

    // ---- loading ----

    /// Read and validate `dir/warpfs.conf` (treated as hostile input).
    pub fn load(dir: &Path) -> Result<Config> {
        let path = crate::config_path(dir);
        let f = std::fs::File::open(&path).map_err(|e| ConfigError::io(&path, e))?;
        let mut buf = Vec::new();
        f.take(MAX_CONFIG_SIZE as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(|e| ConfigError::io(&path, e))?;
        Self::from_json(&buf)
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
        if version != 1 && version != u64::from(FORMAT_VERSION) {
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
        check_key_bits(f.key_bits)?;
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
        if f.kdf.algorithm != KDF_ALGORITHM {
            return Err(ConfigError::Unsupported(format!(
                "password KDF {} is not supported (only {KDF_ALGORITHM})",
                show(&f.kdf.algorithm)
            )));
        }
        let kdf = KdfParams {
            memory_kib: f.kdf.memory_kib,
            iterations: f.kdf.iterations,
            parallelism: f.kdf.parallelism,
        };
        check_kdf(&kdf)?;
        let salt = decode_fixed::<SALT_LEN>("kdf.salt", &f.kdf.salt)?;
        if f.wrapped_key.algorithm != WRAP_ALGORITHM {
            return Err(ConfigError::Unsupported(format!(
                "key wrapping {} is not supported (only {WRAP_ALGORITHM})",
                show(&f.wrapped_key.algorithm)
            )));
        }
        if f.key_generation == Some(0) {
            return Err(ConfigError::parse("\"key_generation\" 0 must be omitted"));
        }
        let key_generation = f.key_generation.unwrap_or(0);
        check_generations(key_generation, f.rekey_target)?;
        let nonce = decode_fixed::<WRAP_NONCE_LEN>("wrapped_key.nonce", &f.wrapped_key.nonce)?;
        let ct = decode_fixed::<WRAPPED_LEN>("wrapped_key.ciphertext", &f.wrapped_key.ciphertext)?;
        Ok(Config {
            version: f.version,
            creator: f.creator,
            content_mode,
            key_bits: f.key_bits,
            block_size: f.block_size,
            feature_flags: flags,
            kdf,
            salt,
            key_generation,
            rekey_target: f.rekey_target,
            wrapped: Wrapped {
                nonce,
                ciphertext: ct.to_vec(),
            },
        })
    }

    /// The config as written to disk: pretty-printed JSON and a newline.
    pub fn to_json(&self) -> String {
        let file = FileV1 {
            format: FORMAT_NAME.to_owned(),
            version: self.version,
            creator: self.creator.clone(),
            content_mode: self.content_mode.as_str().to_owned(),
            key_bits: self.key_bits,
            block_size: self.block_size,
            feature_flags: self.feature_flags.iter().map(|f| f.as_str().to_owned()).collect(),
            kdf: KdfJson {
                algorithm: KDF_ALGORITHM.to_owned(),
                memory_kib: self.kdf.memory_kib,
                iterations: self.kdf.iterations,
                parallelism: self.kdf.parallelism,
                salt: B64.encode(self.salt),
            },
            key_generation: (self.key_generation > 0).then_some(self.key_generation),
            rekey_target: self.rekey_target,
            wrapped_key: WrappedJson {
                algorithm: WRAP_ALGORITHM.to_owned(),
                nonce: B64.encode(self.wrapped.nonce),
                ciphertext: B64.encode(&self.wrapped.ciphertext),
            },
        };
        let mut s = serde_json::to_string_pretty(&file).expect("config JSON serialises");
        s.push('\n');
        s
    }

    // ---- keys ----

    /// The canonical associated data of the key wrapping: every field except
    /// `wrapped_key`, length-prefixed (FORMAT.md 2.3).
    pub fn aad(&self) -> Vec<u8> {
        fn field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
            // Names and values are far below 4 GiB (the file is ≤ 64 KiB).
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
        let flags = self
            .feature_flags
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let mut a = Vec::with_capacity(512);
        a.extend_from_slice(AAD_MAGIC);
        field(&mut a, "format", FORMAT_NAME.as_bytes());
        field(&mut a, "version", self.version.to_string().as_bytes());
        field(&mut a, "creator", self.creator.as_bytes());
        field(&mut a, "content_mode", self.content_mode.as_str().as_bytes());
        field(&mut a, "key_bits", self.key_bits.to_string().as_bytes());
        field(&mut a, "block_size", self.block_size.to_string().as_bytes());
        field(&mut a, "feature_flags", flags.as_bytes());
        field(&mut a, "kdf.algorithm", KDF_ALGORITHM.as_bytes());
        field(&mut a, "kdf.memory_kib", self.kdf.memory_kib.to_string().as_bytes());
        field(&mut a, "kdf.iterations", self.kdf.iterations.to_string().as_bytes());
        field(&mut a, "kdf.parallelism", self.kdf.parallelism.to_string().as_bytes());
        field(&mut a, "kdf.salt", &self.salt);
        // Present only after a rekey, so older volumes' AAD is unchanged.
        if self.key_generation > 0 {
            field(&mut a, "key_generation", self.key_generation.to_string().as_bytes());
        }
        if let Some(t) = self.rekey_target {
            field(&mut a, "rekey_target", t.to_string().as_bytes());
        }
        a
    }

    fn derive_kek(&self, password: &[u8]) -> Result<zeroize::Zeroizing<[u8; 32]>> {
        kdf::derive(password, &self.salt, &self.kdf).map_err(|e| {
            if e.is_kdf_too_weak() {
                ConfigError::WeakKdf(e.to_string())
            } else {
                ConfigError::Unsupported(e.to_string())
            }
        })
    }

    /// Unwrap the master key with `password`. A wrong password, or any
    /// edited field, gives [`ConfigError::WrongPassword`].
    pub fn unlock(&self, password: &[u8]) -> Result<MasterKey> {
        let kek = self.derive_kek(password)?;
        wrap::unwrap(&kek, &self.wrapped, &self.aad()).map_err(|e| match e {
            WrapError::WrongKey => ConfigError::WrongPassword,
            WrapError::Malformed => ConfigError::parse("wrapped_key has the wrong length"),
        })
    }

    /// Rewrap the master key under `new` (fresh salt, same KDF parameters)
    /// and atomically replace `dir/warpfs.conf`. Writes nothing if `old`
    /// is wrong. Only this file changes; the data is untouched.
    pub fn change_password(&self, dir: &Path, old: &[u8], new: &[u8]) -> Result<()> {
        let master = self.unlock(old)?;
        let cfg = Self::seal_gens(
            self.creator.clone(),
            self.content_mode,
            self.key_bits,
            self.feature_flags.clone(),
            self.kdf,
            (self.key_generation, self.rekey_target),
        )?
        .wrap_under(&master, new)?;
        write_atomic(dir, CONFIG_FILE, cfg.to_json().as_bytes(), Mode::Replace)
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
        let master = self.unlock(password)?;
        check_generations(key_generation, rekey_target)?;
        let cfg = Self::seal_gens(
            self.creator.clone(),
            self.content_mode,
            self.key_bits,
            self.feature_flags.clone(),
            self.kdf,
            (key_generation, rekey_target),
        )?
        .wrap_under(&master, password)?;
        write_atomic(dir, CONFIG_FILE, cfg.to_json().as_bytes(), Mode::Replace)?;
        Ok(cfg)
    }

    // ---- accessors ----

    /// How file contents are encrypted.
    pub fn content_mode(&self) -> ContentMode {
        self.content_mode
    }
    /// Content key size in bits (128 or 256).
    pub fn key_bits(&self) -> u32 {
        self.key_bits
    }
    /// Argon2id parameters.
    pub fn kdf_params(&self) -> KdfParams {
        self.kdf
    }
    /// Config format version (1).
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
        writeln!(
            f,
            "password KDF:  argon2id, {} KiB memory, {} iterations, parallelism {}",
            self.kdf.memory_kib, self.kdf.iterations, self.kdf.parallelism
        )?;
        match self.rekey_target {
            Some(t) => writeln!(
                f,
                "key generation: {} (rekey to {t} unfinished: run warpfs rekey again)",
                self.key_generation
            )?,
            None => writeln!(f, "key generation: {}", self.key_generation)?,
        }
        write!(f, "key wrapping:  {WRAP_ALGORITHM}")
    }
}

mod reverse;
