//! Edited and hostile configs: authenticated fields, weak KDFs, unknown
//! flags and versions, corrupt fields, garbage files, the pinned AAD.

use super::*;

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
        Box::new(|v| v["version"] = json!(4)),
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
    let v4 = edited(|v| v["version"] = json!(4)).unwrap_err();
    assert!(v4.to_string().contains("newer warpfs"), "{v4}");
    // Version 3 without keyslots.
    assert!(matches!(
        edited(|v| v["version"] = json!(3)).unwrap_err(),
        ConfigError::Parse(_)
    ));
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
