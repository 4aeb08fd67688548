//! The directory view over backing directories arranged as sync tools leave
//! them: conflict copies, long-name copies, foreign files and undecryptable
//! names (FORMAT.md 13); the helpers the other test modules share. Two IV
//! files: `tests_ivs`; tails after a name: `tests_tails`.

use crate::{Caller, Options, Volume};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use warpfs_config::{Config, ContentMode, KdfParams};

pub(super) const ST: &str = ".sync-conflict-20261125-141403-ABCDEFG";
pub(super) const WHO: Caller = Caller { uid: 0, gid: 0 };

pub(super) fn volume(dir: &Path) -> Volume {
    let (cfg, master) = Config::create(dir, b"pw", ContentMode::Gcm, 256, KdfParams::MIN).unwrap();
    Volume::init_root(&warpfs_backing::Root::open(dir).unwrap()).unwrap();
    let mut v = Volume::open(dir, &cfg, &master, Options::default()).unwrap();
    // As mounted: backing directories kept open for `*at` calls.
    v.keep_dirs_open(crate::DIR_FD_TTL);
    v
}

pub(super) fn write(v: &Volume, dir: &str, name: &str, data: &[u8]) -> String {
    let (cname, _, f, _) = v
        .create(Path::new(dir), OsStr::new(name), 0o644, libc::O_RDWR, WHO, name.into())
        .unwrap();
    f.write_at(0, data).unwrap();
    cname
}

pub(super) fn read(v: &Volume, dir: &str, name: &str) -> Vec<u8> {
    let (cname, attr) = v.lookup(Path::new(dir), OsStr::new(name)).unwrap();
    let f = v
        .open_file(&Path::new(dir).join(cname), libc::O_RDONLY, name.into())
        .unwrap();
    let mut buf = vec![0; attr.size as usize];
    let n = f.read_at(0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

pub(super) fn names(v: &Volume, dir: &str) -> Vec<OsString> {
    let mut n: Vec<_> = v.readdir(Path::new(dir)).unwrap().into_iter().map(|e| e.name).collect();
    n.sort();
    n
}

pub(super) fn s(x: &str) -> OsString {
    OsString::from(x)
}

pub(super) fn backing(v: &Volume, rel: &str) -> PathBuf {
    v.root().join(rel)
}

#[test]
fn a_conflict_copy_is_shown_readable_renamable_and_deletable() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let mine = write(&v, "", "report.txt", b"mine");
    let theirs = write(&v, "", "other", b"theirs");
    // A sync tool keeps the other side's version beside ours.
    fs::rename(backing(&v, &theirs), backing(&v, &format!("{mine}{ST}"))).unwrap();
    let copy = format!("report.txt{ST}");
    assert_eq!(names(&v, ""), vec![s("report.txt"), s(&copy)]);
    assert_eq!(read(&v, "", "report.txt"), b"mine");
    assert_eq!(read(&v, "", &copy), b"theirs");
    v.rename(
        Path::new(""),
        OsStr::new(&copy),
        Path::new(""),
        OsStr::new("theirs.txt"),
        0,
    )
    .unwrap();
    assert_eq!(names(&v, ""), vec![s("report.txt"), s("theirs.txt")]);
    assert_eq!(read(&v, "", "theirs.txt"), b"theirs");
    v.unlink(Path::new(""), OsStr::new("theirs.txt")).unwrap();
    assert_eq!(names(&v, ""), vec![s("report.txt")]);
}

#[test]
fn a_fresh_lookup_finds_a_copy_without_a_listing() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let mine = write(&v, "", "a", b"1");
    let theirs = write(&v, "", "b", b"2");
    fs::rename(
        backing(&v, &theirs),
        backing(&v, &format!("{mine} (vm's conflicted copy 2026-11-25)")),
    )
    .unwrap();
    let v2 = volume_again(&v, t.path());
    assert_eq!(read(&v2, "", "a (vm's conflicted copy 2026-11-25)"), b"2");
}

pub(super) fn volume_again(_v: &Volume, dir: &Path) -> Volume {
    let cfg = Config::load(dir).unwrap();
    let master = cfg.unlock(b"pw").unwrap();
    let mut v = Volume::open(dir, &cfg, &master, Options::default()).unwrap();
    // As mounted: backing directories kept open for `*at` calls.
    v.keep_dirs_open(crate::DIR_FD_TTL);
    v
}

#[test]
fn a_copy_of_a_long_name_keeps_its_name_when_the_original_goes() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let long = "x".repeat(190);
    let file = write(&v, "", &long, b"original");
    assert!(file.starts_with("warpfs.long."));
    let other = write(&v, "", "o", b"copy");
    let hash = &file["warpfs.long.".len()..];
    fs::rename(backing(&v, &other), backing(&v, &format!("warpfs.long{ST}.{hash}"))).unwrap();
    let copy = format!("{long}{ST}");
    assert_eq!(names(&v, ""), vec![s(&long), s(&copy)]);
    v.unlink(Path::new(""), OsStr::new(&long)).unwrap();
    assert_eq!(names(&v, ""), vec![s(&copy)]);
    assert_eq!(read(&v, "", &copy), b"copy");
}

#[test]
fn foreign_files_never_show_and_never_break_a_listing() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    write(&v, "", "f", b"data");
    fs::create_dir(backing(&v, ".stfolder")).unwrap();
    for f in [
        ".syncthing.abc.tmp",
        ".nfs0000000012",
        "desktop.ini",
        ".DS_Store",
        "Thumbs.db",
    ] {
        fs::write(backing(&v, f), b"x").unwrap();
    }
    assert_eq!(names(&v, ""), vec![s("f")]);
    assert!(v.lookup(Path::new(""), OsStr::new(".DS_Store")).is_err());
}

#[test]
fn an_undecryptable_name_is_shown_marked_and_readable() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let cname = write(&v, "", "f", b"content");
    // A name that is not ours (another volume's, or damaged), and one that
    // is not base64url at all.
    let mut bad = cname.clone().into_bytes();
    bad[3] = if bad[3] == b'A' { b'B' } else { b'A' };
    let bad = String::from_utf8(bad).unwrap();
    fs::rename(backing(&v, &cname), backing(&v, &bad)).unwrap();
    fs::write(backing(&v, "hello"), b"").unwrap();
    let shown = format!("{bad}.warpfs-undecryptable");
    let mut want = vec![s(&shown), s("hello.warpfs-undecryptable")];
    want.sort(); // the encrypted name is random: it may sort either side
    assert_eq!(names(&v, ""), want);
    assert_eq!(read(&v, "", &shown), b"content");
    // Found by a lookup alone too, and renamable to a proper name.
    let v2 = volume_again(&v, t.path());
    v2.rename(Path::new(""), OsStr::new(&shown), Path::new(""), OsStr::new("g"), 0)
        .unwrap();
    assert_eq!(read(&v2, "", "g"), b"content");
    assert!(names(&v2, "").iter().all(|n| !n.as_bytes().starts_with(bad.as_bytes())));
}

/// A format 2 volume: symlink targets sealed for their entry (`bound-seals`).
pub(super) fn bound_volume(dir: &Path) -> Volume {
    let (cfg, master) = Config::create_with_features(
        dir,
        b"pw",
        ContentMode::Gcm,
        256,
        KdfParams::MIN,
        &[warpfs_config::FeatureFlag::BoundSeals],
    )
    .unwrap();
    Volume::init_root(&warpfs_backing::Root::open(dir).unwrap()).unwrap();
    let mut v = Volume::open(dir, &cfg, &master, Options::default()).unwrap();
    // As mounted: backing directories kept open for `*at` calls.
    v.keep_dirs_open(crate::DIR_FD_TTL);
    v
}

pub(super) fn link(v: &Volume, dir: &str, name: &str, target: &str) -> String {
    v.symlink(Path::new(dir), OsStr::new(name), OsStr::new(target), WHO)
        .unwrap()
        .0
}

pub(super) fn target(v: &Volume, dir: &str, name: &str) -> Vec<u8> {
    let (cname, _) = v.lookup(Path::new(dir), OsStr::new(name)).unwrap();
    v.readlink(&Path::new(dir).join(cname)).unwrap()
}

#[test]
fn a_directory_moved_or_removed_is_not_reached_through_its_old_descriptor() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let who = WHO;
    let (ca, _) = v.mkdir(Path::new(""), OsStr::new("a"), 0o755, who).unwrap();
    write(&v, &ca, "x", b"in a");
    // Moved: a new "a" gets what is made there next, the moved one keeps x.
    v.rename(Path::new(""), OsStr::new("a"), Path::new(""), OsStr::new("b"), 0)
        .unwrap();
    let (ca2, _) = v.mkdir(Path::new(""), OsStr::new("a"), 0o755, who).unwrap();
    assert_eq!(ca, ca2, "same name, same backing name");
    write(&v, &ca2, "y", b"in the new a");
    let (cb, _) = v.lookup(Path::new(""), OsStr::new("b")).unwrap();
    assert_eq!(names(&v, &cb), [s("x")]);
    assert_eq!(names(&v, &ca2), [s("y")]);
    // Removed and made again: the new directory, not the removed one.
    v.unlink(Path::new(&ca2), OsStr::new("y")).unwrap();
    v.rmdir(Path::new(""), OsStr::new("a")).unwrap();
    v.mkdir(Path::new(""), OsStr::new("a"), 0o755, who).unwrap();
    write(&v, &ca2, "z", b"again");
    assert_eq!(names(&v, &ca2), [s("z")]);
    assert_eq!(read(&v, &ca2, "z"), b"again");
    // A directory renamed over an empty one takes its path.
    v.mkdir(Path::new(""), OsStr::new("c"), 0o755, who).unwrap();
    let (cc, _) = v.lookup(Path::new(""), OsStr::new("c")).unwrap();
    assert!(names(&v, &cc).is_empty());
    v.rename(Path::new(""), OsStr::new("b"), Path::new(""), OsStr::new("c"), 0)
        .unwrap();
    assert_eq!(names(&v, &cc), [s("x")]);
}

#[test]
fn making_and_removing_without_a_lookup_first_keeps_every_answer() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    write(&v, "", "f", b"1");
    // O_EXCL on a taken name; without O_EXCL the existing file, truncated.
    let excl = libc::O_RDWR | libc::O_EXCL;
    let e = v.create(Path::new(""), OsStr::new("f"), 0o644, excl, WHO, "f".into());
    assert_eq!(e.err(), Some(crate::Error(libc::EEXIST)));
    let (_, attr, _, existed) = v
        .create(
            Path::new(""),
            OsStr::new("f"),
            0o644,
            libc::O_RDWR | libc::O_TRUNC,
            WHO,
            "f".into(),
        )
        .unwrap();
    assert!(existed);
    assert_eq!(attr.size, 0);
    let (_, attr, _, existed) = v
        .create(Path::new(""), OsStr::new("g"), 0o600, libc::O_RDWR, WHO, "g".into())
        .unwrap();
    assert!(!existed);
    assert_eq!((attr.perm, attr.size), (0o600, 0));
    assert_eq!(
        v.mkdir(Path::new(""), OsStr::new("f"), 0o755, WHO).err(),
        Some(crate::Error(libc::EEXIST))
    );
    assert_eq!(
        v.unlink(Path::new(""), OsStr::new("nothing")).err(),
        Some(crate::Error(libc::ENOENT))
    );
    assert_eq!(
        v.rmdir(Path::new(""), OsStr::new("nothing")).err(),
        Some(crate::Error(libc::ENOENT))
    );
    assert_eq!(
        v.rmdir(Path::new(""), OsStr::new("f")).err(),
        Some(crate::Error(libc::ENOTDIR))
    );
    v.unlink(Path::new(""), OsStr::new("f")).unwrap();
    assert_eq!(names(&v, ""), [s("g")]);
}
