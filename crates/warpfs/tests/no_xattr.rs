//! `mount --no-xattr`: every xattr call fails with EOPNOTSUPP through the
//! mount (the daemon answers ENOSYS once and the kernel stops asking), data
//! still round-trips, attributes set before stay on disk for a later mount
//! without the flag, and the commands that talk to a mount through its
//! virtual attributes (`warpfs stats`, an online `warpfs rekey`) still work:
//! they use the mount root's control ioctls.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::io::Write;

mode_tests!(no_xattr_mount);

fn no_xattr_mount(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let xattrs_on_backing = backing_supports_user_xattrs(v.root());
    let f = v.p("f");
    write_file(&f, b"before");
    if xattrs_on_backing && mounts_serve_xattrs() {
        setxattr(&f, "user.kept", b"kept value", 0).unwrap();
    }
    v.unmount();
    v.mount_with(&["--no-xattr"]);

    // Writes and reads round-trip.
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 31 + 7) as u8).collect();
    {
        let mut w = fs::OpenOptions::new().append(true).open(&f).unwrap();
        for c in data.chunks(4096) {
            w.write_all(c).unwrap();
        }
        w.sync_all().unwrap();
    }
    let mut want = b"before".to_vec();
    want.extend_from_slice(&data);
    assert_bytes_eq(&fs::read(&f).unwrap(), &want, "read back under --no-xattr");

    // Every xattr call is refused, on files, directories and the root.
    fs::create_dir(v.p("d")).unwrap();
    for p in [f.clone(), v.p("d"), v.mnt.clone()] {
        for _ in 0..2 {
            assert_errno(getxattr(&p, "user.kept"), libc::EOPNOTSUPP, "getxattr");
            assert_errno(setxattr(&p, "user.new", b"v", 0), libc::EOPNOTSUPP, "setxattr");
            assert_errno(listxattr(&p), libc::EOPNOTSUPP, "listxattr");
            assert_errno(removexattr(&p, "user.kept"), libc::EOPNOTSUPP, "removexattr");
        }
    }

    // The commands that use the virtual attributes work: through the
    // control ioctls, not xattrs.
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("warpfs stats under --no-xattr");
    assert!(o.stdout.contains("\"applies\""), "{o}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let o = warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]);
        o.expect_ok("online rekey of a --no-xattr mount");
        assert!(
            o.stdout.contains("to key generation 1") && o.stdout.contains("online"),
            "{o}"
        );
        assert_bytes_eq(&fs::read(&f).unwrap(), &want, "read back after the online rekey");
    }

    // The daemon answered ENOSYS, so the kernel stopped asking: at most
    // one request of each of the four kinds reached it, against one per
    // call above (24 of them) had it answered anything else.
    v.unmount();
    let log = v.log();
    let refused: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("xattr request(s) refused"))
        .filter_map(|l| l.split("at unmount: ").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        matches!(refused.as_slice(), [n] if (1..=4).contains(n)),
        "xattr requests refused at unmount: {refused:?}\n{log}"
    );

    // Without the flag the attribute set before is still there, and the
    // data written under the flag (and rekeyed) reads back.
    v.mount();
    assert_bytes_eq(&fs::read(&f).unwrap(), &want, "read back after remount");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let o = warpfs(args!["info", &v.cipher]);
        assert!(
            o.stdout.contains("key generation: 1"),
            "the online rekey did not land:\n{o}"
        );
    }
    if xattrs_on_backing {
        assert_eq!(getxattr(&f, "user.kept").unwrap(), b"kept value");
        assert_eq!(listxattr(&f).unwrap(), ["user.kept".to_string()]);
    }
}
