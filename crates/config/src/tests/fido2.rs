//! FIDO2 keyslots (FORMAT.md 2.6): written with their own member in place
//! of `kdf`, opened only by their credential's hmac-secret output, every
//! field bound into the slot's wrapping and the config's MAC, and hostile
//! members refused on reading.

use super::*;
use warpfs_crypto::slotkeys::RecoveryKey;

const CRED: [u8; 48] = [0x5a; 48];
const OUTPUT: [u8; 32] = [0x11; 32];

fn fido2_input<'a>(credential: &'a [u8], output: &'a [u8; 32]) -> Input<'a> {
    Input::Fido2 { credential, output }
}

/// A keyslot config (slot 0: PW, slot 1: recovery, slot 2: FIDO2 for
/// [`CRED`] whose key answers [`OUTPUT`]) as JSON, and its volume key.
fn with_fido2() -> &'static (String, MasterKey) {
    static S: OnceLock<(String, MasterKey)> = OnceLock::new();
    S.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let rk = RecoveryKey::generate();
        let (c, vk) = Config::create_slots_at(
            &config_path(d.path()),
            PW,
            SlotKind::Password,
            ContentMode::Gcm,
            256,
            fast(),
            &[],
            Some(&rk),
        )
        .unwrap();
        let params = Fido2::new(FIDO2_RP_ID, &CRED, true, Some("Test Key")).unwrap();
        let (c, id) = c
            .with_slot(
                &vk,
                Some(0),
                &NewSlot::Fido2 {
                    params: &params,
                    output: &OUTPUT,
                },
                "token",
            )
            .unwrap();
        assert_eq!(id, 2);
        (c.to_json(), vk)
    })
}

fn fido2_edited(f: impl FnOnce(&mut Value)) -> std::result::Result<Config, ConfigError> {
    let mut v: Value = serde_json::from_str(&with_fido2().0).unwrap();
    f(&mut v);
    Config::from_json(serde_json::to_string_pretty(&v).unwrap().as_bytes())
}

#[test]
fn a_fido2_slot_is_written_and_opens_only_with_its_credentials_output() {
    let (text, vk) = with_fido2();
    let v: Value = serde_json::from_str(text).unwrap();
    let s = &v["keyslots"][2];
    assert_eq!(s["kind"], "fido2");
    assert!(s.get("kdf").is_none(), "{s}");
    assert_eq!(s["fido2"]["rp_id"], "warpfs");
    assert_eq!(s["fido2"]["user_verification"], true);
    assert_eq!(s["fido2"]["device"], "Test Key");
    let c = Config::from_json(text.as_bytes()).unwrap();
    assert_eq!(c.to_json(), *text);
    let slot = c.slot(2).unwrap();
    assert_eq!(slot.kind(), SlotKind::Fido2);
    let f = slot.fido2().unwrap();
    assert_eq!((f.credential.as_slice(), f.user_verification), (&CRED[..], true));
    assert!(c.slot(0).unwrap().fido2().is_none());
    // Its output opens it; the volume key is the one the password gives.
    let o = c.open(&fido2_input(&CRED, &OUTPUT)).unwrap();
    assert_eq!((o.key == *vk, o.slot, o.verified), (true, Some(2), true));
    assert_eq!(c.open(&Input::Secret { bytes: PW, kind: None }).unwrap().key, *vk);
    // Another output (another key, or the same key without its PIN), or
    // another credential: nothing opens.
    for bad in [
        fido2_input(&CRED, &[0x12; 32]),
        fido2_input(&[0x5b; 48], &OUTPUT),
        fido2_input(&CRED[..47], &OUTPUT),
    ] {
        assert!(matches!(c.open(&bad), Err(ConfigError::WrongPassword)));
    }
    // The output is not a password, and a password opens no FIDO2 slot.
    assert!(matches!(
        c.slot_key(
            2,
            &Input::Secret {
                bytes: &OUTPUT,
                kind: None
            }
        ),
        Err(ConfigError::Slots(_))
    ));
    assert!(c.slot_key(2, &fido2_input(&CRED, &OUTPUT)).is_ok());
    // A FIDO2 slot has no password to change.
    assert!(matches!(c.with_new_secret(&o, 2, b"new"), Err(ConfigError::Slots(_))));
    // Removed, its output opens nothing.
    let c2 = c.without_slot(vk, Some(0), 2).unwrap();
    assert!(matches!(
        c2.open(&fido2_input(&CRED, &OUTPUT)),
        Err(ConfigError::WrongPassword)
    ));
}

#[test]
fn every_fido2_field_is_bound_to_its_wrapping_and_the_mac() {
    let fields: [(&str, Value); 5] = [
        ("rp_id", json!("example.com")),
        ("credential", json!(B64_32B)),
        ("salt", json!(B64_32B)),
        ("user_verification", json!(false)),
        ("device", json!("Other Key")),
    ];
    for (name, value) in fields {
        let c = fido2_edited(|v| v["keyslots"][2]["fido2"][name] = value.clone()).unwrap();
        let cred = c.slot(2).unwrap().fido2().unwrap().credential.clone();
        // The slot itself no longer unwraps (its fields are its AD) ...
        assert!(
            matches!(c.open(&fido2_input(&cred, &OUTPUT)), Err(ConfigError::WrongPassword)),
            "{name}"
        );
        // ... and another slot sees the change through the MAC.
        assert!(
            matches!(
                c.open(&Input::Secret { bytes: PW, kind: None }),
                Err(ConfigError::Tampered(_))
            ),
            "{name}"
        );
    }
    // The device hint dropped: the same.
    let c = fido2_edited(|v| {
        v["keyslots"][2]["fido2"].as_object_mut().unwrap().remove("device");
    })
    .unwrap();
    assert!(matches!(
        c.open(&fido2_input(&CRED, &OUTPUT)),
        Err(ConfigError::WrongPassword)
    ));
    assert!(matches!(
        c.open(&Input::Secret { bytes: PW, kind: None }),
        Err(ConfigError::Tampered(_))
    ));
    fido2_edited(|_| {})
        .unwrap()
        .open(&fido2_input(&CRED, &OUTPUT))
        .unwrap();
}

const B64_32B: &str = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";

#[test]
fn hostile_fido2_members_are_refused_on_reading() {
    let edits: Vec<(&str, Edit)> = vec![
        (
            "no member",
            Box::new(|v| {
                v["keyslots"][2].as_object_mut().unwrap().remove("fido2");
            }),
        ),
        (
            "kdf too",
            Box::new(|v| v["keyslots"][2]["kdf"] = v["keyslots"][0]["kdf"].clone()),
        ),
        (
            "on a password slot",
            Box::new(|v| v["keyslots"][0]["fido2"] = v["keyslots"][2]["fido2"].clone()),
        ),
        (
            "password kind",
            Box::new(|v| v["keyslots"][2]["kind"] = json!("password")),
        ),
        (
            "unknown field",
            Box::new(|v| v["keyslots"][2]["fido2"]["pin"] = json!("1234")),
        ),
        (
            "salt short",
            Box::new(|v| v["keyslots"][2]["fido2"]["salt"] = json!("AQID")),
        ),
        (
            "salt not base64",
            Box::new(|v| v["keyslots"][2]["fido2"]["salt"] = json!("!!")),
        ),
        (
            "credential empty",
            Box::new(|v| v["keyslots"][2]["fido2"]["credential"] = json!("")),
        ),
        (
            "credential huge",
            Box::new(|v| v["keyslots"][2]["fido2"]["credential"] = json!("A".repeat(4000))),
        ),
        (
            "rp_id empty",
            Box::new(|v| v["keyslots"][2]["fido2"]["rp_id"] = json!("")),
        ),
        (
            "rp_id control",
            Box::new(|v| v["keyslots"][2]["fido2"]["rp_id"] = json!("a\u{1b}b")),
        ),
        (
            "uv not bool",
            Box::new(|v| v["keyslots"][2]["fido2"]["user_verification"] = json!("yes")),
        ),
        (
            "device long",
            Box::new(|v| v["keyslots"][2]["fido2"]["device"] = json!("x".repeat(65))),
        ),
        (
            "device empty",
            Box::new(|v| v["keyslots"][2]["fido2"]["device"] = json!("")),
        ),
    ];
    for (what, e) in &edits {
        match fido2_edited(e) {
            Err(ConfigError::Parse(m)) => assert!(!m.contains('\n'), "{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}
