//! Property tests: random and mutated configs are refused or parse and
//! re-serialise the same; nothing panics.

use super::*;

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
    &["key_generation"],
    &["rekey_target"],
    &["rekey_id"],
    &["wrapped_key"],
    &["wrapped_key", "algorithm"],
    &["wrapped_key", "nonce"],
    &["wrapped_key", "ciphertext"],
    &["unknown"],
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(warpfs_testkit::cases(2000)))]

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
