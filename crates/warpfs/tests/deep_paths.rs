//! Deep trees through a real mount: a plaintext path shorter than PATH_MAX
//! whose backing path (longer encrypted names) is longer than PATH_MAX must
//! work for every operation, survive a remount, pass fsck and be rekeyed.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

mode_tests!(deep_backing_paths);

/// Plaintext name length of each level: short enough to stay a plain
/// (not hashed) backing name, long enough that the backing path outgrows
/// PATH_MAX before the plaintext path does.
const LEVEL_NAME: usize = 150;

fn names(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Length of the longest backing directory path under `root`, following
/// the single subdirectory of each level with `openat` (the paths are too
/// long to name).
fn deepest_backing_dir_len(root: &Path) -> usize {
    let open = |dirfd: i32, name: &[u8]| -> i32 {
        let c = CString::new(name).unwrap();
        // SAFETY: valid C string.
        let fd = unsafe { libc::openat(dirfd, c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        assert!(fd >= 0, "openat: {}", std::io::Error::last_os_error());
        fd
    };
    let mut fd = open(libc::AT_FDCWD, root.as_os_str().as_bytes());
    let mut len = root.as_os_str().len();
    loop {
        let here = PathBuf::from(format!("/proc/self/fd/{fd}"));
        let subdirs: Vec<_> = fs::read_dir(&here)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.file_name())
            .collect();
        match subdirs.as_slice() {
            [one] => {
                let next = open(fd, one.as_bytes());
                // SAFETY: `fd` is ours and not used again.
                unsafe { libc::close(fd) };
                fd = next;
                len += 1 + one.len();
            }
            _ => {
                // SAFETY: as above.
                unsafe { libc::close(fd) };
                return len;
            }
        }
    }
}

fn deep_backing_paths(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let mut deep = v.mnt.clone();
    let mut level = 0;
    // Leave room under PATH_MAX for the entries made inside.
    while deep.as_os_str().len() + 1 + LEVEL_NAME < 4095 - 300 {
        deep.push(format!("{level:03}{}", "p".repeat(LEVEL_NAME - 3)));
        level += 1;
    }
    fs::create_dir_all(&deep).unwrap_or_else(|e| panic!("mkdir -p ({} levels): {e}", level));
    let rel = deep.strip_prefix(&v.mnt).unwrap().to_path_buf();
    let backing_len = deepest_backing_dir_len(&v.cipher);
    assert!(
        backing_len > 4096,
        "the test must reach past PATH_MAX in the backing dir: {backing_len} bytes ({level} levels)"
    );
    let d = |n: &str| deep.join(n);

    // Files: create, write, read, truncate, stat.
    let mut f = File::create(d("f")).unwrap();
    f.write_all(b"hello deep world").unwrap();
    drop(f);
    assert_eq!(fs::read(d("f")).unwrap(), b"hello deep world");
    fs::OpenOptions::new()
        .write(true)
        .open(d("f"))
        .unwrap()
        .set_len(5)
        .unwrap();
    assert_eq!(fs::read(d("f")).unwrap(), b"hello");
    assert_eq!(fs::metadata(d("f")).unwrap().len(), 5);

    // Metadata: chmod, chown (as root), utimens.
    fs::set_permissions(d("f"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(d("f")).unwrap().mode() & 0o7777, 0o640);
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::lchown(d("f"), Some(1234), Some(5678)).unwrap();
        let m = fs::metadata(d("f")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 5678));
    }
    utimens(&d("f"), (1_000_000, 0), (2_000_000, 7), true).unwrap();
    let m = fs::metadata(d("f")).unwrap();
    assert_eq!((m.atime(), m.mtime(), m.mtime_nsec()), (1_000_000, 2_000_000, 7));

    // Directories, symlinks, hard links, fifos, a long (hashed) name.
    fs::create_dir(d("sub")).unwrap();
    std::os::unix::fs::symlink("some/target", d("s")).unwrap();
    assert_eq!(fs::read_link(d("s")).unwrap(), PathBuf::from("some/target"));
    assert_eq!(fs::symlink_metadata(d("s")).unwrap().len(), "some/target".len() as u64);
    fs::hard_link(d("f"), d("h")).unwrap();
    assert_eq!(fs::metadata(d("f")).unwrap().nlink(), 2);
    mknod_fifo(&d("p"), 0o600).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(
        &fs::symlink_metadata(d("p")).unwrap().file_type()
    ));
    let long = "L".repeat(255);
    fs::write(d(&long), b"long name").unwrap();
    assert_eq!(fs::read(d(&long)).unwrap(), b"long name");

    // Rename within and across deep directories; readdir.
    fs::rename(d("h"), deep.join("sub").join("h2")).unwrap();
    assert_eq!(fs::read(deep.join("sub").join("h2")).unwrap(), b"hello");
    assert_eq!(
        names(&deep),
        ["f", "s", "sub", "p", long.as_str()]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert_eq!(names(&deep.join("sub")), ["h2".to_string()].into());

    // Extended attributes.
    let xattrs = backing_supports_user_xattrs(v.root()) && xattrs_or_refused(&d("f"));
    if xattrs {
        setxattr(&d("f"), "user.deep", b"value", 0).unwrap();
        assert_eq!(getxattr(&d("f"), "user.deep").unwrap(), b"value");
        assert!(listxattr(&d("f")).unwrap().contains(&"user.deep".to_string()));
        removexattr(&d("f"), "user.deep").unwrap();
        assert_errno(getxattr(&d("f"), "user.deep"), libc::ENODATA, "removed xattr");
        setxattr(&d("f"), "user.kept", b"kept", 0).unwrap();
    }

    // Everything is still there after a remount (a fresh daemon with
    // nothing cached).
    let before = snapshot(&v.mnt);
    v.remount();
    assert_snapshots_eq(&snapshot(&v.mnt), &before, "after remount");
    if xattrs {
        assert_eq!(getxattr(&d("f"), "user.kept").unwrap(), b"kept");
    }

    // fsck walks the deep tree and finds nothing wrong.
    v.unmount();
    let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
    o.expect_ok("fsck of a volume with backing paths past PATH_MAX");
    // The root, the levels and `sub`; `f` (and its link) and the long name.
    let counts = format!("fsck: {} directories, 2 files, 1 symlinks", level + 2);
    assert!(
        o.stdout.contains(&counts) && o.stdout.contains("fsck: clean"),
        "want {counts:?} and clean, got {o:?}"
    );
    // An offline rekey reaches the deep files too; the content is unchanged.
    let o = warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]);
    o.expect_ok("rekey of a volume with backing paths past PATH_MAX");
    assert!(o.stdout.contains("to key generation 1"), "{o:?}");
    warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_ok("fsck after the rekey");
    v.mount();
    assert_snapshots_eq(&snapshot(&v.mnt), &before, "after the rekey");

    // Remove everything; the deep directory is empty and removable.
    for n in ["f", "s", "p", long.as_str()] {
        fs::remove_file(d(n)).unwrap();
    }
    fs::remove_file(deep.join("sub").join("h2")).unwrap();
    fs::remove_dir(d("sub")).unwrap();
    assert!(names(&deep).is_empty());
    fs::remove_dir_all(v.mnt.join(rel.iter().next().unwrap())).unwrap();
    assert!(names(&v.mnt).is_empty());
    v.unmount();
    assert!(v.root_backing_entries().is_empty(), "{:?}", v.root_backing_entries());
}
