//! Keyslots through the command line and real mounts (FORMAT.md 2.6,
//! 10.5): a volume mounts by each kind of slot, `warpfs key list/add/
//! remove`, a slot table edited without the volume key is refused, an
//! older config becomes a keyslot config, and `key remove --rekey`
//! revokes for good: a config copy from before, opened with the removed
//! password, gives keys that decrypt no block and no name of the volume
//! (checked here through the library), also after a rekey killed part way
//! and finished by `warpfs rekey`.

#[macro_use]
mod common;

use common::*;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use warpfs_config::{Config, Input};
use warpfs_crypto::keys::Subkeys;

const E_WRONG: i32 = 10;
const E_CONFIG: i32 = 11;
const E_UNFINISHED: i32 = 14;

/// A fresh volume (fast KDF) with `extra` init arguments; its recovery key.
fn fresh(extra: &[&str]) -> (Volume, String) {
    let v = Volume::blank(Mode::Gcm);
    let mut a = args![
        "init",
        "--passfile",
        &v.passfile,
        "--kdf-memory",
        "32768",
        "--kdf-iterations",
        "2"
    ];
    a.extend(extra.iter().map(OsString::from));
    a.push(v.cipher.clone().into());
    let o = warpfs(a);
    o.expect_ok("init");
    let rk = o
        .stdout
        .split_whitespace()
        .find(|w| w.len() == 71 && w.matches('-').count() == 7)
        .unwrap_or_else(|| panic!("no recovery key printed:\n{o}"))
        .to_string();
    (v, rk)
}

fn file(v: &Volume, name: &str, body: &str) -> PathBuf {
    let p = v.root().join(name);
    fs::write(&p, body).unwrap();
    p
}

/// Run warpfs with `input` on standard input.
fn with_stdin(args: Vec<OsString>, input: &str) -> Out {
    let mut c = Command::new(BIN)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = c.stdin.take().unwrap().write_all(input.as_bytes());
    let o = c.wait_with_output().unwrap();
    Out {
        what: format!("{args:?}"),
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn mount_with(v: &Volume, key: &[&str]) -> Out {
    let mut a = args!["mount", "--log-file", &v.logfile];
    a.extend(key.iter().map(OsString::from));
    a.push(v.cipher.clone().into());
    a.push(v.mnt.clone().into());
    warpfs(a)
}

fn key_list(v: &Volume) -> serde_json::Value {
    let o = warpfs(args!["key", "list", "--json", &v.cipher]);
    o.expect_ok("key list --json");
    serde_json::from_str(o.stdout.trim()).unwrap()
}

fn kinds(v: &Volume) -> Vec<(u64, String)> {
    key_list(v)["keyslots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_u64().unwrap(), s["kind"].as_str().unwrap().to_string()))
        .collect()
}

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
    for pw in [v.passfile.clone(), pw2] {
        v.passfile = pw;
        v.mount();
        assert_snapshots_eq(&snapshot(&v.mnt), &want, "converted");
        v.unmount();
    }
}

/// Every key the volume key `k` gives for content (generations 0 to 3)
/// and names: none may decrypt a block or a name of the volume at `dir`.
fn nothing_decrypts(dir: &Path, k: &warpfs_crypto::MasterKey, old_ivs: &[[u8; 16]]) -> (u64, u64) {
    use std::os::unix::fs::FileExt;
    let names = Subkeys::derive(k, 256).names;
    let content: Vec<_> = (0..4).map(|g| Subkeys::derive_gen(k, 256, g).content).collect();
    let mut ivs = old_ivs.to_vec();
    let (mut blocks, mut checked_names) = (0, 0);
    let mut all = Vec::new();
    walk(dir, &mut all);
    for p in &all {
        if p.file_name().unwrap() == "warpfs.diriv" {
            ivs.push(fs::read(p).unwrap().try_into().unwrap());
        }
    }
    for p in &all {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let enc = if name.starts_with("warpfs.long.") && name.ends_with(".name") {
            fs::read_to_string(p).unwrap()
        } else if name.starts_with("warpfs.") {
            String::new()
        } else {
            name.clone()
        };
        if !enc.is_empty() {
            checked_names += 1;
            for iv in &ivs {
                assert!(
                    names.decrypt_name(iv, &enc).is_err(),
                    "{name} decrypts with the old key"
                );
            }
        }
        let md = p.symlink_metadata().unwrap();
        let content_file = !name.starts_with("warpfs.") || !name.ends_with(".name") && name.starts_with("warpfs.long.");
        if !md.is_file() || md.len() < 544 || !content_file {
            continue;
        }
        let f = fs::File::open(p).unwrap();
        let mut h = [0u8; 32];
        f.read_exact_at(&mut h, 0).unwrap();
        let id = &h[8..24];
        let body = md.len() - 544;
        // Blocks of the nnode (the volumes here keep files under 64 KiB).
        for b in 0..body.div_ceil(4096).min(16) {
            let mut e = [0u8; 32];
            f.read_exact_at(&mut e, 32 + 32 * b).unwrap();
            if e[..12] == [0; 12] {
                continue;
            }
            let len = (body - 4096 * b).min(4096) as usize;
            let mut data = vec![0u8; len];
            f.read_exact_at(&mut data, 544 + 4096 * b).unwrap();
            let mut aad = id.to_vec();
            aad.extend_from_slice(&b.to_be_bytes());
            let nonce: [u8; 12] = e[..12].try_into().unwrap();
            let tag: [u8; 16] = e[16..].try_into().unwrap();
            for c in &content {
                let ej0 = warpfs_crypto::gcm::tag_mask(c, &nonce);
                assert!(
                    !warpfs_crypto::GcmTagger::new(c).verify(&aad, &data, &ej0, &tag),
                    "{name} block {b} decrypts with the old key"
                );
            }
            blocks += 1;
        }
    }
    (blocks, checked_names)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.symlink_metadata().unwrap().is_dir() {
            walk(&p, out);
        }
        out.push(p);
    }
}

fn ivs_of(dir: &Path) -> Vec<[u8; 16]> {
    let mut all = Vec::new();
    walk(dir, &mut all);
    all.iter()
        .filter(|p| p.file_name().unwrap() == "warpfs.diriv")
        .map(|p| fs::read(p).unwrap().try_into().unwrap())
        .collect()
}

/// A volume with summaries, a second password (to revoke) and a tree.
fn revocable() -> (Volume, PathBuf, std::collections::BTreeMap<PathBuf, Node>) {
    let (mut v, _) = fresh(&["--file-summary", "on"]);
    let gone = file(&v, "gone", "the password to revoke\n");
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--password",
        "--new-passfile",
        &gone,
        "--label",
        "old laptop",
        &v.cipher
    ])
    .expect_ok("add");
    v.mount();
    write_file(&v.p("a.txt"), b"alpha");
    fs::create_dir_all(v.p("d/e")).unwrap();
    write_file(&v.p("d/e/b.bin"), &vec![7u8; 20000]);
    write_file(&v.p(format!("d/{}", "n".repeat(200))), b"long name");
    std::os::unix::fs::symlink("a.txt", v.p("link")).unwrap();
    std::os::unix::fs::symlink("../a.txt", v.p("d/up")).unwrap();
    let want = snapshot(&v.mnt);
    v.unmount();
    (v, gone, want)
}

#[test]
fn key_remove_rekey_leaves_an_old_config_nothing_to_decrypt() {
    require_fuse!();
    let (mut v, gone, want) = revocable();
    let old_conf = v.root().join("old.conf");
    fs::copy(v.cipher.join("warpfs.conf"), &old_conf).unwrap();
    let old_ivs = ivs_of(&v.cipher);
    // Mounted: refused, nothing changes.
    v.mount();
    let o = warpfs(args![
        "key",
        "remove",
        "--passfile",
        &v.passfile,
        "--rekey",
        "--yes",
        &v.cipher,
        "2"
    ]);
    o.expect_code(1, "mounted");
    assert!(o.stderr.contains("unmount"), "{o}");
    v.unmount();
    // Off a terminal it needs --yes; then it says what it does.
    warpfs(args![
        "key",
        "remove",
        "--passfile",
        &v.passfile,
        "--rekey",
        &v.cipher,
        "2"
    ])
    .expect_code(2, "no --yes");
    let o = warpfs(args![
        "key",
        "remove",
        "--passfile",
        &v.passfile,
        "--rekey",
        "--yes",
        &v.cipher,
        "2"
    ]);
    o.expect_ok("key remove --rekey");
    assert!(o.stderr.contains("every backing name changes"), "{o}");
    assert!(o.stderr.contains("dropped: keyslot 1 (recovery)"), "{o}");
    assert!(o.stderr.contains("no recovery slot is left"), "{o}");
    v.mount();
    assert_snapshots_eq(&snapshot(&v.mnt), &want, "after the rekey");
    v.unmount();
    mount_with(&v, &["--passfile", gone.to_str().unwrap()]).expect_code(E_WRONG, "the removed password");
    // The CLI refuses the old config as older...
    let o = mount_with(
        &v,
        &[
            "--passfile",
            gone.to_str().unwrap(),
            "--config",
            old_conf.to_str().unwrap(),
        ],
    );
    o.expect_code(E_CONFIG, "the old config");
    assert!(o.stderr.contains("older"), "{o}");
    // ...and the library shows why that is not what protects the volume:
    // the old config, opened with the removed password, gives a volume key
    // under which no block and no name of the volume decrypts.
    let old = Config::load_file(&old_conf).unwrap();
    let gone_pw = fs::read_to_string(&gone).unwrap();
    let k = old
        .open(&Input::Secret {
            bytes: gone_pw.trim_end().as_bytes(),
            kind: None,
        })
        .unwrap()
        .key;
    let (blocks, names) = nothing_decrypts(&v.cipher, &k, &old_ivs);
    assert!(blocks >= 7 && names >= 7, "{blocks} blocks, {names} names checked");
    // The new key does decrypt them (the check above can fail).
    let now = Config::load(&v.cipher).unwrap().unlock(PASSWORD.as_bytes()).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| nothing_decrypts(&v.cipher, &now, &[])));
    assert!(r.is_err(), "the check finds the new key's names");
}

#[test]
fn a_killed_volume_key_rekey_is_finished_by_warpfs_rekey() {
    require_fuse!();
    for kill in ["config:0", "data:2", "name:3", "dir:2"] {
        let (mut v, gone, want) = revocable();
        let mut c = Command::new(BIN);
        c.args(["key", "remove", "--passfile"])
            .arg(&v.passfile)
            .args(["--rekey", "--yes", "--jobs", "1"])
            .arg(&v.cipher)
            .arg("2")
            .env("WARPFS_REKEY_KILL", kill);
        let o = run_cmd(c, std::time::Duration::from_secs(120));
        assert_eq!(o.code, None, "{kill}: not killed\n{o}");
        let cfg = Config::load(&v.cipher).unwrap();
        assert!(cfg.volume_rekey_under_way(), "{kill}");
        // Until it is finished nothing else opens the volume.
        let o = v.try_mount(&[]);
        o.expect_code(E_UNFINISHED, kill);
        assert!(o.stderr.contains("warpfs rekey"), "{o}");
        warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_code(E_UNFINISHED, kill);
        // The removed password is already gone from the config.
        warpfs(args!["rekey", "--passfile", &gone, &v.cipher]).expect_code(E_WRONG, kill);
        let o = warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]);
        o.expect_ok(&format!("{kill}: warpfs rekey finishes it"));
        assert!(o.stderr.contains("finishing"), "{o}");
        assert!(!Config::load(&v.cipher).unwrap().volume_rekey_under_way());
        v.mount();
        assert_snapshots_eq(&snapshot(&v.mnt), &want, kill);
        v.unmount();
        let mut all = Vec::new();
        walk(&v.cipher, &mut all);
        assert!(
            all.iter().all(|p| !p.to_string_lossy().contains("warpfs.rekey")),
            "{kill}: {all:?}"
        );
    }
}

#[test]
fn rekey_new_volume_key_keeps_the_slots_whose_secrets_are_given() {
    require_fuse!();
    let (mut v, rk) = fresh(&[]);
    let rkf = file(&v, "rk", &rk);
    let kf = file(&v, "kf", "key bytes");
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--keyfile",
        &kf,
        &v.cipher
    ])
    .expect_ok("add keyfile");
    v.mount();
    write_file(&v.p("x"), b"kept");
    v.unmount();
    let keep_rk = format!("1=recovery:{}", rkf.display());
    let keep_kf = format!("2=keyfile:{}", kf.display());
    let bad = format!("2=keyfile:{}", rkf.display());
    warpfs(args![
        "rekey",
        "--passfile",
        &v.passfile,
        "--new-volume-key",
        "--yes",
        "--keep",
        &bad,
        &v.cipher
    ])
    .expect_code(E_WRONG, "a --keep secret that does not open its slot");
    warpfs(args!["rekey", "--passfile", &v.passfile, "--keep", &keep_rk, &v.cipher]).expect_code(2, "--keep alone");
    let o = warpfs(args![
        "rekey",
        "--passfile",
        &v.passfile,
        "--new-volume-key",
        "--yes",
        "--keep",
        &keep_rk,
        "--keep",
        &keep_kf,
        &v.cipher
    ]);
    o.expect_ok("rekey --new-volume-key");
    let ids: Vec<u64> = kinds(&v).into_iter().map(|(i, _)| i).collect();
    assert_eq!(ids, [0, 1, 2], "every slot kept");
    mount_with(&v, &["--keyfile", kf.to_str().unwrap(), "--keyfile-only"]).expect_ok("keyfile");
    assert_eq!(fs::read(v.p("x")).unwrap(), b"kept");
    unmount_path(&v.mnt).unwrap();
    let mut a = args!["mount", "--masterkey", "stdin"];
    a.extend([v.cipher.clone().into(), v.mnt.clone().into()]);
    with_stdin(a, &rk).expect_ok("recovery key");
    unmount_path(&v.mnt).unwrap();
    // Without --keep, only the slot that unlocked stays.
    warpfs(args![
        "rekey",
        "--passfile",
        &v.passfile,
        "--new-volume-key",
        "--yes",
        &v.cipher
    ])
    .expect_ok("rekey");
    assert_eq!(kinds(&v), [(0, "password".to_string())]);
}
