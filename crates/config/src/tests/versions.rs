//! Content modes, key generations and the version 2 feature flags.

use super::*;

#[test]
fn content_mode_names_and_codes() {
    assert_eq!("gcm".parse::<ContentMode>().unwrap(), ContentMode::Gcm);
    assert_eq!("ctr".parse::<ContentMode>().unwrap(), ContentMode::Ctr);
    assert_eq!("xts".parse::<ContentMode>().unwrap(), ContentMode::Xts);
    assert_eq!("xts-twofish".parse::<ContentMode>().unwrap(), ContentMode::XtsTwofish);
    assert!(matches!(
        "xts-serpent".parse::<ContentMode>(),
        Err(ConfigError::Unsupported(_))
    ));
    assert_eq!(ContentMode::default(), ContentMode::Gcm);
    for m in [ContentMode::Ctr, ContentMode::Gcm, ContentMode::Xts] {
        assert_eq!(ContentMode::from_header_code(m.header_code()), Some(m));
    }
    for m in [
        ContentMode::Ctr,
        ContentMode::Gcm,
        ContentMode::Xts,
        ContentMode::XtsTwofish,
    ] {
        assert_eq!(m.to_string().parse::<ContentMode>().unwrap(), m);
    }
    assert_eq!(ContentMode::Ctr.header_code(), 1);
    assert_eq!(ContentMode::Gcm.header_code(), 2);
    assert_eq!(ContentMode::Xts.header_code(), 3);
    assert_eq!(ContentMode::XtsTwofish.header_code(), 3);
    assert_eq!(
        ContentMode::XtsTwofish.xts_cipher(),
        Some(warpfs_crypto::XtsCipher::Twofish)
    );
    assert_eq!(ContentMode::Gcm.xts_cipher(), None);
    assert_eq!(ContentMode::from_header_code(0), None);
    assert_eq!(ContentMode::from_header_code(4), None);
}

#[test]
fn xts_config_round_trips_and_mode_is_authenticated() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, key) = Config::create(d.path(), PW, ContentMode::XtsTwofish, 128, fast()).unwrap();
    let loaded = Config::load(d.path()).unwrap();
    assert_eq!(loaded, cfg);
    assert_eq!(loaded.content_mode(), ContentMode::XtsTwofish);
    assert_eq!(loaded.unlock(PW).unwrap(), key);
    let s = loaded.to_string();
    assert!(s.contains("xts-twofish") && s.contains("Twofish-128"), "{s}");
    // Editing the cipher (twofish -> aes) breaks the unwrap.
    let json = loaded.to_json().replace("\"xts-twofish\"", "\"xts\"");
    let edited = Config::from_json(json.as_bytes()).unwrap();
    assert_eq!(edited.content_mode(), ContentMode::Xts);
    assert!(matches!(edited.unlock(PW), Err(ConfigError::WrongPassword)));
}

#[test]
fn key_generations_are_recorded_authenticated_and_checked() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, master) = Config::create(d.path(), PW, ContentMode::Ctr, 128, fast()).unwrap();
    assert_eq!(
        (cfg.key_generation(), cfg.rekey_target(), cfg.write_generation()),
        (0, None, 0)
    );
    assert!(!cfg.to_json().contains("key_generation"), "generation 0 is not written");
    // Start a rekey, then finish it; the master key stays.
    let mid = cfg.set_generations(d.path(), PW, 0, Some(1)).unwrap();
    let loaded = Config::load(d.path()).unwrap();
    assert_eq!(loaded, mid);
    assert_eq!(
        (
            loaded.key_generation(),
            loaded.rekey_target(),
            loaded.write_generation()
        ),
        (0, Some(1), 1)
    );
    assert!(loaded.to_string().contains("unfinished"));
    assert_eq!(loaded.unlock(PW).unwrap(), master);
    let done = loaded.set_generations(d.path(), PW, 1, None).unwrap();
    let text = std::fs::read_to_string(config_path(d.path())).unwrap();
    assert!(
        text.contains("\"key_generation\": 1") && !text.contains("rekey_target"),
        "{text}"
    );
    assert_eq!(Config::load(d.path()).unwrap(), done);
    assert_eq!(done.unlock(PW).unwrap(), master);
    // A password change keeps the generation.
    done.change_password(d.path(), PW, b"other").unwrap();
    assert_eq!(Config::load(d.path()).unwrap().key_generation(), 1);
    // The fields are authenticated: editing one breaks the unwrap.
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["key_generation"] = json!(2);
    let tampered = Config::from_json(v.to_string().as_bytes()).unwrap();
    assert!(matches!(tampered.unlock(PW), Err(ConfigError::WrongPassword)));
    // Hostile values are refused before any key derivation.
    assert!(matches!(
        cfg.set_generations(d.path(), b"wrong", 0, Some(1)),
        Err(ConfigError::WrongPassword)
    ));
    assert!(edited(|v| v["key_generation"] = json!(0)).is_err());
    assert!(edited(|v| v["rekey_target"] = json!(2)).is_err());
    assert!(edited(|v| v["key_generation"] = json!(-1)).is_err());
    assert!(edited(|v| v["key_generation"] = json!("1")).is_err());
    assert!(edited(|v| v["rekey_target"] = json!(1)).is_ok());
}

#[test]
fn version_2_features_round_trip_and_are_authenticated() {
    let d = tempfile::tempdir().unwrap();
    let flags = [FeatureFlag::BoundSeals, FeatureFlag::FileSummary];
    let (cfg, master) =
        Config::create_with_features(d.path(), b"pw", ContentMode::Gcm, 256, KdfParams::MIN, &flags).unwrap();
    assert_eq!(cfg.version(), 2);
    let back = Config::load(d.path()).unwrap();
    assert_eq!(back.version(), 2);
    assert!(back.has_feature(FeatureFlag::FileSummary) && back.has_feature(FeatureFlag::BoundSeals));
    assert_eq!(back.unlock(b"pw").unwrap(), master);
    let text = std::fs::read_to_string(d.path().join("warpfs.conf")).unwrap();
    assert!(text.contains("\"version\": 2"), "{text}");
    assert!(text.contains("\"file-summary\""), "{text}");
    // A password change keeps version 2 and its flags.
    back.change_password(d.path(), b"pw", b"pw2").unwrap();
    let again = Config::load(d.path()).unwrap();
    assert_eq!(again.version(), 2);
    assert!(again.has_feature(FeatureFlag::FileSummary));
    // Dropping a flag (a downgrade attempt) fails the unwrap.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("warpfs.conf")).unwrap()).unwrap();
    v["feature_flags"] = serde_json::json!(["dir-iv", "long-names", "siv-names", "bound-seals"]);
    let edited = Config::from_json(serde_json::to_string(&v).unwrap().as_bytes()).unwrap();
    assert!(edited.unlock(b"pw2").is_err());
    // file-summary is gcm only; no flags give version 1.
    let d2 = tempfile::tempdir().unwrap();
    assert!(Config::create_with_features(d2.path(), b"pw", ContentMode::Ctr, 256, KdfParams::MIN, &flags).is_err());
    let (c1, _) = Config::create_with_features(d2.path(), b"pw", ContentMode::Ctr, 256, KdfParams::MIN, &[]).unwrap();
    assert_eq!(c1.version(), 1);
}

#[test]
fn a_rekey_has_an_authenticated_id_only_while_it_is_under_way() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, master) = Config::create(d.path(), PW, ContentMode::Gcm, 256, fast()).unwrap();
    assert_eq!(cfg.rekey_id(), None);
    let mid = cfg.set_generations(d.path(), PW, 0, Some(1)).unwrap();
    let id = mid.rekey_id().expect("a rekey that starts gets an ID");
    assert!(mid.has_feature(FeatureFlag::RekeyId));
    assert_eq!(mid.version(), 1, "the flag does not change the version");
    let text = std::fs::read_to_string(config_path(d.path())).unwrap();
    assert!(text.contains("\"rekey_id\"") && text.contains("\"rekey-id\""), "{text}");
    assert_eq!(Config::load(d.path()).unwrap(), mid);
    // The AAD ends with it (after rekey_target).
    let mut tail = (8u32).to_le_bytes().to_vec();
    tail.extend_from_slice(b"rekey_id");
    tail.extend_from_slice(&16u32.to_le_bytes());
    tail.extend_from_slice(&id);
    assert!(mid.aad().ends_with(&tail));
    // Kept by a password change and by resuming the same rekey.
    mid.change_password(d.path(), PW, b"other").unwrap();
    let changed = Config::load(d.path()).unwrap();
    assert_eq!(changed.rekey_id(), Some(id));
    let resumed = changed.set_generations(d.path(), b"other", 0, Some(1)).unwrap();
    assert_eq!(resumed.rekey_id(), Some(id));
    // Authenticated: another ID (or none) fails the unwrap.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(config_path(d.path())).unwrap()).unwrap();
    v["rekey_id"] = json!("AAAAAAAAAAAAAAAAAAAAAA==");
    let other = Config::from_json(v.to_string().as_bytes()).unwrap();
    assert!(matches!(other.unlock(b"other"), Err(ConfigError::WrongPassword)));
    // Gone (with its flag) when the rekey ends; the next rekey gets another.
    let done = resumed.set_generations(d.path(), b"other", 1, None).unwrap();
    assert!(done.rekey_id().is_none() && !done.has_feature(FeatureFlag::RekeyId));
    let text = std::fs::read_to_string(config_path(d.path())).unwrap();
    assert!(!text.contains("rekey"), "{text}");
    let next = done.set_generations(d.path(), b"other", 1, Some(2)).unwrap();
    assert!(next.rekey_id().is_some_and(|n| n != id));
    assert_eq!(next.unlock(b"other").unwrap(), master);
}

#[test]
fn a_rekey_of_an_earlier_warpfs_gets_an_id_when_asked() {
    let d = tempfile::tempdir().unwrap();
    let p = config_path(d.path());
    let (cfg, master) = Config::create(d.path(), PW, ContentMode::Gcm, 256, fast()).unwrap();
    // What an earlier warpfs wrote: a rekey target, no ID.
    let old = Config::seal_gens(
        cfg.creator().to_string(),
        cfg.content_mode(),
        cfg.key_bits(),
        cfg.feature_flags().to_vec(),
        cfg.kdf_params(),
        (0, Some(1)),
    )
    .unwrap()
    .wrap_under(&master, PW)
    .unwrap();
    std::fs::write(&p, old.to_json()).unwrap();
    let old = Config::load(d.path()).unwrap();
    assert_eq!((old.rekey_target(), old.rekey_id()), (Some(1), None));
    // Resuming keeps it without (its journals have none).
    let resumed = old.set_generations_at(&p, PW, 0, Some(1)).unwrap();
    assert_eq!(resumed.rekey_id(), None);
    let with = resumed.add_rekey_id_at(&p, PW).unwrap();
    assert!(with.rekey_id().is_some() && with.has_feature(FeatureFlag::RekeyId));
    assert_eq!(Config::load(d.path()).unwrap(), with);
    assert_eq!(with.unlock(PW).unwrap(), master);
    assert_eq!(with.add_rekey_id_at(&p, PW).unwrap(), with, "nothing to do");
    assert!(matches!(
        resumed.add_rekey_id_at(&p, b"wrong"),
        Err(ConfigError::WrongPassword)
    ));
}

#[test]
fn a_hostile_rekey_id_is_refused() {
    let id = json!("AAECAwQFBgcICQoLDA0ODw==");
    let flags = json!(["dir-iv", "long-names", "siv-names", "rekey-id"]);
    let ok = |v: &mut Value| {
        v["rekey_target"] = json!(1);
        v["rekey_id"] = id.clone();
        v["feature_flags"] = flags.clone();
    };
    assert!(edited(ok).is_ok());
    for (bad, why) in [
        (
            Box::new(|v: &mut Value| v["feature_flags"] = json!(["dir-iv", "long-names", "siv-names"])) as Edit,
            "needs the feature flag",
        ),
        (
            Box::new(|v: &mut Value| drop(v.as_object_mut().unwrap().remove("rekey_id"))),
            "needs \"rekey_id\"",
        ),
        (
            Box::new(|v: &mut Value| drop(v.as_object_mut().unwrap().remove("rekey_target"))),
            "without \"rekey_target\"",
        ),
        (
            Box::new(|v: &mut Value| v["rekey_id"] = json!("AAECAwQFBgcICQoLDA0O")),
            "16 bytes",
        ),
        (Box::new(|v: &mut Value| v["rekey_id"] = json!("not base64!")), "base64"),
        (Box::new(|v: &mut Value| v["rekey_id"] = json!(7)), "expected a string"),
    ] {
        let r = edited(|v| {
            ok(v);
            bad(v);
        });
        match r {
            Err(e) => assert!(e.to_string().contains(why), "{e} does not say {why}"),
            Ok(_) => panic!("accepted; want refused: {why}"),
        }
    }
}

#[test]
fn xchacha_configs_round_trip_with_256_bit_keys_and_summaries() {
    let d = tempfile::tempdir().unwrap();
    let flags = [FeatureFlag::BoundSeals, FeatureFlag::FileSummary];
    let (cfg, master) =
        Config::create_with_features(d.path(), PW, ContentMode::XChaCha20Poly1305, 256, fast(), &flags).unwrap();
    let loaded = Config::load(d.path()).unwrap();
    assert_eq!(loaded, cfg);
    assert_eq!(loaded.content_mode(), ContentMode::XChaCha20Poly1305);
    assert!(loaded.has_feature(FeatureFlag::FileSummary));
    assert_eq!(loaded.unlock(PW).unwrap(), master);
    let text = std::fs::read_to_string(config_path(d.path())).unwrap();
    assert!(text.contains("\"content_mode\": \"xchacha20-poly1305\""), "{text}");
    // Swapping the cipher back to AES (same layout) breaks the unwrap.
    let json = loaded.to_json().replace("\"xchacha20-poly1305\"", "\"gcm\"");
    let edited = Config::from_json(json.as_bytes()).unwrap();
    assert!(matches!(edited.unlock(PW), Err(ConfigError::WrongPassword)));
    // XChaCha20 has 256-bit keys only: refused on create and on load.
    let d2 = tempfile::tempdir().unwrap();
    for m in [ContentMode::XChaCha20Poly1305, ContentMode::CtrXChaCha20] {
        let e = Config::create(d2.path(), PW, m, 128, fast()).unwrap_err().to_string();
        assert!(e.contains("supported: 256"), "{e}");
    }
    let json = loaded.to_json().replace("\"key_bits\": 256", "\"key_bits\": 128");
    assert!(matches!(
        Config::from_json(json.as_bytes()),
        Err(ConfigError::Unsupported(_))
    ));
    // Summaries need tags: not in ctr-xchacha20.
    let e = Config::create_with_features(d2.path(), PW, ContentMode::CtrXChaCha20, 256, fast(), &flags)
        .unwrap_err()
        .to_string();
    assert!(e.contains("file-summary"), "{e}");
    let (c, _) = Config::create(d2.path(), PW, ContentMode::CtrXChaCha20, 256, fast()).unwrap();
    assert_eq!(Config::load(d2.path()).unwrap(), c);
}

#[test]
fn xchacha_keyslot_configs_take_256_bit_keys_only_and_bind_the_cipher() {
    use crate::SlotKind;
    let d = tempfile::tempdir().unwrap();
    let path = config_path(d.path());
    let flags = [FeatureFlag::BoundSeals, FeatureFlag::FileSummary];
    // Format 3 (what `init` writes) refuses a 128-bit XChaCha20 key, as
    // the older formats do, and writes nothing.
    for m in [ContentMode::XChaCha20Poly1305, ContentMode::CtrXChaCha20] {
        let e = Config::create_slots_at(&path, PW, SlotKind::Password, m, 128, fast(), &[], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("supported: 256"), "{e}");
        assert!(!path.exists());
    }
    let (c, vk) = Config::create_slots_at(
        &path,
        PW,
        SlotKind::Password,
        ContentMode::XChaCha20Poly1305,
        256,
        fast(),
        &flags,
        None,
    )
    .unwrap();
    let loaded = Config::load(d.path()).unwrap();
    assert_eq!(loaded, c);
    assert_eq!(
        (loaded.version(), loaded.content_mode()),
        (3, ContentMode::XChaCha20Poly1305)
    );
    assert!(loaded.has_feature(FeatureFlag::Keyslots) && loaded.has_feature(FeatureFlag::FileSummary));
    assert_eq!(loaded.unlock(PW).unwrap(), vk);
    // The cipher is bound: the same layout under AES, or a 128-bit key,
    // does not open.
    let json = c.to_json().replace("\"xchacha20-poly1305\"", "\"gcm\"");
    assert!(Config::from_json(json.as_bytes()).unwrap().unlock(PW).is_err());
    let json = c.to_json().replace("\"key_bits\": 256", "\"key_bits\": 128");
    assert!(matches!(
        Config::from_json(json.as_bytes()),
        Err(ConfigError::Unsupported(_))
    ));
}
