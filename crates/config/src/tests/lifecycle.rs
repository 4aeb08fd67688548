//! Creating, loading, unlocking and re-passwording configs, and the file
//! they leave on disk.

use super::*;

#[test]
fn create_load_unlock_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, key) = Config::create(d.path(), PW, ContentMode::Ctr, 128, fast()).unwrap();
    assert_eq!(dir_entries(d.path()), vec![CONFIG_FILE.to_string()]);
    let meta = std::fs::metadata(config_path(d.path())).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777 & !0o200, 0o400);
    let loaded = Config::load(d.path()).unwrap();
    assert_eq!(loaded, cfg);
    assert_eq!(loaded.content_mode(), ContentMode::Ctr);
    assert_eq!(loaded.key_bits(), 128);
    assert_eq!(loaded.kdf_params(), fast());
    assert_eq!(loaded.version(), 1);
    assert_eq!(loaded.block_size(), 4096);
    assert_eq!(loaded.feature_flags(), &V1_FEATURE_FLAGS[..]);
    assert!(loaded.has_feature(FeatureFlag::SivNames));
    assert!(loaded.creator().starts_with("warpfs "));
    assert_eq!(loaded.unlock(PW).unwrap(), key);
    // The file on disk is exactly to_json().
    assert_eq!(
        std::fs::read_to_string(config_path(d.path())).unwrap(),
        loaded.to_json()
    );
}

#[test]
fn file_layout_is_as_documented() {
    let v = sample_value();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    let mut expected = vec![
        "format",
        "version",
        "creator",
        "content_mode",
        "key_bits",
        "block_size",
        "feature_flags",
        "kdf",
        "wrapped_key",
    ];
    expected.sort();
    let mut keys_sorted = keys.clone();
    keys_sorted.sort();
    assert_eq!(keys_sorted, expected);
    assert_eq!(v["format"], "warpfs");
    assert_eq!(v["version"], 1);
    assert_eq!(v["content_mode"], "gcm");
    assert_eq!(v["key_bits"], 256);
    assert_eq!(v["block_size"], 4096);
    assert_eq!(v["feature_flags"], json!(["dir-iv", "long-names", "siv-names"]));
    assert_eq!(v["kdf"]["algorithm"], "argon2id");
    assert_eq!(v["kdf"]["salt"].as_str().unwrap().len(), 44);
    assert_eq!(v["wrapped_key"]["algorithm"], "aes-256-gcm");
    assert_eq!(v["wrapped_key"]["nonce"].as_str().unwrap().len(), 16);
    assert_eq!(v["wrapped_key"]["ciphertext"].as_str().unwrap().len(), 64);
    // Pretty-printed, fields in documented order.
    let text = &sample().0;
    assert!(text.starts_with("{\n  \"format\": \"warpfs\",\n  \"version\": 1,\n  \"creator\""));
    assert!(text.ends_with("}\n"));
}

#[test]
fn display_shows_no_secrets() {
    let cfg = Config::from_json(sample().0.as_bytes()).unwrap();
    let s = cfg.to_string();
    let v = sample_value();
    for secret in [
        &v["kdf"]["salt"],
        &v["wrapped_key"]["nonce"],
        &v["wrapped_key"]["ciphertext"],
    ] {
        let secret = secret.as_str().unwrap();
        assert!(!s.contains(secret));
        assert!(!s.contains(&secret[..8]));
    }
    assert!(s.contains("gcm") && s.contains("argon2id") && s.contains("AES-256"));
    assert!(!sample().1.recovery_text().is_empty() && !s.contains(&sample().1.recovery_text()[..8]));
}

#[test]
fn wrong_password_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, _) = Config::create(d.path(), PW, ContentMode::Gcm, 256, fast()).unwrap();
    let before = std::fs::read(config_path(d.path())).unwrap();
    assert!(matches!(cfg.unlock(b"wrong"), Err(ConfigError::WrongPassword)));
    assert!(matches!(cfg.unlock(b""), Err(ConfigError::WrongPassword)));
    assert!(matches!(
        cfg.change_password(d.path(), b"wrong", b"new"),
        Err(ConfigError::WrongPassword)
    ));
    assert_eq!(std::fs::read(config_path(d.path())).unwrap(), before);
    assert_eq!(dir_entries(d.path()), vec![CONFIG_FILE.to_string()]);
}

#[test]
fn change_password_keeps_master_key() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, key) = Config::create(d.path(), PW, ContentMode::Gcm, 256, fast()).unwrap();
    cfg.change_password(d.path(), PW, b"new password").unwrap();
    assert_eq!(dir_entries(d.path()), vec![CONFIG_FILE.to_string()]);
    let after = Config::load(d.path()).unwrap();
    assert!(matches!(after.unlock(PW), Err(ConfigError::WrongPassword)));
    assert_eq!(after.unlock(b"new password").unwrap(), key);
    assert_eq!(after.content_mode(), cfg.content_mode());
    assert_eq!(after.kdf_params(), cfg.kdf_params());
    assert_eq!(after.creator(), cfg.creator());
    // New salt.
    assert_ne!(after.aad(), cfg.aad());
    // The old in-memory config still describes the old password only.
    assert_eq!(cfg.unlock(PW).unwrap(), key);
}

#[test]
fn create_refuses_existing_config() {
    let d = tempfile::tempdir().unwrap();
    Config::create(d.path(), PW, ContentMode::Gcm, 256, fast()).unwrap();
    let before = std::fs::read(config_path(d.path())).unwrap();
    let e = Config::create(d.path(), b"other", ContentMode::Ctr, 256, fast()).unwrap_err();
    assert!(matches!(e, ConfigError::AlreadyExists { .. }), "{e}");
    assert!(e.to_string().contains("already"));
    assert_eq!(std::fs::read(config_path(d.path())).unwrap(), before);
    assert_eq!(dir_entries(d.path()), vec![CONFIG_FILE.to_string()]);
}

#[test]
fn create_with_key_for_recovery() {
    let d = tempfile::tempdir().unwrap();
    let key = MasterKey::from_recovery_text(&sample().1.recovery_text()).unwrap();
    let cfg = Config::create_with_key(d.path(), &key, b"pw2", ContentMode::Gcm, 256, fast()).unwrap();
    assert_eq!(Config::load(d.path()).unwrap().unlock(b"pw2").unwrap(), sample().1);
    assert_eq!(cfg.unlock(b"pw2").unwrap(), key);
}

#[test]
fn create_validates_parameters() {
    let d = tempfile::tempdir().unwrap();
    let weak = KdfParams {
        memory_kib: 1024,
        ..fast()
    };
    assert!(matches!(
        Config::create(d.path(), PW, ContentMode::Gcm, 256, weak),
        Err(ConfigError::WeakKdf(_))
    ));
    assert!(matches!(
        Config::create(d.path(), PW, ContentMode::Gcm, 192, fast()),
        Err(ConfigError::Unsupported(_))
    ));
    assert!(dir_entries(d.path()).is_empty());
    let missing = d.path().join("nope");
    assert!(matches!(
        Config::create(&missing, PW, ContentMode::Gcm, 256, fast()),
        Err(ConfigError::Io { .. })
    ));
    assert!(matches!(Config::load(d.path()), Err(ConfigError::Io { .. })));
}
