//! `init` and `info`: the volume and recovery text made, the default mode,
//! what `info` prints (never a key), a non-empty CIPHERDIR, usage errors
//! and password sources.

use super::*;

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
