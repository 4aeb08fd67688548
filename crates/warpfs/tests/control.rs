//! The mount root's control ioctls (`fuse::ctl`), sent by hand with the
//! numbers and layout FORMAT-independent callers would use: a request reads
//! the live stats, malformed or unknown requests are refused, only the
//! root directory answers, another user is turned away (with
//! `allow_other`, when the tests run as root), and the mount's own user
//! starts an online rekey only with the tag that proves the password.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// `_IOWR('W', 0xf0, char[16383])` and `_IOW('W', 0xf1, char[16383])`.
const GET: u32 = (3 << 30) | (16383 << 16) | ((b'W' as u32) << 8) | 0xf0;
const SET: u32 = (1 << 30) | (16383 << 16) | ((b'W' as u32) << 8) | 0xf1;
const SIZE: usize = 16383;

/// "WFC1", name length (u8), name, value length (u32 LE), value, zeros
/// (where a tag length of 0 says: no tag).
fn request(name: &str, value: &[u8]) -> Vec<u8> {
    let mut b = b"WFC1".to_vec();
    b.push(name.len() as u8);
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&(value.len() as u32).to_le_bytes());
    b.extend_from_slice(value);
    b.resize(SIZE, 0);
    b
}

/// [`request`] with a 32-byte tag after the value (tag length 32, tag).
fn tagged(name: &str, value: &[u8], tag: &[u8; 32]) -> Vec<u8> {
    let mut b = request(name, value);
    let at = 4 + 1 + name.len() + 4 + value.len();
    b[at] = 32;
    b[at + 1..at + 33].copy_from_slice(tag);
    b
}

/// ioctl `cmd` with `buf` on `p` (opened read-only): the result's bytes.
fn ioctl(p: &Path, cmd: u32, mut buf: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let f = File::open(p)?;
    assert_eq!(buf.len(), SIZE);
    // SAFETY: `buf` holds SIZE bytes, the size encoded in `cmd`.
    let n = unsafe { libc::ioctl(f.as_raw_fd(), cmd as _, buf.as_mut_ptr()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

#[test]
fn control_ioctls_serve_the_root_and_refuse_the_rest() {
    require_fuse!();
    let v = Volume::new(Mode::Gcm);
    write_file(&v.p("f"), &vec![5u8; 300_000]);
    assert_eq!(fs::read(v.p("f")).unwrap(), vec![5u8; 300_000]);

    // The stats: the same JSON `warpfs stats --json` parses.
    let got = ioctl(&v.mnt, GET, request("trusted.warpfs.stats", b"")).expect("stats ioctl");
    let text = String::from_utf8(got).expect("stats are text");
    let s = warpfs_engine::StatsSnapshot::from_json(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(
        s.applies + s.inline + s.direct > 0,
        "no block counted after a write and a read:\n{s}"
    );
    // No rekey asked for: no status.
    assert_errno(
        ioctl(&v.mnt, GET, request("trusted.warpfs.rekey", b"")),
        libc::ENODATA,
        "rekey status before any rekey",
    );

    // Malformed or unknown requests.
    let mut bad = request("trusted.warpfs.stats", b"");
    bad[..4].copy_from_slice(b"XXXX");
    assert_errno(ioctl(&v.mnt, GET, bad), libc::EINVAL, "bad magic");
    let mut bad = request("trusted.warpfs.stats", b"");
    bad[4] = 255;
    bad[5..5 + 255].fill(b'a');
    bad[5 + 255..5 + 259].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_errno(ioctl(&v.mnt, GET, bad), libc::EINVAL, "value length past the end");
    // Names that are not virtual attributes, a read-only one, a rekey
    // request that does not parse, and (last) one to a generation the
    // volume cannot move to: refused, and the status then says why.
    for (cmd, name, value, what) in [
        (GET, "user.something", &b""[..], "not a virtual attribute"),
        (SET, "trusted.warpfs.stats", b"x", "the stats are read-only"),
        (
            SET,
            "trusted.warpfs.rekey",
            b"no such request",
            "a rekey request that does not parse",
        ),
        (
            SET,
            "trusted.warpfs.rekey",
            b"start 7 1 0",
            "a rekey to generation 7 of a generation-0 volume",
        ),
    ] {
        assert_errno(ioctl(&v.mnt, cmd, request(name, value)), libc::EINVAL, what);
    }
    let st = ioctl(&v.mnt, GET, request("trusted.warpfs.rekey", b"")).expect("status after a refusal");
    let st = String::from_utf8_lossy(&st);
    assert!(st.contains("refused") && st.contains("generation 7"), "{st}");

    // Only the root directory answers; other numbers are not ours.
    fs::create_dir(v.p("d")).unwrap();
    for p in [v.p("f"), v.p("d")] {
        assert_errno(
            ioctl(&p, GET, request("trusted.warpfs.stats", b"")),
            libc::ENOTTY,
            "control ioctl off the root",
        );
    }
    assert_errno(
        ioctl(&v.mnt, GET ^ 1, request("trusted.warpfs.stats", b"")),
        libc::ENOTTY,
        "another ioctl number",
    );
    // The data is untouched by all this.
    assert_eq!(fs::read(v.p("f")).unwrap(), vec![5u8; 300_000]);
}

#[test]
fn another_user_is_refused() {
    require_fuse!();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        warpfs_testkit::skip("needs root (runs warpfs stats as nobody)");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let mut v = Volume::init(Mode::Ctr);
    // The fixture's temp dir is 0700; let nobody reach the mountpoint.
    fs::set_permissions(v.root(), fs::Permissions::from_mode(0o755)).unwrap();
    v.mount_with(&["-o", "allow_other"]);
    let as_nobody = |args: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_warpfs"));
        cmd.args(args).uid(65534).gid(65534).current_dir("/");
        run_cmd(cmd, std::time::Duration::from_secs(60))
    };
    let mnt = v.mnt.to_str().unwrap();
    let o = as_nobody(&["stats", mnt]);
    assert_ne!(o.code, Some(0), "nobody read the stats of root's mount:\n{o}");
    assert!(o.stderr.contains("only root and the user the mount runs as"), "{o}");
    // Root still may.
    warpfs(args!["stats", &v.mnt]).expect_ok("stats as root");
}

/// A user mounts their own volume: they rekey it online with `warpfs
/// rekey` (which proves the password with a tag on the request), and a
/// rekey request of theirs without the tag, or with a wrong one, is
/// refused and starts nothing.
#[test]
fn the_mounts_own_user_rekeys_online_only_with_proof_of_the_password() {
    require_fuse!();
    if warpfs_testkit::skip_if(user_mounts_unavailable()) {
        return;
    }
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    const NOBODY: u32 = 65534;
    let mut v = Volume::init(Mode::Gcm);
    v.give_to(NOBODY, NOBODY);
    v.mount();
    let mnt_dir = v.mnt.clone();
    let as_nobody = |mut c: Command| {
        c.uid(NOBODY).gid(NOBODY).current_dir(&mnt_dir);
        run_cmd(c, std::time::Duration::from_secs(120))
    };
    let sh = |script: &str| {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    };
    let check = "seq 1 200000 | cmp - a && cat d/b";
    as_nobody(sh("seq 1 200000 > a && mkdir d && echo hi > d/b")).expect_ok("write as nobody");

    // Forged requests, sent by hand as the mount's user.
    let mnt = cstr(&v.mnt);
    let start = b"start 1 1 0";
    let mut untagged = request("trusted.warpfs.rekey", start);
    let mut wrong = tagged("trusted.warpfs.rekey", start, &[0x5a; 32]);
    let mut status = request("trusted.warpfs.rekey", b"");
    let code = in_child_as(NOBODY, NOBODY, || {
        // SAFETY: system calls on buffers of SIZE bytes made before the fork.
        unsafe {
            let fd = libc::open(mnt.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            if fd < 0 {
                return 100;
            }
            let errno = |r: libc::c_int| if r < 0 { *libc::__errno_location() } else { 0 };
            let mut bad = 0;
            if errno(libc::ioctl(fd, SET as _, untagged.as_mut_ptr())) != libc::EPERM {
                bad |= 1;
            }
            if errno(libc::ioctl(fd, SET as _, wrong.as_mut_ptr())) != libc::EPERM {
                bad |= 2;
            }
            // The status: none, so nothing started.
            if errno(libc::ioctl(fd, GET as _, status.as_mut_ptr())) != libc::ENODATA {
                bad |= 4;
            }
            bad
        }
    });
    assert_eq!(
        code,
        0,
        "forged requests as the mount's user (1: untagged not refused, 2: wrong tag not refused, 4: a rekey status exists)\nlog:\n{}",
        v.log()
    );
    assert!(v.log().contains("control request of uid 65534 refused"), "{}", v.log());
    let conf_path = v.cipher.join("warpfs.conf");
    let conf = || fs::read_to_string(&conf_path).unwrap();
    assert!(
        !conf().contains("rekey_target") && !conf().contains("key_generation"),
        "{}",
        conf()
    );

    // The real thing: `warpfs rekey` as the mount's user.
    let mut rekey = Command::new(env!("CARGO_BIN_EXE_warpfs"));
    rekey.arg("rekey").arg("--passfile").arg(&v.passfile).arg(&v.cipher);
    let o = as_nobody(rekey);
    o.expect_ok("online rekey as the mount's user");
    assert!(
        o.stdout.contains("to key generation 1") && o.stdout.contains("online"),
        "{o}"
    );
    let c = conf();
    assert!(
        c.contains("\"key_generation\": 1") && !c.contains("rekey_target"),
        "{c}"
    );
    let o = as_nobody(sh(check));
    o.expect_ok("read back after the rekey");
    assert_eq!(o.stdout, "hi\n");
    // After a remount (generation 1 only), the same.
    v.remount();
    let o = as_nobody(sh(check));
    o.expect_ok("read back after a remount");
    assert_eq!(o.stdout, "hi\n");
    v.unmount();
}
