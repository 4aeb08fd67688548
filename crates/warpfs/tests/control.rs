//! The mount root's control ioctls (`fuse::ctl`), sent by hand with the
//! numbers and layout FORMAT-independent callers would use: a request reads
//! the live stats, malformed or unknown requests are refused, only the
//! root directory answers, and another user is turned away (with
//! `allow_other`, when the tests run as root).

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

/// "WFC1", name length (u8), name, value length (u32 LE), value, zeros.
fn request(name: &str, value: &[u8]) -> Vec<u8> {
    let mut b = b"WFC1".to_vec();
    b.push(name.len() as u8);
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&(value.len() as u32).to_le_bytes());
    b.extend_from_slice(value);
    b.resize(SIZE, 0);
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
        eprintln!("skipped: needs root (runs warpfs stats as nobody)");
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
