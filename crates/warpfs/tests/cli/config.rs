//! A corrupt or edited `warpfs.conf` is refused with exit code 11.

use super::*;

/// Apply `edit` to the config text; `None` if it does not apply.
fn edit_json_number(conf: &str, key_pred: impl Fn(&str) -> bool, new: &str) -> Option<String> {
    // Find `"key": 123` with key matching.
    let b = conf.as_bytes();
    let mut i = 0;
    while let Some(q) = conf[i..].find('"') {
        let start = i + q + 1;
        let end = start + conf[start..].find('"')?;
        let key = &conf[start..end];
        let mut j = end + 1;
        while j < b.len() && (b[j] == b' ' || b[j] == b'\n' || b[j] == b'\t') {
            j += 1;
        }
        if j < b.len() && b[j] == b':' {
            j += 1;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\n' || b[j] == b'\t') {
                j += 1;
            }
            let ns = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > ns && key_pred(&key.to_lowercase()) {
                return Some(format!("{}{}{}", &conf[..ns], new, &conf[j..]));
            }
        }
        i = end + 1;
    }
    None
}

#[test]
fn corrupt_config_exit_11() {
    let (v, o) = Volume::init_fresh(Mode::Gcm);
    o.expect_ok("init");
    let conf_path = v.cipher.join("warpfs.conf");
    let orig = fs::read(&conf_path).unwrap();
    // The config is read-only (0400); make it writable for the edits below
    // (root would not need this).
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&conf_path, fs::Permissions::from_mode(0o600)).unwrap();
    }
    let text = String::from_utf8_lossy(&orig).into_owned();
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("empty file".into(), Vec::new()),
        ("truncated to half".into(), orig[..orig.len() / 2].to_vec()),
        ("garbage".into(), Rng::new(7).bytes(orig.len())),
        ("not an object".into(), b"[1, 2, 3]\n".to_vec()),
    ];
    match edit_json_number(&text, |k| k.contains("version") && !k.contains("kdf"), "99") {
        Some(t) => cases.push(("format version 99".into(), t.into_bytes())),
        None => eprintln!("note: no numeric *version* field found in warpfs.conf; not testing a bumped version"),
    }
    match edit_json_number(&text, |k| k.contains("mem") || k == "m" || k.contains("m_cost"), "8") {
        Some(t) => cases.push(("Argon2 memory weakened to 8".into(), t.into_bytes())),
        None => eprintln!("note: no Argon2 memory field found in warpfs.conf:\n{text}"),
    }
    match edit_json_number(
        &text,
        |k| k.contains("iter") || k == "t" || k.contains("t_cost") || k == "time",
        "0",
    ) {
        Some(t) => cases.push(("Argon2 iterations weakened to 0".into(), t.into_bytes())),
        None => eprintln!("note: no Argon2 iterations field found in warpfs.conf:\n{text}"),
    }
    for key in ["\"feature_flags\"", "\"features\"", "\"flags\""] {
        if let Some(p) = text.find(key) {
            if let Some(open) = text[p..].find('[') {
                let at = p + open + 1;
                let close_empty = text[at..].trim_start().starts_with(']');
                let ins = if close_empty {
                    "\"FlagFromTheFuture\""
                } else {
                    "\"FlagFromTheFuture\","
                };
                cases.push((
                    format!("unknown feature flag in {key}"),
                    format!("{}{}{}", &text[..at], ins, &text[at..]).into_bytes(),
                ));
                break;
            }
        }
    }
    // Without FUSE the mount half cannot run: the test counts as skipped.
    let fuse = !warpfs_testkit::skip_if(fuse_unavailable());
    let mut failures = Vec::new();
    for (what, bytes) in &cases {
        fs::write(&conf_path, bytes).unwrap();
        let o = warpfs(args!["info", &v.cipher]);
        if o.code != Some(E_CONFIG) {
            failures.push(format!("info with config '{what}': expected exit {E_CONFIG}\n{o}"));
        }
        if fuse {
            let o = warpfs(args!["mount", "--passfile", &v.passfile, &v.cipher, &v.mnt]);
            if is_mounted(&v.mnt) {
                let _ = unmount_path(&v.mnt);
            }
            if o.code != Some(E_CONFIG) {
                failures.push(format!("mount with config '{what}': expected exit {E_CONFIG}\n{o}"));
            } else if o.stderr.trim().is_empty() {
                failures.push(format!(
                    "mount with config '{what}': exit {E_CONFIG} but no message on stderr"
                ));
            }
        }
        let o = warpfs(args![
            "passwd",
            "--passfile",
            &v.passfile,
            "--new-passfile",
            &v.passfile,
            &v.cipher
        ]);
        if o.code != Some(E_CONFIG) {
            failures.push(format!("passwd with config '{what}': expected exit {E_CONFIG}\n{o}"));
        }
        assert_eq!(
            &fs::read(&conf_path).unwrap(),
            bytes,
            "a refused command rewrote the corrupt config ('{what}')"
        );
    }
    // A missing config is an error too (1 or 11).
    fs::remove_file(&conf_path).unwrap();
    let o = warpfs(args!["info", &v.cipher]);
    if !matches!(o.code, Some(1) | Some(E_CONFIG)) {
        failures.push(format!("info without warpfs.conf: expected exit 1 or 11\n{o}"));
    }
    fs::write(&conf_path, &orig).unwrap();
    warpfs(args!["info", &v.cipher]).expect_ok("info after restoring the config");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
