//! Slots of every kind mount; `key list`, `key add`, `key remove`;
//! `passwd` changes the slot it opened; a slot table changed without the
//! volume key is refused; an older config keeps opening and `key add`
//! converts it.

use super::*;

#[test]
fn every_kind_of_slot_mounts_and_a_removed_one_does_not() {
    require_fuse!();
    let (v, rk) = fresh(&[]);
    let conf = v.cipher.join("warpfs.conf");
    let (pw2, kf) = (file(&v, "pw2", "second password\n"), file(&v, "kf", "keyfile bytes"));
    let pw3 = file(&v, "pw3", "third, with the keyfile\n");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let pass = s(&v.passfile);
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &pass,
        "--password",
        "--new-passfile",
        &pw2,
        "--label",
        "laptop",
        &v.cipher
    ])
    .expect_ok("add a password");
    warpfs(args!["key", "add", "--passfile", &pw2, "--keyfile", &kf, &v.cipher]).expect_ok("add a keyfile");
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &pass,
        "--password",
        "--keyfile",
        &kf,
        "--new-passfile",
        &pw3,
        &v.cipher
    ])
    .expect_ok("add a password+keyfile");
    let o = with_stdin(
        args![
            "key",
            "add",
            "--masterkey",
            "stdin",
            "--recovery",
            "--label",
            "safe",
            &v.cipher
        ],
        &rk,
    );
    o.expect_ok("add a recovery slot, opened by the recovery key");
    let rk2 = o.stdout.split_whitespace().find(|w| w.len() == 71).unwrap().to_string();
    assert_ne!(rk2, rk);
    let want = [
        (0, "password"),
        (1, "recovery"),
        (2, "password"),
        (3, "keyfile"),
        (4, "password+keyfile"),
        (5, "recovery"),
    ];
    let want: Vec<(u64, String)> = want.iter().map(|(i, k)| (*i, k.to_string())).collect();
    assert_eq!(kinds(&v), want);
    let j = key_list(&v);
    assert_eq!(j["keyslots"][2]["label"], "laptop");
    assert_eq!(j["verified"], false);
    // Nothing secret in the listing or in info.
    for o in [
        warpfs(args!["key", "list", &v.cipher]),
        warpfs(args!["info", "--json", &v.cipher]),
    ] {
        o.expect_ok("listing");
        for t in [&rk, &rk2, PASSWORD, "second password"] {
            assert!(!o.stdout.contains(t), "{o}");
        }
    }
    // Each slot mounts.
    let mut m = v;
    m.mount();
    write_file(&m.p("f"), b"opened by every slot");
    m.unmount();
    let v = m;
    for key in [
        vec!["--passfile", &pass],
        vec!["--passfile", pw2.to_str().unwrap()],
        vec!["--keyfile", kf.to_str().unwrap(), "--keyfile-only"],
        vec!["--passfile", pw3.to_str().unwrap(), "--keyfile", kf.to_str().unwrap()],
    ] {
        mount_with(&v, &key).expect_ok(&format!("mount {key:?}"));
        assert_eq!(fs::read(v.p("f")).unwrap(), b"opened by every slot");
        unmount_path(&v.mnt).unwrap();
    }
    for r in [&rk, &rk2] {
        let mut a = args!["mount", "--masterkey", "stdin"];
        a.extend([v.cipher.clone().into(), v.mnt.clone().into()]);
        with_stdin(a, r).expect_ok("mount with a recovery key");
        assert_eq!(fs::read(v.p("f")).unwrap(), b"opened by every slot");
        unmount_path(&v.mnt).unwrap();
    }
    // A secret of another kind opens nothing (the keyfile's password is
    // not a password slot's).
    mount_with(&v, &["--passfile", pw3.to_str().unwrap()]).expect_code(E_WRONG, "pw3 alone");
    // Adding or removing needs an existing slot; a refused command writes nothing.
    let before = fs::read(&conf).unwrap();
    let wrong = file(&v, "wrong", "not a slot's\n");
    warpfs(args!["key", "add", "--passfile", &wrong, "--recovery", &v.cipher]).expect_code(E_WRONG, "add, wrong");
    warpfs(args!["key", "remove", "--passfile", &wrong, &v.cipher, "2"]).expect_code(E_WRONG, "remove, wrong");
    warpfs(args!["key", "remove", "--passfile", &pass, &v.cipher, "9"]).expect_code(1, "no slot 9");
    warpfs(args!["key", "add", "--passfile", &pass, &v.cipher]).expect_code(2, "add what?");
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &pass,
        "--recovery",
        "--label",
        &"x".repeat(65),
        &v.cipher
    ])
    .expect_code(2, "label too long");
    assert_eq!(fs::read(&conf).unwrap(), before);
    // Remove the keyfile slot: it no longer mounts; the rest do.
    let o = warpfs(args!["key", "remove", "--passfile", &pw2, &v.cipher, "3"]);
    o.expect_ok("remove slot 3");
    assert!(
        o.stderr.contains("--rekey"),
        "the removal says what it does not do: {o}"
    );
    mount_with(&v, &["--keyfile", kf.to_str().unwrap(), "--keyfile-only"]).expect_code(E_WRONG, "removed slot");
    mount_with(&v, &["--passfile", &pass]).expect_ok("slot 0 still");
    unmount_path(&v.mnt).unwrap();
    // The slot that opened may remove itself; the last one may not go.
    for id in ["0", "1", "4", "5"] {
        warpfs(args!["key", "remove", "--passfile", &pw2, &v.cipher, id]).expect_ok("remove");
    }
    let o = warpfs(args!["key", "remove", "--passfile", &pw2, &v.cipher, "2"]);
    o.expect_code(1, "the last slot");
    assert!(o.stderr.contains("only one"), "{o}");
    // passwd changes the slot it opened.
    let pw4 = file(&v, "pw4", "fourth\n");
    let o = warpfs(args!["passwd", "--passfile", &pw2, "--new-passfile", &pw4, &v.cipher]);
    o.expect_ok("passwd");
    assert!(o.stdout.contains("keyslot 2"), "{o}");
    mount_with(&v, &["--passfile", pw4.to_str().unwrap()]).expect_ok("new password");
    unmount_path(&v.mnt).unwrap();
}

#[test]
fn a_slot_table_changed_without_the_volume_key_is_refused() {
    require_fuse!();
    let (v, _) = fresh(&[]);
    let conf = v.cipher.join("warpfs.conf");
    let orig = fs::read_to_string(&conf).unwrap();
    let mut edits: Vec<(&str, String)> = vec![
        ("a slot dropped", {
            let mut j: serde_json::Value = serde_json::from_str(&orig).unwrap();
            j["keyslots"].as_array_mut().unwrap().remove(1);
            serde_json::to_string_pretty(&j).unwrap()
        }),
        ("a label", orig.replacen("\"label\": \"\"", "\"label\": \"mine\"", 1)),
        ("the revision", {
            let mut j: serde_json::Value = serde_json::from_str(&orig).unwrap();
            j["revision"] = 99.into();
            serde_json::to_string_pretty(&j).unwrap()
        }),
        ("a slot copied in", {
            let mut j: serde_json::Value = serde_json::from_str(&orig).unwrap();
            let mut s = j["keyslots"][0].clone();
            s["id"] = 5.into();
            j["keyslots"].as_array_mut().unwrap().push(s);
            serde_json::to_string_pretty(&j).unwrap()
        }),
    ];
    edits.retain(|(what, t)| {
        assert_ne!(t, &orig, "{what}: the edit did not apply");
        true
    });
    for (what, text) in edits {
        fs::write(&conf, &text).unwrap();
        let o = mount_with(&v, &["--passfile", v.passfile.to_str().unwrap()]);
        if is_mounted(&v.mnt) {
            let _ = unmount_path(&v.mnt);
        }
        o.expect_code(E_CONFIG, what);
        assert!(o.stderr.contains("altered"), "{what}: {o}");
        warpfs(args!["key", "add", "--passfile", &v.passfile, "--recovery", &v.cipher]).expect_code(E_CONFIG, what);
        assert_eq!(fs::read_to_string(&conf).unwrap(), text, "{what}: rewritten");
    }
    fs::write(&conf, &orig).unwrap();
    mount_with(&v, &["--passfile", v.passfile.to_str().unwrap()]).expect_ok("the original");
    unmount_path(&v.mnt).unwrap();
}

#[test]
fn an_older_config_keeps_opening_and_key_add_converts_it() {
    require_fuse!();
    let vols = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/volumes/v2-gcm");
    let mut v = Volume::blank(Mode::Gcm);
    copy_tree(&vols.join("cipher"), &v.cipher);
    fs::copy(vols.join("password.txt"), &v.passfile).unwrap();
    let want = snapshot(&vols.join("expected"));
    let o = warpfs(args!["key", "list", &v.cipher]);
    o.expect_ok("key list");
    assert!(o.stdout.contains("no keyslots"), "{o}");
    // The master key its init printed mounts it, before and after the
    // conversion (then checked by the config's MAC).
    let master = Config::load(&v.cipher)
        .unwrap()
        .unlock(fs::read_to_string(&v.passfile).unwrap().trim_end().as_bytes())
        .unwrap()
        .recovery_text();
    let by_master = |v: &Volume| {
        let mut a = args!["mount", "--masterkey", "stdin"];
        a.extend([v.cipher.clone().into(), v.mnt.clone().into()]);
        with_stdin(a, &master)
    };
    by_master(&v).expect_ok("mount --masterkey, format 2");
    assert_snapshots_eq(&snapshot(&v.mnt), &want, "by the master key");
    unmount_path(&v.mnt).unwrap();
    let pw2 = file(&v, "pw2", "a second password\n");
    let o = warpfs(args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--password",
        "--new-passfile",
        &pw2,
        &v.cipher
    ]);
    o.expect_ok("key add on a version 2 config");
    assert!(o.stderr.contains("keyslots"), "{o}");
    let c = Config::load(&v.cipher).unwrap();
    assert_eq!((c.version(), c.slots().len()), (3, 2));
    by_master(&v).expect_ok("mount --masterkey, converted");
    unmount_path(&v.mnt).unwrap();
    for pw in [v.passfile.clone(), pw2] {
        v.passfile = pw;
        v.mount();
        assert_snapshots_eq(&snapshot(&v.mnt), &want, "converted");
        v.unmount();
    }
}
