//! Tests of create / load / unlock / change_password and of hostile configs.

use crate::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::OnceLock;

const PW: &[u8] = b"correct horse";

/// An edit of the config JSON.
type Edit = Box<dyn Fn(&mut Value)>;

fn fast() -> KdfParams {
    KdfParams::MIN
}

/// One valid config (JSON text) and its master key, made once.
fn sample() -> &'static (String, MasterKey) {
    static S: OnceLock<(String, MasterKey)> = OnceLock::new();
    S.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let (_, k) = Config::create(d.path(), PW, ContentMode::Gcm, 256, fast()).unwrap();
        (std::fs::read_to_string(config_path(d.path())).unwrap(), k)
    })
}

fn sample_value() -> Value {
    serde_json::from_str(&sample().0).unwrap()
}

fn edited(f: impl FnOnce(&mut Value)) -> std::result::Result<Config, ConfigError> {
    let mut v = sample_value();
    f(&mut v);
    Config::from_json(serde_json::to_string_pretty(&v).unwrap().as_bytes())
}

fn dir_entries(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

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

#[test]
fn authenticated_fields_cannot_be_edited() {
    let key = &sample().1;
    // Each edit still passes validation but must no longer unlock.
    let edits: Vec<Edit> = vec![
        Box::new(|v| v["content_mode"] = json!("ctr")),
        Box::new(|v| v["key_bits"] = json!(128)),
        Box::new(|v| v["creator"] = json!("warpfs 9.9.9")),
        Box::new(|v| v["feature_flags"] = json!(["siv-names", "dir-iv", "long-names"])),
        Box::new(|v| v["kdf"]["iterations"] = json!(3)),
        Box::new(|v| v["kdf"]["memory_kib"] = json!(65536)),
        Box::new(|v| v["kdf"]["parallelism"] = json!(2)),
    ];
    for (i, e) in edits.iter().enumerate() {
        let cfg = edited(e).unwrap_or_else(|err| panic!("edit {i}: {err}"));
        assert!(
            matches!(cfg.unlock(PW), Err(ConfigError::WrongPassword)),
            "edit {i} unlocked"
        );
    }
    // Unedited: unlocks.
    assert_eq!(&edited(|_| {}).unwrap().unlock(PW).unwrap(), key);
    // Edited wrapped key / nonce / salt (right lengths): does not unlock.
    for field in [("kdf", "salt"), ("wrapped_key", "nonce"), ("wrapped_key", "ciphertext")] {
        let cfg = edited(|v| {
            let s = v[field.0][field.1].as_str().unwrap().to_string();
            let flipped = if s.starts_with('A') { "B" } else { "A" };
            v[field.0][field.1] = json!(format!("{flipped}{}", &s[1..]));
        })
        .unwrap();
        assert!(matches!(cfg.unlock(PW), Err(ConfigError::WrongPassword)), "{field:?}");
    }
}

#[test]
fn weakened_kdf_is_refused() {
    for (field, value) in [
        ("memory_kib", 32767),
        ("memory_kib", 8),
        ("iterations", 1),
        ("parallelism", 0),
    ] {
        let e = edited(|v| v["kdf"][field] = json!(value)).unwrap_err();
        assert!(matches!(e, ConfigError::WeakKdf(_)), "{field}: {e}");
        assert!(e.to_string().contains(field), "{e}");
    }
    let e = edited(|v| v["kdf"]["iterations"] = json!(101)).unwrap_err();
    assert!(matches!(e, ConfigError::Unsupported(_)), "{e}");
    let e = edited(|v| v["kdf"]["memory_kib"] = json!(4_194_305u64)).unwrap_err();
    assert!(matches!(e, ConfigError::Unsupported(_)), "{e}");
}

#[test]
fn feature_flags_are_checked() {
    let e = edited(|v| v["feature_flags"].as_array_mut().unwrap().push(json!("xts-tweaks"))).unwrap_err();
    assert!(matches!(e, ConfigError::Unsupported(_)));
    assert_eq!(
        e.to_string(),
        "unknown feature flag \"xts-tweaks\": this volume needs a newer warpfs"
    );
    let e = edited(|v| v["feature_flags"] = json!(["dir-iv", "siv-names"])).unwrap_err();
    assert!(matches!(e, ConfigError::Unsupported(_)));
    assert!(e.to_string().contains("long-names"));
    let e = edited(|v| v["feature_flags"] = json!(["dir-iv", "siv-names", "long-names", "dir-iv"])).unwrap_err();
    assert!(matches!(e, ConfigError::Parse(_)), "{e}");
    // An unknown flag wins over other problems, so old warpfs says "newer".
    let e = edited(|v| {
        v["feature_flags"] = json!(["dir-iv", "long-names", "siv-names", "x"]);
        v["block_size"] = json!(8192);
        v["new_field"] = json!(1);
    })
    .unwrap_err();
    assert!(e.to_string().contains("newer warpfs"), "{e}");
}

#[test]
fn unsupported_and_corrupt_fields() {
    let unsupported: Vec<Edit> = vec![
        Box::new(|v| v["version"] = json!(3)),
        Box::new(|v| v["version"] = json!(0)),
        Box::new(|v| v["content_mode"] = json!("xts-serpent")),
        Box::new(|v| v["key_bits"] = json!(512)),
        Box::new(|v| v["block_size"] = json!(8192)),
        Box::new(|v| v["kdf"]["algorithm"] = json!("scrypt")),
        Box::new(|v| v["wrapped_key"]["algorithm"] = json!("aes-256-siv")),
    ];
    for (i, e) in unsupported.iter().enumerate() {
        let err = edited(e).unwrap_err();
        assert!(matches!(err, ConfigError::Unsupported(_)), "edit {i}: {err}");
        assert!(!err.to_string().contains('\n'));
    }
    // A config asking for more than a desktop bears per unlock (the old
    // ceiling, 4 GiB and 100 passes) is refused before any KDF runs.
    for e in [
        edited(|v| v["kdf"]["memory_kib"] = json!(4194304)).unwrap_err(),
        edited(|v| v["kdf"]["iterations"] = json!(100)).unwrap_err(),
    ] {
        assert!(matches!(e, ConfigError::Unsupported(_)), "{e}");
        assert!(e.to_string().contains("more than warpfs spends on one unlock"), "{e}");
    }
    let v3 = edited(|v| v["version"] = json!(3)).unwrap_err();
    assert!(v3.to_string().contains("newer warpfs"), "{v3}");
    // Version 2 without a version 2 flag, and a version 2 flag in version 1.
    assert!(matches!(
        edited(|v| v["version"] = json!(2)).unwrap_err(),
        ConfigError::Parse(_)
    ));
    assert!(matches!(
        edited(|v| v["feature_flags"] = json!(["dir-iv", "long-names", "siv-names", "file-summary"])).unwrap_err(),
        ConfigError::Parse(_)
    ));

    let corrupt: Vec<Edit> = vec![
        Box::new(|v| v["format"] = json!("gocryptfs")),
        Box::new(|v| {
            v.as_object_mut().unwrap().remove("format");
        }),
        Box::new(|v| v["version"] = json!("1")),
        Box::new(|v| v["version"] = json!(1.5)),
        Box::new(|v| v["version"] = json!(-1)),
        Box::new(|v| v["key_bits"] = json!(1e300)),
        Box::new(|v| v["key_bits"] = json!(18446744073709551615u64)),
        Box::new(|v| v["kdf"]["memory_kib"] = json!(4294967296u64)),
        Box::new(|v| v["kdf"]["memory_kib"] = json!(-65536)),
        Box::new(|v| v["kdf"]["salt"] = json!("AAAA")),
        Box::new(|v| v["kdf"]["salt"] = json!("not base64!")),
        Box::new(|v| v["kdf"]["salt"] = json!("A".repeat(60000))),
        Box::new(|v| v["wrapped_key"]["nonce"] = json!(B64_13)),
        Box::new(|v| v["wrapped_key"]["ciphertext"] = json!("")),
        Box::new(|v| v["wrapped_key"]["ciphertext"] = json!(null)),
        Box::new(|v| {
            v["kdf"].as_object_mut().unwrap().remove("salt");
        }),
        Box::new(|v| v["extra"] = json!(true)),
        Box::new(|v| v["kdf"]["pepper"] = json!("x")),
        Box::new(|v| v["creator"] = json!("evil\u{1b}[2J")),
        Box::new(|v| v["creator"] = json!("x".repeat(300))),
        Box::new(|v| v["feature_flags"] = json!("dir-iv")),
        Box::new(|v| *v = json!([1, 2, 3])),
    ];
    for (i, e) in corrupt.iter().enumerate() {
        let err = edited(e).unwrap_err();
        assert!(matches!(err, ConfigError::Parse(_)), "edit {i}: {err}");
        assert!(!err.to_string().contains('\n'), "edit {i}: {err}");
    }
}

/// base64 of 13 bytes (a nonce one byte too long).
const B64_13: &str = "AAAAAAAAAAAAAAAAAA==";

#[test]
fn garbage_files() {
    let text = sample().0.as_bytes();
    // Every strict prefix that cuts into the JSON is an error.
    let end = text.iter().rposition(|&b| b == b'}').unwrap();
    for n in 0..=end {
        assert!(Config::from_json(&text[..n]).is_err(), "prefix {n}");
    }
    assert!(Config::from_json(b"").is_err());
    assert!(Config::from_json(b"\xff\xfe\x00").is_err());
    assert!(Config::from_json(b"null").is_err());
    assert!(Config::from_json("[".repeat(100_000).as_bytes()).is_err());
    // Over 64 KiB: refused, even if it would be valid JSON.
    let mut big = sample().0.clone();
    big.insert_str(1, &" ".repeat(MAX_CONFIG_SIZE));
    let e = Config::from_json(big.as_bytes()).unwrap_err();
    assert!(e.to_string().contains("64 KiB"), "{e}");
    let d = tempfile::tempdir().unwrap();
    std::fs::write(config_path(d.path()), big).unwrap();
    assert!(matches!(Config::load(d.path()), Err(ConfigError::Parse(_))));
    // Duplicate keys are refused.
    let dup = sample()
        .0
        .replacen("\"key_bits\": 256,", "\"key_bits\": 256, \"key_bits\": 128,", 1);
    assert!(Config::from_json(dup.as_bytes()).is_err());
}

#[test]
fn aad_layout_is_pinned() {
    // Fix the variable parts (creator, salt) by editing the JSON.
    let cfg = edited(|v| {
        v["creator"] = json!("warpfs 0.1.0");
        v["kdf"]["salt"] = json!("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    })
    .unwrap();
    let mut expected = b"warpfs.conf aad v1".to_vec();
    let mut f = |n: &str, val: &[u8]| {
        expected.extend_from_slice(&(n.len() as u32).to_le_bytes());
        expected.extend_from_slice(n.as_bytes());
        expected.extend_from_slice(&(val.len() as u32).to_le_bytes());
        expected.extend_from_slice(val);
    };
    f("format", b"warpfs");
    f("version", b"1");
    f("creator", b"warpfs 0.1.0");
    f("content_mode", b"gcm");
    f("key_bits", b"256");
    f("block_size", b"4096");
    f("feature_flags", b"dir-iv,long-names,siv-names");
    f("kdf.algorithm", b"argon2id");
    f("kdf.memory_kib", b"32768");
    f("kdf.iterations", b"2");
    f("kdf.parallelism", b"1");
    let salt: Vec<u8> = (0u8..32).collect();
    f("kdf.salt", &salt);
    assert_eq!(cfg.aad(), expected);
    assert_eq!(&expected[..22], b"warpfs.conf aad v1\x06\x00\x00\x00");
}

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

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        (0u32..5_000_000).prop_map(|n| json!(n)),
        "\\PC{0,40}".prop_map(Value::String),
        "[A-Za-z0-9+/=]{0,70}".prop_map(Value::String),
        prop_oneof![
            Just("gcm"),
            Just("ctr"),
            Just("dir-iv"),
            Just("argon2id"),
            Just("aes-256-gcm"),
            Just("warpfs")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const PATHS: &[&[&str]] = &[
    &["format"],
    &["version"],
    &["creator"],
    &["content_mode"],
    &["key_bits"],
    &["block_size"],
    &["feature_flags"],
    &["kdf"],
    &["kdf", "algorithm"],
    &["kdf", "memory_kib"],
    &["kdf", "iterations"],
    &["kdf", "parallelism"],
    &["kdf", "salt"],
    &["wrapped_key"],
    &["wrapped_key", "algorithm"],
    &["wrapped_key", "nonce"],
    &["wrapped_key", "ciphertext"],
    &["unknown"],
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        prop_assert!(Config::from_json(&bytes).is_err());
    }

    #[test]
    fn mutated_text_never_panics(pos in 0usize..2000, len in 0usize..20, ins in "\\PC{0,10}") {
        let t = &sample().0;
        let mut b = t.as_bytes().to_vec();
        let p = pos % b.len();
        let e = (p + len).min(b.len());
        b.splice(p..e, ins.bytes());
        if let Ok(cfg) = Config::from_json(&b) {
            // Whatever parses must re-serialise to a config that parses the same.
            prop_assert_eq!(Config::from_json(cfg.to_json().as_bytes()).unwrap(), cfg);
        }
    }

    #[test]
    fn mutated_fields_never_panic(path in 0usize..PATHS.len(), val in any_json(), remove in any::<bool>()) {
        let mut v = sample_value();
        let p = PATHS[path];
        let (parent, last) = match p {
            [a] => (&mut v, *a),
            [a, b] => (&mut v[*a], *b),
            _ => unreachable!(),
        };
        if let Some(obj) = parent.as_object_mut() {
            if remove { obj.remove(last); } else { obj.insert(last.to_string(), val); }
        }
        let text = serde_json::to_string(&v).unwrap();
        match Config::from_json(text.as_bytes()) {
            Ok(cfg) => prop_assert_eq!(Config::from_json(cfg.to_json().as_bytes()).unwrap(), cfg),
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }
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
