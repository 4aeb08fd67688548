//! The keyslot table of a format 3 config (FORMAT.md 2.6): any number of
//! slots, each wrapping the one volume key under a key of its own, and
//! the whole config authenticated by a MAC under a key derived from the
//! volume key. A slot kind is one module of `slots/` (`secret`,
//! `recovery`, `fido2`, `tpm2`): its name, its public fields, and how the
//! user's input becomes the slot key; an arm of [`Params`] ties it in
//! (decision records 0082; `tpm2` 0084, `fido2` 0085).

use super::fields::show;
use super::mac::Fields;
use crate::error::{ConfigError, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use warpfs_crypto::kdf::KdfParams;
use warpfs_crypto::slotkeys::{RecoveryKey, SlotKey};
use warpfs_crypto::wrap::{Wrapped, WRAPPED_LEN, WRAP_NONCE_LEN};
use warpfs_crypto::MasterKey;

mod fido2;
mod recovery;
mod secret;
mod tpm2;

pub use fido2::{Fido2, FIDO2_RP_ID, FIDO2_SALT_LEN};
pub(crate) use recovery::Recovery;
pub(crate) use secret::Secret;
pub(crate) use tpm2::Tpm2;
pub use tpm2::{tcti_is_safe_hint, Tpm2Object, Unseal, TPM2_MAX_PCR};

/// Most slots a config holds.
pub const MAX_SLOTS: usize = 32;
/// Longest slot label, in bytes.
pub const MAX_LABEL_LEN: usize = 64;
/// Prefix of a slot's wrapping associated data.
const SLOT_AD_MAGIC: &[u8] = b"warpfs keyslot v1";

/// The kinds of slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// A password (Argon2id).
    Password,
    /// A keyfile alone (Argon2id over the keyfile's combination with an
    /// empty password, FORMAT.md 8).
    Keyfile,
    /// A password and a keyfile together.
    PasswordKeyfile,
    /// A recovery key printed once (HKDF).
    Recovery,
    /// A FIDO2 security key's hmac-secret (HKDF of its output).
    Fido2,
    /// A secret sealed by a TPM2, optionally to PCR values.
    Tpm2,
}

impl SlotKind {
    /// The kind as written.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotKind::Password => "password",
            SlotKind::Keyfile => "keyfile",
            SlotKind::PasswordKeyfile => "password+keyfile",
            SlotKind::Recovery => "recovery",
            SlotKind::Fido2 => "fido2",
            SlotKind::Tpm2 => "tpm2",
        }
    }

    fn from_name(s: &str) -> Result<Self> {
        Ok(match s {
            "password" => SlotKind::Password,
            "keyfile" => SlotKind::Keyfile,
            "password+keyfile" => SlotKind::PasswordKeyfile,
            "recovery" => SlotKind::Recovery,
            "fido2" => SlotKind::Fido2,
            "tpm2" => SlotKind::Tpm2,
            other => return Err(ConfigError::parse(format!("unknown keyslot kind {}", show(other)))),
        })
    }

    /// Whether the slot opens with a password, a keyfile or both.
    pub fn is_secret(self) -> bool {
        matches!(self, SlotKind::Password | SlotKind::Keyfile | SlotKind::PasswordKeyfile)
    }
}

impl fmt::Display for SlotKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the user gives to open a slot.
#[derive(Clone, Copy)]
pub enum Input<'a> {
    /// A password, a keyfile's combination or both (the bytes given to
    /// Argon2id, FORMAT.md 8), and which of them it is (`None`: try every
    /// slot of those kinds).
    Secret {
        /// The secret bytes.
        bytes: &'a [u8],
        /// Which kind of slot they are for.
        kind: Option<SlotKind>,
    },
    /// A recovery key.
    Recovery(&'a RecoveryKey),
    /// What a FIDO2 security key gave for one slot: the slot's credential
    /// ID and the key's hmac-secret output for the slot's salt.
    Fido2 {
        /// The credential the output is of (opens only its slot).
        credential: &'a [u8],
        /// The hmac-secret output.
        output: &'a [u8; 32],
    },
    /// A TPM2 client that unseals `tpm2` slots' objects.
    Tpm2(&'a dyn Unseal),
}

/// A kind's public parameters (the seam a new kind plugs into).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Params {
    /// `password`, `keyfile`, `password+keyfile`.
    Secret(Secret),
    /// `recovery`.
    Recovery(Recovery),
    /// `fido2`.
    Fido2(Fido2),
    /// `tpm2`.
    Tpm2(Tpm2),
}

impl Params {
    pub(crate) fn kind(&self) -> SlotKind {
        match self {
            Params::Secret(s) => s.kind,
            Params::Recovery(_) => SlotKind::Recovery,
            Params::Fido2(_) => SlotKind::Fido2,
            Params::Tpm2(_) => SlotKind::Tpm2,
        }
    }

    /// The slot key from `input`; `None` when the input is not for this
    /// kind of slot.
    fn slot_key(&self, input: &Input) -> Option<Result<SlotKey>> {
        match self {
            Params::Secret(s) => s.slot_key(input),
            Params::Recovery(r) => r.slot_key(input),
            Params::Fido2(f) => f.slot_key(input),
            Params::Tpm2(t) => t.slot_key(input),
        }
    }

    fn fields(&self, out: &mut Fields) {
        match self {
            Params::Secret(s) => s.fields(out),
            Params::Recovery(r) => r.fields(out),
            Params::Fido2(f) => f.fields(out),
            Params::Tpm2(t) => t.fields(out),
        }
    }

    /// The `kdf` member of the slot as written (kinds with a member of
    /// their own have none).
    fn kdf_json(&self) -> Option<SlotKdfJson> {
        match self {
            Params::Secret(s) => Some(s.to_json()),
            Params::Recovery(r) => Some(r.to_json()),
            Params::Fido2(_) | Params::Tpm2(_) => None,
        }
    }

    fn fido2_json(&self) -> Option<fido2::Fido2Json> {
        match self {
            Params::Fido2(f) => Some(f.to_json()),
            _ => None,
        }
    }

    fn tpm2_json(&self) -> Option<tpm2::Tpm2Json> {
        match self {
            Params::Tpm2(t) => Some(t.to_json()),
            _ => None,
        }
    }

    fn from_json(kind: SlotKind, j: &SlotJson) -> Result<Self> {
        let member =
            |name: &str| ConfigError::parse(format!("a {kind} keyslot needs a \"{name}\" member, and only it"));
        Ok(match (kind, &j.kdf, &j.fido2, &j.tpm2) {
            (SlotKind::Fido2, None, Some(f), None) => Params::Fido2(Fido2::from_json(f)?),
            (SlotKind::Fido2, ..) => return Err(member("fido2")),
            (SlotKind::Tpm2, None, None, Some(t)) => Params::Tpm2(Tpm2::from_json(t)?),
            (SlotKind::Tpm2, ..) => return Err(member("tpm2")),
            (SlotKind::Recovery, Some(kdf), None, None) => Params::Recovery(Recovery::from_json(kdf)?),
            (k, Some(kdf), None, None) => Params::Secret(Secret::from_json(k, kdf)?),
            _ => return Err(member("kdf")),
        })
    }
}

/// One keyslot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The slot's number, unique in the config (a new slot takes one
    /// more than the highest there).
    pub id: u32,
    /// The user's name for it (may be empty).
    pub label: String,
    /// When it was made (Unix seconds).
    pub created: u64,
    /// When it last opened the config for a change warpfs wrote (Unix
    /// seconds; a mount writes nothing, so it is not recorded there).
    pub last_used: Option<u64>,
    pub(crate) params: Params,
    pub(crate) wrapped: Wrapped,
}

impl Slot {
    /// The slot's kind.
    pub fn kind(&self) -> SlotKind {
        self.params.kind()
    }

    /// Its Argon2id parameters (a password or keyfile slot).
    pub fn kdf(&self) -> Option<KdfParams> {
        match &self.params {
            Params::Secret(s) => Some(s.kdf),
            Params::Recovery(_) | Params::Fido2(_) | Params::Tpm2(_) => None,
        }
    }

    /// Its FIDO2 parameters (a FIDO2 slot).
    pub fn fido2(&self) -> Option<&Fido2> {
        match &self.params {
            Params::Fido2(f) => Some(f),
            _ => None,
        }
    }

    /// Its sealed object (a `tpm2` slot).
    pub fn tpm2(&self) -> Option<&Tpm2Object> {
        match &self.params {
            Params::Tpm2(t) => Some(&t.object),
            _ => None,
        }
    }

    /// The associated data of the slot's wrapping: its ID, kind and
    /// public parameters (FORMAT.md 2.6).
    pub(crate) fn ad(id: u32, params: &Params) -> Vec<u8> {
        let mut f = Fields::new(SLOT_AD_MAGIC);
        f.dec("slot.id", id);
        f.str("slot.kind", params.kind().as_str());
        params.fields(&mut f);
        f.into_bytes()
    }

    /// A new slot wrapping `vk` under `key`.
    pub(crate) fn sealed(id: u32, label: String, created: u64, params: Params, key: &SlotKey, vk: &MasterKey) -> Self {
        let wrapped = key.wrap(vk, &Self::ad(id, &params));
        Slot {
            id,
            label,
            created,
            last_used: None,
            params,
            wrapped,
        }
    }

    /// The slot key `input` gives for this slot, checked by unwrapping
    /// the volume key with it; `None`: the input is not for this kind.
    pub(crate) fn open(&self, input: &Input) -> Option<Result<(SlotKey, MasterKey)>> {
        let key = match self.params.slot_key(input)? {
            Ok(k) => k,
            Err(e) => return Some(Err(e)),
        };
        Some(
            key.unwrap(&self.wrapped, &Self::ad(self.id, &self.params))
                .map(|vk| (key, vk))
                .map_err(|_| ConfigError::WrongPassword),
        )
    }

    /// The same slot wrapping `vk` under the same slot key (fresh nonce).
    pub(crate) fn rewrapped(&self, key: &SlotKey, vk: &MasterKey) -> Self {
        Slot {
            wrapped: key.wrap(vk, &Self::ad(self.id, &self.params)),
            ..self.clone()
        }
    }

    /// Its part of the config MAC (FORMAT.md 2.6).
    pub(crate) fn mac_fields(&self, f: &mut Fields) {
        f.dec("slot.id", self.id);
        f.str("slot.kind", self.kind().as_str());
        f.str("slot.label", &self.label);
        f.dec64("slot.created", self.created);
        if let Some(t) = self.last_used {
            f.dec64("slot.last_used", t);
        }
        self.params.fields(f);
        f.bytes("slot.nonce", &self.wrapped.nonce);
        f.bytes("slot.ciphertext", &self.wrapped.ciphertext);
    }
}

/// The keyslot part of a format 3 config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotTable {
    /// Counts the rewrites of the table (FORMAT.md 13.5's key state).
    pub(crate) revision: u32,
    /// The volume key before the one the slots wrap, while a volume-key
    /// rekey runs: (the generation it is of, wrapped).
    pub(crate) previous: Option<(u32, Wrapped)>,
    pub(crate) slots: Vec<Slot>,
    pub(crate) mac: [u8; 32],
}

impl SlotTable {
    /// Argon2id parameters of the first password slot.
    pub(crate) fn first_kdf(&self) -> Option<KdfParams> {
        self.slots.iter().find_map(|s| match &s.params {
            Params::Secret(x) => Some(x.kdf),
            Params::Recovery(_) | Params::Fido2(_) | Params::Tpm2(_) => None,
        })
    }
}

/// Associated data of the previous volume key's wrapping.
pub(crate) fn previous_ad(generation: u32) -> Vec<u8> {
    let mut f = Fields::new(b"warpfs previous volume key v1");
    f.dec("generation", generation);
    f.into_bytes()
}

// ---- JSON ----

/// A slot as written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SlotJson {
    id: u32,
    kind: String,
    label: String,
    created: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_used: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kdf: Option<SlotKdfJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fido2: Option<fido2::Fido2Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tpm2: Option<tpm2::Tpm2Json>,
    wrapped_key: super::fields::WrappedJson,
}

/// A slot's key derivation as written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SlotKdfJson {
    pub(crate) algorithm: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) memory_kib: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) iterations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parallelism: Option<u32>,
    pub(crate) salt: String,
}

impl Slot {
    pub(crate) fn to_json(&self) -> SlotJson {
        SlotJson {
            id: self.id,
            kind: self.kind().as_str().to_owned(),
            label: self.label.clone(),
            created: self.created,
            last_used: self.last_used,
            kdf: self.params.kdf_json(),
            fido2: self.params.fido2_json(),
            tpm2: self.params.tpm2_json(),
            wrapped_key: super::fields::WrappedJson::of(&self.wrapped),
        }
    }

    pub(crate) fn from_json(j: SlotJson) -> Result<Self> {
        let kind = SlotKind::from_name(&j.kind)?;
        check_label(&j.label)?;
        let params = Params::from_json(kind, &j)?;
        let wrapped = j.wrapped_key.parse("keyslots[].wrapped_key")?;
        Ok(Slot {
            id: j.id,
            label: j.label,
            created: j.created,
            last_used: j.last_used,
            params,
            wrapped,
        })
    }
}

/// A label: at most [`MAX_LABEL_LEN`] bytes, no control characters.
pub(crate) fn check_label(label: &str) -> Result<()> {
    if label.len() > MAX_LABEL_LEN || label.chars().any(char::is_control) {
        return Err(ConfigError::parse(format!(
            "a keyslot label is at most {MAX_LABEL_LEN} bytes without control characters"
        )));
    }
    Ok(())
}

/// The checks of a table as read: slots present, at most [`MAX_SLOTS`],
/// IDs unique.
pub(crate) fn check_table(slots: &[Slot]) -> Result<()> {
    if slots.is_empty() {
        return Err(ConfigError::parse("\"keyslots\" is empty"));
    }
    if slots.len() > MAX_SLOTS {
        return Err(ConfigError::parse(format!("more than {MAX_SLOTS} keyslots")));
    }
    for (i, s) in slots.iter().enumerate() {
        if slots[..i].iter().any(|o| o.id == s.id) {
            return Err(ConfigError::parse(format!("keyslot id {} appears twice", s.id)));
        }
    }
    Ok(())
}

/// Exact lengths of a wrapped key as read.
pub(crate) fn check_wrapped(w: &Wrapped) -> Result<()> {
    if w.ciphertext.len() != WRAPPED_LEN || w.nonce.len() != WRAP_NONCE_LEN {
        return Err(ConfigError::parse("a wrapped key has the wrong length"));
    }
    Ok(())
}
