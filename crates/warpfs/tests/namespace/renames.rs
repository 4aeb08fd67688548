//! rename(2) and renameat2(2) flags: files and directories, across
//! directories, over existing names, and the errors.

use super::*;

// Over Twofish in CI: `rename` (a file of 25 blocks through directory
// and cross-directory renames); the rest in scripts/twofish-matrix.sh.
mode_tests!(twofish: rename);
mode_tests!(
    all: rename_dir_over_empty_dir,
    renameat2_flags,
    rename_whiteout_leaves_a_whiteout,
    a_reused_directory_name_is_the_new_directory,
    fstat_of_a_directory_renamed_over
);

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

/// RENAME_WHITEOUT (overlayfs renames in an upper directory this way):
/// the source's name becomes a whiteout (a character device 0:0) and the
/// moved entry is whole at its new name, for a file, a directory and a
/// symlink (which moves as a new backing symlink sealed for its new place),
/// onto a free name and over an existing file; no other backing entry is
/// left behind.
fn rename_whiteout_leaves_a_whiteout(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    write_file(&v.p("file"), b"file content");
    fs::create_dir(v.p("dir")).unwrap();
    write_file(&v.p("dir/inner"), b"inner");
    std::os::unix::fs::symlink("some/target", v.p("link")).unwrap();
    std::os::unix::fs::symlink("other/target", v.p("link2")).unwrap();
    write_file(&v.p("victim"), b"replaced");
    let backing = v.root_backing_entries().len();
    let moves = [
        ("file", "file.moved"),
        ("dir", "dir.moved"),
        ("link", "link.moved"),
        ("link2", "victim"),
    ];
    for (from, to) in moves {
        renameat2(&v.p(from), &v.p(to), libc::RENAME_WHITEOUT)
            .unwrap_or_else(|e| panic!("RENAME_WHITEOUT {from} -> {to}: {e}"));
    }
    let check = |v: &Volume, ctx: &str| {
        for (from, _) in moves {
            let m = fs::symlink_metadata(v.p(from)).unwrap_or_else(|e| panic!("{ctx}: {from} after the rename: {e}"));
            assert!(
                m.file_type().is_char_device() && m.rdev() == 0,
                "{ctx}: {from} is not a whiteout (char device 0:0): {:?} rdev {}",
                m.file_type(),
                m.rdev()
            );
        }
        assert_eq!(fs::read(v.p("file.moved")).unwrap(), b"file content", "{ctx}");
        assert_eq!(fs::read(v.p("dir.moved/inner")).unwrap(), b"inner", "{ctx}");
        assert_eq!(
            fs::read_link(v.p("link.moved")).unwrap(),
            Path::new("some/target"),
            "{ctx}"
        );
        assert_eq!(
            fs::read_link(v.p("victim")).unwrap(),
            Path::new("other/target"),
            "{ctx}"
        );
        assert_eq!(
            names(&v.mnt),
            set(&[
                "file",
                "dir",
                "link",
                "link2",
                "file.moved",
                "dir.moved",
                "link.moved",
                "victim"
            ]),
            "{ctx}"
        );
    };
    check(&v, "mounted");
    // Three new names and four whiteouts; the file over `victim` left none.
    assert_eq!(
        v.root_backing_entries().len(),
        backing + 3,
        "backing entries after the renames"
    );
    v.remount();
    check(&v, "after remount");
}

/// A directory's name given to a new directory (after a rename or rmdir, or
/// by a directory moved over an empty one) leads to the new directory at
/// once: what is made there lands there, in the backing tree too.
fn a_reused_directory_name_is_the_new_directory(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    fs::create_dir(v.p("d")).unwrap();
    write_file(&v.p("d/x"), b"first d");
    fs::rename(v.p("d"), v.p("e")).unwrap();
    fs::create_dir(v.p("d")).unwrap();
    write_file(&v.p("d/y"), b"second d");
    assert_eq!(names(&v.p("e")), set(&["x"]));
    assert_eq!(names(&v.p("d")), set(&["y"]));
    fs::remove_file(v.p("d/y")).unwrap();
    fs::remove_dir(v.p("d")).unwrap();
    fs::create_dir(v.p("d")).unwrap();
    write_file(&v.p("d/z"), b"third d");
    assert_eq!(names(&v.p("d")), set(&["z"]));
    // e moved over an empty c: c's name now leads to e's contents.
    fs::create_dir(v.p("c")).unwrap();
    assert!(names(&v.p("c")).is_empty());
    fs::rename(v.p("e"), v.p("c")).unwrap();
    write_file(&v.p("c/w"), b"in the moved e");
    assert_eq!(names(&v.p("c")), set(&["w", "x"]));
    let before = snapshot(&v.mnt);
    v.remount();
    assert_snapshots_eq(&snapshot(&v.mnt), &before, "after remount");
    assert_eq!(fs::read(v.p("c/x")).unwrap(), b"first d");
    assert_eq!(fs::read(v.p("d/z")).unwrap(), b"third d");
}

/// fstat(2) of an open file or directory after another was renamed over
/// it answers, with no links left (what xfstests' generic/035 checks): the
/// kernel asks the daemon by node, whose backing name is gone.
fn fstat_of_a_directory_renamed_over(mode: Mode) {
    require_fuse!();
    let v = Volume::new(mode);
    for dir in [false, true] {
        let (a, b) = (v.p(format!("one-{dir}")), v.p(format!("two-{dir}")));
        if dir {
            fs::create_dir(&a).unwrap();
            fs::create_dir(&b).unwrap();
        } else {
            write_file(&a, b"one");
            write_file(&b, b"two");
        }
        let held = File::open(&b).unwrap();
        let before = held.metadata().unwrap();
        fs::rename(&a, &b).unwrap();
        let after = held.metadata().unwrap_or_else(|e| {
            panic!(
                "{mode:?}: fstat of the {} renamed over: {e}",
                if dir { "directory" } else { "file" }
            )
        });
        assert_eq!(
            after.nlink(),
            0,
            "{mode:?}: links of the {} renamed over",
            if dir { "directory" } else { "file" }
        );
        assert_eq!(after.ino(), before.ino(), "{mode:?}: the descriptor's inode");
        assert_eq!(after.is_dir(), dir, "{mode:?}: its type");
        drop(held);
        if dir {
            fs::remove_dir(&b).unwrap();
        } else {
            fs::remove_file(&b).unwrap();
        }
    }
}
