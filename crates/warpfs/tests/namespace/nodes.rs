//! Making and removing nodes: mkdir/rmdir, fifos, open(2) create flags,
//! and a whole random tree kept across remounts.

use super::*;

mode_tests!(all: mkdir_rmdir, fifo, create_flags, tree_persists);

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
