//! Key handling as gocryptfs users know it: `--config FILE` on every
//! command that reads warpfs.conf, `passwd --masterkey stdin` for a
//! forgotten password (old config kept as a backup), `--force-owner
//! UID:GID`, `info --json`.

use crate::common::*;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Run `warpfs ARGS` with `input` on stdin; (exit code, stdout + stderr).
fn warpfs_stdin(args: Vec<std::ffi::OsString>, input: &str) -> (Option<i32>, String) {
    let mut c = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command refused before it reads stdin closes the pipe: not an error here.
    let _ = c.stdin.take().unwrap().write_all(input.as_bytes());
    let o = c.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

fn master_key(init_stdout: &str) -> String {
    init_stdout
        .split_whitespace()
        .find(|w| w.len() == 71 && w.matches('-').count() == 7)
        .unwrap_or_else(|| panic!("no master key in init output:\n{init_stdout}"))
        .to_string()
}

fn info_json(cipher: &Path, extra: &[&str]) -> serde_json::Value {
    let mut a = args!["info", "--json"];
    a.extend(extra.iter().map(std::ffi::OsString::from));
    a.push(cipher.into());
    let o = warpfs(a);
    o.expect_ok("info --json");
    assert_eq!(o.stdout.trim().lines().count(), 1, "one line: {o}");
    serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {o}"))
}

#[test]
fn a_config_file_elsewhere_works_with_every_command() {
    require_fuse!();
    let mut v = Volume::blank(Mode::Gcm);
    let keys = v.root().join("keys");
    fs::create_dir(&keys).unwrap();
    let conf = keys.join("private.conf");
    let c = conf.to_str().unwrap().to_string();
    warpfs(args!["init", "--passfile", &v.passfile, "--config", &c, &v.cipher]).expect_ok("init --config");
    assert!(conf.exists());
    assert!(
        !v.cipher.join("warpfs.conf").exists(),
        "the wrapped key is in CIPHERDIR"
    );
    // Without --config the volume has no config.
    warpfs(args!["info", &v.cipher]).expect_code(11, "info without --config");
    assert_eq!(info_json(&v.cipher, &["--config", &c])["content_mode"], "gcm");
    v.try_mount(&["--config", &c]).expect_ok("mount --config");
    write_file(&v.p("f"), b"kept apart");
    v.unmount();
    // The mount helper's -o config=.
    let opts = format!("passfile={},config={c}", v.passfile.display());
    let mut cmd = Command::new(BIN);
    cmd.arg(&v.cipher).arg(&v.mnt).arg("-o").arg(&opts);
    run_cmd(cmd, std::time::Duration::from_secs(60)).expect_ok("-o config=");
    assert_eq!(fs::read(v.p("f")).unwrap(), b"kept apart");
    unmount_path(&v.mnt).unwrap();
    warpfs(args!["fsck", "--passfile", &v.passfile, "--config", &c, &v.cipher]).expect_ok("fsck --config");
    warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_code(11, "fsck without --config");
    warpfs(args!["rekey", "--passfile", &v.passfile, "--config", &c, &v.cipher]).expect_ok("rekey --config");
    assert_eq!(info_json(&v.cipher, &["--config", &c])["key_generation"], 1);
    let newp = v.root().join("new.txt");
    fs::write(&newp, "another password\n").unwrap();
    warpfs(args![
        "passwd",
        "--passfile",
        &v.passfile,
        "--new-passfile",
        &newp,
        "--config",
        &c,
        &v.cipher
    ])
    .expect_ok("passwd --config");
    assert!(!v.cipher.join("warpfs.conf").exists());
    v.passfile = newp;
    v.try_mount(&["--config", &c]).expect_ok("mount with the new password");
    assert_eq!(fs::read(v.p("f")).unwrap(), b"kept apart");
}

#[test]
fn passwd_masterkey_resets_a_forgotten_password() {
    require_fuse!();
    let (mut v, o) = Volume::init_fresh(Mode::Gcm);
    o.expect_ok("init");
    let key = master_key(&o.stdout);
    v.mount();
    write_file(&v.p("secret.txt"), b"still readable");
    v.unmount();
    let old_conf = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    let newp = v.root().join("new.txt");
    fs::write(&newp, "a new password\n").unwrap();
    let cipher = v.cipher.clone();
    let reset = |input: &str| {
        warpfs_stdin(
            args!["passwd", "--masterkey", "stdin", "--new-passfile", &newp, &cipher],
            input,
        )
    };
    // Another volume's key is refused and changes nothing.
    let (_w, wo) = Volume::init_fresh(Mode::Gcm);
    let (code, out) = reset(&format!("{}\n", master_key(&wo.stdout)));
    assert_eq!(code, Some(10), "{out}");
    assert_eq!(fs::read(v.cipher.join("warpfs.conf")).unwrap(), old_conf);
    assert!(!v.cipher.join("warpfs.conf.bak").exists());
    let (code, out) = reset("garbage\n");
    assert_eq!(code, Some(10), "{out}");
    // The right key resets it; the old config is the backup.
    let (code, out) = reset(&format!("{key}\n"));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("warpfs.conf.bak"), "{out}");
    assert_eq!(fs::read(v.cipher.join("warpfs.conf.bak")).unwrap(), old_conf);
    v.try_mount(&[])
        .expect_code(10, "the forgotten password no longer opens it");
    v.passfile = newp.clone();
    v.mount();
    assert_eq!(fs::read(v.p("secret.txt")).unwrap(), b"still readable");
    let names: Vec<_> = fs::read_dir(&v.mnt).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["secret.txt"], "the backup is not shown in the mount");
    v.unmount();
    // A second reset keeps the first backup.
    let (code, out) = reset(&format!("{key}\n"));
    assert_eq!(code, Some(0), "{out}");
    assert!(v.cipher.join("warpfs.conf.bak.1").exists());
    assert_eq!(fs::read(v.cipher.join("warpfs.conf.bak")).unwrap(), old_conf);
    // --masterkey replaces the old password: no --passfile with it.
    let (code, _) = warpfs_stdin(
        args!["passwd", "--masterkey", "stdin", "--passfile", &newp, &v.cipher],
        &key,
    );
    assert_eq!(code, Some(2));
}

#[test]
fn force_owner_shows_every_file_as_owned_by_that_user() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    fs::create_dir(v.p("dir")).unwrap();
    write_file(&v.p("dir/file"), b"x");
    std::os::unix::fs::symlink("file", v.p("dir/link")).unwrap();
    v.unmount();
    v.mount_with(&["--force-owner", "1234:5678", "-o", "allow_other"]);
    for p in ["", "dir", "dir/file", "dir/link"] {
        let m = fs::symlink_metadata(v.p(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 5678), "{p:?}");
    }
    // Entries listed with their attributes (readdirplus) too.
    for e in fs::read_dir(v.p("dir")).unwrap() {
        let m = e.unwrap().metadata().unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 5678));
    }
    // New files as well; the backing files keep their real owner.
    write_file(&v.p("new"), b"y");
    assert_eq!(fs::metadata(v.p("new")).unwrap().uid(), 1234);
    for b in v.backing_paths() {
        assert_eq!(fs::symlink_metadata(&b).unwrap().uid(), 0, "{}", b.display());
    }
    v.unmount();
    v.try_mount(&["--force-owner", "nobody"])
        .expect_code(2, "--force-owner takes numbers");
}

#[test]
fn info_json_has_the_documented_fields() {
    require_fuse!();
    let mut v = Volume::new(Mode::Ctr);
    let j = info_json(&v.cipher, &[]);
    assert_eq!(j["schema"], 1);
    assert_eq!(j["content_mode"], "ctr");
    assert_eq!(j["cipher"], "AES");
    assert_eq!(j["authenticated"], false);
    assert_eq!(j["key_bits"], 256);
    assert_eq!(j["block_size"], 4096);
    assert_eq!(j["format_version"], 3, "a new volume is format 3 (FORMAT.md 6)");
    // Its keyslots: the password and a recovery key, nothing secret.
    let kinds: Vec<&str> = j["keyslots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["password", "recovery"]);
    assert!(j["keyslot_revision"].as_u64().unwrap() >= 1);
    assert_eq!(j["volume_rekey_unfinished"], false);
    assert_eq!(j["kdf"]["algorithm"], "argon2id");
    assert!(j["kdf"]["memory_kib"].as_u64().unwrap() >= 32768);
    assert_eq!(j["key_generation"], 0);
    assert!(j["rekey_target"].is_null());
    assert_eq!(j["cipherdir"], v.cipher.to_str().unwrap());
    assert_eq!(j["config"], v.cipher.join("warpfs.conf").to_str().unwrap());
    assert_eq!(j["mounted_at"], v.mnt.to_str().unwrap());
    assert!(j["feature_flags"].as_array().unwrap().iter().any(|f| f == "siv-names"));
    // Nothing secret: no salt, no wrapped key, no MAC.
    let text = j.to_string();
    let conf = fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap();
    let conf: serde_json::Value = serde_json::from_str(&conf).unwrap();
    let mut secrets = vec![&conf["mac"]];
    for s in conf["keyslots"].as_array().unwrap() {
        secrets.extend([&s["kdf"]["salt"], &s["wrapped_key"]["ciphertext"]]);
    }
    for secret in secrets {
        assert!(!text.contains(secret.as_str().unwrap()), "info --json shows {secret}");
    }
    v.unmount();
    assert!(info_json(&v.cipher, &[])["mounted_at"].is_null());
    // The documented failure codes hold for --json too.
    let empty = tempfile::tempdir().unwrap();
    warpfs(args!["info", "--json", empty.path()]).expect_code(11, "no config");
}
