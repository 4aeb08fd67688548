//! The command-line contract: init / mount / passwd / info, exit codes
//! (0 ok, 1 error, 2 usage, 10 wrong password, 11 bad config, 12 CIPHERDIR
//! not empty, 13 mount failed), daemon and foreground mounts, read-only.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File};
use std::time::{Duration, Instant};

const E_USAGE: i32 = 2;
const E_PASSWORD: i32 = 10;
const E_CONFIG: i32 = 11;
const E_NOT_EMPTY: i32 = 12;
const E_MOUNT: i32 = 13;

fn sorted_names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Tokens of `text` that look like key material (8+ chars of [A-Za-z0-9+/_]
/// with at least one digit).
fn key_like_tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '_'))
        .filter(|t| t.len() >= 8 && t.chars().any(|c| c.is_ascii_digit()))
        .map(|t| t.to_string())
        .collect()
}

#[test]
fn init_creates_volume_and_prints_recovery_text() {
    let (v, o) = Volume::init_fresh(Mode::Gcm);
    o.expect_ok("init --mode gcm");
    assert!(
        !o.stdout.trim().is_empty(),
        "init printed no master-key recovery text\n{o}"
    );
    assert_eq!(
        sorted_names(&v.cipher),
        ["warpfs.conf", "warpfs.diriv"],
        "cipher dir after init"
    );
    assert_eq!(
        fs::metadata(v.cipher.join("warpfs.diriv")).unwrap().len(),
        16,
        "warpfs.diriv is 16 bytes"
    );
    let conf = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    assert!(
        !contains(&conf, PASSWORD.as_bytes()),
        "warpfs.conf contains the password"
    );
    // The recovery text is not in the config.
    let conf_s = String::from_utf8_lossy(&conf);
    for t in key_like_tokens(&o.stdout) {
        if t.len() >= 16 {
            assert!(!conf_s.contains(&t), "warpfs.conf contains the recovery text token {t}");
        }
    }
    // Two inits make different keys / IVs.
    let (v2, o2) = Volume::init_fresh(Mode::Gcm);
    o2.expect_ok("second init");
    assert_ne!(
        fs::read(v.cipher.join("warpfs.diriv")).unwrap(),
        fs::read(v2.cipher.join("warpfs.diriv")).unwrap(),
        "two volumes have the same root IV"
    );
    assert_ne!(o.stdout, o2.stdout, "two volumes printed the same recovery text");
}

#[test]
fn init_default_mode_is_gcm_and_info_reports_it() {
    let v = Volume::blank(Mode::Gcm);
    warpfs(args!["init", "--passfile", &v.passfile, &v.cipher]).expect_ok("init without --mode");
    let o = warpfs(args!["info", &v.cipher]);
    o.expect_ok("info");
    assert!(
        o.stdout.to_lowercase().contains("gcm"),
        "info of a default volume does not say gcm\n{o}"
    );
}

#[test]
fn info_prints_mode_version_kdf_and_no_key() {
    for mode in [Mode::Gcm, Mode::Ctr] {
        let (v, init) = Volume::init_fresh(mode);
        init.expect_ok("init");
        let o = warpfs(args!["info", &v.cipher]);
        o.expect_ok("info (no password needed)");
        let out = o.stdout.to_lowercase();
        assert!(
            out.contains(mode.name()),
            "info does not print mode {}\n{o}",
            mode.name()
        );
        let other = if mode == Mode::Gcm { "ctr" } else { "gcm" };
        let mode_lines: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("mode") && !l.contains("wrap"))
            .collect();
        assert!(
            mode_lines.iter().any(|l| l.contains(mode.name())) && !mode_lines.iter().any(|l| l.contains(other)),
            "info of a {} volume: its mode line(s) {mode_lines:?} should name {} only\n{o}",
            mode.name(),
            mode.name()
        );
        assert!(
            out.contains("version") && out.contains('1'),
            "info does not print format version 1\n{o}"
        );
        assert!(out.contains("argon2"), "info does not print the KDF (Argon2id)\n{o}");
        for t in key_like_tokens(&init.stdout) {
            assert!(!o.stdout.contains(&t), "info prints recovery-text token {t}\n{o}");
        }
        assert!(!o.stdout.contains(PASSWORD), "info prints the password");
    }
}

#[test]
fn init_refuses_non_empty_dir() {
    let v = Volume::blank(Mode::Gcm);
    fs::write(v.cipher.join("existing.txt"), b"keep me").unwrap();
    let before = dir_state(&v.cipher);
    let o = warpfs(args!["init", "--passfile", &v.passfile, &v.cipher]);
    o.expect_code(E_NOT_EMPTY, "init on a non-empty dir");
    assert_eq!(dir_state(&v.cipher), before, "init on a non-empty dir changed it");
    assert_eq!(fs::read(v.cipher.join("existing.txt")).unwrap(), b"keep me");

    // A hidden file counts too.
    let v = Volume::blank(Mode::Gcm);
    fs::write(v.cipher.join(".hidden"), b"").unwrap();
    warpfs(args!["init", "--passfile", &v.passfile, &v.cipher]).expect_code(E_NOT_EMPTY, "init with a hidden file");

    // Init twice: refused, config unchanged.
    let (v, o) = Volume::init_fresh(Mode::Ctr);
    o.expect_ok("init");
    let conf = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    warpfs(args!["init", "--passfile", &v.passfile, "--mode", "gcm", &v.cipher])
        .expect_code(E_NOT_EMPTY, "second init");
    assert_eq!(
        fs::read(v.cipher.join("warpfs.conf")).unwrap(),
        conf,
        "second init touched warpfs.conf"
    );
}

#[test]
fn usage_errors_exit_2() {
    let v = Volume::blank(Mode::Gcm);
    warpfs(Vec::<String>::new()).expect_code(E_USAGE, "no arguments");
    warpfs(["no-such-command"]).expect_code(E_USAGE, "unknown subcommand");
    warpfs(args!["init", "--mode", "rot13", "--passfile", &v.passfile, &v.cipher]).expect_code(E_USAGE, "bad --mode");
    warpfs(args!["init", "--no-such-flag", &v.cipher]).expect_code(E_USAGE, "unknown flag");
    warpfs(args!["mount", "--passfile", &v.passfile, &v.cipher]).expect_code(E_USAGE, "mount without MOUNTPOINT");
    warpfs(args!["info"]).expect_code(E_USAGE, "info without CIPHERDIR");
    assert!(
        sorted_names(&v.cipher).is_empty(),
        "a usage error wrote into the cipher dir"
    );
}

#[test]
fn init_with_extpass_and_passfile_first_line() {
    let v = Volume::blank(Mode::Gcm);
    // extpass prints the password; init must take it.
    let cmd = format!("cat {}", v.passfile.display());
    warpfs(args!["init", "--extpass", &cmd, "--mode", "ctr", &v.cipher]).expect_ok("init --extpass");
    // Only the first line of a passfile is the password; a missing newline is fine.
    let multi = v.root().join("multi.txt");
    fs::write(&multi, format!("{PASSWORD}\nsecond line\n")).unwrap();
    let bare = v.root().join("bare.txt");
    fs::write(&bare, PASSWORD).unwrap();
    let newp = v.root().join("new.txt");
    fs::write(&newp, "another password\n").unwrap();
    // passwd verifies the old password without mounting.
    warpfs(args![
        "passwd",
        "--passfile",
        &multi,
        "--new-passfile",
        &bare,
        &v.cipher
    ])
    .expect_ok("passwd with a multi-line passfile (first line is the password)");
    warpfs(args!["passwd", "--passfile", &bare, "--new-passfile", &newp, &v.cipher])
        .expect_ok("passwd with a passfile without trailing newline");
    let cmd = format!("cat {}", newp.display());
    warpfs(args![
        "passwd",
        "--extpass",
        &cmd,
        "--new-passfile",
        &v.passfile,
        &v.cipher
    ])
    .expect_ok("passwd --extpass");
}

#[test]
fn wrong_password_refused_and_nothing_written() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("file"), b"secret");
    fs::create_dir(v.p("dir")).unwrap();
    v.unmount();
    let wrong = v.root().join("wrong.txt");
    fs::write(&wrong, "not the password\n").unwrap();
    let before = dir_state(&v.cipher);
    std::thread::sleep(Duration::from_millis(20)); // make any mtime change visible
    let o = warpfs(args![
        "mount",
        "--passfile",
        &wrong,
        "--log-file",
        &v.logfile,
        &v.cipher,
        &v.mnt
    ]);
    o.expect_code(E_PASSWORD, "mount with a wrong password");
    assert!(!is_mounted(&v.mnt), "mounted with a wrong password");
    assert!(sorted_names(&v.mnt).is_empty());
    assert_eq!(
        dir_state(&v.cipher),
        before,
        "mount with a wrong password changed the cipher dir"
    );
    let cmd = "echo also-wrong";
    let o = warpfs(args!["mount", "--extpass", cmd, &v.cipher, &v.mnt]);
    o.expect_code(E_PASSWORD, "mount with a wrong --extpass password");
    let newp = v.root().join("new.txt");
    fs::write(&newp, "new password\n").unwrap();
    warpfs(args![
        "passwd",
        "--passfile",
        &wrong,
        "--new-passfile",
        &newp,
        &v.cipher
    ])
    .expect_code(E_PASSWORD, "passwd with a wrong old password");
    assert_eq!(dir_state(&v.cipher), before, "refused commands changed the cipher dir");
    // The right password still works.
    v.mount();
    assert_eq!(fs::read(v.p("file")).unwrap(), b"secret");
}

#[test]
fn passwd_changes_password() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("file"), b"data survives passwd");
    v.unmount();
    let names_before = sorted_names(&v.cipher);
    let diriv = fs::read(v.cipher.join("warpfs.diriv")).unwrap();
    let conf_before = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    let old = v.passfile.clone();
    let newp = v.root().join("new.txt");
    fs::write(&newp, "a brand new password\n").unwrap();
    warpfs(args!["passwd", "--passfile", &old, "--new-passfile", &newp, &v.cipher]).expect_ok("passwd");
    assert_eq!(
        sorted_names(&v.cipher),
        names_before,
        "passwd left extra files in the cipher dir"
    );
    assert_eq!(fs::read(v.cipher.join("warpfs.diriv")).unwrap(), diriv);
    assert_ne!(
        fs::read(v.cipher.join("warpfs.conf")).unwrap(),
        conf_before,
        "passwd did not rewrite warpfs.conf"
    );
    let o = v.try_mount(&[]);
    o.expect_code(E_PASSWORD, "mount with the old password after passwd");
    v.passfile = newp;
    v.mount();
    assert_eq!(fs::read(v.p("file")).unwrap(), b"data survives passwd");
}

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

#[test]
fn mount_failures_exit_13() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    let missing = v.root().join("no-such-dir");
    let o = warpfs(args!["mount", "--passfile", &v.passfile, &v.cipher, &missing]);
    o.expect_code(E_MOUNT, "mount on a missing mountpoint");
    let file = v.root().join("a-file");
    File::create(&file).unwrap();
    let o = warpfs(args!["mount", "--passfile", &v.passfile, &v.cipher, &file]);
    o.expect_code(E_MOUNT, "mount on a regular file");
    assert!(!is_mounted(&file));
    v.mount();
    write_file(&v.p("x"), b"x");
    // A cipher dir that was never initialised.
    let empty = v.root().join("empty-cipher");
    let mnt2 = v.root().join("mnt2");
    fs::create_dir(&empty).unwrap();
    fs::create_dir(&mnt2).unwrap();
    let o = warpfs(args!["mount", "--passfile", &v.passfile, &empty, &mnt2]);
    assert!(
        matches!(o.code, Some(1) | Some(E_CONFIG)),
        "mount of an uninitialised dir: expected exit 1 or 11\n{o}"
    );
    assert!(!is_mounted(&mnt2));
}

#[test]
fn mount_returns_when_live_and_daemon_exits_on_unmount() {
    require_fuse!();
    let v = Volume::init(Mode::Ctr);
    let o = warpfs(args![
        "mount",
        "--passfile",
        &v.passfile,
        "--log-file",
        &v.logfile,
        &v.cipher,
        &v.mnt
    ]);
    o.expect_ok("mount");
    let live = is_mounted(&v.mnt);
    let pids = daemon_pids(&v.mnt);
    // Clean up before asserting.
    let stat_ok = live && fs::metadata(&v.mnt).map(|m| m.is_dir()).unwrap_or(false);
    let t = Instant::now();
    while !is_mounted(&v.mnt) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let um = unmount_path(&v.mnt);
    let alive = wait_pids_gone(&pids, Duration::from_secs(15));
    for p in &alive {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert!(live, "`warpfs mount` returned before the mount was live");
    assert!(stat_ok, "stat of the fresh mount root failed");
    um.expect("unmount");
    assert!(
        !pids.is_empty(),
        "no `warpfs mount` daemon process found for {}",
        v.mnt.display()
    );
    assert!(alive.is_empty(), "daemon {alive:?} still running 15 s after unmount");
}

fn foreground_signal(sig: i32) {
    let mut v = Volume::init(Mode::Gcm);
    let mut fg = Foreground::start(&v, &[]);
    write_file(&v.p("fg.txt"), b"written in the foreground");
    fg.signal(sig);
    let st = fg.exited(Duration::from_secs(15), &format!("signal {sig}"));
    assert_eq!(
        st.code(),
        Some(0),
        "mount -f exit status after signal {sig}; stderr:\n{}",
        fg.stderr()
    );
    assert!(
        !is_mounted(&v.mnt),
        "still mounted after mount -f exited on signal {sig}"
    );
    drop(fg);
    v.mount();
    assert_eq!(fs::read(v.p("fg.txt")).unwrap(), b"written in the foreground");
}

#[test]
fn foreground_sigterm_unmounts_cleanly() {
    require_fuse!();
    foreground_signal(libc::SIGTERM);
}

#[test]
fn foreground_sigint_unmounts_cleanly() {
    require_fuse!();
    foreground_signal(libc::SIGINT);
}

#[test]
fn foreground_exits_on_external_unmount() {
    require_fuse!();
    let v = Volume::init(Mode::Ctr);
    let mut fg = Foreground::start(&v, &[]);
    unmount_path(&v.mnt).unwrap();
    let st = fg
        .wait(Duration::from_secs(15))
        .expect("mount -f still running 15 s after umount");
    assert_eq!(
        st.code(),
        Some(0),
        "mount -f exit status after umount; stderr:\n{}",
        fg.stderr()
    );
}

/// A mount still in use when SIGTERM comes is detached (as `umount -l`):
/// it leaves the namespace at once, the file held open on it keeps working,
/// and the daemon exits cleanly when that file is closed. (Before, the
/// failed unmount was only logged and the daemon ran on, deaf to signals.)
#[test]
fn a_busy_mount_is_detached_on_a_signal_and_served_until_its_last_file_closes() {
    require_fuse!();
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut v = Volume::init(Mode::Gcm);
    let mut fg = Foreground::start(&v, &[]);
    let mut held = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(v.p("held.txt"))
        .unwrap();
    held.write_all(b"before the signal, ").unwrap();
    fg.signal(libc::SIGTERM);
    assert!(
        wait_unmounted(&v.mnt, Duration::from_secs(15)),
        "still mounted 15 s after SIGTERM with a file open; log:\n{}",
        fg.stderr()
    );
    assert!(
        fg.wait(Duration::ZERO).is_none(),
        "the daemon left while a file was open on its detached mount; log:\n{}",
        fg.stderr()
    );
    held.write_all(b"after it").unwrap();
    held.sync_all().unwrap();
    held.seek(SeekFrom::Start(0)).unwrap();
    let mut back = String::new();
    held.read_to_string(&mut back).unwrap();
    assert_eq!(back, "before the signal, after it");
    drop(held);
    let st = fg.exited(Duration::from_secs(15), "SIGTERM, then the last open file closed");
    let log = fg.stderr();
    assert_eq!(st.code(), Some(0), "exit status; log:\n{log}");
    assert!(log.contains("is busy: detached it"), "no word of the detach:\n{log}");
    drop(fg);
    v.mount();
    assert_eq!(fs::read(v.p("held.txt")).unwrap(), b"before the signal, after it");
}

/// A second signal ends a daemon whose detached mount is still in use, at
/// once and with status 1; what was synced before is kept.
#[test]
fn a_second_signal_stops_a_daemon_whose_detached_mount_is_in_use() {
    require_fuse!();
    use std::io::Write;
    let mut v = Volume::init(Mode::Ctr);
    let mut fg = Foreground::start(&v, &[]);
    let mut held = File::create(v.p("held.txt")).unwrap();
    held.write_all(b"synced before the signals").unwrap();
    held.sync_all().unwrap();
    fg.signal(libc::SIGINT);
    assert!(
        wait_unmounted(&v.mnt, Duration::from_secs(15)),
        "still mounted 15 s after SIGINT with a file open; log:\n{}",
        fg.stderr()
    );
    fg.signal(libc::SIGINT);
    let st = fg.exited(Duration::from_secs(15), "a second SIGINT");
    let log = fg.stderr();
    assert_eq!(st.code(), Some(1), "exit status; log:\n{log}");
    assert!(log.contains("SIGINT received again: stopping now"), "{log}");
    assert!(
        held.write_all(b", lost").and_then(|_| held.sync_all()).is_err(),
        "a write reached a daemon that is gone"
    );
    drop(held);
    drop(fg);
    v.mount();
    assert_eq!(fs::read(v.p("held.txt")).unwrap(), b"synced before the signals");
}

/// A background daemon unmounts cleanly on SIGTERM (as at shutdown) rather
/// than dying and leaving a dead mount behind.
#[test]
fn a_daemon_unmounts_cleanly_on_sigterm() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    v.mount();
    write_file(&v.p("d.txt"), b"written before SIGTERM");
    let pids = v.daemon_pids().to_vec();
    assert!(!pids.is_empty(), "no daemon found for {}", v.mnt.display());
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGTERM) };
    }
    let alive = wait_pids_gone(&pids, Duration::from_secs(15));
    assert!(
        alive.is_empty(),
        "daemon {alive:?} still running 15 s after SIGTERM; log:\n{}",
        v.log()
    );
    assert!(
        !is_mounted(&v.mnt),
        "the daemon left a dead mount behind; log:\n{}",
        v.log()
    );
    let log = v.log();
    assert!(log.contains("SIGTERM received, unmounting"), "{log}");
    assert!(log.contains("unmounted "), "{log}");
    v.daemon_stopped();
    v.mount();
    assert_eq!(fs::read(v.p("d.txt")).unwrap(), b"written before SIGTERM");
}

/// The same for a user's own daemon (mounted through fusermount3, which it
/// also unmounts through): SIGTERM with a file open detaches the mount, and
/// the daemon exits once the file is closed.
#[test]
fn a_users_daemon_detaches_its_busy_mount_on_sigterm() {
    require_fuse!();
    if warpfs_testkit::skip_if(user_mounts_unavailable()) {
        return;
    }
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    let mut v = Volume::init(Mode::Gcm);
    v.give_to(NOBODY, NOBODY);
    v.mount();
    // `nobody` holds a file open (the shell opens it, then becomes sleep).
    let mut holder = std::process::Command::new("sh")
        .arg("-c")
        .arg("echo held > held.txt && exec sleep 60 < held.txt")
        .current_dir(&v.mnt)
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .unwrap();
    let comm = format!("/proc/{}/comm", holder.id());
    let start = Instant::now();
    while fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep" {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the holder never opened its file"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pids = v.daemon_pids().to_vec();
    assert!(!pids.is_empty(), "no daemon found for {}", v.mnt.display());
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGTERM) };
    }
    let detached = wait_unmounted(&v.mnt, Duration::from_secs(15));
    let running = pids.iter().any(|p| !pid_gone(*p));
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(detached, "still mounted 15 s after SIGTERM; log:\n{}", v.log());
    assert!(
        running,
        "the daemon left while a file was open on its mount; log:\n{}",
        v.log()
    );
    let alive = wait_pids_gone(&pids, Duration::from_secs(15));
    assert!(
        alive.is_empty(),
        "daemon {alive:?} still running after the last file closed; log:\n{}",
        v.log()
    );
    assert!(v.log().contains("unmounted "), "{}", v.log());
    v.daemon_stopped();
    v.mount();
    let o = std::process::Command::new("cat")
        .arg(v.p("held.txt"))
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "held\n", "{o:?}");
}

#[test]
fn read_only_mount() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("f"), b"read only");
    v.unmount();
    v.mount_with(&["-o", "ro"]);
    let opts = mount_options(&v.mnt).unwrap_or_default();
    assert!(opts.split(',').any(|o| o == "ro"), "mount options {opts:?} lack ro");
    assert_eq!(fs::read(v.p("f")).unwrap(), b"read only");
    assert_errno(File::create(v.p("g")), libc::EROFS, "create on a ro mount");
    assert_errno(
        fs::OpenOptions::new().write(true).open(v.p("f")),
        libc::EROFS,
        "open for write on ro",
    );
    assert_errno(fs::remove_file(v.p("f")), libc::EROFS, "unlink on ro");
    assert_errno(fs::create_dir(v.p("d")), libc::EROFS, "mkdir on ro");
    let state = dir_state(&v.cipher);
    v.unmount();
    assert_eq!(dir_state(&v.cipher), state, "ro mount changed the cipher dir");
}

#[test]
fn threads_option() {
    require_fuse!();
    let mut v = Volume::init(Mode::Ctr);
    for n in ["1", "4"] {
        v.mount_with(&["--threads", n]);
        let data = Rng::new(n.len() as u64).bytes(300_000);
        write_file(&v.p(format!("t{n}")), &data);
        assert_eq!(fs::read(v.p(format!("t{n}"))).unwrap(), data);
        v.unmount();
    }
}

/// Run `cat FILE` as user `nobody` (65534); returns (success, stdout).
fn cat_as_nobody(p: &std::path::Path) -> (bool, String) {
    use std::os::unix::process::CommandExt;
    let o = std::process::Command::new("cat")
        .arg(p)
        .uid(65534)
        .gid(65534)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run cat as nobody");
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn allow_other_option() {
    require_fuse!();
    use std::os::unix::fs::PermissionsExt;
    let mut v = Volume::init(Mode::Gcm);
    // The fixture's temp dir is 0700; let other users reach the mountpoint.
    fs::set_permissions(v.root(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&v.cipher, fs::Permissions::from_mode(0o755)).unwrap();
    v.mount();
    write_file(&v.p("pub.txt"), b"public");
    fs::set_permissions(v.p("pub.txt"), fs::Permissions::from_mode(0o644)).unwrap();
    write_file(&v.p("private.txt"), b"private");
    fs::set_permissions(v.p("private.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    let (ok, _) = cat_as_nobody(&v.p("pub.txt"));
    assert!(!ok, "another user read the mount without allow_other");
    v.unmount();
    v.mount_with(&["-o", "allow_other"]);
    let (ok, out) = cat_as_nobody(&v.p("pub.txt"));
    assert!(
        ok && out == "public",
        "with allow_other another user cannot read a 0644 file ({ok}, {out:?})"
    );
    let (ok, _) = cat_as_nobody(&v.p("private.txt"));
    assert!(
        !ok,
        "with allow_other another user read a 0600 root file (permissions not enforced)"
    );
}

#[test]
fn log_file_is_not_world_writable() {
    require_fuse!();
    use std::os::unix::fs::MetadataExt;
    let mut v = Volume::new(Mode::Ctr);
    write_file(&v.p("f"), b"x");
    v.unmount();
    let m = fs::metadata(&v.logfile).expect("the --log-file was not created");
    assert_eq!(
        m.mode() & 0o022,
        0,
        "--log-file created with mode {:o} (group/world-writable)",
        m.mode() & 0o7777
    );
}
