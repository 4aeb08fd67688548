//! `WarpFs` through the operation traits, with no mount and no root, as
//! the mount serves it (`Served`), over a volume in a temporary directory.

use crate::nodes::ROOT;
use crate::ops::prelude::*;
use crate::ops::{Entry, SetAttr, Xattr};
use crate::ops::{Errno, FileKind};
use crate::testvol::{me, Gather, TestFs};
use std::ffi::{OsStr, OsString};

fn names(t: &TestFs, dir: u64) -> Vec<OsString> {
    let o = t.fs.opendir(&me(), dir, 0).unwrap();
    let mut got = Vec::new();
    let mut add = |_: u64, _: u64, _: FileKind, n: &OsStr| {
        got.push(n.to_os_string());
        false
    };
    t.fs.readdir(&me(), dir, o.fh, 0, &mut add).unwrap();
    t.fs.releasedir(&me(), dir, o.fh).unwrap();
    got.retain(|n| n != "." && n != "..");
    got.sort();
    got
}

fn read_all(t: &TestFs, ino: u64) -> Vec<u8> {
    let o = t.fs.open(&me(), ino, libc::O_RDONLY).unwrap();
    let mut g = Gather::default();
    t.fs.read(&me(), ino, o.fh, 0, 1 << 20, &mut g).unwrap();
    t.fs.release(&me(), ino, o.fh).unwrap();
    g.data
}

#[test]
fn a_file_is_made_written_renamed_listed_and_removed_through_the_operations() {
    let t = TestFs::new();
    let c = me();
    let secret = b"the plaintext marker Qx7-warpfs-ops".repeat(300);
    let (e, o) =
        t.fs.create(&c, ROOT, OsStr::new("report.txt"), 0o100644, 0o022, libc::O_RDWR)
            .unwrap();
    let ino = e.attr.ino;
    assert_eq!(t.fs.write(&c, ino, o.fh, 0, &secret, 0).unwrap(), secret.len() as u32);
    t.fs.flush(&c, ino, o.fh).unwrap();
    t.fs.release(&c, ino, o.fh).unwrap();
    assert_eq!(t.fs.lookup(&c, ROOT, OsStr::new("report.txt")).unwrap().attr.ino, ino);
    assert_eq!(t.fs.getattr(&c, ino, None).unwrap().attr.size, secret.len() as u64);
    assert_eq!(read_all(&t, ino), secret);
    // Nothing of the name or the bytes is in the backing directory.
    for p in t.backing_files() {
        assert!(!p.to_string_lossy().contains("report"), "{p:?}");
        let full = t.dir.path().join(&p);
        if full.is_file() {
            let raw = std::fs::read(&full).unwrap();
            assert!(!raw.windows(20).any(|w| w == &secret[..20]), "{p:?} holds plaintext");
        }
    }
    let d = t.fs.mkdir(&c, ROOT, OsStr::new("d"), 0o755, 0o022).unwrap().attr.ino;
    t.fs.rename(&c, ROOT, OsStr::new("report.txt"), d, OsStr::new("moved"), 0)
        .unwrap();
    assert_eq!(
        t.fs.lookup(&c, ROOT, OsStr::new("report.txt")).unwrap_err(),
        Errno::ENOENT
    );
    assert_eq!(
        t.fs.lookup(&c, d, OsStr::new("moved")).unwrap().attr.ino,
        ino,
        "a rename keeps the node"
    );
    assert_eq!(names(&t, ROOT), ["d"]);
    assert_eq!(names(&t, d), ["moved"]);
    assert_eq!(read_all(&t, ino), secret);
    t.fs.unlink(&c, d, OsStr::new("moved")).unwrap();
    t.fs.rmdir(&c, ROOT, OsStr::new("d")).unwrap();
    assert!(names(&t, ROOT).is_empty());
}

/// A symlink with a bound target is a new backing inode after a move,
/// yet the same node (docs/decisions/0095): its number stays, and a new
/// entry never takes it over.
#[test]
fn a_moved_symlink_keeps_its_node_and_its_target() {
    let t = TestFs::new();
    let c = me();
    let s =
        t.fs.symlink(&c, ROOT, OsStr::new("s"), OsStr::new("target-s"))
            .unwrap()
            .attr
            .ino;
    t.fs.rename(&c, ROOT, OsStr::new("s"), ROOT, OsStr::new("t"), 0)
        .unwrap();
    assert_eq!(t.fs.lookup(&c, ROOT, OsStr::new("t")).unwrap().attr.ino, s);
    for i in 0..16 {
        let n = format!("n{i}");
        let e =
            t.fs.symlink(&c, ROOT, OsStr::new(&n), OsStr::new(&format!("other-{i}")))
                .unwrap();
        assert_ne!(e.attr.ino, s, "a new symlink took the moved one's node");
    }
    assert_eq!(t.fs.readlink(&c, s).unwrap(), b"target-s");
    t.fs.forget(s, 2);
    assert_eq!(
        t.fs.readlink(&c, t.fs.lookup(&c, ROOT, OsStr::new("t")).unwrap().attr.ino)
            .unwrap(),
        b"target-s"
    );
}

/// Every request a mount sends is answered by the forward file system's
/// own impl of its group's trait: none falls through to the operations
/// layer's ENOSYS default, after which the kernel would stop asking for
/// the whole mount.
#[test]
fn no_request_of_a_forward_mount_is_answered_enosys() {
    let t = TestFs::new();
    let c = me();
    let mut seen: Vec<(&str, Option<Errno>)> = Vec::new();
    let mut note = |op: &'static str, r: Result<(), Errno>| seen.push((op, r.err()));
    let fs = &t.fs;
    let (e, o) = fs.create(&c, ROOT, OsStr::new("f"), 0o100644, 0, libc::O_RDWR).unwrap();
    let f = e.attr.ino;
    note("write", fs.write(&c, f, o.fh, 0, b"0123456789", 0).map(drop));
    note("read", fs.read(&c, f, o.fh, 0, 10, &mut Gather::default()));
    note("flush", fs.flush(&c, f, o.fh));
    note("fsync", fs.fsync(&c, f, o.fh, false));
    note("fallocate", fs.fallocate(&c, f, o.fh, 0, 8192, 0));
    note("release", fs.release(&c, f, o.fh));
    let o = fs.open(&c, f, libc::O_RDONLY).unwrap();
    note("lseek", fs.lseek(&c, f, o.fh, 0, libc::SEEK_DATA).map(drop));
    note("ioctl", fs.ioctl(&c, f, o.fh, 0x1234, &[], 0).map(drop));
    note("release", fs.release(&c, f, o.fh));
    note("lookup", fs.lookup(&c, ROOT, OsStr::new("f")).map(drop));
    note("getattr", fs.getattr(&c, f, None).map(drop));
    let set = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    note("setattr", fs.setattr(&c, f, &set).map(drop));
    note("access", fs.access(&c, f, libc::R_OK));
    note("setxattr", fs.setxattr(&c, f, OsStr::new("user.k"), b"v", 0));
    note("getxattr", fs.getxattr(&c, f, OsStr::new("user.k"), 0).map(drop));
    note("listxattr", fs.listxattr(&c, f, 0).map(drop));
    note("removexattr", fs.removexattr(&c, f, OsStr::new("user.k")));
    let d = fs.mkdir(&c, ROOT, OsStr::new("d"), 0o755, 0).map(|e: Entry| e.attr.ino);
    note("mkdir", d.map(drop));
    let d = d.unwrap();
    note(
        "mknod",
        fs.mknod(&c, d, OsStr::new("p"), libc::S_IFIFO | 0o644, 0, 0).map(drop),
    );
    note("symlink", fs.symlink(&c, d, OsStr::new("s"), OsStr::new("f")).map(drop));
    let s = fs.lookup(&c, d, OsStr::new("s")).unwrap().attr.ino;
    note("readlink", fs.readlink(&c, s).map(drop));
    note("link", fs.link(&c, f, d, OsStr::new("hard")).map(drop));
    note(
        "rename",
        fs.rename(&c, d, OsStr::new("hard"), ROOT, OsStr::new("hard2"), 0),
    );
    let od = fs.opendir(&c, d, 0).unwrap();
    note(
        "readdir",
        fs.readdir(&c, d, od.fh, 0, &mut |_: u64, _: u64, _: FileKind, _: &OsStr| false),
    );
    note(
        "readdirplus",
        fs.readdirplus(&c, d, od.fh, 0, &mut |_: &Entry, _: u64, _: &OsStr| false),
    );
    note("fsyncdir", fs.fsyncdir(&c, d, od.fh, false));
    note("releasedir", fs.releasedir(&c, d, od.fh));
    note("statfs", fs.statfs(&c, ROOT).map(drop));
    note("unlink", fs.unlink(&c, d, OsStr::new("p")));
    note("unlink", fs.unlink(&c, d, OsStr::new("s")));
    note("rmdir", fs.rmdir(&c, ROOT, OsStr::new("d")));
    let nosys: Vec<_> = seen.iter().filter(|(_, e)| *e == Some(Errno::ENOSYS)).collect();
    assert!(nosys.is_empty(), "answered ENOSYS: {nosys:?}");
    // The calls did their work (a sample; failures other than ENOSYS
    // would show here).
    let failed: Vec<_> = seen
        .iter()
        .filter(|(op, e)| {
            e.is_some() && !matches!(*op, "ioctl" | "getxattr" | "setxattr" | "listxattr" | "removexattr")
        })
        .collect();
    assert!(failed.is_empty(), "failed: {failed:?}");
    assert!(matches!(
        fs.getxattr(&c, ROOT, OsStr::new("user.none"), 0),
        Err(_) | Ok(Xattr::Size(_))
    ));
}
