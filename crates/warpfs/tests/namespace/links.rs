//! Hard links, unlinking files still open (and renaming over them), and
//! symlinks.

use super::*;

// Over Twofish in CI: hard links (one file's content under two names);
// the rest in scripts/twofish-matrix.sh.
mode_tests!(twofish: hard_links);
mode_tests!(all: unlink_open_file, symlinks);

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
    // Names and attributes valid 0 s in the kernel: every stat and fstat
    // below is answered by the daemon, never by a cached attribute.
    let mut v = Volume::init(mode);
    v.mount_with(&["--cache-timeout", "0"]);
    let path = v.p("tmp.bin");
    let mut model = rng.bytes(200_000);
    let f = open_rw(&path);
    write_at(&f, 0, &model).unwrap();
    f.sync_all().unwrap();
    fs::remove_file(&path).unwrap();
    assert!(!path.exists(), "unlinked file still visible");
    assert!(names(&v.mnt).is_empty(), "root not empty after unlink");
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
