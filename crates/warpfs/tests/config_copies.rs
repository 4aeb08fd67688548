//! Copies of `warpfs.conf` (FORMAT.md 13.5) through the real commands: a
//! copy is used only when named (`--config COPY`, `warpfs passwd
//! --from-copy COPY`) and never when it records an older key state than
//! `warpfs.conf`. When the password opens a copy but not `warpfs.conf`,
//! every command that unlocks answers exit 11 naming both files, and uses
//! nothing: an altered `warpfs.conf` can no longer let an older genuine
//! copy (from a provider's version history) roll the content key back.

#[macro_use]
mod common;

use common::*;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

const E_WRONG_PASSWORD: i32 = 10;
const E_BAD_CONFIG: i32 = 11;
/// A Syncthing conflict copy's name.
const COPY: &str = "warpfs.sync-conflict-20261125-141403-ABCDEFG.conf";

fn conf(v: &Volume) -> PathBuf {
    v.cipher.join("warpfs.conf")
}

/// A password file in the volume's directory.
fn pwfile(v: &Volume, name: &str, pw: &str) -> PathBuf {
    let p = v.root().join(name);
    fs::write(&p, format!("{pw}\n")).unwrap();
    p
}

/// Change one byte of the wrapped key in `path`: still a valid config,
/// but no password opens it.
fn flip_wrapped_key(path: &Path) {
    let text = fs::read_to_string(path).unwrap();
    let at = text.find("\"ciphertext\": \"").unwrap() + "\"ciphertext\": \"".len();
    let mut b = text.into_bytes();
    b[at] = if b[at] == b'A' { b'B' } else { b'A' };
    fs::write(path, b).unwrap();
}

/// `warpfs ARGS` with `--passfile PW` after the command name.
fn with_pw(cmd: &[&str], pw: &Path, rest: &[&Path]) -> Out {
    let mut a: Vec<OsString> = cmd.iter().map(OsString::from).collect();
    a.push("--passfile".into());
    a.push(pw.into());
    a.extend(rest.iter().map(OsString::from));
    warpfs(a)
}

/// Exit 11 and one line naming both files.
fn expect_named_refusal(o: &Out, what: &str, main: &Path, copy: &Path, says: &str) {
    o.expect_code(E_BAD_CONFIG, what);
    let line = o.stderr.lines().find(|l| l.contains(&*copy.to_string_lossy()));
    let line = line.unwrap_or_else(|| panic!("{what}: no line names {}\n{o}", copy.display()));
    assert!(line.contains(&*main.to_string_lossy()), "{what}: {line}");
    assert!(line.contains(says), "{what}: expected \"{says}\" in: {line}");
}

/// Every command that unlocks with `pw` on the volume (plus `extra` before
/// CIPHERDIR): mount, fsck, rekey, passwd, name.
fn every_unlock(v: &Volume, pw: &Path, extra: &[&str]) -> Vec<(&'static str, Out)> {
    let newpw = pwfile(v, "unused-new-password", "never set");
    let run = |name: &'static str, head: &[&str], tail: &[&Path]| {
        let mut a: Vec<OsString> = head.iter().map(OsString::from).collect();
        a.extend(args!["--passfile", pw]);
        a.extend(extra.iter().map(OsString::from));
        a.extend(tail.iter().map(OsString::from));
        (name, warpfs(a))
    };
    let log = v.root().join("refused-mount.log");
    vec![
        run(
            "mount",
            &["mount", "--log-file", log.to_str().unwrap()],
            &[&v.cipher, &v.mnt],
        ),
        run("fsck", &["fsck"], &[&v.cipher]),
        run("rekey", &["rekey"], &[&v.cipher]),
        run(
            "passwd",
            &["passwd", "--new-passfile", newpw.to_str().unwrap()],
            &[&v.cipher],
        ),
        run("name", &["name", "decrypt"], &[&v.cipher, Path::new("warpfs.diriv")]),
    ]
}

/// Names and bytes of every file in CIPHERDIR's top directory.
fn top(v: &Volume) -> Vec<(OsString, Vec<u8>)> {
    let mut out: Vec<_> = fs::read_dir(&v.cipher)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| (e.file_name(), fs::read(e.path()).unwrap()))
        .collect();
    out.sort();
    out
}

#[test]
fn an_altered_config_beside_an_older_copy_is_reported_and_nothing_is_used() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("kept"), b"written at key generation 0");
    v.unmount();
    // A genuine copy from before the rekey, as a provider's history keeps it.
    let old = fs::read(conf(&v)).unwrap();
    with_pw(&["rekey"], &v.passfile, &[&v.cipher]).expect_ok("rekey");
    assert!(fs::read_to_string(conf(&v)).unwrap().contains("\"key_generation\": 1"));
    let copy = v.cipher.join(COPY);
    fs::write(&copy, &old).unwrap();
    // One byte of warpfs.conf changed: it no longer opens, the old copy does.
    flip_wrapped_key(&conf(&v));
    let before = top(&v);
    for (cmd, o) in every_unlock(&v, &v.passfile, &[]) {
        expect_named_refusal(&o, cmd, &conf(&v), &copy, "older");
        assert!(
            !o.stderr.contains("--from-copy"),
            "{cmd}: an older copy is offered\n{o}"
        );
        assert!(!o.stdout.contains("config: ok"), "{cmd}: went on\n{o}");
    }
    assert!(!is_mounted(&v.mnt), "mounted with the old copy");
    assert_eq!(top(&v), before, "a refused command wrote to CIPHERDIR");
    // Flipped in the key generation instead (an authenticated field): the
    // same refusal.
    fs::write(
        conf(&v),
        fs::read_to_string(conf(&v))
            .unwrap()
            .replace("\"key_generation\": 1", "\"key_generation\": 3"),
    )
    .unwrap();
    let o = v.try_mount(&[]);
    expect_named_refusal(&o, "mount, key generation edited", &conf(&v), &copy, "key generation 3");
    // A password that opens nothing is still a wrong password.
    let wrong = pwfile(&v, "wrong", "not the password");
    v.passfile = wrong;
    v.try_mount(&[]).expect_code(E_WRONG_PASSWORD, "a wrong password");
}

#[test]
fn an_altered_config_beside_a_copy_of_another_password_is_reported_and_resolved_only_when_asked() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("kept"), b"survives the resolution");
    v.unmount();
    // A genuine copy from before `warpfs passwd` (same key state).
    let old = fs::read(conf(&v)).unwrap();
    let newpw = pwfile(&v, "new", "the new password");
    with_pw(
        &["passwd", "--new-passfile", newpw.to_str().unwrap()],
        &v.passfile,
        &[&v.cipher],
    )
    .expect_ok("passwd");
    let copy = v.cipher.join(COPY);
    fs::write(&copy, &old).unwrap();
    flip_wrapped_key(&conf(&v));
    let before = top(&v);
    // The old password opens the copy only: reported, with the way out.
    let way_out = format!("warpfs passwd --from-copy {}", copy.display());
    for (cmd, o) in every_unlock(&v, &v.passfile, &[]) {
        expect_named_refusal(&o, cmd, &conf(&v), &copy, &way_out);
        assert!(o.stderr.contains("altered"), "{cmd}\n{o}");
    }
    assert!(!is_mounted(&v.mnt));
    assert_eq!(top(&v), before, "a refused command wrote to CIPHERDIR");
    // The new password opens neither: a wrong password (or an edited config).
    let o = with_pw(&["fsck"], &newpw, &[&v.cipher]);
    o.expect_code(E_WRONG_PASSWORD, "the new password on an altered config");
    // Named, the copy (same key state) is used.
    v.mount_with(&["--config", copy.to_str().unwrap()]);
    assert_eq!(fs::read(v.p("kept")).unwrap(), b"survives the resolution");
    v.unmount();
}

#[test]
fn a_named_copy_is_used_only_when_it_is_not_older_than_the_config() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("kept"), b"named copies");
    v.unmount();
    let copy = v.cipher.join(COPY);
    fs::write(&copy, fs::read(conf(&v)).unwrap()).unwrap();
    with_pw(&["rekey"], &v.passfile, &[&v.cipher]).expect_ok("rekey");
    // The copy is key generation 0, warpfs.conf 1: refused by every command.
    let before = top(&v);
    for (cmd, o) in every_unlock(&v, &v.passfile, &["--config", copy.to_str().unwrap()]) {
        expect_named_refusal(&o, cmd, &conf(&v), &copy, "older");
    }
    assert!(!is_mounted(&v.mnt));
    assert_eq!(top(&v), before, "a refused command wrote to CIPHERDIR");
    // Also when warpfs.conf does not open with this password (its fields
    // are compared as the file says them).
    let otherpw = pwfile(&v, "other", "another password");
    with_pw(
        &["passwd", "--new-passfile", otherpw.to_str().unwrap()],
        &v.passfile,
        &[&v.cipher],
    )
    .expect_ok("passwd");
    v.try_mount(&["--config", copy.to_str().unwrap()])
        .expect_code(E_BAD_CONFIG, "older copy, other password");
    // A copy of the same state is used when named, and then only it is
    // tried: warpfs.conf's password does not open it.
    fs::write(&copy, fs::read(conf(&v)).unwrap()).unwrap();
    with_pw(
        &["passwd", "--new-passfile", v.passfile.to_str().unwrap()],
        &otherpw,
        &[&v.cipher],
    )
    .expect_ok("passwd back");
    assert!(fs::read_to_string(&copy).unwrap().contains("\"key_generation\": 1"));
    v.passfile = otherpw.clone();
    v.mount_with(&["--config", copy.to_str().unwrap()]);
    assert_eq!(fs::read(v.p("kept")).unwrap(), b"named copies");
    v.unmount();
    v.passfile = pwfile(&v, "main", PASSWORD);
    v.try_mount(&["--config", copy.to_str().unwrap()])
        .expect_code(E_WRONG_PASSWORD, "--config tries only COPY");
    with_pw(&["fsck"], &otherpw, &[Path::new("--config"), &copy, &v.cipher])
        .expect_code(20, "fsck --config COPY (it reports the copy)");
    // warpfs.conf gone beside its copy: the copy's state cannot be checked.
    fs::remove_file(conf(&v)).unwrap();
    let o = with_pw(&["fsck"], &otherpw, &[Path::new("--config"), &copy, &v.cipher]);
    expect_named_refusal(
        &o,
        "fsck --config COPY without warpfs.conf",
        &conf(&v),
        &copy,
        "missing",
    );
}

#[test]
fn passwd_from_copy_resolves_a_passwd_conflict_of_two_hosts() {
    require_fuse!();
    let mut a = Volume::new(Mode::Gcm);
    write_file(&a.p("shared"), b"on both hosts");
    a.unmount();
    // Host B: a synced copy of the cipher dir; each host changes the password.
    let b_cipher = a.root().join("host-b");
    fs::create_dir(&b_cipher).unwrap();
    copy_tree(&a.cipher, &b_cipher);
    let (pw_a, pw_b) = (
        pwfile(&a, "pw-a", "password of host A"),
        pwfile(&a, "pw-b", "password of host B"),
    );
    with_pw(
        &["passwd", "--new-passfile", pw_a.to_str().unwrap()],
        &a.passfile,
        &[&a.cipher],
    )
    .expect_ok("passwd on A");
    with_pw(
        &["passwd", "--new-passfile", pw_b.to_str().unwrap()],
        &a.passfile,
        &[&b_cipher],
    )
    .expect_ok("passwd on B");
    // The sync tool keeps A's and renames B's.
    let copy = a.cipher.join(COPY);
    fs::copy(b_cipher.join("warpfs.conf"), &copy).unwrap();
    // B's password: reported with the way out, not used.
    a.passfile = pw_b.clone();
    let o = a.try_mount(&[]);
    expect_named_refusal(&o, "mount with B's password", &conf(&a), &copy, "--from-copy");
    with_pw(
        &["passwd", "--new-passfile", pw_b.to_str().unwrap()],
        &pw_b,
        &[&a.cipher],
    )
    .expect_code(E_BAD_CONFIG, "passwd without --from-copy");
    // A wrong password for the copy writes nothing.
    let before = top(&a);
    let from = [
        "passwd",
        "--from-copy",
        copy.to_str().unwrap(),
        "--new-passfile",
        pw_b.to_str().unwrap(),
    ];
    with_pw(&from, &pw_a, &[&a.cipher]).expect_code(E_WRONG_PASSWORD, "--from-copy with A's password");
    assert_eq!(top(&a), before);
    // Resolved: B's config (and password) is warpfs.conf, the copy is gone.
    with_pw(&from, &pw_b, &[&a.cipher]).expect_ok("passwd --from-copy");
    assert!(!copy.exists(), "the copy is still there");
    a.mount();
    assert_eq!(fs::read(a.p("shared")).unwrap(), b"on both hosts");
    a.unmount();
    a.passfile = pw_a.clone();
    a.try_mount(&[])
        .expect_code(E_WRONG_PASSWORD, "A's password after the resolution");
    // An older copy is refused by --from-copy too, and nothing is written.
    with_pw(&["rekey"], &pw_b, &[&a.cipher]).expect_ok("rekey");
    fs::copy(b_cipher.join("warpfs.conf"), &copy).unwrap();
    let before = top(&a);
    let o = with_pw(&from, &pw_b, &[&a.cipher]);
    expect_named_refusal(&o, "--from-copy of an older copy", &conf(&a), &copy, "older");
    assert_eq!(top(&a), before);
}
