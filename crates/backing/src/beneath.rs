//! Resolving a path relative to a directory descriptor without ever
//! leaving that directory: the path must be plain (relative, no `.`, `..`
//! or empty names) and no symbolic link is followed anywhere on it, so a
//! symlink or `..` planted in CIPHERDIR cannot make the daemon (often root)
//! reach a file elsewhere. `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` does it in one call; where the kernel lacks
//! openat2 (before Linux 5.6, or a seccomp filter refuses it) or the path
//! is longer than PATH_MAX, the same is done one name at a time with
//! `O_NOFOLLOW`.

use crate::errno::{Errno, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Cleared once openat2 turned out to be missing.
static HAVE_OPENAT2: AtomicBool = AtomicBool::new(true);

/// Whether `rel` is a plain relative path: not empty, not absolute, names
/// separated by single `/`, none of them `.` or `..`, no NUL.
pub fn is_plain(rel: &[u8]) -> bool {
    !rel.is_empty()
        && rel[0] != b'/'
        && !rel.contains(&0)
        && rel.split(|&b| b == b'/').all(|c| !matches!(c, b"" | b"." | b".."))
}

/// Whether `name` can name an entry of a directory: one plain name, or
/// `.` (the directory itself).
pub(crate) fn is_entry_name(name: &[u8]) -> bool {
    name == b"." || (is_plain(name) && !name.contains(&b'/'))
}

pub(crate) fn cstring(b: &[u8]) -> Result<CString> {
    CString::new(b).map_err(|_| Errno::EINVAL)
}

pub(crate) fn owned(fd: libc::c_int) -> Result<OwnedFd> {
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// openat2 beneath `dirfd` without symlinks; `None` when the kernel
/// cannot do it (no openat2) or the path is too long for one call.
fn openat2(dirfd: RawFd, rel: &[u8], flags: i32) -> Option<Result<OwnedFd>> {
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
        Err(Errno(libc::ENOSYS | libc::EPERM | libc::E2BIG)) => {
            HAVE_OPENAT2.store(false, Ordering::Relaxed);
            None
        }
        r => Some(r),
    }
}

/// The error of a failed open of `name` in `dirfd`: ELOOP when `name` is
/// a symlink (a directory opened `O_NOFOLLOW | O_DIRECTORY` fails with
/// ENOTDIR there), else `e`.
fn symlink_errno(dirfd: RawFd, name: &CString, e: Errno) -> Errno {
    if e.0 != libc::ENOTDIR {
        return e;
    }
    // SAFETY: `stat` is plain data; valid C string and out-pointer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        Errno::ELOOP
    } else {
        e
    }
}

/// The directory `name` of `dirfd` as an `O_PATH` descriptor, not
/// following a symlink there (ELOOP).
pub(crate) fn open_subdir(dirfd: RawFd, name: &[u8]) -> Result<OwnedFd> {
    let c = cstring(name)?;
    // SAFETY: valid C string; O_PATH opens no contents and never blocks.
    let fd = unsafe {
        libc::openat(
            dirfd,
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    owned(fd).map_err(|e| symlink_errno(dirfd, &c, e))
}

/// The same as [`openat2`] for a directory, one name at a time.
fn walk_dir(dirfd: RawFd, rel: &[u8]) -> Result<OwnedFd> {
    let mut cur: Option<OwnedFd> = None;
    for d in rel.split(|&b| b == b'/') {
        let at = cur.as_ref().map_or(dirfd, |f| f.as_raw_fd());
        cur = Some(open_subdir(at, d)?);
    }
    cur.ok_or(Errno::EINVAL)
}

/// The directory at plain relative path `rel` beneath `dirfd`, as an
/// `O_PATH` descriptor, with no symlink followed anywhere on the path.
pub(crate) fn open_dir_beneath(dirfd: RawFd, rel: &[u8]) -> Result<OwnedFd> {
    if !is_plain(rel) {
        return Err(Errno::EINVAL);
    }
    match openat2(dirfd, rel, libc::O_PATH | libc::O_DIRECTORY) {
        // openat2 says ENOTDIR for a symlink at the end (O_DIRECTORY comes
        // first) and ELOOP or EXDEV on the way: the walk tells which name
        // it was and says ELOOP for every symlink.
        Some(Err(Errno(libc::ENOTDIR | libc::ELOOP | libc::EXDEV))) | None => walk_dir(dirfd, rel),
        Some(r) => r,
    }
}

/// For tests: resolve `rel` with the walk only, as on a kernel without
/// openat2.
#[cfg(test)]
pub(crate) fn open_dir_walking(dirfd: RawFd, rel: &[u8]) -> Result<OwnedFd> {
    if !is_plain(rel) {
        return Err(Errno::EINVAL);
    }
    walk_dir(dirfd, rel)
}

/// Longest piece of an absolute path opened in one call.
const PIECE: usize = 2048;

/// Open the directory at path `p` (the user's own path: symlinks on it
/// are followed, as the user wrote them) of any length as an `O_PATH`
/// descriptor: one piece of fewer than PATH_MAX bytes at a time, each
/// relative to the last.
pub(crate) fn open_user_dir(p: &[u8]) -> Result<OwnedFd> {
    let mut fd: Option<OwnedFd> = None;
    let mut rest = p;
    loop {
        let (piece, tail) = if rest.len() < PIECE {
            (rest, &rest[rest.len()..])
        } else {
            // Cut at the last '/' inside the piece (names are at most 255
            // bytes, so there is one).
            let cut = rest[..PIECE]
                .iter()
                .rposition(|&b| b == b'/')
                .filter(|&i| i > 0)
                .ok_or(Errno::ENAMETOOLONG)?;
            (&rest[..cut], &rest[cut + 1..])
        };
        let dirfd = fd.as_ref().map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
        let c = cstring(piece)?;
        // SAFETY: valid C string; O_PATH opens no contents.
        let raw = unsafe { libc::openat(dirfd, c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        fd = Some(owned(raw)?);
        if tail.is_empty() {
            return fd.ok_or(Errno::EINVAL);
        }
        rest = tail;
    }
}
