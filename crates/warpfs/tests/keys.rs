//! Key sources through real mounts: `--extpass`, `--keyfile` (with and
//! without a password), `--masterkey stdin` with the key `init` printed.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};

const E_WRONG_PASSWORD: i32 = 10;

/// Run warpfs with `input` on standard input.
fn warpfs_stdin(args: &[std::ffi::OsString], input: &str) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A process that refuses its arguments exits without reading stdin.
    if let Err(e) = child.stdin.take().unwrap().write_all(input.as_bytes()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "writing stdin: {e}");
    }
    let o = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

fn mount_args(v: &Volume, extra: &[&str]) -> Vec<std::ffi::OsString> {
    let mut a = args!["mount", "--log-file", &v.logfile];
    a.extend(extra.iter().map(std::ffi::OsString::from));
    a.push(v.cipher.clone().into());
    a.push(v.mnt.clone().into());
    a
}

/// Mount with explicit key arguments (not the fixture's passfile).
fn try_mount_raw(v: &Volume, extra: &[&str]) -> Out {
    warpfs(mount_args(v, extra))
}

fn write_and_unmount(v: &mut Volume) {
    fs::write(v.p("secret.txt"), b"key sources work\n").unwrap();
    v.unmount();
}

#[test]
fn extpass_mount() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_and_unmount(&mut v);
    let good = format!("cat {}", v.passfile.display());
    let o = try_mount_raw(&v, &["--extpass", &good]);
    o.expect_ok("mount --extpass");
    assert_eq!(fs::read(v.p("secret.txt")).unwrap(), b"key sources work\n");
    unmount_path(&v.mnt).unwrap();
    try_mount_raw(&v, &["--extpass", "echo wrong"]).expect_code(E_WRONG_PASSWORD, "wrong extpass");
    try_mount_raw(&v, &["--extpass", "exit 7"]).expect_code(1, "failing extpass");
}

#[test]
fn keyfile_with_password() {
    require_fuse!();
    let v = Volume::blank(Mode::Gcm);
    let kf = v.root().join("key.bin");
    fs::write(&kf, (0..64u8).collect::<Vec<_>>()).unwrap();
    let kfs = kf.to_str().unwrap();
    let pf = v.passfile.to_str().unwrap().to_string();
    warpfs(args!["init", "--passfile", &pf, "--keyfile", kfs, &v.cipher]).expect_ok("init --keyfile");
    try_mount_raw(&v, &["--passfile", &pf, "--keyfile", kfs]).expect_ok("mount with both");
    fs::write(v.mnt.join("f"), b"x").unwrap();
    unmount_path(&v.mnt).unwrap();
    // The password alone, or with another keyfile, does not unlock.
    try_mount_raw(&v, &["--passfile", &pf]).expect_code(E_WRONG_PASSWORD, "password without keyfile");
    let other = v.root().join("other.bin");
    fs::write(&other, (1..65u8).collect::<Vec<_>>()).unwrap();
    try_mount_raw(&v, &["--passfile", &pf, "--keyfile", other.to_str().unwrap()])
        .expect_code(E_WRONG_PASSWORD, "wrong keyfile");
    try_mount_raw(&v, &["--keyfile", kfs, "--keyfile-only"]).expect_code(E_WRONG_PASSWORD, "keyfile without password");
    // An empty keyfile is refused.
    let empty = v.root().join("empty.bin");
    fs::write(&empty, b"").unwrap();
    let o = try_mount_raw(&v, &["--passfile", &pf, "--keyfile", empty.to_str().unwrap()]);
    assert!(!o.ok() && o.stderr.contains("keyfile"), "{o}");
    // passwd keeps the keyfile requirement.
    let newpw = v.root().join("new.txt");
    fs::write(&newpw, "another password\n").unwrap();
    warpfs(args![
        "passwd",
        "--passfile",
        &pf,
        "--keyfile",
        kfs,
        "--new-passfile",
        &newpw,
        &v.cipher
    ])
    .expect_ok("passwd with keyfile");
    try_mount_raw(&v, &["--passfile", newpw.to_str().unwrap()]).expect_code(E_WRONG_PASSWORD, "new pw alone");
    try_mount_raw(&v, &["--passfile", newpw.to_str().unwrap(), "--keyfile", kfs]).expect_ok("new pw + keyfile");
    assert_eq!(fs::read(v.mnt.join("f")).unwrap(), b"x");
    unmount_path(&v.mnt).unwrap();
}

#[test]
fn keyfile_only() {
    require_fuse!();
    let v = Volume::blank(Mode::Xts);
    let kf = v.root().join("key.bin");
    fs::write(&kf, [0x42u8; 32]).unwrap();
    let kfs = kf.to_str().unwrap();
    warpfs(args![
        "init",
        "--keyfile",
        kfs,
        "--keyfile-only",
        "--mode",
        "xts",
        &v.cipher
    ])
    .expect_ok("init");
    // stdin is /dev/null: no password is asked for.
    try_mount_raw(&v, &["--keyfile", kfs, "--keyfile-only"]).expect_ok("mount --keyfile-only");
    fs::write(v.mnt.join("f"), b"keyfile only").unwrap();
    unmount_path(&v.mnt).unwrap();
    try_mount_raw(&v, &["--keyfile", kfs, "--keyfile-only"]).expect_ok("remount");
    assert_eq!(fs::read(v.mnt.join("f")).unwrap(), b"keyfile only");
    unmount_path(&v.mnt).unwrap();
    // --keyfile-only needs --keyfile and excludes a password source.
    try_mount_raw(&v, &["--keyfile-only"]).expect_code(2, "keyfile-only without keyfile");
    try_mount_raw(&v, &["--keyfile", kfs, "--keyfile-only", "--passfile", kfs]).expect_code(2, "both");
}

#[test]
fn masterkey_stdin_recovers_a_volume() {
    require_fuse!();
    let (mut v, o) = Volume::init_fresh(Mode::Gcm);
    o.expect_ok("init");
    // The key printed once by init.
    let key = o
        .stdout
        .split_whitespace()
        .find(|w| w.len() == 71 && w.matches('-').count() == 7)
        .unwrap_or_else(|| panic!("no master key in init output:\n{o}"))
        .to_string();
    v.mount();
    write_and_unmount(&mut v);
    // Forget the password: change it to something unknown.
    let unknown = v.root().join("unknown.txt");
    fs::write(&unknown, "nobody knows this\n").unwrap();
    warpfs(args![
        "passwd",
        "--passfile",
        &v.passfile,
        "--new-passfile",
        &unknown,
        &v.cipher
    ])
    .expect_ok("passwd");
    let (code, out) = warpfs_stdin(&mount_args(&v, &["--masterkey", "stdin"]), &format!("{key}\n"));
    assert_eq!(code, Some(0), "mount --masterkey stdin failed: {out}");
    assert_eq!(fs::read(v.p("secret.txt")).unwrap(), b"key sources work\n");
    unmount_path(&v.mnt).unwrap();
    // Upper case without dashes works too; a wrong key or garbage does not.
    let loose = key.replace('-', "").to_uppercase();
    let (code, out) = warpfs_stdin(&mount_args(&v, &["--masterkey", "stdin"]), &loose);
    assert_eq!(code, Some(0), "{out}");
    unmount_path(&v.mnt).unwrap();
    let wrong = format!("{}{}", &key[..70], if key.ends_with('0') { '1' } else { '0' });
    let (code, out) = warpfs_stdin(&mount_args(&v, &["--masterkey", "stdin"]), &wrong);
    assert_eq!(code, Some(E_WRONG_PASSWORD), "wrong master key mounted: {out}");
    assert!(!is_mounted(&v.mnt));
    let (code, _) = warpfs_stdin(&mount_args(&v, &["--masterkey", "stdin"]), "not a key\n");
    assert_eq!(code, Some(E_WRONG_PASSWORD));
    let (code, _) = warpfs_stdin(&mount_args(&v, &["--masterkey", "file"]), &key);
    assert_eq!(code, Some(2));
}
