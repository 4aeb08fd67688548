//! Keyslot configs (format 3): opening by any slot, the table's MAC
//! against every kind of edit, adding, removing and re-passwording slots,
//! converting an older config, and the start and end of a volume-key
//! rekey.

use super::*;
use warpfs_crypto::slotkeys::RecoveryKey;

const PW2: &[u8] = b"second password";

fn secret(bytes: &[u8]) -> Input<'_> {
    Input::Secret { bytes, kind: None }
}

/// A keyslot config at `dir/warpfs.conf` (slot 0: PW, slot 1: recovery)
/// and its volume key and recovery key.
fn slotted(dir: &Path) -> (Config, MasterKey, RecoveryKey) {
    let rk = RecoveryKey::generate();
    let (c, vk) = Config::create_slots_at(
        &config_path(dir),
        PW,
        SlotKind::Password,
        ContentMode::Gcm,
        256,
        fast(),
        &[FeatureFlag::BoundSeals],
        Some(&rk),
    )
    .unwrap();
    (c, vk, rk)
}

fn sample_slots() -> &'static (String, MasterKey) {
    static S: OnceLock<(String, MasterKey)> = OnceLock::new();
    S.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let (c, vk, _) = slotted(d.path());
        let (c, _) = c
            .with_slot(
                &vk,
                Some(0),
                &NewSlot::Secret {
                    bytes: PW2,
                    kind: SlotKind::Password,
                    kdf: fast(),
                },
                "second",
            )
            .unwrap();
        (c.to_json(), vk)
    })
}

fn slots_edited(f: impl FnOnce(&mut Value)) -> std::result::Result<Config, ConfigError> {
    let mut v: Value = serde_json::from_str(&sample_slots().0).unwrap();
    f(&mut v);
    Config::from_json(serde_json::to_string_pretty(&v).unwrap().as_bytes())
}

#[test]
fn a_new_volume_opens_with_its_password_or_recovery_key_and_nothing_else() {
    let d = tempfile::tempdir().unwrap();
    let (c, vk, rk) = slotted(d.path());
    let loaded = Config::load(d.path()).unwrap();
    assert_eq!(loaded, c);
    assert_eq!(std::fs::read_to_string(config_path(d.path())).unwrap(), c.to_json());
    assert_eq!(loaded.version(), 3);
    assert!(loaded.has_feature(FeatureFlag::Keyslots) && loaded.has_feature(FeatureFlag::BoundSeals));
    let kinds: Vec<SlotKind> = loaded.slots().iter().map(|s| s.kind()).collect();
    assert_eq!(kinds, [SlotKind::Password, SlotKind::Recovery]);
    let o = loaded.open(&secret(PW)).unwrap();
    assert_eq!((o.key == vk, o.slot, o.verified), (true, Some(0), true));
    assert_eq!(loaded.unlock(PW).unwrap(), vk);
    let o = loaded.open(&Input::Recovery(&rk)).unwrap();
    assert_eq!((o.key == vk, o.slot), (true, Some(1)));
    assert!(matches!(
        loaded.open(&secret(b"wrong")),
        Err(ConfigError::WrongPassword)
    ));
    assert!(matches!(
        loaded.open(&Input::Recovery(&RecoveryKey::generate())),
        Err(ConfigError::WrongPassword)
    ));
    // A secret of another kind does not even try the password slot.
    let kf = Input::Secret {
        bytes: PW,
        kind: Some(SlotKind::Keyfile),
    };
    assert!(matches!(loaded.open(&kf), Err(ConfigError::WrongPassword)));
    // The recovery text is nowhere in the file, nor the volume key.
    let text = c.to_json();
    assert!(!text.contains(&rk.text()) && !text.contains(&vk.recovery_text()));
    // The volume key itself, given as a recovery text, is checked by the MAC.
    let as_text = RecoveryKey::from_text(&vk.recovery_text()).unwrap();
    let o = loaded.open(&Input::Recovery(&as_text)).unwrap();
    assert_eq!((o.slot, o.verified), (None, true));
}

#[test]
fn every_edit_of_the_table_is_refused_after_a_slot_opens() {
    type E = Box<dyn Fn(&mut Value)>;
    let edits: Vec<(&str, E)> = vec![
        (
            "slot removed",
            Box::new(|v| {
                v["keyslots"].as_array_mut().unwrap().remove(1);
            }),
        ),
        ("slot label", Box::new(|v| v["keyslots"][2]["label"] = json!("mine"))),
        ("slot created", Box::new(|v| v["keyslots"][1]["created"] = json!(1))),
        ("slot last used", Box::new(|v| v["keyslots"][2]["last_used"] = json!(5))),
        ("slot id", Box::new(|v| v["keyslots"][1]["id"] = json!(7))),
        (
            "slot added (a copy of slot 0 renumbered)",
            Box::new(|v| {
                let mut s = v["keyslots"][0].clone();
                s["id"] = json!(9);
                v["keyslots"].as_array_mut().unwrap().push(s);
            }),
        ),
        (
            "slots reordered",
            Box::new(|v| v["keyslots"].as_array_mut().unwrap().swap(1, 2)),
        ),
        ("revision", Box::new(|v| v["revision"] = json!(1))),
        ("key generation", Box::new(|v| v["key_generation"] = json!(4))),
        ("creator", Box::new(|v| v["creator"] = json!("someone"))),
        (
            "flag dropped",
            Box::new(|v| {
                let f = v["feature_flags"].as_array_mut().unwrap();
                f.retain(|x| x != "bound-seals");
            }),
        ),
        ("mode", Box::new(|v| v["content_mode"] = json!("ctr"))),
        ("mac", Box::new(|v| v["mac"] = json!(B64_32))),
    ];
    for (what, e) in &edits {
        let c = slots_edited(e).unwrap_or_else(|err| panic!("{what}: {err}"));
        // Slot 0 (PW) still unwraps the key; the MAC refuses the rest.
        match c.open(&secret(PW)) {
            Err(ConfigError::Tampered(m)) => assert!(!m.contains('\n'), "{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
        // So does a slot that the edit did not touch.
        assert!(
            matches!(
                c.open(&secret(PW2)),
                Err(ConfigError::Tampered(_)) | Err(ConfigError::WrongPassword)
            ),
            "{what}"
        );
    }
    // The slot's own parameters are bound into its wrapping: that slot no
    // longer opens at all, another one sees the change.
    let c = slots_edited(|v| v["keyslots"][0]["kdf"]["salt"] = json!(B64_32)).unwrap();
    assert!(matches!(c.open(&secret(PW)), Err(ConfigError::WrongPassword)));
    assert!(matches!(c.open(&secret(PW2)), Err(ConfigError::Tampered(_))));
    // Wrapped keys swapped between slots open nothing.
    let c = slots_edited(|v| {
        let w = v["keyslots"][0]["wrapped_key"].clone();
        v["keyslots"][0]["wrapped_key"] = v["keyslots"][2]["wrapped_key"].clone();
        v["keyslots"][2]["wrapped_key"] = w;
    })
    .unwrap();
    assert!(matches!(c.open(&secret(PW)), Err(ConfigError::WrongPassword)));
    assert!(matches!(c.open(&secret(PW2)), Err(ConfigError::WrongPassword)));
    // Untouched, it opens.
    slots_edited(|_| {}).unwrap().open(&secret(PW2)).unwrap();
}

const B64_32: &str = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";

#[test]
fn hostile_slot_tables_are_refused_on_reading() {
    let corrupt: Vec<Edit> = vec![
        Box::new(|v| v["keyslots"] = json!([])),
        Box::new(|v| v["keyslots"][1]["id"] = json!(0)),
        Box::new(|v| v["keyslots"][0]["kind"] = json!("retina")),
        Box::new(|v| v["keyslots"][0]["label"] = json!("a\nb")),
        Box::new(|v| v["keyslots"][0]["label"] = json!("x".repeat(65))),
        Box::new(|v| v["keyslots"][1]["kdf"]["memory_kib"] = json!(65536)),
        Box::new(|v| v["keyslots"][0]["kdf"]["salt"] = json!("AAAA")),
        Box::new(|v| v["keyslots"][0]["wrapped_key"]["ciphertext"] = json!("")),
        Box::new(|v| v["keyslots"][0]["unknown"] = json!(1)),
        Box::new(|v| v["mac"] = json!("AAAA")),
        Box::new(|v| {
            v.as_object_mut().unwrap().remove("mac");
        }),
        Box::new(|v| {
            v.as_object_mut().unwrap().remove("revision");
        }),
        Box::new(|v| v["wrapped_key"] = json!({"algorithm": "aes-256-gcm", "nonce": "", "ciphertext": ""})),
        Box::new(|v| {
            let s = v["keyslots"][0].clone();
            let a = v["keyslots"].as_array_mut().unwrap();
            for i in 0..40 {
                let mut s = s.clone();
                s["id"] = json!(100 + i);
                a.push(s);
            }
        }),
        Box::new(|v| {
            v["previous_volume_key"] = json!({"generation": 0, "nonce": "AAAAAAAAAAAAAAAA", "ciphertext": B64_32});
        }),
        // Keyslots without the flag (and version 2).
        Box::new(|v| {
            v["version"] = json!(2);
            v["feature_flags"].as_array_mut().unwrap().retain(|f| f != "keyslots");
        }),
    ];
    for (i, e) in corrupt.iter().enumerate() {
        let err = slots_edited(e).unwrap_err();
        assert!(
            matches!(err, ConfigError::Parse(_) | ConfigError::Unsupported(_)),
            "edit {i}: {err:?}"
        );
        assert!(!err.to_string().contains('\n'));
    }
    // A weakened slot KDF is refused before anything is derived.
    let err = slots_edited(|v| v["keyslots"][0]["kdf"]["memory_kib"] = json!(8)).unwrap_err();
    assert!(matches!(err, ConfigError::WeakKdf(_)), "{err}");
    // An older config with keyslot fields is refused too.
    let err = edited(|v| v["revision"] = json!(1)).unwrap_err();
    assert!(matches!(err, ConfigError::Parse(_)), "{err}");
}

#[test]
fn slots_are_added_removed_and_repassworded_by_any_slot() {
    let d = tempfile::tempdir().unwrap();
    let (c, vk, rk) = slotted(d.path());
    let o = c.open(&Input::Recovery(&rk)).unwrap();
    let kf_secret = warpfs_crypto::kdf::combine_keyfile(b"", b"keyfile bytes");
    let (c2, id) = c
        .with_slot(
            &o.key,
            o.slot,
            &NewSlot::Secret {
                bytes: &kf_secret[..],
                kind: SlotKind::Keyfile,
                kdf: fast(),
            },
            "usb stick",
        )
        .unwrap();
    assert_eq!(id, 2);
    assert_eq!(c2.revision(), c.revision() + 1);
    assert!(c2.key_state() > c.key_state());
    assert!(c2.slot(1).unwrap().last_used.is_some(), "the recovery slot was used");
    let back = Config::from_json(c2.to_json().as_bytes()).unwrap();
    let o2 = back
        .open(&Input::Secret {
            bytes: &kf_secret[..],
            kind: Some(SlotKind::Keyfile),
        })
        .unwrap();
    assert_eq!((o2.key == vk, o2.slot), (true, Some(2)));
    assert_eq!(back.slot(2).unwrap().label, "usb stick");
    // Remove the password slot: its password no longer opens this config.
    let c3 = back.without_slot(&o2.key, o2.slot, 0).unwrap();
    assert_eq!(c3.revision(), back.revision() + 1, "a removal makes older copies older");
    assert!(matches!(c3.open(&secret(PW)), Err(ConfigError::WrongPassword)));
    assert!(c3.open(&Input::Recovery(&rk)).is_ok());
    assert!(matches!(c3.without_slot(&vk, None, 0), Err(ConfigError::Slots(_))));
    // Down to one slot: that one stays.
    let c4 = c3.without_slot(&vk, None, 1).unwrap();
    let e = c4.without_slot(&vk, None, 2).unwrap_err();
    assert!(e.to_string().contains("only one"), "{e}");
    // A password change replaces only the slot it opened.
    let o = c2.open(&secret(PW)).unwrap();
    let c5 = c2.with_new_secret(&o, 0, PW2).unwrap();
    // A copy from before a password change is as new (passwd on two hosts).
    assert_eq!(c5.key_state(), c2.key_state());
    assert!(matches!(c5.open(&secret(PW)), Err(ConfigError::WrongPassword)));
    assert_eq!(c5.open(&secret(PW2)).unwrap().slot, Some(0));
    assert!(c5.open(&Input::Recovery(&rk)).is_ok());
    assert!(matches!(c5.with_new_secret(&o, 1, PW2), Err(ConfigError::Slots(_))));
    // Labels are checked; a new slot never takes a number that was used.
    assert!(c2
        .with_slot(&vk, None, &NewSlot::Recovery(&rk), &"x".repeat(65))
        .is_err());
    let (_, id) = c3.with_slot(&vk, None, &NewSlot::Recovery(&rk), "").unwrap();
    assert_eq!(id, 3);
    // The slot key of a slot, checked against it.
    assert!(c2.slot_key(0, &secret(PW)).is_ok());
    assert!(matches!(c2.slot_key(0, &secret(PW2)), Err(ConfigError::WrongPassword)));
    assert!(matches!(c2.slot_key(1, &secret(PW)), Err(ConfigError::Slots(_))));
    assert!(matches!(c2.slot_key(9, &secret(PW)), Err(ConfigError::Slots(_))));
}

#[test]
fn an_older_config_becomes_a_keyslot_config_with_the_same_key() {
    let d = tempfile::tempdir().unwrap();
    let (old, master) = Config::create_with_features(
        d.path(),
        PW,
        ContentMode::Gcm,
        256,
        fast(),
        &[FeatureFlag::FileSummary, FeatureFlag::BoundSeals],
    )
    .unwrap();
    let old = old.set_generations(d.path(), PW, 2, Some(3)).unwrap();
    assert!(!old.has_slots() && old.slots().is_empty());
    assert!(matches!(
        old.with_new_secret(&old.open(&secret(PW)).unwrap(), 0, PW2),
        Err(ConfigError::Slots(_))
    ));
    assert!(old.with_keyslots(PW2, SlotKind::Password, "").is_err());
    let (new, o) = old.with_keyslots(PW, SlotKind::Password, "laptop").unwrap();
    assert_eq!(o.key, master);
    assert_eq!(new.version(), 3);
    assert_eq!(
        (new.key_generation(), new.rekey_target(), new.rekey_id()),
        (2, Some(3), old.rekey_id())
    );
    assert_eq!(new.feature_flags().last(), Some(&FeatureFlag::RekeyId));
    assert!(new.key_state() > old.key_state());
    let back = Config::from_json(new.to_json().as_bytes()).unwrap();
    assert_eq!(back.unlock(PW).unwrap(), master);
    assert_eq!(back.slot(0).unwrap().label, "laptop");
    // The old recovery text (the master key itself) opens it, checked.
    let rk = RecoveryKey::from_text(&master.recovery_text()).unwrap();
    assert!(back.open(&Input::Recovery(&rk)).unwrap().verified);
    // Generations and rekey IDs work as before.
    new.save_at(&config_path(d.path())).unwrap();
    let g = back.set_generations(d.path(), PW, 3, None).unwrap();
    assert_eq!((g.key_generation(), g.rekey_target(), g.rekey_id()), (3, None, None));
    assert!(!g.has_feature(FeatureFlag::RekeyId));
    assert_eq!(Config::load(d.path()).unwrap().unlock(PW).unwrap(), master);
}

#[test]
fn a_volume_key_rekey_keeps_only_the_slots_whose_keys_were_given() {
    let d = tempfile::tempdir().unwrap();
    let (c, vk, rk) = slotted(d.path());
    let (c, _) = c
        .with_slot(
            &vk,
            None,
            &NewSlot::Secret {
                bytes: PW2,
                kind: SlotKind::Password,
                kdf: fast(),
            },
            "to revoke",
        )
        .unwrap();
    let before = c.clone();
    let o = c.open(&secret(PW)).unwrap();
    let keep = vec![
        (0, o.slot_key.unwrap()),
        (1, c.slot_key(1, &Input::Recovery(&rk)).unwrap()),
    ];
    // A slot key that does not open the slot it is given for is refused.
    let bad = vec![(2, c.slot_key(0, &secret(PW)).unwrap())];
    assert!(c.begin_volume_rekey(&vk, Some(0), &bad, None).is_err());
    let new_rk = RecoveryKey::generate();
    let (mid, new) = c
        .begin_volume_rekey(&vk, Some(0), &keep, Some((&new_rk, "new")))
        .unwrap();
    assert_ne!(new, vk);
    assert!(mid.volume_rekey_under_way());
    assert_eq!(mid.rekey_target(), Some(c.key_generation() + 1));
    assert!(mid.rekey_id().is_some());
    assert!(mid.key_state() > before.key_state());
    let ids: Vec<u32> = mid.slots().iter().map(|s| s.id).collect();
    assert_eq!(ids, [0, 1, 3]);
    let mid = Config::from_json(mid.to_json().as_bytes()).unwrap();
    for input in [secret(PW), Input::Recovery(&rk), Input::Recovery(&new_rk)] {
        let o = mid.open(&input).unwrap();
        assert_eq!(o.key, new);
        assert_eq!(mid.previous_key(&o.key).unwrap(), Some(vk.clone()));
    }
    assert!(matches!(mid.open(&secret(PW2)), Err(ConfigError::WrongPassword)));
    // The config from before still gives the old key to the removed
    // password, and never the new one.
    assert_eq!(before.open(&secret(PW2)).unwrap().key, vk);
    // A second start is refused while this one runs; the old key cannot
    // stand in for the new one.
    assert!(mid.begin_volume_rekey(&new, None, &[], None).is_err());
    assert!(mid.finish_volume_rekey(&vk, None).is_err());
    let done = mid.finish_volume_rekey(&new, Some(0)).unwrap();
    assert!(!done.volume_rekey_under_way());
    assert_eq!(
        (done.key_generation(), done.rekey_target(), done.rekey_id()),
        (1, None, None)
    );
    assert_eq!(done.previous_key(&new).unwrap(), None);
    let done = Config::from_json(done.to_json().as_bytes()).unwrap();
    assert_eq!(done.unlock(PW).unwrap(), new);
    assert!(done.finish_volume_rekey(&new, None).is_err());
    // Keeping nothing is refused.
    assert!(c.begin_volume_rekey(&vk, None, &[], None).is_err());
}

#[test]
fn a_password_change_and_generations_work_through_the_old_calls() {
    let d = tempfile::tempdir().unwrap();
    let (c, vk, rk) = slotted(d.path());
    c.change_password(d.path(), PW, PW2).unwrap();
    let c = Config::load(d.path()).unwrap();
    assert_eq!(c.unlock(PW2).unwrap(), vk);
    assert!(c.unlock(PW).is_err());
    let c = c.set_generations(d.path(), PW2, 0, Some(1)).unwrap();
    let c = c.add_rekey_id_at(&config_path(d.path()), PW2).unwrap();
    assert!(c.rekey_id().is_some());
    // Reset with the recovery key: the one password slot gets the new one.
    let o = c.open(&Input::Recovery(&rk)).unwrap();
    let backup = c.reset_password_slot(&config_path(d.path()), &o, None, PW).unwrap();
    assert!(backup.ends_with("warpfs.conf.bak"));
    assert_eq!(Config::load(d.path()).unwrap().unlock(PW).unwrap(), vk);
}

const TOP: &[&str] = &[
    "revision",
    "mac",
    "keyslots",
    "previous_volume_key",
    "key_generation",
    "kdf",
    "wrapped_key",
];
const SLOT: &[&str] = &[
    "id",
    "kind",
    "label",
    "created",
    "last_used",
    "kdf",
    "wrapped_key",
    "unknown",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(warpfs_testkit::cases(48)))]

    /// Any edit of a keyslot config is refused on reading, or when a slot
    /// opens it; what opens is the config as written.
    #[test]
    fn an_edited_slot_table_never_opens_as_anything_else(
        top in proptest::option::of(0usize..TOP.len()),
        slot in 0usize..3,
        field in 0usize..SLOT.len(),
        val in prop_oneof![
            Just(json!(null)),
            Just(json!(0)),
            Just(json!(7)),
            Just(json!(u64::MAX)),
            Just(json!("")),
            Just(json!("password")),
            Just(json!("recovery")),
            Just(json!(B64_32)),
            Just(json!([])),
            Just(json!({})),
        ],
        remove in any::<bool>(),
    ) {
        let orig = Config::from_json(sample_slots().0.as_bytes()).unwrap();
        let r = slots_edited(|v| {
            let (parent, key) = match top {
                Some(t) => (v, TOP[t]),
                None => (&mut v["keyslots"][slot], SLOT[field]),
            };
            if let Some(o) = parent.as_object_mut() {
                if remove { o.remove(key); } else { o.insert(key.to_string(), val); }
            }
        });
        if let Ok(c) = r {
            prop_assert_eq!(&Config::from_json(c.to_json().as_bytes()).unwrap(), &c);
            if c.open(&secret(PW2)).is_ok() {
                prop_assert_eq!(c, orig);
            }
        }
    }
}
