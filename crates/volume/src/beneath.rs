//! Opening a backing file by a path relative to CIPHERDIR without ever
//! leaving CIPHERDIR: the path must be plain (relative, no `.`, `..` or
//! empty names) and no symbolic link is followed anywhere on it, so a
//! symlink or `..` planted in CIPHERDIR cannot make the daemon (often
//! root) open a file elsewhere. `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)` does it in one call; where the kernel lacks
//! openat2 (before Linux 5.6, or a seccomp filter refuses it) or the path
//! is longer than PATH_MAX, the same is done one name at a time with
//! `O_NOFOLLOW`.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Cleared once openat2 turned out to be missing.
static HAVE_OPENAT2: AtomicBool = AtomicBool::new(true);

/// Whether `rel` is a plain relative path: not empty, not absolute, names
/// separated by single `/`, none of them `.` or `..`, no NUL.
pub(crate) fn check_plain(rel: &[u8]) -> io::Result<()> {
    let plain = !rel.is_empty()
        && rel[0] != b'/'
        && !rel.contains(&0)
        && rel.split(|&b| b == b'/').all(|c| !matches!(c, b"" | b"." | b".."));
    if plain {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{:?} is not a plain relative path beneath CIPHERDIR",
                String::from_utf8_lossy(rel)
            ),
        ))
    }
}

fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The root directory itself (`O_PATH`; any length).
fn open_root(root: &Path) -> io::Result<OwnedFd> {
    crate::at::open_dir_path(root.as_os_str().as_bytes()).map_err(|e| io::Error::from_raw_os_error(e.0))
}

/// openat2 beneath `dirfd` without symlinks; `None` when the kernel
/// cannot do it (no openat2) or the path is too long for one call.
fn openat2(dirfd: RawFd, rel: &[u8], flags: i32, mode: u32) -> Option<io::Result<OwnedFd>> {
    if !HAVE_OPENAT2.load(Ordering::Relaxed) || rel.len() >= libc::PATH_MAX as usize {
        return None;
    }
    let c = match cstring(rel) {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    // SAFETY: open_how is plain data; zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
    if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
        how.mode = u64::from(mode);
    }
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid C string and a live open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    match owned(fd as libc::c_int) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM | libc::E2BIG)) => {
            HAVE_OPENAT2.store(false, Ordering::Relaxed);
            None
        }
        r => Some(r),
    }
}

/// The error of a failed open of `name` in `dirfd`: ELOOP when `name` is
/// a symlink (a directory component opened `O_NOFOLLOW | O_DIRECTORY`
/// fails with ENOTDIR there), else `e`.
fn symlink_errno(dirfd: RawFd, name: &CString, e: io::Error) -> io::Error {
    if e.raw_os_error() != Some(libc::ENOTDIR) {
        return e;
    }
    // SAFETY: valid C string and out-pointer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        io::Error::from_raw_os_error(libc::ELOOP)
    } else {
        e
    }
}

/// The same as [`openat2`], one name at a time: every directory opened
/// `O_PATH | O_DIRECTORY | O_NOFOLLOW` relative to the last, the file
/// with `O_NOFOLLOW`. `rel` is plain, so nothing leads out of `dirfd`.
fn walk(dirfd: RawFd, rel: &[u8], flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let names: Vec<&[u8]> = rel.split(|&b| b == b'/').collect();
    let (last, dirs) = names
        .split_last()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut cur: Option<OwnedFd> = None;
    for d in dirs {
        let at = cur.as_ref().map_or(dirfd, |f| f.as_raw_fd());
        let c = cstring(d)?;
        // SAFETY: valid C string; O_PATH opens no contents.
        let fd = unsafe {
            libc::openat(
                at,
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        cur = Some(owned(fd).map_err(|e| symlink_errno(at, &c, e))?);
    }
    let at = cur.as_ref().map_or(dirfd, |f| f.as_raw_fd());
    let c = cstring(last)?;
    // SAFETY: valid C string.
    let fd = unsafe {
        libc::openat(
            at,
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    owned(fd).map_err(|e| symlink_errno(at, &c, e))
}

fn open_fd(root: &Path, rel: &Path, flags: i32, mode: u32, try_openat2: bool) -> io::Result<OwnedFd> {
    let rel = rel.as_os_str().as_bytes();
    check_plain(rel)?;
    let dir = open_root(root)?;
    if try_openat2 {
        if let Some(r) = openat2(dir.as_raw_fd(), rel, flags, mode) {
            return r;
        }
    }
    walk(dir.as_raw_fd(), rel, flags, mode)
}

/// Open the backing file `rel` (a plain relative path, any length) beneath
/// `root` with open(2) `flags` (and `mode` when creating), following no
/// symlink: a symlink anywhere on the path is ELOOP (or ENOTDIR where the
/// kernel says so), a path that is not plain is an InvalidInput error.
pub(crate) fn open_beneath(root: &Path, rel: &Path, flags: i32, mode: u32) -> io::Result<File> {
    open_fd(root, rel, flags, mode, true).map(File::from)
}

/// lstat of the backing entry `rel` beneath `root`, following no symlink
/// on the way (the entry itself may be one).
pub(crate) fn lstat_beneath(root: &Path, rel: &Path) -> io::Result<libc::stat> {
    let b = rel.as_os_str().as_bytes();
    check_plain(b)?;
    let (dir, name) = match b.iter().rposition(|&c| c == b'/') {
        Some(i) => (
            open_fd(
                root,
                Path::new(std::ffi::OsStr::from_bytes(&b[..i])),
                libc::O_PATH | libc::O_DIRECTORY,
                0,
                true,
            )?,
            &b[i + 1..],
        ),
        None => (open_root(root)?, b),
    };
    let c = cstring(name)?;
    // SAFETY: valid C string and out-pointer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn both(root: &Path, rel: &str, flags: i32) -> [io::Result<OwnedFd>; 2] {
        [
            open_fd(root, Path::new(rel), flags, 0o600, true),
            open_fd(root, Path::new(rel), flags, 0o600, false),
        ]
    }

    fn errno(r: &io::Result<OwnedFd>) -> Option<i32> {
        r.as_ref().err().and_then(|e| e.raw_os_error())
    }

    /// root/{f, d/g, d/e/h}, root/link -> ../outside, root/dlink -> d,
    /// root/d/up -> ../../outside/secret; outside/secret.
    fn tree() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let out = t.path().join("outside");
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("secret"), b"outside").unwrap();
        std::fs::write(root.join("f"), b"f").unwrap();
        std::fs::write(root.join("d/g"), b"g").unwrap();
        std::fs::write(root.join("d/e/h"), b"h").unwrap();
        symlink("../outside", root.join("link")).unwrap();
        symlink("d", root.join("dlink")).unwrap();
        symlink("../../outside/secret", root.join("d/up")).unwrap();
        (t, root, out)
    }

    #[test]
    fn plain_paths_open_beneath_the_root() {
        let (_t, root, _) = tree();
        for (rel, want) in [("f", "f"), ("d/g", "g"), ("d/e/h", "h")] {
            for r in both(&root, rel, libc::O_RDONLY) {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut File::from(r.unwrap()), &mut s).unwrap();
                assert_eq!(s, want, "{rel}");
            }
        }
        assert_eq!(lstat_beneath(&root, Path::new("d/e/h")).unwrap().st_size, 1);
        assert_eq!(
            lstat_beneath(&root, Path::new("d/up")).unwrap().st_mode & libc::S_IFMT,
            libc::S_IFLNK
        );
        // Creating works too (the journals are made this way).
        for (i, r) in both(&root, "d/new", libc::O_RDWR | libc::O_CREAT)
            .into_iter()
            .enumerate()
        {
            r.unwrap_or_else(|e| panic!("try {i}: {e}"));
        }
    }

    #[test]
    fn symlinks_anywhere_on_the_path_are_refused() {
        let (_t, root, out) = tree();
        for rel in ["link/secret", "dlink/g", "d/up", "dlink/e/h"] {
            for (i, r) in both(&root, rel, libc::O_RDWR).iter().enumerate() {
                assert_eq!(errno(r), Some(libc::ELOOP), "{rel} (try {i})");
            }
            assert!(lstat_beneath(&root, Path::new(&format!("{rel}/x"))).is_err(), "{rel}");
        }
        // A dangling symlink is not created through either.
        symlink("../outside/created", root.join("dangling")).unwrap();
        for (i, r) in both(&root, "dangling", libc::O_RDWR | libc::O_CREAT).iter().enumerate() {
            assert_eq!(errno(r), Some(libc::ELOOP), "try {i}");
        }
        assert!(!out.join("created").exists());
        assert_eq!(std::fs::read(out.join("secret")).unwrap(), b"outside");
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
            "",
            abs.to_str().unwrap(),
        ] {
            for (i, r) in both(&root, rel, libc::O_RDWR).iter().enumerate() {
                let e = r.as_ref().expect_err(rel);
                assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{rel} (try {i}): {e}");
            }
            assert_eq!(
                lstat_beneath(&root, Path::new(rel)).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }

    #[test]
    fn paths_past_path_max_are_walked() {
        let (_t, deep) = crate::at::tests::deep_tree();
        let root = deep.ancestors().nth(25).unwrap().to_path_buf();
        let rel = deep.strip_prefix(&root).unwrap().join("f");
        assert!(rel.as_os_str().len() > libc::PATH_MAX as usize);
        let f = open_beneath(&root, &rel, libc::O_RDWR | libc::O_CREAT, 0o600).unwrap();
        drop(f);
        assert_eq!(
            lstat_beneath(&root, &rel).unwrap().st_mode & libc::S_IFMT,
            libc::S_IFREG
        );
    }
}
