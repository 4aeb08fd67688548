//! The door's rules, each tried as the storage would break it: symlinks
//! anywhere, FIFOs and devices where files are expected, second links on
//! reserved names, paths that are not plain, paths past PATH_MAX.

use crate::beneath::open_dir_walking;
use crate::*;
use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::symlink as ln_s;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// root/{f, d/g, d/e/h}, root/link -> ../outside, root/dlink -> d,
/// root/d/up -> ../../outside/secret, root/fifo (a FIFO), root/tofifo ->
/// ../outside/fifo; outside/{secret, fifo}.
fn tree() -> (tempfile::TempDir, Root, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("root");
    let out = t.path().join("outside");
    std::fs::create_dir_all(r.join("d/e")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("secret"), b"outside").unwrap();
    std::fs::write(r.join("f"), b"f").unwrap();
    std::fs::write(r.join("d/g"), b"g").unwrap();
    std::fs::write(r.join("d/e/h"), b"h").unwrap();
    ln_s("../outside", r.join("link")).unwrap();
    ln_s("d", r.join("dlink")).unwrap();
    ln_s("../../outside/secret", r.join("d/up")).unwrap();
    mkfifo(&r.join("fifo"));
    mkfifo(&out.join("fifo"));
    ln_s("../outside/fifo", r.join("tofifo")).unwrap();
    let root = Root::open(&r).unwrap();
    (t, root, out)
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `f()` must return within a few seconds: an open that blocks on a FIFO
/// would never return, so the test would hang instead of failing; run it
/// on a thread and fail after the deadline.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what} blocked"))
}

fn open_in(root: &Root, rel: &str, flags: i32, expect: Expect) -> Result<std::fs::File> {
    root.open_file(Path::new(rel), flags, 0o600, expect)
}

#[test]
fn plain_paths_open_beneath_the_root() {
    let (_t, root, _) = tree();
    for (rel, want) in [("f", "f"), ("d/g", "g"), ("d/e/h", "h")] {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut open_in(&root, rel, libc::O_RDONLY, Expect::File).unwrap(), &mut s).unwrap();
        assert_eq!(s, want, "{rel}");
        let d = root.dir(Path::new(rel).parent().unwrap()).unwrap();
        let walked = open_dir_walking(
            root.top().fd(),
            Path::new(rel).parent().unwrap().as_os_str().as_encoded_bytes(),
        );
        if !rel.contains('/') {
            assert_eq!(
                walked.unwrap_err(),
                Errno::EINVAL,
                "the root itself is not a plain path"
            );
        } else {
            let st = fstat(&walked.unwrap()).unwrap();
            assert_eq!(st.st_ino, d.stat().unwrap().st_ino);
        }
    }
    assert_eq!(root.lstat(Path::new("d/e/h")).unwrap().st_size, 1);
    assert_eq!(
        root.lstat(Path::new("d/up")).unwrap().st_mode & libc::S_IFMT,
        libc::S_IFLNK
    );
    open_in(
        &root,
        "d/new",
        libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
        Expect::Reserved,
    )
    .unwrap();
}

#[test]
fn symlinks_anywhere_on_the_path_are_refused() {
    let (_t, root, out) = tree();
    for rel in ["link/secret", "dlink/g", "d/up", "dlink/e/h", "tofifo"] {
        for flags in [libc::O_RDONLY, libc::O_RDWR, libc::O_RDWR | libc::O_CREAT] {
            let e = open_in(&root, rel, flags, Expect::File).unwrap_err();
            assert!(matches!(e.0, libc::ELOOP | libc::ENOTDIR), "{rel}: {e}");
        }
        let parent = Path::new(rel).parent().unwrap();
        if rel.contains("link") {
            let e = root.dir(parent).unwrap_err();
            assert!(matches!(e.0, libc::ELOOP | libc::ENOTDIR), "{rel}: {e}");
            let e = open_dir_walking(root.top().fd(), parent.as_os_str().as_encoded_bytes()).unwrap_err();
            assert!(matches!(e.0, libc::ELOOP | libc::ENOTDIR), "walk {rel}: {e}");
        }
    }
    // A dangling symlink is not created through.
    ln_s("../outside/created", root.path().join("dangling")).unwrap();
    assert_eq!(
        open_in(&root, "dangling", libc::O_RDWR | libc::O_CREAT, Expect::File).unwrap_err(),
        Errno::ELOOP
    );
    assert_eq!(
        open_in(
            &root,
            "dangling",
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
            Expect::File
        )
        .unwrap_err(),
        Errno(libc::EEXIST)
    );
    assert!(!out.join("created").exists());
    assert_eq!(std::fs::read(out.join("secret")).unwrap(), b"outside");
    // No entry operation follows one either.
    let top = root.top();
    let l = top.entry(OsStr::new("link"));
    assert_eq!(lstat(&l).unwrap().st_mode & libc::S_IFMT, libc::S_IFLNK);
    assert!(chmod(&top.entry(OsStr::new("d/up")), 0o777).is_err(), "not one name");
    let dl = top.entry(OsStr::new("dangling"));
    assert!(chmod(&dl, 0o777).is_err(), "a symlink's mode is never changed");
    assert!(top.child(OsStr::new("dlink")).is_err());
}

#[test]
fn fifos_are_never_opened_and_never_block() {
    let (_t, root, _) = tree();
    let root = std::sync::Arc::new(root);
    for (rel, want) in [("fifo", libc::EINVAL), ("tofifo", libc::ELOOP)] {
        for flags in [
            libc::O_RDONLY,
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_RDWR | libc::O_CREAT,
        ] {
            let r = root.clone();
            let e = bounded(rel, move || open_in(&r, rel, flags, Expect::File).unwrap_err());
            assert_eq!(e.0, want, "{rel} {flags:#x}");
            let r = root.clone();
            let e = bounded(rel, move || {
                read_small(&r.top().entry(OsStr::new(rel)), 16, Expect::Reserved).unwrap_err()
            });
            assert_eq!(e.0, want, "{rel}");
        }
    }
}

#[test]
fn device_nodes_are_never_opened() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        warpfs_testkit::skip("mknod of a device needs root");
        return;
    }
    let (_t, root, _) = tree();
    let l = root.top().entry(OsStr::new("zero"));
    mknod(&l, libc::S_IFCHR | 0o666, libc::makedev(1, 5)).unwrap();
    for flags in [libc::O_RDONLY, libc::O_RDWR] {
        assert_eq!(open_file(&l, flags, 0, Expect::File).unwrap_err(), Errno::EINVAL);
    }
    assert_eq!(read_small(&l, 16, Expect::Reserved).unwrap_err(), Errno::EINVAL);
    ln_s("/dev/zero", root.path().join("tozero")).unwrap();
    assert_eq!(
        read_small(&root.top().entry(OsStr::new("tozero")), 16, Expect::File).unwrap_err(),
        Errno::ELOOP
    );
}

#[test]
fn reserved_files_with_a_second_link_are_refused() {
    let (_t, root, out) = tree();
    std::fs::hard_link(out.join("secret"), root.path().join("warpfs.conf")).unwrap();
    let l = root.top().entry(OsStr::new("warpfs.conf"));
    assert_eq!(read_small(&l, 100, Expect::Reserved).unwrap_err(), Errno::EMLINK);
    assert_eq!(
        open_file(&l, libc::O_RDWR, 0, Expect::Reserved).unwrap_err(),
        Errno::EMLINK
    );
    // A cipher file may have several links (the plaintext hard-links it).
    assert_eq!(read_small(&l, 100, Expect::File).unwrap(), b"outside");
    // Directories are not files.
    assert_eq!(
        open_in(&root, "d", libc::O_RDONLY, Expect::File).unwrap_err(),
        Errno::EISDIR
    );
}

#[test]
fn a_file_swapped_between_the_looks_is_refused() {
    let (_t, root, _) = tree();
    // What open_file does, with a swap between lstat and open: the
    // descriptor is not the inode that was looked at.
    let l = root.top().entry(OsStr::new("f"));
    let before = lstat(&l).unwrap();
    std::fs::rename(root.path().join("d/g"), root.path().join("f")).unwrap();
    let f = open_file(&l, libc::O_RDONLY, 0, Expect::File).unwrap();
    assert_ne!(fstat(&f).unwrap().st_ino, before.st_ino, "the fixture swapped it");
    assert!(crate::open::check_type(&fstat(&f).unwrap(), Expect::File).is_ok());
}

#[test]
fn paths_that_are_not_plain_are_refused_before_any_open() {
    let (_t, root, out) = tree();
    let abs = out.join("secret");
    for rel in [
        "../outside/secret",
        "d/../../outside/secret",
        "d/..",
        "./f",
        "d//g",
        abs.to_str().unwrap(),
    ] {
        let e = open_in(&root, rel, libc::O_RDWR, Expect::File).unwrap_err();
        assert_eq!(e, Errno::EINVAL, "{rel}");
        assert_eq!(root.lstat(Path::new(rel)).unwrap_err(), Errno::EINVAL, "{rel}");
    }
    for name in ["..", "a/b", ""] {
        assert_eq!(
            lstat(&root.top().entry(OsStr::new(name))).unwrap_err(),
            Errno::EINVAL,
            "{name:?}"
        );
        assert_eq!(
            root.top().child(OsStr::new(name)).unwrap_err(),
            Errno::EINVAL,
            "{name:?}"
        );
    }
    assert_eq!(root.top().child(OsStr::new(".")).unwrap_err(), Errno::EINVAL);
    // The root as its own entry.
    let (d, n) = root.entry(Path::new("")).unwrap();
    assert_eq!(lstat(&d.entry(&n)).unwrap().st_ino, root.top().stat().unwrap().st_ino);
}

#[test]
fn paths_past_path_max_are_walked() {
    let (_t, root, deep) = crate::test_util::deep_root();
    assert!(deep.as_os_str().len() > libc::PATH_MAX as usize);
    let rel = deep.join("f");
    root.open_file(&rel, libc::O_RDWR | libc::O_CREAT, 0o600, Expect::File)
        .unwrap();
    assert_eq!(root.lstat(&rel).unwrap().st_mode & libc::S_IFMT, libc::S_IFREG);
    let d = root.dir(&deep).unwrap();
    mkdir(&d.entry(OsStr::new("sub")), 0o700).unwrap();
    let mut names: Vec<_> = d.list().unwrap().into_iter().map(|e| e.name).collect();
    names.sort();
    assert_eq!(names, ["f", "sub"]);
    // The root itself may be past PATH_MAX too (the user's own path).
    let deep_abs = root.path().join(&deep);
    let r2 = Root::open(&deep_abs).unwrap();
    assert_eq!(r2.top().stat().unwrap().st_ino, d.stat().unwrap().st_ino);
    assert!(d.fd().as_raw_fd() >= 0);
}

#[test]
fn new_files_never_replace_and_never_follow() {
    let (_t, root, out) = tree();
    let top = root.top();
    create_file(&top.entry(OsStr::new("n")), 0o444, b"iv", true).unwrap();
    assert_eq!(
        create_file(&top.entry(OsStr::new("n")), 0o444, b"x", false).unwrap_err(),
        Errno(libc::EEXIST)
    );
    assert_eq!(
        read_small(&top.entry(OsStr::new("n")), 2, Expect::Reserved).unwrap(),
        b"iv"
    );
    assert_eq!(
        read_small(&top.entry(OsStr::new("n")), 1, Expect::Reserved).unwrap(),
        b"iv",
        "max + 1"
    );
    ln_s(out.join("new"), root.path().join("s")).unwrap();
    assert_eq!(
        create_file(&top.entry(OsStr::new("s")), 0o444, b"x", false).unwrap_err(),
        Errno(libc::EEXIST)
    );
    assert!(!out.join("new").exists());
    top.sync().unwrap();
    assert!(top.statvfs().unwrap().f_bsize > 0);
}
