//! `tpm2` keyslots in the table: written and read back, bound into the
//! slot's wrapping and the config MAC, opened only by what the TPM
//! unseals, a device's failures reported (the most telling of several),
//! and hostile slot members refused. The TPM itself is the caller's
//! (`warpfs-tpm2`, tested against swtpm); here it is a table of objects
//! and the secrets they hold.

use super::*;
use crate::{DeviceError, DeviceFailure, Tpm2Object, Unseal};
use warpfs_crypto::slotkeys::SlotKey;

/// An edit of a config's JSON.
type Edit = Box<dyn Fn(&mut Value)>;

/// A TPM as the config sees it: which private blob unseals to what, and
/// a failure for every other object.
struct FakeTpm {
    objects: Vec<(Vec<u8>, [u8; 32])>,
    otherwise: DeviceFailure,
}

impl Unseal for FakeTpm {
    fn unseal(&self, o: &Tpm2Object) -> std::result::Result<SlotKey, DeviceError> {
        self.objects
            .iter()
            .find(|(p, _)| *p == o.private)
            .map(|(_, s)| SlotKey::from_bytes(s))
            .ok_or(DeviceError {
                failure: self.otherwise,
                msg: format!("{:?}", self.otherwise),
            })
    }
}

fn object(tag: u8, pcrs: Vec<u32>, tcti: Option<&str>) -> Tpm2Object {
    Tpm2Object {
        pcrs,
        public: vec![0, 4, tag, tag, tag, tag],
        private: vec![0, 3, tag, 1, 2],
        tcti: tcti.map(str::to_owned),
    }
}

/// A password slot 0 and a tpm2 slot 1 (PCR 7, a TCTI hint).
fn with_tpm2(dir: &Path) -> (Config, MasterKey, Tpm2Object, [u8; 32]) {
    let (c, vk) = Config::create_slots_at(
        &config_path(dir),
        PW,
        SlotKind::Password,
        ContentMode::Gcm,
        256,
        fast(),
        &[],
        None,
    )
    .unwrap();
    let o = object(1, vec![7], Some("swtpm:port=2321"));
    let secret = [0x5a; 32];
    let (c, id) = c
        .with_slot(
            &vk,
            Some(0),
            &NewSlot::Tpm2 {
                object: o.clone(),
                secret: &secret,
            },
            "laptop tpm",
        )
        .unwrap();
    assert_eq!(id, 1);
    c.save_at(&config_path(dir)).unwrap();
    (c, vk, o, secret)
}

#[test]
fn a_tpm2_slot_opens_with_what_the_tpm_unseals_and_nothing_else() {
    let d = tempfile::tempdir().unwrap();
    let (c, vk, o, secret) = with_tpm2(d.path());
    let loaded = Config::load(d.path()).unwrap();
    assert_eq!(loaded, c);
    let s = loaded.slot(1).unwrap();
    assert_eq!(
        (s.kind(), s.label.as_str(), s.tpm2()),
        (SlotKind::Tpm2, "laptop tpm", Some(&o))
    );
    let tpm = FakeTpm {
        objects: vec![(o.private.clone(), secret)],
        otherwise: DeviceFailure::Foreign,
    };
    let opened = loaded.open(&Input::Tpm2(&tpm)).unwrap();
    assert_eq!((opened.key == vk, opened.slot), (true, Some(1)));
    // The slot key serves a volume-key rekey's rewrap.
    assert!(loaded.slot_key(1, &Input::Tpm2(&tpm)).is_ok());
    // Another 32 bytes from the TPM open nothing: a wrong key.
    let wrong = FakeTpm {
        objects: vec![(o.private.clone(), [0x5b; 32])],
        otherwise: DeviceFailure::Foreign,
    };
    assert!(matches!(
        loaded.open(&Input::Tpm2(&wrong)),
        Err(ConfigError::WrongPassword)
    ));
    // A password does not reach the TPM slot, the TPM not the password slot.
    assert_eq!(
        loaded.open(&Input::Secret { bytes: PW, kind: None }).unwrap().slot,
        Some(0)
    );
    // Written as FORMAT.md 2.6 says: a "tpm2" member in place of "kdf".
    let v: Value = serde_json::from_str(&c.to_json()).unwrap();
    let slot = &v["keyslots"][1];
    assert_eq!(slot["kind"], "tpm2");
    assert!(slot.get("kdf").is_none());
    let text = c.to_json();
    let from = text.find("\"tpm2\":").unwrap();
    let at = |k: &str| from + text[from..].find(&format!("\"{k}\":")).unwrap();
    let order = ["pcr_bank", "pcrs", "public", "private", "tcti", "wrapped_key"].map(at);
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert_eq!(slot["tpm2"]["pcrs"], json!([7]));
    assert_eq!(slot["tpm2"]["tcti"], "swtpm:port=2321");
}

#[test]
fn a_devices_failure_is_reported_not_taken_for_a_wrong_password() {
    let d = tempfile::tempdir().unwrap();
    let (c, vk, o, secret) = with_tpm2(d.path());
    // A second tpm2 slot, of another TPM.
    let other = object(2, vec![], None);
    let (c, _) = c
        .with_slot(
            &vk,
            Some(0),
            &NewSlot::Tpm2 {
                object: other.clone(),
                secret: &[0x77; 32],
            },
            "",
        )
        .unwrap();
    for f in [
        DeviceFailure::Unreachable,
        DeviceFailure::Refused,
        DeviceFailure::Foreign,
        DeviceFailure::Other,
    ] {
        let none = FakeTpm {
            objects: vec![],
            otherwise: f,
        };
        match c.open(&Input::Tpm2(&none)) {
            Err(ConfigError::Device(e)) => assert_eq!(e.failure, f),
            other => panic!("{f:?}: {other:?}"),
        }
    }
    // The slot of this TPM opens though the other slot's object is foreign.
    let this = FakeTpm {
        objects: vec![(o.private.clone(), secret)],
        otherwise: DeviceFailure::Foreign,
    };
    assert_eq!(c.open(&Input::Tpm2(&this)).unwrap().slot, Some(1));
    let second = FakeTpm {
        objects: vec![(other.private.clone(), [0x77; 32])],
        otherwise: DeviceFailure::Refused,
    };
    assert_eq!(c.open(&Input::Tpm2(&second)).unwrap().slot, Some(2));
    // A refusal (PCRs changed) says more than a foreign object.
    struct Mixed(Vec<u8>);
    impl Unseal for Mixed {
        fn unseal(&self, o: &Tpm2Object) -> std::result::Result<SlotKey, DeviceError> {
            let failure = if o.private == self.0 {
                DeviceFailure::Refused
            } else {
                DeviceFailure::Foreign
            };
            Err(DeviceError {
                failure,
                msg: String::new(),
            })
        }
    }
    for tpm in [Mixed(o.private.clone()), Mixed(other.private.clone())] {
        assert!(matches!(
            c.open(&Input::Tpm2(&tpm)),
            Err(ConfigError::Device(DeviceError {
                failure: DeviceFailure::Refused,
                ..
            }))
        ));
    }
    // A volume without a tpm2 slot says so.
    let (plain, _) = Config::create_slots_at(
        &d.path().join("plain.conf"),
        PW,
        SlotKind::Password,
        ContentMode::Gcm,
        256,
        fast(),
        &[],
        None,
    )
    .unwrap();
    let err = plain.open(&Input::Tpm2(&this)).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Slots(m) if m.contains("no tpm2 keyslot")),
        "{err}"
    );
}

#[test]
fn the_tpm2_member_is_bound_by_the_wrapping_and_the_mac() {
    let d = tempfile::tempdir().unwrap();
    let (c, _, o, secret) = with_tpm2(d.path());
    let json = c.to_json();
    let tpm = FakeTpm {
        objects: vec![(o.private.clone(), secret)],
        otherwise: DeviceFailure::Foreign,
    };
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v: Value = serde_json::from_str(&json).unwrap();
        f(&mut v);
        Config::from_json(serde_json::to_string(&v).unwrap().as_bytes())
    };
    // Each field changed to another valid value: the slot no longer
    // unwraps (its AD changed), and the password slot's MAC check fails.
    let changes: Vec<Edit> = vec![
        Box::new(|v| v["keyslots"][1]["tpm2"]["pcrs"] = json!([])),
        Box::new(|v| v["keyslots"][1]["tpm2"]["pcrs"] = json!([7, 8])),
        Box::new(|v| v["keyslots"][1]["tpm2"]["public"] = json!("AAQJCQkJ")),
        Box::new(|v| v["keyslots"][1]["tpm2"]["tcti"] = json!("device:/dev/tpmrm0")),
        Box::new(|v| {
            v["keyslots"][1]["tpm2"].as_object_mut().unwrap().remove("tcti");
        }),
    ];
    for (i, f) in changes.iter().enumerate() {
        let c = edit(f.as_ref()).unwrap();
        assert!(
            matches!(c.open(&Input::Tpm2(&tpm)), Err(ConfigError::WrongPassword)),
            "change {i}"
        );
        assert!(
            matches!(
                c.open(&Input::Secret { bytes: PW, kind: None }),
                Err(ConfigError::Tampered(_))
            ),
            "change {i}"
        );
    }
    // Malformed members are refused as read, never a panic.
    let bad: Vec<Edit> = vec![
        Box::new(|v| v["keyslots"][1]["tpm2"]["pcr_bank"] = json!("sha1")),
        Box::new(|v| v["keyslots"][1]["tpm2"]["pcrs"] = json!([24])),
        Box::new(|v| v["keyslots"][1]["tpm2"]["pcrs"] = json!([8, 7])),
        Box::new(|v| v["keyslots"][1]["tpm2"]["pcrs"] = json!([-1])),
        Box::new(|v| v["keyslots"][1]["tpm2"]["public"] = json!("!!")),
        Box::new(|v| v["keyslots"][1]["tpm2"]["private"] = json!("A".repeat(4000))),
        Box::new(|v| v["keyslots"][1]["tpm2"]["tcti"] = json!("device:/dev/sda")),
        Box::new(|v| v["keyslots"][1]["tpm2"]["tcti"] = json!("swtpm:host=192.0.2.1,port=1")),
        Box::new(|v| v["keyslots"][1]["tpm2"]["extra"] = json!(1)),
        Box::new(|v| {
            v["keyslots"][1]["tpm2"].as_object_mut().unwrap().remove("private");
        }),
        Box::new(|v| {
            v["keyslots"][1].as_object_mut().unwrap().remove("tpm2");
        }),
        Box::new(|v| v["keyslots"][1]["kdf"] = v["keyslots"][0]["kdf"].clone()),
        Box::new(|v| v["keyslots"][0]["tpm2"] = v["keyslots"][1]["tpm2"].clone()),
    ];
    for (i, f) in bad.iter().enumerate() {
        let err = edit(f.as_ref()).unwrap_err();
        assert!(
            matches!(err, ConfigError::Parse(_) | ConfigError::Unsupported(_)),
            "edit {i}: {err:?}"
        );
    }
}

#[test]
fn an_unsafe_tcti_is_never_written_into_a_slot() {
    let d = tempfile::tempdir().unwrap();
    let (c, vk, _, _) = with_tpm2(d.path());
    for t in ["device:/etc/shadow", "tabrmd:", "swtpm:host=example.com,port=1"] {
        let err = c
            .with_slot(
                &vk,
                Some(0),
                &NewSlot::Tpm2 {
                    object: object(3, vec![], Some(t)),
                    secret: &[1; 32],
                },
                "",
            )
            .unwrap_err();
        assert!(matches!(err, ConfigError::Parse(_)), "{t}: {err}");
    }
}
