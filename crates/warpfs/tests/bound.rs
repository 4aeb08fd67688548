//! Symlink targets and xattr values bound to their entry (`bound-seals`,
//! FORMAT.md 5.1, 5.3), through a real mount: a target or value swapped
//! between entries (or between two attributes of one entry) in CIPHERDIR
//! reads as EIO with a log line, never as the other entry's; renames,
//! hard links and exchanges of symlinks keep their targets.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// The backing entry of plaintext `name` (a symlink or file) in the root,
/// found by creating the entries one at a time and diffing the listing.
fn backing_of(v: &Volume, make: impl FnOnce()) -> PathBuf {
    let before = v.root_backing_entries();
    make();
    let new: Vec<PathBuf> = v
        .root_backing_entries()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(new.len(), 1, "one new backing entry: {new:?}");
    new.into_iter().next().unwrap()
}

fn swap_symlink_targets(a: &Path, b: &Path) {
    let (ta, tb) = (fs::read_link(a).unwrap(), fs::read_link(b).unwrap());
    fs::remove_file(a).unwrap();
    fs::remove_file(b).unwrap();
    symlink(&tb, a).unwrap();
    symlink(&ta, b).unwrap();
}

fn backing_xattr_names(p: &Path) -> Vec<String> {
    listxattr(p)
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("user.warpfs.") && n != "user.warpfs.id")
        .collect()
}

#[test]
fn swapped_symlink_targets_are_eio() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    let a = backing_of(&v, || symlink("/first/target", v.p("a")).unwrap());
    let b = backing_of(&v, || symlink("/second/target", v.p("b")).unwrap());
    assert_eq!(fs::read_link(v.p("a")).unwrap(), Path::new("/first/target"));
    v.unmount();
    swap_symlink_targets(&a, &b);
    v.mount();
    for name in ["a", "b"] {
        assert_errno(
            fs::read_link(v.p(name)),
            libc::EIO,
            &format!("readlink {name} after the swap"),
        );
    }
    assert!(
        v.log().contains("corrupt symlink target"),
        "no log line; log:\n{}",
        v.log()
    );
    // fsck names both.
    v.unmount();
    let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
    assert!(!o.ok(), "fsck passed a volume with swapped symlink targets\n{o}");
}

#[test]
fn xattr_values_swapped_between_entries_are_eio() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    if !backing_supports_user_xattrs(&v.cipher) {
        warpfs_testkit::skip("the backing file system has no user xattrs");
        return;
    }
    let f = backing_of(&v, || write_file(&v.p("f"), b"f"));
    if !xattrs_or_refused(&v.p("f")) {
        return;
    }
    let g = backing_of(&v, || write_file(&v.p("g"), b"g"));
    setxattr(&v.p("f"), "user.k", b"value of f", 0).unwrap();
    setxattr(&v.p("g"), "user.k", b"value of g", 0).unwrap();
    assert_eq!(getxattr(&v.p("f"), "user.k").unwrap(), b"value of f");
    v.unmount();
    let n = backing_xattr_names(&f);
    assert_eq!(n, backing_xattr_names(&g), "one attribute, same encrypted name");
    let (vf, vg) = (getxattr(&f, &n[0]).unwrap(), getxattr(&g, &n[0]).unwrap());
    setxattr(&f, &n[0], &vg, 0).unwrap();
    setxattr(&g, &n[0], &vf, 0).unwrap();
    v.mount();
    for name in ["f", "g"] {
        assert_errno(
            getxattr(&v.p(name), "user.k"),
            libc::EIO,
            &format!("getxattr {name} after the swap"),
        );
    }
    assert!(v.log().contains("corrupt xattr value"), "log:\n{}", v.log());
}

#[test]
fn xattr_values_swapped_between_attributes_are_eio() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    if !backing_supports_user_xattrs(&v.cipher) {
        warpfs_testkit::skip("the backing file system has no user xattrs");
        return;
    }
    let f = backing_of(&v, || write_file(&v.p("f"), b"f"));
    if !xattrs_or_refused(&v.p("f")) {
        return;
    }
    setxattr(&v.p("f"), "user.a", b"value a", 0).unwrap();
    setxattr(&v.p("f"), "user.b", b"value b", 0).unwrap();
    v.unmount();
    let n = backing_xattr_names(&f);
    assert_eq!(n.len(), 2);
    let (va, vb) = (getxattr(&f, &n[0]).unwrap(), getxattr(&f, &n[1]).unwrap());
    setxattr(&f, &n[0], &vb, 0).unwrap();
    setxattr(&f, &n[1], &va, 0).unwrap();
    v.mount();
    for name in ["user.a", "user.b"] {
        assert_errno(
            getxattr(&v.p("f"), name),
            libc::EIO,
            &format!("getxattr {name} after the swap"),
        );
    }
}

#[test]
fn symlinks_and_xattrs_survive_renames_links_and_exchanges() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    let xattrs = backing_supports_user_xattrs(&v.cipher) && mounts_serve_xattrs();
    fs::create_dir(v.p("d")).unwrap();
    symlink("target-1", v.p("s1")).unwrap();
    symlink("target-2", v.p("s2")).unwrap();
    symlink("target-3", v.p("s3")).unwrap();
    write_file(&v.p("file"), b"content");
    if xattrs {
        setxattr(&v.p("file"), "user.x", b"xv", 0).unwrap();
        setxattr(&v.p("d"), "user.y", b"yv", 0).unwrap();
    }
    // Same directory, another directory, over an existing symlink.
    fs::rename(v.p("s1"), v.p("s1-renamed")).unwrap();
    fs::rename(v.p("s1-renamed"), v.p("d/s1")).unwrap();
    fs::rename(v.p("s2"), v.p("s3")).unwrap();
    // A hard link to a symlink (linkat without following it).
    let link = |from: &Path, to: &Path| {
        let (a, b) = (cstr(from), cstr(to));
        let r = unsafe { libc::linkat(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), 0) };
        assert_eq!(r, 0, "linkat: {}", std::io::Error::last_os_error());
    };
    link(&v.p("d/s1"), &v.p("s1-link"));
    // Exchange a symlink with a file.
    renameat2(&v.p("s3"), &v.p("file"), libc::RENAME_EXCHANGE as libc::c_uint).unwrap();
    // A file with attributes renamed and hard-linked.
    fs::rename(v.p("s3"), v.p("d/file")).unwrap();
    fs::hard_link(v.p("d/file"), v.p("file-link")).unwrap();
    let check = |v: &Volume| {
        assert_eq!(fs::read_link(v.p("d/s1")).unwrap(), Path::new("target-1"));
        assert_eq!(fs::read_link(v.p("s1-link")).unwrap(), Path::new("target-1"));
        assert_eq!(fs::read_link(v.p("file")).unwrap(), Path::new("target-2"));
        assert_eq!(fs::read(v.p("d/file")).unwrap(), b"content");
        assert_eq!(fs::read(v.p("file-link")).unwrap(), b"content");
        assert!(!v.p("s1").exists() && !v.p("s2").exists() && fs::symlink_metadata(v.p("s3")).is_err());
        if xattrs {
            assert_eq!(getxattr(&v.p("d/file"), "user.x").unwrap(), b"xv");
            assert_eq!(getxattr(&v.p("file-link"), "user.x").unwrap(), b"xv");
            assert_eq!(getxattr(&v.p("d"), "user.y").unwrap(), b"yv");
            assert_eq!(listxattr(&v.p("d/file")).unwrap(), vec!["user.x".to_string()]);
        }
        let mut names: Vec<String> = fs::read_dir(v.p(""))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["d", "file", "file-link", "s1-link"]);
    };
    check(&v);
    v.unmount();
    v.mount();
    check(&v);
    v.unmount();
    warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_ok("fsck after renames and links");
}

/// A moved symlink is a new backing inode (its target sealed for its new
/// name), yet to the user it is the same inode: its number stays through
/// renames and an exchange, and a symlink made meanwhile never reads as
/// it. On a backing file system that hands a freed number out again
/// (ext4 does), a new entry with the moved symlink's first number once
/// took over its kernel inode and read the other target. With a cache
/// timeout of 0 the kernel asks the daemon at every step, so each answer
/// below is the daemon's, not one the kernel kept.
#[test]
fn a_moved_symlink_keeps_its_inode_number_and_its_target() {
    use std::os::unix::fs::MetadataExt;
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    v.mount_with(&["--cache-timeout", "0"]);
    fs::create_dir(v.p("d")).unwrap();
    symlink("target-a", v.p("a")).unwrap();
    let ino = fs::symlink_metadata(v.p("a")).unwrap().ino();
    fs::rename(v.p("a"), v.p("a2")).unwrap();
    fs::rename(v.p("a2"), v.p("d/a")).unwrap();
    assert_eq!(
        fs::symlink_metadata(v.p("d/a")).unwrap().ino(),
        ino,
        "rename keeps the inode number"
    );
    // Many new symlinks, each moved once: whatever numbers the backing
    // file system hands out, none becomes the moved symlink.
    for i in 0..64 {
        let (n, m) = (format!("n{i}"), format!("m{i}"));
        symlink(format!("other-{i}"), v.p(&n)).unwrap();
        fs::rename(v.p(&n), v.p(&m)).unwrap();
        assert_eq!(fs::read_link(v.p(&m)).unwrap(), Path::new(&format!("other-{i}")));
        assert_ne!(fs::symlink_metadata(v.p(&m)).unwrap().ino(), ino);
        assert_eq!(fs::read_link(v.p("d/a")).unwrap(), Path::new("target-a"), "after {m}");
    }
    symlink("target-b", v.p("b")).unwrap();
    let ino_b = fs::symlink_metadata(v.p("b")).unwrap().ino();
    renameat2(&v.p("d/a"), &v.p("b"), libc::RENAME_EXCHANGE as libc::c_uint).unwrap();
    assert_eq!(fs::read_link(v.p("b")).unwrap(), Path::new("target-a"));
    assert_eq!(fs::read_link(v.p("d/a")).unwrap(), Path::new("target-b"));
    assert_eq!(fs::symlink_metadata(v.p("b")).unwrap().ino(), ino);
    assert_eq!(fs::symlink_metadata(v.p("d/a")).unwrap().ino(), ino_b);
}
