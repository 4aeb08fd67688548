//! Keyslot configs (format 3, FORMAT.md 2.6): opening with whichever slot
//! the user's input opens (then checking the config's MAC), and every
//! rewrite of the table: a slot added, removed or given a new secret, new
//! key generations, an old config converted, and the start and end of a
//! rekey to a new volume key (FORMAT.md 10.5). Each rewrite counts up the
//! revision, records when the slot that allowed it was used, and MACs the
//! result under the (new) volume key.

use super::slots::{previous_ad, Fido2, Params, Recovery, Secret, Slot, SlotTable, Tpm2, Tpm2Object, MAX_SLOTS};
use super::{Config, FeatureFlag, Input, KeyStore, SlotKind};
use crate::error::{ConfigError, Result};
use crate::write::{write_atomic, Mode};
use std::path::Path;
use warpfs_crypto::kdf::KdfParams;
use warpfs_crypto::slotkeys::{ConfigMacKey, RecoveryKey, SlotKey};
use warpfs_crypto::MasterKey;

/// A config opened: the volume key and the slot that gave it.
#[derive(Debug)]
pub struct Opened {
    /// The volume key (the master key of formats 1 and 2).
    pub key: MasterKey,
    /// The slot that opened (none: a format 1 or 2 config, or a volume
    /// key given directly).
    pub slot: Option<u32>,
    /// Whether the key is known to be this volume's: false only for a key
    /// given directly to a format 1 or 2 config, which cannot be checked
    /// against anything in the config.
    pub verified: bool,
    /// The opening slot's key (a slot kept through a volume-key rekey is
    /// wrapped again with it).
    pub slot_key: Option<SlotKey>,
}

/// A slot to add.
pub enum NewSlot<'a> {
    /// A password, keyfile or password+keyfile slot: the secret bytes (a
    /// password, or its combination with a keyfile) and its Argon2id
    /// parameters.
    Secret {
        /// The secret.
        bytes: &'a [u8],
        /// Which kind of secret.
        kind: SlotKind,
        /// Argon2id parameters.
        kdf: KdfParams,
    },
    /// A recovery slot for this recovery key.
    Recovery(&'a RecoveryKey),
    /// A FIDO2 slot: its parameters ([`Fido2::new`]) and the security
    /// key's hmac-secret output for their salt.
    Fido2 {
        /// The slot's parameters.
        params: &'a Fido2,
        /// The key's output for `params.salt`.
        output: &'a [u8; 32],
    },
    /// A TPM2 slot: the object sealed on the TPM and the 32 bytes it
    /// holds (the slot key).
    Tpm2 {
        /// The sealed object (public data).
        object: Tpm2Object,
        /// What it unseals to.
        secret: &'a [u8; 32],
    },
}

impl NewSlot<'_> {
    fn make(&self) -> Result<(Params, SlotKey)> {
        Ok(match self {
            NewSlot::Secret { bytes, kind, kdf } => {
                if !kind.is_secret() {
                    return Err(ConfigError::Slots(
                        "a secret slot needs a password or keyfile kind".into(),
                    ));
                }
                super::validate::check_kdf(kdf)?;
                let p = Secret::new(*kind, *kdf);
                let key = p
                    .slot_key(&Input::Secret {
                        bytes,
                        kind: Some(*kind),
                    })
                    .expect("a secret is the input of a secret slot")?;
                (Params::Secret(p), key)
            }
            NewSlot::Recovery(rk) => {
                let p = Recovery::new();
                let key = SlotKey::from_recovery(rk, &p.salt);
                (Params::Recovery(p), key)
            }
            NewSlot::Fido2 { params, output } => (
                Params::Fido2((*params).clone()),
                SlotKey::from_fido2(output, &params.salt),
            ),
            NewSlot::Tpm2 { object, secret } => (Params::Tpm2(Tpm2::new(object.clone())?), SlotKey::from_bytes(secret)),
        })
    }
}

/// The error of an input for a kind of slot the config has none of.
fn no_slot(kind: SlotKind) -> ConfigError {
    ConfigError::Slots(format!(
        "this volume has no {kind} keyslot (`warpfs key list` shows its slots; `warpfs key add --{kind}` makes one)"
    ))
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Config {
    /// Whether this is a keyslot config (format 3).
    pub fn has_slots(&self) -> bool {
        matches!(self.store, KeyStore::Slots(_))
    }

    /// The keyslots (none for a config of format 1 or 2). Not
    /// authenticated until [`Config::open`] succeeded on this config.
    pub fn slots(&self) -> &[Slot] {
        match &self.store {
            KeyStore::Slots(t) => &t.slots,
            KeyStore::Single { .. } => &[],
        }
    }

    /// The slot `id`, if there is one.
    pub fn slot(&self, id: u32) -> Option<&Slot> {
        self.slots().iter().find(|s| s.id == id)
    }

    /// How many times the keyslot table was rewritten (0 for formats 1
    /// and 2).
    pub fn revision(&self) -> u32 {
        match &self.store {
            KeyStore::Slots(t) => t.revision,
            KeyStore::Single { .. } => 0,
        }
    }

    /// Whether a rekey to a new volume key is unfinished (the config holds
    /// the previous volume key, FORMAT.md 10.5).
    pub fn volume_rekey_under_way(&self) -> bool {
        matches!(&self.store, KeyStore::Slots(t) if t.previous.is_some())
    }

    fn table(&self) -> Result<&SlotTable> {
        match &self.store {
            KeyStore::Slots(t) => Ok(t),
            KeyStore::Single { .. } => Err(ConfigError::Slots(
                "this config has no keyslots (warpfs key add converts it)".into(),
            )),
        }
    }

    pub(crate) fn any_secret(bytes: &[u8]) -> Input<'_> {
        Input::Secret { bytes, kind: None }
    }

    /// Open the config with `input`: the first slot it opens gives the
    /// volume key, and then the MAC must verify ([`ConfigError::Tampered`]
    /// if not). A recovery key that opens no slot is tried as the volume
    /// key itself (the key a volume made before keyslots printed), which
    /// the MAC checks. Nothing opens: [`ConfigError::WrongPassword`]. A
    /// format 1 or 2 config opens with a secret as [`Config::unlock`]; a
    /// recovery key is taken as its master key, unverified.
    pub fn open(&self, input: &Input) -> Result<Opened> {
        let KeyStore::Slots(t) = &self.store else {
            return match input {
                Input::Secret { bytes, .. } => Ok(Opened {
                    key: self.unlock(bytes)?,
                    slot: None,
                    verified: true,
                    slot_key: None,
                }),
                Input::Recovery(rk) => Ok(Opened {
                    key: rk.as_key(),
                    slot: None,
                    verified: false,
                    slot_key: None,
                }),
                Input::Fido2 { .. } => Err(ConfigError::Slots(
                    "this volume has no keyslots, so no FIDO2 slot: open it with its password".into(),
                )),
                Input::Tpm2(_) => Err(no_slot(SlotKind::Tpm2)),
            };
        };
        if matches!(input, Input::Tpm2(_)) && !t.slots.iter().any(|s| s.kind() == SlotKind::Tpm2) {
            return Err(no_slot(SlotKind::Tpm2));
        }
        // A device that fails for one slot may serve the next (another
        // TPM's slot, another TCTI): the most telling failure is kept.
        let mut device: Option<crate::error::DeviceError> = None;
        for s in &t.slots {
            match s.open(input) {
                None | Some(Err(ConfigError::WrongPassword)) => continue,
                Some(Err(ConfigError::Device(e))) => {
                    if device.as_ref().is_none_or(|d| e.failure.rank() > d.failure.rank()) {
                        device = Some(e);
                    }
                    continue;
                }
                Some(Err(e)) => return Err(e),
                Some(Ok((k, vk))) => {
                    self.check_mac(&vk, Some(s.id))?;
                    return Ok(Opened {
                        key: vk,
                        slot: Some(s.id),
                        verified: true,
                        slot_key: Some(k),
                    });
                }
            }
        }
        if let Some(e) = device {
            return Err(ConfigError::Device(e));
        }
        if let Input::Recovery(rk) = input {
            let vk = rk.as_key();
            if ConfigMacKey::derive(&vk).verify(&self.mac_input(), &t.mac) {
                return Ok(Opened {
                    key: vk,
                    slot: None,
                    verified: true,
                    slot_key: None,
                });
            }
        }
        Err(ConfigError::WrongPassword)
    }

    /// Check the MAC under volume key `vk` (which slot `by` gave).
    fn check_mac(&self, vk: &MasterKey, by: Option<u32>) -> Result<()> {
        let t = self.table()?;
        if ConfigMacKey::derive(vk).verify(&self.mac_input(), &t.mac) {
            return Ok(());
        }
        Err(ConfigError::Tampered(format!(
            "keyslot {} opened but the config's MAC does not verify: slots or settings were added, \
             removed or changed by someone without the volume key",
            by.map_or_else(|| "-".to_string(), |i| i.to_string())
        )))
    }

    /// The key of slot `id` that `input` gives, checked by unwrapping the
    /// slot (a slot kept through a volume-key rekey is wrapped again with
    /// it).
    pub fn slot_key(&self, id: u32, input: &Input) -> Result<SlotKey> {
        let s = self
            .slot(id)
            .ok_or_else(|| ConfigError::Slots(format!("there is no keyslot {id}")))?;
        match s.open(input) {
            None => Err(ConfigError::Slots(format!(
                "keyslot {id} is a {} slot: that is not what opens it",
                s.kind()
            ))),
            Some(r) => r.map(|(k, _)| k),
        }
    }

    /// The volume key of the generation before the rekey under way, kept
    /// while a volume-key rekey runs (`vk` is the current one).
    pub fn previous_key(&self, vk: &MasterKey) -> Result<Option<MasterKey>> {
        let KeyStore::Slots(SlotTable {
            previous: Some((g, w)), ..
        }) = &self.store
        else {
            return Ok(None);
        };
        SlotKey::for_previous(vk)
            .unwrap(w, &previous_ad(*g))
            .map(Some)
            .map_err(|_| ConfigError::Tampered("the previous volume key does not open".into()))
    }

    /// A copy with `edit` applied, slot `used` recorded as used now, and
    /// the MAC made under `vk`; the revision is not changed (see
    /// [`Config::resealed_new_revision`]).
    pub(crate) fn resealed(&self, vk: &MasterKey, used: Option<u32>, edit: impl FnOnce(&mut Config)) -> Config {
        self.reseal(vk, used, false, edit)
    }

    /// [`Config::resealed`] counting the revision up: the set of slots or
    /// the volume key changes, so a copy from before is older (FORMAT.md
    /// 13.5). A password change keeps the revision: a copy from before it
    /// (a `passwd` on another host) is as new, and opens with the key it
    /// had anyway.
    pub(crate) fn resealed_new_revision(
        &self,
        vk: &MasterKey,
        used: Option<u32>,
        edit: impl FnOnce(&mut Config),
    ) -> Config {
        self.reseal(vk, used, true, edit)
    }

    fn reseal(&self, vk: &MasterKey, used: Option<u32>, bump: bool, edit: impl FnOnce(&mut Config)) -> Config {
        let mut c = self.clone();
        edit(&mut c);
        let t = match &mut c.store {
            KeyStore::Slots(t) => t,
            KeyStore::Single { .. } => unreachable!("resealed is for keyslot configs"),
        };
        if bump {
            t.revision = t.revision.saturating_add(1);
        }
        let when = now();
        if let Some(s) = t.slots.iter_mut().find(|s| Some(s.id) == used) {
            s.last_used = Some(when);
        }
        let mac = ConfigMacKey::derive(vk).tag(&c.mac_input());
        if let KeyStore::Slots(t) = &mut c.store {
            t.mac = mac;
        }
        c
    }

    /// Add a slot wrapping `vk` (from [`Config::open`], by slot `used`).
    /// Returns the new config and the new slot's ID (one more than the
    /// highest in the table).
    pub fn with_slot(&self, vk: &MasterKey, used: Option<u32>, new: &NewSlot, label: &str) -> Result<(Config, u32)> {
        let t = self.table()?;
        super::slots::check_label(label)?;
        if t.slots.len() >= MAX_SLOTS {
            return Err(ConfigError::Slots(format!(
                "a config holds at most {MAX_SLOTS} keyslots"
            )));
        }
        let id = t
            .slots
            .iter()
            .map(|s| s.id)
            .max()
            .map_or(Some(0), |m| m.checked_add(1))
            .ok_or_else(|| ConfigError::Slots("no keyslot number left".into()))?;
        let (params, key) = new.make()?;
        let slot = Slot::sealed(id, label.to_string(), now(), params, &key, vk);
        let c = self.resealed_new_revision(vk, used, |c| {
            if let KeyStore::Slots(t) = &mut c.store {
                t.slots.push(slot);
            }
        });
        Ok((c, id))
    }

    /// Remove slot `id` (refused for the last slot).
    pub fn without_slot(&self, vk: &MasterKey, used: Option<u32>, id: u32) -> Result<Config> {
        let t = self.table()?;
        if !t.slots.iter().any(|s| s.id == id) {
            return Err(ConfigError::Slots(format!("there is no keyslot {id}")));
        }
        if t.slots.len() == 1 {
            return Err(ConfigError::Slots(format!(
                "keyslot {id} is the only one: removing it would lock everyone out"
            )));
        }
        Ok(self.resealed_new_revision(vk, used, |c| {
            if let KeyStore::Slots(t) = &mut c.store {
                t.slots.retain(|s| s.id != id);
            }
        }))
    }

    /// Give the secret slot `opened.slot` the secret `new` (fresh salt,
    /// same kind and Argon2id parameters): a password change.
    pub fn with_new_secret(&self, opened: &Opened, id: u32, new: &[u8]) -> Result<Config> {
        let s = self
            .slot(id)
            .ok_or_else(|| ConfigError::Slots(format!("there is no keyslot {id}")))?;
        let Params::Secret(p) = &s.params else {
            return Err(ConfigError::Slots(format!(
                "keyslot {id} is a {} slot, which has no password",
                s.kind()
            )));
        };
        let (params, key) = NewSlot::Secret {
            bytes: new,
            kind: p.kind,
            kdf: p.kdf,
        }
        .make()?;
        let slot = Slot { params, ..s.clone() };
        let slot = slot.rewrapped(&key, &opened.key);
        Ok(self.resealed(&opened.key, opened.slot, |c| {
            if let KeyStore::Slots(t) = &mut c.store {
                if let Some(x) = t.slots.iter_mut().find(|x| x.id == id) {
                    *x = slot;
                }
            }
        }))
    }

    /// A format 1 or 2 config as a keyslot config (format 3) with one slot
    /// of `kind` for `secret` (which must open it), labelled `label`: the
    /// same master key, so nothing else in the volume changes.
    pub fn with_keyslots(&self, secret: &[u8], kind: SlotKind, label: &str) -> Result<(Config, Opened)> {
        if self.has_slots() {
            let o = self.open(&Input::Secret {
                bytes: secret,
                kind: Some(kind),
            })?;
            return Ok((self.clone(), o));
        }
        super::slots::check_label(label)?;
        let master = self.unlock(secret)?;
        let (mut c, key) = self.with_first_slot(secret, kind, self.kdf_params(), &master, Some(0))?;
        if let KeyStore::Slots(t) = &mut c.store {
            t.slots[0].label = label.to_string();
        }
        let c = c.resealed(&master, Some(0), |_| {});
        Ok((
            c,
            Opened {
                key: master,
                slot: Some(0),
                verified: true,
                slot_key: Some(key),
            },
        ))
    }

    /// This config as a keyslot config whose only slot, 0, wraps `vk`
    /// under `secret` of `kind` (Argon2id `kdf`); `used` is recorded.
    pub(crate) fn with_first_slot(
        &self,
        secret: &[u8],
        kind: SlotKind,
        kdf: KdfParams,
        vk: &MasterKey,
        used: Option<u32>,
    ) -> Result<(Config, SlotKey)> {
        let (params, key) = NewSlot::Secret {
            bytes: secret,
            kind,
            kdf,
        }
        .make()?;
        let mut c = self.clone();
        c.feature_flags
            .retain(|&f| f != FeatureFlag::RekeyId && f != FeatureFlag::Keyslots);
        c.feature_flags.push(FeatureFlag::Keyslots);
        if c.rekey_id.is_some() {
            c.feature_flags.push(FeatureFlag::RekeyId);
        }
        c.version = super::flags::version_of(&c.feature_flags);
        c.store = KeyStore::Slots(SlotTable {
            revision: 0,
            previous: None,
            slots: vec![Slot::sealed(0, String::new(), now(), params, &key, vk)],
            mac: [0; 32],
        });
        Ok((c.resealed_new_revision(vk, used, |_| {}), key))
    }

    /// Start a rekey to a new volume key (FORMAT.md 10.5): a fresh random
    /// volume key wrapped in the slots of `kept` only (each with the slot
    /// key its secret gave, [`Config::slot_key`]), and in a new recovery
    /// slot for `recovery` if given; the old key `vk` kept as the previous
    /// volume key under one derived from the new; the rekey target the
    /// next generation with a fresh rekey ID. Returns the config (to be
    /// written before anything else changes) and the new volume key.
    pub fn begin_volume_rekey(
        &self,
        vk: &MasterKey,
        used: Option<u32>,
        kept: &[(u32, SlotKey)],
        recovery: Option<(&RecoveryKey, &str)>,
    ) -> Result<(Config, MasterKey)> {
        let t = self.table()?;
        if self.rekey_target.is_some() {
            return Err(ConfigError::Slots(
                "a rekey is unfinished: run warpfs rekey to finish it first".into(),
            ));
        }
        let target = self
            .key_generation
            .checked_add(1)
            .ok_or_else(|| ConfigError::Slots("key generation limit reached".into()))?;
        let new = MasterKey::generate();
        let mut slots = Vec::new();
        for (id, key) in kept {
            let s = self
                .slot(*id)
                .ok_or_else(|| ConfigError::Slots(format!("there is no keyslot {id}")))?;
            // The slot key must open the slot as it is now.
            key.unwrap(&s.wrapped, &Slot::ad(s.id, &s.params))
                .map_err(|_| ConfigError::WrongPassword)?;
            if slots.iter().any(|x: &Slot| x.id == *id) {
                continue;
            }
            slots.push(s.rewrapped(key, &new));
        }
        if let Some((rk, label)) = recovery {
            super::slots::check_label(label)?;
            let id = t.slots.iter().map(|s| s.id).max().unwrap_or(0).saturating_add(1);
            let (params, key) = NewSlot::Recovery(rk).make()?;
            slots.push(Slot::sealed(id, label.to_string(), now(), params, &key, &new));
        }
        if slots.is_empty() {
            return Err(ConfigError::Slots(
                "no keyslot would be left: keep at least one slot".into(),
            ));
        }
        slots.sort_by_key(|s| s.id);
        let previous = SlotKey::for_previous(&new).wrap(vk, &previous_ad(self.key_generation));
        let id = Some(warpfs_crypto::rand::array());
        let g = self.key_generation;
        let c = self.resealed_new_revision(&new, used, |c| {
            c.rekey_target = Some(target);
            c.set_rekey_id(id);
            if let KeyStore::Slots(t) = &mut c.store {
                t.slots = slots;
                t.previous = Some((g, previous));
            }
        });
        Ok((c, new))
    }

    /// End a volume-key rekey: the files use the new key's generation,
    /// the previous volume key is dropped.
    pub fn finish_volume_rekey(&self, vk: &MasterKey, used: Option<u32>) -> Result<Config> {
        let Some(target) = self.rekey_target.filter(|_| self.volume_rekey_under_way()) else {
            return Err(ConfigError::Slots("no volume-key rekey is under way".into()));
        };
        self.check_mac(vk, used)?;
        Ok(self.resealed(vk, used, |c| {
            c.key_generation = target;
            c.rekey_target = None;
            c.set_rekey_id(None);
            if let KeyStore::Slots(t) = &mut c.store {
                t.previous = None;
            }
        }))
    }

    /// Write this config to `path`, which must not exist (a new volume).
    pub(crate) fn save_new_at(&self, path: &Path) -> Result<()> {
        let (dir, name) = crate::file::split(path)?;
        write_atomic(&dir, &name, self.to_json().as_bytes(), Mode::CreateNew)
    }
}
