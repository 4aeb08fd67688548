//! Reverse mode through real mounts (FORMAT.md 14): a copy of the view
//! (`rsync -a`, `cp -a`) mounts forward and shows PLAINDIR exactly; rsync
//! copies only what changed; inode numbers, listings and bytes stay the
//! same across remounts; excludes and --one-file-system; entries the view
//! cannot or need not show; a user's view through fusermount3; a
//! sequential reader's requests encrypted ahead.

#[macro_use]
mod common;
mod revkit;

use common::*;
use revkit::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

fn set_mtime(p: &Path, secs: i64, nsec: i64) {
    let c = cstr(p);
    let t = [
        libc::timespec {
            tv_sec: secs,
            tv_nsec: nsec,
        },
        libc::timespec {
            tv_sec: secs,
            tv_nsec: nsec,
        },
    ];
    // SAFETY: valid C string and two timespecs.
    assert_eq!(
        unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), t.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) },
        0
    );
}

/// Move every mtime below `root` that lies within the last few seconds
/// two seconds back, keeping its nanoseconds. rsync does not set the time
/// of a symlink or directory it made when its own clock second equals the
/// source's (it compares whole seconds there), so a tree made and copied
/// within one second would not keep those times, whatever the view shows.
fn age_recent(root: &Path) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p.clone());
            }
            if m.mtime() >= now - 3 {
                set_mtime(&p, m.mtime() - 2, m.mtime_nsec());
            }
        }
    }
}

/// A tree with every kind of entry a forward volume holds.
fn fill(plain: &Path) {
    let mut rng = Rng::for_test("reverse-fill");
    fs::write(plain.join("small"), b"hello").unwrap();
    fs::write(plain.join("empty"), b"").unwrap();
    fs::write(plain.join("one-block"), rng.bytes(4096)).unwrap();
    fs::write(plain.join("nnode-edge"), rng.bytes(65536)).unwrap();
    fs::write(plain.join("big"), rng.bytes(3 * 1024 * 1024 + 777)).unwrap();
    let sparse = fs::File::create(plain.join("sparse")).unwrap();
    sparse.set_len(9 * 1024 * 1024 + 5).unwrap();
    std::os::unix::fs::FileExt::write_at(&sparse, b"middle", 4 * 1024 * 1024).unwrap();
    fs::write(plain.join("x".repeat(176)), b"long name").unwrap();
    fs::write(plain.join("y".repeat(255)), b"longest name").unwrap();
    fs::write(plain.join("ünïcödé name"), b"u").unwrap();
    let mut deep = plain.to_owned();
    for i in 0..40 {
        deep.push(format!("level-{i:02}-{}", "d".repeat(40)));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("bottom"), b"deep").unwrap();
    fs::create_dir(plain.join("dir")).unwrap();
    std::os::unix::fs::symlink("../small", plain.join("dir/rel-link")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", plain.join("abs-link")).unwrap();
    std::os::unix::fs::symlink("z".repeat(3000), plain.join("dir/long-target")).unwrap();
    fs::write(plain.join("dir/mode600"), b"private").unwrap();
    fs::set_permissions(plain.join("dir/mode600"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(plain.join("dir/setgid"), b"s").unwrap();
    fs::set_permissions(plain.join("dir/setgid"), fs::Permissions::from_mode(0o2755)).unwrap();
    let c = cstr(&plain.join("fifo"));
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o640) }, 0);
    let c = cstr(&plain.join("null-device"));
    // SAFETY: valid C string; makes a character device node (root).
    assert_eq!(
        unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) },
        0
    );
    std::os::unix::net::UnixListener::bind(plain.join("socket")).unwrap();
    set_mtime(&plain.join("small"), 1_000_000_000, 123_456_789);
    set_mtime(&plain.join("dir/rel-link"), 1_200_000_000, 5);
    set_mtime(&plain.join("dir"), 1_300_000_000, 999_999_999);
    age_recent(plain);
}

#[test]
fn a_copy_of_the_view_mounts_forward_and_shows_plaindir_exactly() {
    require_fuse!();
    if warpfs_testkit::skip_if(rsync_missing()) {
        return;
    }
    let mut r = Rev::new();
    fill(&r.plain);
    r.init();
    r.mount_view(&[]);
    let want = tree(&r.plain);
    // Read-only: nothing is written through the view.
    let e = fs::write(r.view.join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    assert!(r.view.join("warpfs.conf").exists() && r.view.join("warpfs.diriv").exists());
    // Sizes come from the layout, without reading.
    let big = fs::metadata(r.plain.join("big")).unwrap().len();
    let sizes: Vec<u64> = fs::read_dir(&r.view)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    assert!(sizes.contains(&Mode::Gcm.backing_len(big)), "{sizes:?}");

    let copy = r.p("rsync-copy");
    rsync(&[], &r.view, &copy);
    let fwd = r.forward(&copy);
    assert_same_tree(&want, &tree(&fwd));
    r.unmount(&fwd);

    let copy2 = r.p("cp-copy");
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&copy2));
    let fwd2 = r.forward(&copy2);
    assert_same_tree(&want, &tree(&fwd2));
    // The symlink whose sealed target would not fit is left out (logged).
    assert!(fs::symlink_metadata(fwd2.join("dir/long-target")).is_ok());
    r.unmount(&fwd2);
    // warpfs fsck finds nothing wrong in the copy.
    warpfs(args!["fsck", "--passfile", &r.pass, &copy]).expect_ok("fsck of a copy of the view");
}

#[test]
fn a_symlink_whose_encrypted_target_does_not_fit_is_left_out_and_logged() {
    require_fuse!();
    let mut r = Rev::new();
    std::os::unix::fs::symlink("t".repeat(3500), r.plain.join("too-long")).unwrap();
    std::os::unix::fs::symlink("short", r.plain.join("fits")).unwrap();
    r.init();
    r.mount_view(&[]);
    let names: Vec<_> = fs::read_dir(&r.view).unwrap().map(|e| e.unwrap().file_name()).collect();
    // warpfs.conf, warpfs.diriv and the one symlink that fits.
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(r.log().contains("too-long left out"), "{}", r.log());
}

#[test]
fn rsync_copies_only_what_changed() {
    require_fuse!();
    if warpfs_testkit::skip_if(rsync_missing()) {
        return;
    }
    let mut r = Rev::new();
    let mut rng = Rng::for_test("reverse-rsync");
    let big = r.plain.join("hundred-mib");
    fs::write(&big, rng.bytes(100 << 20)).unwrap();
    for i in 0..20 {
        fs::write(r.plain.join(format!("f{i}")), rng.bytes(1000 * i)).unwrap();
    }
    fs::create_dir(r.plain.join("sub")).unwrap();
    fs::write(r.plain.join("sub/g"), b"g").unwrap();
    age_recent(&r.plain);
    r.init();
    r.mount_view(&[]);
    let dst = r.p("backup");
    // --no-whole-file: rsync's delta algorithm, as over a network.
    let first = rsync(&["--no-whole-file"], &r.view, &dst);
    assert!(first.transferred >= 23, "{first:?}");
    let again = rsync(&["--no-whole-file"], &r.view, &dst);
    eprintln!("second rsync, nothing changed: {again:?}");
    assert_eq!(again.transferred, 0, "{again:?}");

    // One 4 KiB block in the middle of the 100 MiB file.
    let f = fs::OpenOptions::new().write(true).open(&big).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, &rng.bytes(4096), 50 << 20).unwrap();
    let m = fs::metadata(&big).unwrap();
    set_mtime(&big, m.mtime() + 10, 0);
    // The view's attributes may be cached for a second: wait until the
    // kernel shows the new mtime (rsync's quick check compares it).
    let in_view = fs::read_dir(&r.view)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| fs::metadata(p).unwrap().len() > 50 << 20)
        .unwrap();
    eventually("the view shows the new mtime", || {
        fs::metadata(&in_view).unwrap().mtime() == m.mtime() + 10
    });
    let one = rsync(&["--no-whole-file"], &r.view, &dst);
    eprintln!("rsync after one changed 4 KiB block of 100 MiB: {one:?}");
    assert_eq!(one.transferred, 1, "{one:?}");
    // rsync's blocks are about 10 KiB for a 100 MiB file: the changed
    // block and its nonce entry (in the page before its segment) are two
    // or three of them.
    assert!(
        one.literal <= 64 * 1024,
        "more than the changed region was sent: {one:?}"
    );

    // A rename changes only that entry.
    fs::rename(r.plain.join("f7"), r.plain.join("f7-renamed")).unwrap();
    let ren = rsync(&["--no-whole-file", "--delete"], &r.view, &dst);
    eprintln!("rsync after a rename: {ren:?}");
    assert_eq!((ren.transferred, ren.created, ren.deleted), (1, 1, 1), "{ren:?}");
    let fwd = r.forward(&dst);
    assert_same_tree(&tree(&r.plain), &tree(&fwd));
}

/// Path, inode number, size and mtime of one entry.
type Identity = (String, u64, u64, i64);

/// `stat` of every entry below `root`, and each directory's listing in
/// order.
fn identities(root: &Path) -> (Vec<Identity>, Vec<Vec<String>>) {
    let (mut stats, mut lists) = (Vec::new(), Vec::new());
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        let mut names = Vec::new();
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = fs::symlink_metadata(e.path()).unwrap();
            names.push(e.file_name().to_string_lossy().into_owned());
            stats.push((e.path().display().to_string(), m.ino(), m.len(), m.mtime()));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
        lists.push(names);
    }
    (stats, lists)
}

#[test]
fn inode_numbers_listings_and_bytes_are_the_same_after_a_remount() {
    require_fuse!();
    let mut r = Rev::new();
    fill(&r.plain);
    fs::write(r.plain.join("linked"), b"hard").unwrap();
    fs::hard_link(r.plain.join("linked"), r.plain.join("dir/linked-too")).unwrap();
    r.init();
    r.mount_view(&[]);
    let (s1, l1) = identities(&r.view);
    let bytes1 = tree(&r.view);
    // Distinct numbers for distinct entries; the plaintext number where it can be.
    let mut inos: Vec<u64> = s1.iter().map(|s| s.1).collect();
    inos.sort();
    inos.dedup();
    assert_eq!(inos.len(), s1.len(), "two entries share an inode number");
    let plain_small = fs::metadata(r.plain.join("small")).unwrap().ino();
    assert!(s1.iter().any(|s| s.1 == plain_small));
    let view = r.view.clone();
    r.unmount(&view);
    r.mount_view(&[]);
    let (s2, l2) = identities(&r.view);
    assert_eq!(s1, s2);
    assert_eq!(l1, l2);
    assert!(bytes1 == tree(&r.view), "the view's bytes changed across a remount");
}

#[test]
fn excluded_paths_and_other_file_systems_are_not_in_the_view() {
    require_fuse!();
    let mut r = Rev::new();
    for d in ["keep", "skip", "cache", "deep/a/b", "mnt"] {
        fs::create_dir_all(r.plain.join(d)).unwrap();
    }
    for f in [
        "keep/x.txt",
        "keep/x.tmp",
        "skip/y",
        "cache/z",
        "deep/a/b/note.log",
        "deep/a/b/data",
        "top.bak",
    ] {
        fs::write(r.plain.join(f), f.as_bytes()).unwrap();
    }
    let list = r.p("excludes");
    fs::write(&list, "# logs\n*.log\n/top.bak\n").unwrap();
    // Another file system inside PLAINDIR.
    let mnt = r.plain.join("mnt");
    sh(Command::new("mount").args(["-t", "tmpfs", "tmpfs"]).arg(&mnt));
    fs::write(mnt.join("elsewhere"), b"e").unwrap();
    r.init();
    let list_s = list.display().to_string();
    r.mount_view(&[
        "--exclude",
        "skip",
        "--exclude-wildcard",
        "*.tmp",
        "--exclude-wildcard",
        "cache/",
        "--exclude-from",
        &list_s,
        "--one-file-system",
    ]);
    let copy = r.p("copy");
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&copy));
    let fwd = r.forward(&copy);
    let got: Vec<String> = tree(&fwd).into_keys().collect();
    let _ = sh(Command::new("umount").arg(&mnt));
    assert_eq!(
        got,
        [
            "deep",
            "deep/a",
            "deep/a/b",
            "deep/a/b/data",
            "keep",
            "keep/x.txt",
            "mnt"
        ],
        "{got:?}"
    );
}

#[test]
fn a_user_mounts_a_view_through_fusermount3_and_an_unreadable_file_fails_alone() {
    require_fuse!();
    if warpfs_testkit::skip_if(user_mounts_unavailable()) {
        return;
    }
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    let r = Rev::new();
    fs::write(r.plain.join("readable"), b"yes").unwrap();
    fs::write(r.plain.join("unreadable"), b"no").unwrap();
    fs::set_permissions(r.plain.join("unreadable"), fs::Permissions::from_mode(0o000)).unwrap();
    for p in [r.dir.path(), &r.plain, &r.view, &r.pass] {
        std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    for f in ["readable", "unreadable"] {
        std::os::unix::fs::chown(r.plain.join(f), Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let as_nobody = |args: &[&std::ffi::OsStr]| {
        let o = Command::new(BIN).args(args).uid(NOBODY).gid(NOBODY).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    as_nobody(&[
        &os("init"),
        &os("--reverse"),
        &os("--passfile"),
        r.pass.as_os_str(),
        &os("--kdf-memory"),
        &os("32768"),
        &os("--kdf-iterations"),
        &os("2"),
        &os("--quiet"),
        r.plain.as_os_str(),
    ]);
    as_nobody(&[
        &os("mount"),
        &os("--reverse"),
        &os("--passfile"),
        r.pass.as_os_str(),
        r.plain.as_os_str(),
        r.view.as_os_str(),
    ]);
    let opts = super_options(&r.view);
    // `./`: an encrypted name may start with '-'.
    let script = "set -e; n=$(ls | wc -l); echo entries=$n; \
        for f in *; do if e=$(cat \"./$f\" 2>&1 > /dev/null); then echo ok; else echo \"$e\"; fi; done";
    let o = Command::new("sh")
        .args(["-c", script])
        .current_dir(&r.view)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    unmount_path(&r.view).unwrap();
    assert!(
        opts.contains(&format!("user_id={NOBODY}")),
        "not the user's mount: {opts}"
    );
    // warpfs.conf, warpfs.diriv and both files are listed; the unreadable
    // one alone fails to read (EACCES), the others read.
    assert!(out.starts_with("entries=4\n"), "{out}");
    assert_eq!(out.matches("ok\n").count(), 3, "{out}");
    assert_eq!(out.matches("Permission denied").count(), 1, "{out}");
}

#[test]
fn a_config_kept_outside_plaindir_is_shown_as_warpfs_conf_and_a_forward_config_is_refused() {
    require_fuse!();
    let mut r = Rev::new();
    fs::write(r.plain.join("f"), b"content").unwrap();
    let conf = r.p("elsewhere.conf");
    let mut a = args!["init", "--reverse", "--config", &conf, "--passfile", &r.pass];
    a.extend(args![
        "--kdf-memory",
        "32768",
        "--kdf-iterations",
        "2",
        "--quiet",
        &r.plain
    ]);
    warpfs(a).expect_ok("init --reverse --config");
    assert!(!r.plain.join(HIDDEN).exists(), "the config went into PLAINDIR");
    let conf_s = conf.display().to_string();
    r.mount_view(&["--config", &conf_s]);
    assert_eq!(fs::read(r.view.join("warpfs.conf")).unwrap(), fs::read(&conf).unwrap());
    let copy = r.p("copy");
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&copy));
    let fwd = r.forward(&copy);
    assert_eq!(fs::read(fwd.join("f")).unwrap(), b"content");
    // A forward volume's config is not a reverse config.
    let other = r.p("forward-vol");
    warpfs(args![
        "init",
        "--passfile",
        &r.pass,
        "--kdf-memory",
        "32768",
        "--kdf-iterations",
        "2",
        "--quiet",
        &other
    ])
    .expect_ok("init");
    let mnt2 = r.p("mnt2");
    fs::create_dir(&mnt2).unwrap();
    let o = warpfs(args![
        "mount",
        "--reverse",
        "--config",
        other.join("warpfs.conf"),
        "--passfile",
        &r.pass,
        &r.plain,
        &mnt2
    ]);
    assert!(!o.ok() && o.stderr.contains("not a reverse config"), "{o}");
    assert!(!is_mounted(&mnt2));
}

/// The largest regular file in directory `d` (a view's cipher files have
/// encrypted names).
fn largest_file(d: &Path) -> std::path::PathBuf {
    fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| fs::symlink_metadata(p).unwrap().is_file())
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .expect("a file in the view")
}

/// Read `p` from start to end in 256 KiB O_DIRECT requests (each one FUSE
/// read of its size at its offset: no page cache, no kernel read-ahead),
/// pausing `pause` between requests.
fn read_sequentially(p: &Path, pause: std::time::Duration) -> Vec<u8> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    const REQ: usize = 256 << 10;
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(p)
        .unwrap();
    let mut got = Vec::new();
    loop {
        let mut b = vec![0u8; REQ];
        let n = f.read_at(&mut b, got.len() as u64).unwrap();
        if n == 0 {
            return got;
        }
        got.extend_from_slice(&b[..n]);
        std::thread::sleep(pause);
    }
}

/// A sequential reader of a large file gets the same view bytes whether
/// its next requests are encrypted ahead (`--read-ahead 2`) or not
/// (`--read-ahead 0`), and with encrypt-ahead every block it read was
/// counted once, served ahead or read by the reader (which path a block
/// takes is a timing: not asserted). The copy of the view still mounts
/// forward and shows the plaintext.
#[test]
fn a_sequential_reader_gets_the_same_bytes_encrypted_ahead() {
    require_fuse!();
    let mut r = Rev::new();
    let plain = Rng::for_test("reverse-ahead").bytes(6 * 1024 * 1024 + 777);
    fs::write(r.plain.join("big"), &plain).unwrap();
    r.init();
    r.mount_view(&["--read-ahead", "0"]);
    let name = largest_file(&r.view).file_name().unwrap().to_owned();
    let want = read_sequentially(&r.view.join(&name), std::time::Duration::ZERO);
    let o = warpfs(args!["stats", "--json", &r.view]);
    assert!(!o.ok(), "a view without encrypt-ahead has no engine to report:\n{o}");
    let view = r.view.clone();
    r.unmount(&view);

    r.mount_view(&["--read-ahead", "2"]);
    let s0 = stats_at(&r.view);
    // Pauses leave the threads time to finish (no assertion depends on it).
    let got = read_sequentially(&r.view.join(&name), std::time::Duration::from_millis(20));
    assert_bytes_eq(&got, &want, "the view read with encrypt-ahead");
    let s = stats_at(&r.view);
    let served = s.ahead_served - s0.ahead_served;
    let by_reader = s.ahead_inline - s0.ahead_inline;
    eprintln!("served ahead {served}, read by the reader {by_reader}");
    assert_eq!(
        served + by_reader,
        (want.len() as u64).div_ceil(4096),
        "served ahead {served} + read by the reader {by_reader}:\n{s}"
    );

    // The bytes are a volume's: a copy of the view decrypts to the plaintext.
    let copy = r.p("copy");
    fs::create_dir(&copy).unwrap();
    for e in fs::read_dir(&r.view).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::write(copy.join(e.file_name()), fs::read(e.path()).unwrap()).unwrap();
        }
    }
    fs::write(copy.join(&name), &got).unwrap();
    let fwd = r.forward(&copy);
    assert_bytes_eq(&fs::read(fwd.join("big")).unwrap(), &plain, "the copy mounted forward");
}
