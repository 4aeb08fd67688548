//! Process hygiene of every command that handles a password or key
//! (SECURITY.md "Keys in memory"): `init`, `passwd`, `fsck`, `rekey`,
//! `mount` and `container open` are non-dumpable before they read the
//! password. Each runs as `nobody` with its password coming from a pipe
//! the test holds open; once it blocks reading that pipe, the owner of its
//! /proc entries shows the dumpable flag (a non-dumpable process's
//! /proc/PID files belong to root, a dumpable one's to its user).

#[macro_use]
mod common;

use common::*;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

/// Whether `pid` is blocked in read(2) (x86-64: syscall 0) on a pipe (its
/// stdin, or a copy of it).
fn reading_stdin(pid: u32) -> bool {
    let Ok(s) = fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let mut w = s.split_whitespace();
    if w.next() != Some("0") {
        return false;
    }
    let Some(fd) = w
        .next()
        .and_then(|a| i64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
    else {
        return false;
    };
    fs::read_link(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|t| t.to_string_lossy().starts_with("pipe:"))
}

/// Run `warpfs ARGS` as nobody until it waits for its password on stdin;
/// returns the uid owning its /proc/PID/status then.
fn owner_while_reading_password(args: &[OsString]) -> u32 {
    let mut child = Command::new(BIN)
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warpfs");
    let pid = child.id();
    let start = Instant::now();
    while !reading_stdin(pid) {
        if let Some(st) = child.try_wait().unwrap() {
            let mut e = String::new();
            use std::io::Read;
            let _ = child.stderr.take().unwrap().read_to_string(&mut e);
            panic!("warpfs {args:?} exited ({st}) before reading its password: {e}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "warpfs {args:?} did not read its password"
        );
        std::thread::yield_now();
    }
    let uid = fs::metadata(format!("/proc/{pid}/status")).unwrap().uid();
    child.kill().unwrap();
    let _ = child.wait();
    uid
}

#[test]
fn every_command_that_reads_a_password_is_non_dumpable() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    let fresh = v.root().join("fresh");
    fs::create_dir(&fresh).unwrap();
    let image = v.root().join("image");
    warpfs(args![
        "container",
        "create",
        "--passfile",
        &v.passfile,
        "--size",
        "1M",
        "--kdf-memory",
        "32768",
        "--kdf-iterations",
        "2",
        &image
    ])
    .expect_ok("container create");
    let cmnt = v.root().join("cmnt");
    fs::create_dir(&cmnt).unwrap();
    v.give_to(NOBODY, NOBODY);
    let stdin = OsString::from("/dev/stdin");
    let (c, m) = (v.cipher.clone().into_os_string(), v.mnt.clone().into_os_string());
    let cmds: Vec<(&str, Vec<OsString>)> = vec![
        ("init", args!["init", "--passfile", &stdin, "--quiet", &fresh]),
        ("passwd", args!["passwd", "--passfile", &stdin, &c]),
        ("fsck", args!["fsck", "--passfile", &stdin, &c]),
        ("rekey", args!["rekey", "--passfile", &stdin, &c]),
        ("mount", args!["mount", "--passfile", &stdin, &c, &m]),
        ("key add", args!["key", "add", "--passfile", &stdin, "--recovery", &c]),
        ("key remove", args!["key", "remove", "--passfile", &stdin, &c, "1"]),
        (
            "container open",
            args!["container", "open", "--passfile", &stdin, &image, &cmnt],
        ),
    ];
    for (name, a) in &cmds {
        let owner = owner_while_reading_password(a);
        assert_eq!(owner, 0, "warpfs {name} is dumpable while it reads the password");
    }
    eprintln!(
        "hygiene: {} commands non-dumpable before reading the password",
        cmds.len()
    );
}

fn vmlck_kb(pid: i32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmLck:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

/// After an online rekey finishes, the mount daemon lets go of the old
/// key generation: its content key, GHASH key and write pool (with the
/// pool's locked masks for future nonces) are dropped, so the daemon's
/// locked memory does not keep both generations' pools (64 masks of two
/// pages each, 512 KiB, per pool).
#[test]
fn an_online_rekey_releases_the_old_generation() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    // Speculation on: the pool holds its 64 masks ready (512 KiB locked).
    v.mount_with(&["--speculation", "on", "--pool-size", "64"]);
    for i in 0..4 {
        write_file(&v.p(format!("f{i}")), &vec![i as u8; 300_000]);
    }
    let pid = daemon_pids(&v.mnt)[0];
    if v.log().contains("cannot lock key memory") {
        warpfs_testkit::skip("mlock is not allowed here");
        return;
    }
    let before = vmlck_kb(pid);
    warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]).expect_ok("online rekey");
    // New writes under the new generation fill its pool.
    for i in 0..4 {
        write_file(&v.p(format!("g{i}")), &vec![i as u8; 300_000]);
    }
    let after = vmlck_kb(pid);
    eprintln!("daemon VmLck: {before} kB before the rekey, {after} kB after it");
    assert!(
        after < before + 256,
        "the daemon's locked memory grew from {before} kB to {after} kB: the old generation's pool was kept"
    );
    for i in 0..4 {
        assert_eq!(fs::read(v.p(format!("f{i}"))).unwrap(), vec![i as u8; 300_000]);
    }
}
