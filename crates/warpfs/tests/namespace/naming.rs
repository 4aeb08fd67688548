//! Names at the limits: 255-byte and UTF-8 names stored as long-name
//! entries, and names that look like warpfs's own files or hold odd bytes.

use super::*;

mode_tests!(all: long_names, odd_names);

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
