//! Names and metadata through a real mount: rename (incl. renameat2 flags),
//! hard links, unlink of open files, symlinks, mkdir/rmdir, fifos,
//! chmod/chown/utimens, statfs, xattrs, fallocate, long and odd names, and
//! persistence of a whole tree across remounts; backing inode numbers reused
//! under concurrent create/unlink.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

mode_tests!(
    rename,
    rename_dir_over_empty_dir,
    renameat2_flags,
    hard_links,
    unlink_open_file,
    symlinks,
    mkdir_rmdir,
    fifo,
    chmod_chown_utimens,
    statfs,
    xattrs,
    fallocate_ranges,
    long_names,
    odd_names,
    tree_persists,
    create_flags,
    concurrent_namespace,
    inode_number_reuse,
);

fn names(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn set(xs: &[&str]) -> BTreeSet<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

fn rename(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("rename-{}", mode.name()));
    let mut v = Volume::new(mode);

    // A file.
    write_file(&v.p("a.txt"), b"alpha");
    fs::rename(v.p("a.txt"), v.p("b.txt")).unwrap();
    assert!(!v.p("a.txt").exists(), "old name still exists after rename");
    assert_eq!(fs::read(v.p("b.txt")).unwrap(), b"alpha");

    // A directory with contents, nested.
    fs::create_dir_all(v.p("d1/sub")).unwrap();
    let big = rng.bytes(100_000);
    write_file(&v.p("d1/f1"), b"one");
    write_file(&v.p("d1/sub/f2"), &big);
    fs::rename(v.p("d1"), v.p("d2")).unwrap();
    assert!(!v.p("d1").exists());
    assert_eq!(fs::read(v.p("d2/f1")).unwrap(), b"one");
    assert_bytes_eq(&fs::read(v.p("d2/sub/f2")).unwrap(), &big, "d2/sub/f2 after dir rename");
    assert_eq!(names(&v.p("d2")), set(&["f1", "sub"]));

    // Across directories (names are encrypted per directory).
    fs::rename(v.p("d2/sub/f2"), v.p("f2-moved")).unwrap();
    assert_bytes_eq(&fs::read(v.p("f2-moved")).unwrap(), &big, "f2 moved to root");
    fs::rename(v.p("b.txt"), v.p("d2/sub/b.txt")).unwrap();
    assert_eq!(fs::read(v.p("d2/sub/b.txt")).unwrap(), b"alpha");

    // Over an existing file.
    write_file(&v.p("x"), b"xx");
    write_file(&v.p("y"), b"yyyy");
    fs::rename(v.p("x"), v.p("y")).unwrap();
    assert_eq!(fs::read(v.p("y")).unwrap(), b"xx", "rename over existing file");
    assert!(!v.p("x").exists());

    // A directory over a non-empty directory fails.
    fs::create_dir(v.p("e2")).unwrap();
    write_file(&v.p("e2/inside"), b"in");
    fs::create_dir(v.p("e3")).unwrap();
    match fs::rename(v.p("e3"), v.p("e2")) {
        Ok(()) => panic!("rename of a dir over a non-empty dir succeeded"),
        Err(e) => assert!(
            [libc::ENOTEMPTY, libc::EEXIST].contains(&errno(&e)),
            "dir over non-empty dir: expected ENOTEMPTY/EEXIST, got {e}"
        ),
    }
    // File over dir, dir over file.
    assert_errno(fs::rename(v.p("y"), v.p("e3")), libc::EISDIR, "rename file over dir");
    assert_errno(fs::rename(v.p("e3"), v.p("y")), libc::ENOTDIR, "rename dir over file");
    // Missing source.
    assert_errno(fs::rename(v.p("nope"), v.p("nope2")), libc::ENOENT, "rename missing");

    assert_eq!(names(&v.mnt), set(&["d2", "e2", "e3", "f2-moved", "y"]));
    let before = snapshot(&v.mnt);
    v.remount();
    assert_snapshots_eq(&snapshot(&v.mnt), &before, "after remount");
}

fn rename_dir_over_empty_dir(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    fs::create_dir(v.p("e1")).unwrap();
    write_file(&v.p("e1/inside"), b"in");
    fs::create_dir(v.p("e2")).unwrap();
    fs::rename(v.p("e1"), v.p("e2")).expect("rename(2) of a directory over an empty directory");
    assert_eq!(fs::read(v.p("e2/inside")).unwrap(), b"in");
    assert!(!v.p("e1").exists());
    // Also into another parent.
    fs::create_dir_all(v.p("p/e4")).unwrap();
    fs::rename(v.p("e2"), v.p("p/e4")).expect("rename of a dir over an empty dir in another parent");
    assert_eq!(fs::read(v.p("p/e4/inside")).unwrap(), b"in");
    assert_eq!(names(&v.mnt), set(&["p"]));
    v.remount();
    assert_eq!(fs::read(v.p("p/e4/inside")).unwrap(), b"in");
}

fn renameat2_flags(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    write_file(&v.p("a"), b"content a");
    write_file(&v.p("b"), b"content b, longer");

    // RENAME_NOREPLACE onto an existing name: EEXIST, nothing changes.
    assert_errno(
        renameat2(&v.p("a"), &v.p("b"), libc::RENAME_NOREPLACE),
        libc::EEXIST,
        "NOREPLACE onto existing",
    );
    assert_eq!(fs::read(v.p("a")).unwrap(), b"content a");
    assert_eq!(fs::read(v.p("b")).unwrap(), b"content b, longer");
    // RENAME_NOREPLACE onto a free name works.
    renameat2(&v.p("a"), &v.p("c"), libc::RENAME_NOREPLACE).expect("RENAME_NOREPLACE onto a free name");
    assert!(!v.p("a").exists());
    assert_eq!(fs::read(v.p("c")).unwrap(), b"content a");

    // RENAME_EXCHANGE of two files.
    renameat2(&v.p("b"), &v.p("c"), libc::RENAME_EXCHANGE).expect("RENAME_EXCHANGE of two files");
    assert_eq!(fs::read(v.p("b")).unwrap(), b"content a");
    assert_eq!(fs::read(v.p("c")).unwrap(), b"content b, longer");

    // RENAME_EXCHANGE of a file and a directory in different directories.
    fs::create_dir_all(v.p("A")).unwrap();
    fs::create_dir_all(v.p("B/dir")).unwrap();
    write_file(&v.p("A/file"), b"file in A");
    write_file(&v.p("B/dir/inner"), b"inner");
    renameat2(&v.p("A/file"), &v.p("B/dir"), libc::RENAME_EXCHANGE).expect("RENAME_EXCHANGE file <-> dir across dirs");
    assert_eq!(fs::read(v.p("B/dir")).unwrap(), b"file in A");
    assert_eq!(fs::read(v.p("A/file/inner")).unwrap(), b"inner");

    // RENAME_EXCHANGE with a missing target: ENOENT.
    assert_errno(
        renameat2(&v.p("b"), &v.p("missing"), libc::RENAME_EXCHANGE),
        libc::ENOENT,
        "EXCHANGE with missing",
    );

    let before = snapshot(&v.mnt);
    v.remount();
    assert_snapshots_eq(&snapshot(&v.mnt), &before, "after remount");
}

fn hard_links(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("hard_links-{}", mode.name()));
    let mut v = Volume::new(mode);
    let mut model = rng.bytes(100_000);
    write_file(&v.p("a"), &model);
    fs::create_dir(v.p("sub")).unwrap();
    fs::hard_link(v.p("a"), v.p("b")).expect("link a b");
    fs::hard_link(v.p("a"), v.p("sub/c")).expect("link a sub/c");
    let check = |v: &Volume, model: &[u8], nlink: u64, ctx: &str| {
        let ma = fs::metadata(v.p("a")).unwrap();
        for p in ["a", "b", "sub/c"] {
            let m = fs::metadata(v.p(p)).unwrap();
            assert_eq!(m.nlink(), nlink, "{ctx}: nlink of {p}");
            assert_eq!(m.ino(), ma.ino(), "{ctx}: inode number of {p} differs from a");
            assert_bytes_eq(&fs::read(v.p(p)).unwrap(), model, &format!("{ctx}: content of {p}"));
        }
    };
    check(&v, &model, 3, "after linking");
    // Write through one name, read through the others.
    let d = rng.bytes(10_000);
    {
        let f = OpenOptions::new().write(true).open(v.p("b")).unwrap();
        write_at(&f, 60_000, &d).unwrap();
        f.sync_all().unwrap();
    }
    model[60_000..70_000].copy_from_slice(&d);
    check(&v, &model, 3, "after write via b");
    v.remount();
    check(&v, &model, 3, "after remount");
    fs::remove_file(v.p("a")).unwrap();
    for p in ["b", "sub/c"] {
        let m = fs::metadata(v.p(p)).unwrap();
        assert_eq!(m.nlink(), 2, "nlink of {p} after unlinking a");
        assert_bytes_eq(&fs::read(v.p(p)).unwrap(), &model, &format!("{p} after unlinking a"));
    }
    // Hard links to directories are refused.
    assert_errno(
        fs::hard_link(v.p("sub"), v.p("sublink")),
        libc::EPERM,
        "link of a directory",
    );
    assert_errno(
        fs::hard_link(v.p("b"), v.p("sub/c")),
        libc::EEXIST,
        "link onto existing name",
    );
}

fn unlink_open_file(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("unlink_open-{}", mode.name()));
    let mut v = Volume::new(mode);
    let path = v.p("tmp.bin");
    let mut model = rng.bytes(200_000);
    let f = open_rw(&path);
    write_at(&f, 0, &model).unwrap();
    f.sync_all().unwrap();
    fs::remove_file(&path).unwrap();
    assert!(!path.exists(), "unlinked file still visible");
    assert!(names(&v.mnt).is_empty(), "root not empty after unlink");
    // Let the kernel's cached attributes expire, so fstat asks the daemon.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // fstat problems are collected so the data checks below still run.
    let mut problems = Vec::new();
    match f.metadata() {
        Ok(m) if m.nlink() == 0 => {}
        Ok(m) => problems.push(format!("fstat of an unlinked open file: nlink {}", m.nlink())),
        Err(e) => problems.push(format!("fstat of an unlinked open file: {e}")),
    }
    if let Err(e) = try_drop_cache(&f) {
        problems.push(format!("fsync of an unlinked open file: {e}"));
    }
    let got = read_at(&f, 0, 300_000).expect("read of an unlinked open file");
    assert_bytes_eq(&got, &model, "unlinked open file via its fd");
    // Write through the fd, extending, and read back from the daemon.
    let d = rng.bytes(100_000);
    write_at(&f, 150_000, &d).expect("write to an unlinked open file");
    model.resize(250_000, 0);
    model[150_000..].copy_from_slice(&d);
    if let Err(e) = try_drop_cache(&f) {
        problems.push(format!("fsync of an unlinked open file: {e}"));
    }
    let got = read_at(&f, 0, 300_000).expect("read back of an unlinked open file");
    assert_bytes_eq(&got, &model, "unlinked open file after write");
    // A new file of the same name is a different file.
    write_file(&path, b"new");
    assert_eq!(fs::read(&path).unwrap(), b"new");
    if let Err(e) = try_drop_cache(&f) {
        problems.push(format!("fsync of an unlinked open file: {e}"));
    }
    assert_bytes_eq(
        &read_at(&f, 0, 300_000).unwrap(),
        &model,
        "old fd after the name was reused",
    );
    drop(f);
    // Renaming over an open file: the old fd keeps the old content.
    let old = rng.bytes(50_000);
    write_file(&path, &old);
    write_file(&v.p("replacement"), b"replacement");
    let g = OpenOptions::new().read(true).write(true).open(&path).unwrap();
    fs::rename(v.p("replacement"), &path).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"replacement");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    if let Err(e) = try_drop_cache(&g) {
        problems.push(format!("fsync of a renamed-over open file: {e}"));
    }
    assert_bytes_eq(
        &read_at(&g, 0, 100_000).expect("read of a renamed-over open file"),
        &old,
        "fd of a file replaced by rename",
    );
    match g.metadata() {
        Ok(m) if m.len() == 50_000 => {}
        Ok(m) => problems.push(format!("fstat of a renamed-over open file: size {}", m.len())),
        Err(e) => problems.push(format!("fstat of a renamed-over open file: {e}")),
    }
    // Attribute changes through the old fd reach the old file only.
    if let Err(e) = g.set_permissions(fs::Permissions::from_mode(0o600)) {
        problems.push(format!("fchmod of a renamed-over open file: {e}"));
    }
    g.set_len(3).expect("ftruncate of a renamed-over open file");
    drop_cache(&g);
    assert_eq!(read_at(&g, 0, 100).unwrap(), &old[..3], "old fd after ftruncate");
    assert_eq!(
        fs::read(&path).unwrap(),
        b"replacement",
        "ftruncate through the old fd hit the new file"
    );
    assert_eq!(
        fs::metadata(&path).unwrap().mode() & 0o777,
        0o644,
        "fchmod through the old fd hit the new file"
    );
    drop(g);
    fs::remove_file(&path).unwrap();
    v.unmount();
    assert!(
        v.root_backing_entries().is_empty(),
        "backing entries left behind after unlinking everything: {:?}",
        v.root_backing_entries()
    );
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn symlinks(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let long_target: String = (0..200).map(|i| format!("d{i}/")).collect::<String>() + "end";
    let targets: Vec<(&str, String)> = vec![
        ("rel", "some/relative/path.txt".into()),
        ("abs", "/etc/hostname".into()),
        ("dot", "../outside".into()),
        ("uni", "ünïcødé/→/файл".into()),
        ("long", long_target.clone()),
        ("to-real", "real.txt".into()),
    ];
    write_file(&v.p("real.txt"), b"real content");
    for (name, t) in &targets {
        std::os::unix::fs::symlink(t, v.p(name)).unwrap_or_else(|e| panic!("symlink {name} -> {t}: {e}"));
    }
    let check = |v: &Volume, ctx: &str| {
        for (name, t) in &targets {
            let md = fs::symlink_metadata(v.p(name)).unwrap();
            assert!(md.file_type().is_symlink(), "{ctx}: {name} is not a symlink");
            assert_eq!(
                fs::read_link(v.p(name)).unwrap(),
                PathBuf::from(t),
                "{ctx}: readlink {name}"
            );
            assert_eq!(
                md.len(),
                t.len() as u64,
                "{ctx}: st_size of symlink {name} must be the target length"
            );
        }
        assert_eq!(
            fs::read(v.p("to-real")).unwrap(),
            b"real content",
            "{ctx}: read through symlink"
        );
        assert_errno(fs::read(v.p("rel")), libc::ENOENT, "dangling symlink");
    };
    check(&v, "mounted");
    assert_errno(
        std::os::unix::fs::symlink("x", v.p("rel")),
        libc::EEXIST,
        "symlink onto an existing name",
    );
    // Rename and hard-link a symlink.
    fs::rename(v.p("to-real"), v.p("to-real2")).unwrap();
    assert_eq!(fs::read(v.p("to-real2")).unwrap(), b"real content");
    fs::rename(v.p("to-real2"), v.p("to-real")).unwrap();
    v.remount();
    check(&v, "after remount");
    for (name, _) in &targets {
        fs::remove_file(v.p(name)).unwrap();
    }
    assert_eq!(names(&v.mnt), set(&["real.txt"]));
}

fn mkdir_rmdir(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    fs::create_dir_all(v.p("a/b/c")).unwrap();
    assert!(fs::metadata(v.p("a/b/c")).unwrap().is_dir());
    assert_errno(fs::create_dir(v.p("a")), libc::EEXIST, "mkdir existing");
    assert_errno(fs::create_dir(v.p("missing/x")), libc::ENOENT, "mkdir in missing dir");
    assert_errno(fs::remove_dir(v.p("a")), libc::ENOTEMPTY, "rmdir non-empty");
    assert!(
        names(&v.p("a/b/c")).is_empty(),
        "new dir not empty: {:?}",
        names(&v.p("a/b/c"))
    );
    assert_eq!(names(&v.mnt), set(&["a"]), "root listing (no warpfs.* visible)");
    fs::remove_dir(v.p("a/b/c")).unwrap();
    assert!(names(&v.p("a/b")).is_empty());
    write_file(&v.p("a/file"), b"f");
    assert_errno(fs::remove_dir(v.p("a/file")), libc::ENOTDIR, "rmdir of a file");
    assert_errno(fs::remove_file(v.p("a/b")), libc::EISDIR, "unlink of a dir");
    fs::remove_dir(v.p("a/b")).unwrap();
    assert_errno(fs::remove_dir(v.p("a")), libc::ENOTEMPTY, "rmdir with a file inside");
    fs::remove_file(v.p("a/file")).unwrap();
    fs::remove_dir(v.p("a")).unwrap();
    assert!(names(&v.mnt).is_empty());
    assert_errno(fs::remove_dir(v.p("a")), libc::ENOENT, "rmdir missing");

    // Mode bits of a new directory.
    fs::DirBuilder::new().mode(0o750).create(v.p("m")).unwrap();
    let m = fs::metadata(v.p("m")).unwrap().mode() & 0o7777;
    let umask = fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Umask:")
                .map(|u| u32::from_str_radix(u.trim(), 8).unwrap())
        })
        .unwrap_or(0o022);
    assert_eq!(m, 0o750 & !umask, "mode of mkdir 0750");
    // A directory made in a set-group-ID directory inherits the bit, also
    // when its own mode lacks owner rwx (warpfs chmods after writing the IV).
    fs::create_dir(v.p("sg")).unwrap();
    fs::set_permissions(v.p("sg"), fs::Permissions::from_mode(0o2775)).unwrap();
    fs::DirBuilder::new().mode(0o500).create(v.p("sg/sub")).unwrap();
    let sub = fs::metadata(v.p("sg/sub")).unwrap().mode();
    assert_eq!(sub & 0o2000, 0o2000, "setgid inherited: {:o}", sub);
    assert_eq!(
        sub & 0o777,
        0o500 & !umask,
        "mode of mkdir 0500 in a setgid dir: {:o}",
        sub
    );
    fs::set_permissions(v.p("sg/sub"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::remove_dir(v.p("sg/sub")).unwrap();
    fs::remove_dir(v.p("sg")).unwrap();
    // Many entries in one directory list completely.
    fs::create_dir(v.p("many")).unwrap();
    let want: BTreeSet<String> = (0..300).map(|i| format!("entry-{i:04}")).collect();
    for n in &want {
        File::create(v.p("many").join(n)).unwrap();
    }
    assert_eq!(names(&v.p("many")), want, "listing of 300 entries");
    v.remount();
    assert_eq!(names(&v.p("many")), want, "listing of 300 entries after remount");
    assert_eq!(names(&v.mnt), set(&["m", "many"]));
    v.unmount();
    // The backing root holds exactly the two dirs plus config and IV.
    assert_eq!(v.root_backing_entries().len(), 2, "{:?}", v.root_backing_entries());
}

fn fifo(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let p = v.p("fifo");
    mknod_fifo(&p, 0o640).expect("mknod fifo");
    let md = fs::symlink_metadata(&p).unwrap();
    assert!(md.file_type().is_fifo(), "not a fifo: {:?}", md.file_type());
    // Data flows through it (the kernel handles the pipe).
    let mut r = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&p)
        .unwrap();
    let mut w = OpenOptions::new().write(true).open(&p).unwrap();
    w.write_all(b"through the pipe").unwrap();
    let mut buf = [0u8; 64];
    let n = r.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"through the pipe");
    drop((r, w));
    v.remount();
    let md = fs::symlink_metadata(&p).unwrap();
    assert!(
        md.file_type().is_fifo(),
        "fifo lost its type after remount: {:?}",
        md.file_type()
    );
    fs::remove_file(&p).unwrap();
    assert!(names(&v.mnt).is_empty());
}

fn chmod_chown_utimens(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let f = v.p("f");
    write_file(&f, b"data");
    fs::create_dir(v.p("d")).unwrap();
    std::os::unix::fs::symlink("f", v.p("l")).unwrap();

    fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o600);
    fs::set_permissions(v.p("d"), fs::Permissions::from_mode(0o711)).unwrap();
    assert_eq!(fs::metadata(v.p("d")).unwrap().mode() & 0o7777, 0o711);

    std::os::unix::fs::chown(&f, Some(1234), Some(5678)).unwrap();
    let m = fs::metadata(&f).unwrap();
    assert_eq!((m.uid(), m.gid()), (1234, 5678), "chown");
    std::os::unix::fs::chown(v.p("d"), None, Some(4321)).unwrap();
    let m = fs::metadata(v.p("d")).unwrap();
    assert_eq!((m.uid(), m.gid()), (0, 4321), "chgrp of a dir");
    std::os::unix::fs::lchown(v.p("l"), Some(42), Some(43)).unwrap();
    let m = fs::symlink_metadata(v.p("l")).unwrap();
    assert_eq!((m.uid(), m.gid()), (42, 43), "lchown of a symlink");
    // Set-id bits stick after chmod; a chown clears them (as on any Linux fs).
    fs::set_permissions(&f, fs::Permissions::from_mode(0o4751)).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o4751, "setuid bit");
    let g = v.p("g");
    write_file(&g, b"g");
    fs::set_permissions(&g, fs::Permissions::from_mode(0o6755)).unwrap();
    std::os::unix::fs::chown(&g, Some(1), Some(1)).unwrap();
    assert_eq!(
        fs::metadata(&g).unwrap().mode() & 0o7777,
        0o755,
        "chown must clear set-id bits"
    );

    utimens(&f, (1_000_000_000, 123_456_789), (1_500_000_000, 987_654_321), false).unwrap();
    let m = fs::metadata(&f).unwrap();
    assert_eq!((m.atime(), m.atime_nsec()), (1_000_000_000, 123_456_789), "atime");
    assert_eq!((m.mtime(), m.mtime_nsec()), (1_500_000_000, 987_654_321), "mtime");
    utimens(v.p("d").as_path(), (1_100_000_000, 0), (1_200_000_000, 5), false).unwrap();
    utimens(v.p("l").as_path(), (1_300_000_000, 0), (1_400_000_000, 7), true).unwrap();
    let m = fs::symlink_metadata(v.p("l")).unwrap();
    assert_eq!(
        (m.mtime(), m.mtime_nsec()),
        (1_400_000_000, 7),
        "symlink mtime (AT_SYMLINK_NOFOLLOW)"
    );

    // chmod does not touch content; truncate keeps the mode.
    assert_eq!(fs::read(&f).unwrap(), b"data");

    v.remount();
    let m = fs::metadata(&f).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o4751, "mode after remount");
    assert_eq!((m.uid(), m.gid()), (1234, 5678), "owner after remount");
    assert_eq!(
        (m.mtime(), m.mtime_nsec()),
        (1_500_000_000, 987_654_321),
        "mtime after remount"
    );
    let m = fs::metadata(v.p("d")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o711, "dir mode after remount");
    assert_eq!(
        (m.mtime(), m.mtime_nsec()),
        (1_200_000_000, 5),
        "dir mtime after remount"
    );
    let m = fs::symlink_metadata(v.p("l")).unwrap();
    assert_eq!((m.uid(), m.gid()), (42, 43), "symlink owner after remount");

    // A write moves mtime forward.
    let before = fs::metadata(&f).unwrap().mtime();
    let g = OpenOptions::new().write(true).open(&f).unwrap();
    write_at(&g, 0, b"DATA").unwrap();
    g.sync_all().unwrap();
    drop(g);
    let after = fs::metadata(&f).unwrap().mtime();
    assert!(after > before, "mtime did not advance on write ({before} -> {after})");
}

fn statfs(mode: Mode) {
    require_fuse!();
    let v = Volume::new(mode);
    let s = statvfs(&v.mnt).expect("statvfs on the mount");
    let b = statvfs(&v.cipher).unwrap();
    assert!(
        s.f_bsize > 0 && s.f_frsize > 0,
        "block sizes {} {}",
        s.f_bsize,
        s.f_frsize
    );
    assert!(s.f_blocks > 0, "f_blocks is 0");
    assert!(s.f_bfree <= s.f_blocks && s.f_bavail <= s.f_blocks, "free > total");
    assert!(
        s.f_namemax >= 255,
        "f_namemax {} < 255 (long names are supported)",
        s.f_namemax
    );
    let total = s.f_blocks as f64 * s.f_frsize as f64;
    let btotal = b.f_blocks as f64 * b.f_frsize as f64;
    assert!(
        (total / btotal - 1.0).abs() < 0.1,
        "mount reports {total} bytes total, backing fs {btotal}"
    );
    let avail = s.f_bavail as f64 * s.f_frsize as f64;
    let bavail = b.f_bavail as f64 * b.f_frsize as f64;
    assert!(
        (avail - bavail).abs() <= 0.1 * btotal,
        "mount reports {avail} bytes available, backing fs {bavail}"
    );
}

fn xattrs(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    if !backing_supports_user_xattrs(v.root()) {
        warpfs_testkit::skip("the backing file system has no user.* xattrs");
        return;
    }
    let f = v.p("f");
    write_file(&f, b"x");
    if !xattrs_or_refused(&f) {
        return;
    }
    fs::create_dir(v.p("d")).unwrap();
    let user_names = |p: &Path| -> BTreeSet<String> {
        listxattr(p)
            .unwrap_or_else(|e| panic!("listxattr {}: {e}", p.display()))
            .into_iter()
            .filter(|n| n.starts_with("user."))
            .collect()
    };
    let v1: &[u8] = b"value\0with nul \xff\xfe";
    // Not near the backing fs's per-inode limit (ext4: ~4 KiB for all xattrs
    // of an inode; encrypted names and sealed values are longer).
    let big: Vec<u8> = (0..2000u32).map(|i| (i * 7) as u8).collect();
    for p in [&f, &v.p("d")] {
        assert!(
            user_names(p).is_empty(),
            "fresh {} lists user xattrs: {:?}",
            p.display(),
            user_names(p)
        );
        assert_errno(getxattr(p, "user.none"), libc::ENODATA, "get missing xattr");
        setxattr(p, "user.test", v1, 0).unwrap_or_else(|e| panic!("setxattr on {}: {e}", p.display()));
        assert_eq!(getxattr(p, "user.test").unwrap(), v1);
        assert_eq!(getxattr_size(p, "user.test").unwrap(), v1.len(), "size query");
        setxattr(p, "user.big", &big, 0).unwrap();
        setxattr(p, "user.empty", b"", 0).unwrap();
        assert_eq!(getxattr(p, "user.empty").unwrap(), b"");
        assert_eq!(user_names(p), set(&["user.big", "user.empty", "user.test"]));
        assert_errno(
            setxattr(p, "user.test", b"v", libc::XATTR_CREATE),
            libc::EEXIST,
            "XATTR_CREATE on existing",
        );
        assert_errno(
            setxattr(p, "user.nope", b"v", libc::XATTR_REPLACE),
            libc::ENODATA,
            "XATTR_REPLACE on missing",
        );
        setxattr(p, "user.test", b"replaced", libc::XATTR_REPLACE).unwrap();
        assert_eq!(getxattr(p, "user.test").unwrap(), b"replaced");
        removexattr(p, "user.test").unwrap();
        assert_errno(getxattr(p, "user.test"), libc::ENODATA, "get removed xattr");
        assert_errno(removexattr(p, "user.test"), libc::ENODATA, "remove missing xattr");
    }
    // Content is unaffected.
    assert_eq!(fs::read(&f).unwrap(), b"x");
    v.remount();
    for p in [&f, &v.p("d")] {
        assert_eq!(user_names(p), set(&["user.big", "user.empty"]), "after remount");
        assert_eq!(getxattr(p, "user.big").unwrap(), big, "user.big after remount");
    }
    // Rename keeps xattrs.
    fs::rename(&f, v.p("g")).unwrap();
    assert_eq!(getxattr(&v.p("g"), "user.big").unwrap(), big, "xattr after rename");
}

fn fallocate_ranges(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("fallocate-{}", mode.name()));
    let mut v = Volume::new(mode);
    let path = v.p("fa.bin");
    let mut model = rng.bytes(10_000);
    let f = open_rw(&path);
    write_at(&f, 0, &model).unwrap();
    let check = |model: &[u8], ctx: &str| {
        let g = File::open(&path).unwrap();
        drop_cache(&g);
        assert_eq!(g.metadata().unwrap().len(), model.len() as u64, "{ctx}: size");
        assert_bytes_eq(&read_at(&g, 0, model.len() + 1).unwrap(), model, ctx);
    };
    fallocate(&f, 0, 0, 200_000).expect("fallocate(0, 0, 200000)");
    model.resize(200_000, 0);
    check(&model, "fallocate extending from 10000 to 200000");
    fallocate(&f, 0, 5000, 1000).expect("fallocate inside existing data");
    check(&model, "fallocate inside data");
    fallocate(&f, 0, NNODE_DATA + SEGMENT + 100, 10).expect("fallocate past the first nonce page");
    model.resize((NNODE_DATA + SEGMENT + 110) as usize, 0);
    check(&model, "fallocate past the first nonce page");
    let d = rng.bytes(3000);
    write_at(&f, 150_000, &d).unwrap();
    model[150_000..153_000].copy_from_slice(&d);
    check(&model, "write into fallocated range");
    match fallocate(&f, libc::FALLOC_FL_KEEP_SIZE, 2_000_000, 4096) {
        Ok(()) => check(&model, "FALLOC_FL_KEEP_SIZE"),
        Err(e) => assert_eq!(errno(&e), libc::EOPNOTSUPP, "FALLOC_FL_KEEP_SIZE: {e}"),
    }
    match fallocate(&f, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 4096, 8192) {
        Ok(()) => {
            model[4096..12288].fill(0);
            check(&model, "FALLOC_FL_PUNCH_HOLE");
        }
        Err(e) => assert_eq!(errno(&e), libc::EOPNOTSUPP, "FALLOC_FL_PUNCH_HOLE: {e}"),
    }
    drop(f);
    v.remount();
    check(&model, "after remount");
}

fn long_names(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let n200: String = format!("{}-200", "n".repeat(196));
    let n255: String = "x".repeat(255);
    let n_utf8: String = "é".repeat(120); // 240 bytes
    let ndir: String = format!("dir-{}", "d".repeat(226));
    let nlink: String = format!("link-{}", "l".repeat(220));
    let nsym: String = format!("sym-{}", "s".repeat(240));
    assert_eq!(n255.len(), 255);

    let long_entries = |v: &Volume| -> Vec<String> {
        v.backing_paths()
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("warpfs.long."))
            .collect()
    };

    write_file(&v.p(&n255), b"255");
    assert_eq!(names(&v.mnt), set(&[&n255]));
    assert_eq!(fs::read(v.p(&n255)).unwrap(), b"255");
    let le = long_entries(&v);
    assert!(
        le.iter().any(|n| !n.ends_with(".name")) && le.iter().any(|n| n.ends_with(".name")),
        "a 255-byte name must be stored as warpfs.long.<hash> + .name sidecar; cipher dir has {le:?}"
    );
    for p in v.backing_paths() {
        assert!(p.file_name().unwrap().len() <= 255);
    }

    // 256 bytes is too long for Linux.
    assert_errno(File::create(v.p("y".repeat(256))), libc::ENAMETOOLONG, "256-byte name");

    // Renames long->long, long->short, short->long.
    fs::rename(v.p(&n255), v.p(&n200)).unwrap();
    assert_eq!(names(&v.mnt), set(&[&n200]));
    fs::rename(v.p(&n200), v.p("short")).unwrap();
    assert_eq!(names(&v.mnt), set(&["short"]));
    assert!(
        long_entries(&v).is_empty(),
        "long-name entries left after renaming to a short name: {:?}",
        long_entries(&v)
    );
    fs::rename(v.p("short"), v.p(&n_utf8)).unwrap();
    assert_eq!(names(&v.mnt), set(&[&n_utf8]));
    assert_eq!(fs::read(v.p(&n_utf8)).unwrap(), b"255");

    // Long dir with a long file inside, long hard link, long symlink.
    fs::create_dir(v.p(&ndir)).unwrap();
    write_file(&v.p(&ndir).join(&n255), b"inside");
    fs::hard_link(v.p(&n_utf8), v.p(&nlink)).unwrap();
    std::os::unix::fs::symlink(&n255, v.p(&nsym)).unwrap();
    assert_eq!(names(&v.mnt), set(&[&n_utf8, &ndir, &nlink, &nsym]));
    assert_eq!(fs::read(v.p(&nlink)).unwrap(), b"255");
    assert_eq!(fs::metadata(v.p(&nlink)).unwrap().nlink(), 2);
    assert_eq!(fs::read_link(v.p(&nsym)).unwrap(), PathBuf::from(&n255));

    let before = snapshot(&v.mnt);
    v.remount();
    assert_snapshots_eq(&snapshot(&v.mnt), &before, "after remount");

    // Unlink everything: no long-name entries or sidecars stay behind.
    fs::remove_file(v.p(&n_utf8)).unwrap();
    fs::remove_file(v.p(&nlink)).unwrap();
    fs::remove_file(v.p(&nsym)).unwrap();
    fs::remove_file(v.p(&ndir).join(&n255)).unwrap();
    fs::remove_dir(v.p(&ndir)).unwrap();
    assert!(names(&v.mnt).is_empty());
    v.unmount();
    assert!(
        long_entries(&v).is_empty(),
        "long-name entries left after unlink: {:?}",
        long_entries(&v)
    );
    assert!(v.root_backing_entries().is_empty(), "{:?}", v.root_backing_entries());
}

fn odd_names(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let odd = [
        "warpfs.conf",
        "warpfs.diriv",
        "warpfs.long.abc",
        ".hidden",
        "...",
        "with space",
        "new\nline",
        "tab\there",
        "ünïcødé ☃",
        "-dash",
        "a=b+c%d&e",
        "back\\slash",
        "x",
    ];
    for (i, n) in odd.iter().enumerate() {
        write_file(&v.p(n), format!("content {i}").as_bytes());
    }
    fs::create_dir(v.p("sub")).unwrap();
    write_file(&v.p("sub/warpfs.diriv"), b"not an IV");
    write_file(&v.p("sub/warpfs.conf"), b"not a config");
    let mut want: BTreeSet<String> = odd.iter().map(|s| s.to_string()).collect();
    want.insert("sub".into());
    assert_eq!(names(&v.mnt), want);
    for (i, n) in odd.iter().enumerate() {
        assert_eq!(
            fs::read(v.p(n)).unwrap(),
            format!("content {i}").as_bytes(),
            "content of {n:?}"
        );
    }
    v.remount();
    assert_eq!(names(&v.mnt), want, "after remount");
    for (i, n) in odd.iter().enumerate() {
        assert_eq!(
            fs::read(v.p(n)).unwrap(),
            format!("content {i}").as_bytes(),
            "content of {n:?} after remount"
        );
    }
    assert_eq!(fs::read(v.p("sub/warpfs.diriv")).unwrap(), b"not an IV");
    assert_eq!(fs::read(v.p("sub/warpfs.conf")).unwrap(), b"not a config");
    v.unmount();
    // The real config is intact: mounting again works.
    v.mount();
}

fn tree_persists(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("tree_persists-{}", mode.name()));
    let mut v = Volume::new(mode);
    let sizes = [
        0u64,
        1,
        4095,
        4096,
        4097,
        65_535,
        65_536,
        65_537,
        NNODE_DATA + SEGMENT - 1,
        NNODE_DATA + SEGMENT + 1,
    ];
    let mut dirs = vec![PathBuf::new()];
    for i in 0..12 {
        let parent = dirs[rng.below(dirs.len() as u64) as usize].clone();
        let d = parent.join(format!("dir{i}"));
        fs::create_dir(v.p(&d)).unwrap();
        dirs.push(d);
    }
    let mut modes = Vec::new();
    for i in 0..40 {
        let parent = dirs[rng.below(dirs.len() as u64) as usize].clone();
        let p = parent.join(format!("file{i}.dat"));
        let size = if i < sizes.len() { sizes[i] } else { rng.below(200_000) };
        let n = size as usize;
        write_file(&v.p(&p), &rng.bytes(n));
        let m = 0o600 | (rng.below(0o100) as u32);
        fs::set_permissions(v.p(&p), fs::Permissions::from_mode(m)).unwrap();
        modes.push((p, m));
    }
    for i in 0..6 {
        let parent = dirs[rng.below(dirs.len() as u64) as usize].clone();
        std::os::unix::fs::symlink(format!("../target{i}"), v.p(parent.join(format!("link{i}")))).unwrap();
    }
    mknod_fifo(&v.p("dir0/fifo"), 0o644).unwrap();
    let before = snapshot(&v.mnt);
    for round in 0..2 {
        v.remount();
        assert_snapshots_eq(&snapshot(&v.mnt), &before, &format!("after remount {round}"));
        for (p, m) in &modes {
            assert_eq!(
                fs::metadata(v.p(p)).unwrap().mode() & 0o7777,
                *m,
                "mode of {}",
                p.display()
            );
        }
    }
}

fn create_flags(mode: Mode) {
    require_fuse!();
    let v = Volume::new(mode);
    let p = v.p("c");
    let umask = fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Umask:")
                .map(|u| u32::from_str_radix(u.trim(), 8).unwrap())
        })
        .unwrap_or(0o022);
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .open(&p)
        .unwrap();
    drop(f);
    let m = fs::metadata(&p).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o640 & !umask, "mode of a file created with 0640");
    assert!(m.is_file() && m.len() == 0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (m.mtime() - now).abs() < 300,
        "mtime of a new file {} vs now {now}",
        m.mtime()
    );
    assert_errno(
        OpenOptions::new().write(true).create_new(true).open(&p),
        libc::EEXIST,
        "O_CREAT|O_EXCL on an existing file",
    );
    assert_errno(File::open(v.p("missing")), libc::ENOENT, "open of a missing file");
    fs::create_dir(v.p("d")).unwrap();
    assert_errno(
        OpenOptions::new().write(true).open(v.p("d")),
        libc::EISDIR,
        "open of a directory for writing",
    );
    write_file(&p, b"some content");
    OpenOptions::new().write(true).truncate(true).open(&p).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().len(), 0, "O_TRUNC");
    let mut r = File::open(&p).unwrap();
    assert_errno(r.write_all(b"x"), libc::EBADF, "write to an O_RDONLY fd");
    let mut buf = Vec::new();
    r.read_to_end(&mut buf).unwrap();
    assert!(buf.is_empty());
}

fn concurrent_namespace(mode: Mode) {
    // Threads creating, renaming, linking and deleting in one directory.
    require_fuse!();
    let mut v = Volume::new(mode);
    fs::create_dir(v.p("shared")).unwrap();
    let dir = v.p("shared");
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                for i in 0..60 {
                    let a = dir.join(format!("t{t}-{i}"));
                    write_file(&a, format!("{t}/{i}").as_bytes());
                    match i % 4 {
                        0 => fs::rename(&a, dir.join(format!("t{t}-{i}-renamed"))).unwrap(),
                        1 => fs::hard_link(&a, dir.join(format!("t{t}-{i}-link"))).unwrap(),
                        2 => fs::remove_file(&a).unwrap(),
                        _ => fs::create_dir(dir.join(format!("t{t}-{i}-dir"))).unwrap(),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("namespace thread panicked");
    }
    let mut want = BTreeSet::new();
    for t in 0..4 {
        for i in 0..60 {
            match i % 4 {
                0 => {
                    want.insert(format!("t{t}-{i}-renamed"));
                }
                1 => {
                    want.insert(format!("t{t}-{i}"));
                    want.insert(format!("t{t}-{i}-link"));
                }
                2 => {}
                _ => {
                    want.insert(format!("t{t}-{i}"));
                    want.insert(format!("t{t}-{i}-dir"));
                }
            }
        }
    }
    assert_eq!(names(&dir), want, "listing after concurrent namespace operations");
    let check = |v: &Volume| {
        for t in 0..4 {
            for i in (1..60).step_by(4) {
                let c = fs::read(v.p(format!("shared/t{t}-{i}-link"))).unwrap();
                assert_eq!(c, format!("{t}/{i}").as_bytes());
            }
        }
    };
    check(&v);
    v.remount();
    assert_eq!(names(&v.p("shared")), want, "listing after remount");
    check(&v);
}

fn inode_number_reuse(mode: Mode) {
    // The backing file system hands a freed inode number to the next new
    // file, often before the kernel has forgotten the old node. Before node
    // generations, the kernel then shared the old inode (link count 0, old
    // cached pages) with the new file: link() failed with ENOENT, fsync
    // too, and reads returned another file's bytes.
    // Threads work in three directories, so that one's create can run
    // while another's unlink (which holds only its own directory) is still
    // being answered.
    require_fuse!();
    let v = Volume::new(mode);
    let dirs: Vec<PathBuf> = (0..3).map(|d| v.p(format!("reuse{d}"))).collect();
    for d in &dirs {
        fs::create_dir(d).unwrap();
    }
    let handles: Vec<_> = (0..12)
        .map(|t| {
            let dir = dirs[t % 3].clone();
            std::thread::spawn(move || {
                let (mut errors, mut inos) = (Vec::new(), Vec::new());
                for i in 0..150 {
                    let a = dir.join(format!("t{t}-{i}"));
                    let b = dir.join(format!("t{t}-{i}-link"));
                    let data = format!("thread {t} file {i}").repeat(1 + i % 7);
                    let r = (|| -> std::io::Result<()> {
                        let mut f = OpenOptions::new().write(true).create_new(true).open(&a)?;
                        f.write_all(data.as_bytes())?;
                        f.sync_all()?;
                        inos.push(f.metadata()?.ino());
                        drop(f);
                        fs::hard_link(&a, &b)?;
                        let nlink = fs::metadata(&b)?.nlink();
                        if nlink != 2 {
                            return Err(std::io::Error::other(format!("nlink {nlink} after link")));
                        }
                        fs::remove_file(&a)?;
                        if fs::read(&b)? != data.as_bytes() {
                            return Err(std::io::Error::other("read back another file's bytes"));
                        }
                        fs::remove_file(&b)
                    })();
                    if let Err(e) = r {
                        errors.push(format!("t{t}-{i}: {e}"));
                    }
                }
                (errors, inos)
            })
        })
        .collect();
    let (mut errors, mut inos) = (Vec::new(), Vec::new());
    for h in handles {
        let (e, i) = h.join().unwrap();
        errors.extend(e);
        inos.extend(i);
    }
    let distinct = inos.iter().collect::<BTreeSet<_>>().len();
    // On a backing file system that never reuses numbers (tmpfs) this
    // test exercises nothing; say so in the output.
    eprintln!(
        "{} files made, {} inode numbers reused",
        inos.len(),
        inos.len() - distinct
    );
    assert!(
        errors.is_empty(),
        "{} failures, first: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    for d in &dirs {
        assert!(names(d).is_empty(), "every file was removed");
    }
}
