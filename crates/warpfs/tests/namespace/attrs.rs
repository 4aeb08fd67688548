//! Metadata: chmod/chown/utimens, statfs, extended attributes and
//! fallocate ranges.

use super::*;

// Over Twofish in CI: fallocate (holes and written blocks past the first
// nonce page); the rest in scripts/twofish-matrix.sh.
mode_tests!(twofish: fallocate_ranges);
mode_tests!(all: chmod_chown_utimens, statfs, xattrs);

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
