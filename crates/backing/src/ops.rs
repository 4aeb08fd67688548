//! The system calls on an entry of a backing directory ([`Loc`]): each an
//! `*at` call relative to the directory's descriptor, none following a
//! symlink at the entry.

use crate::dir::Loc;
use crate::errno::{check, check_len, Errno, Result};
use std::ffi::CString;

/// lstat(2) of an entry (fstatat without following a symlink).
pub fn lstat(l: &Loc) -> Result<libc::stat> {
    let (fd, c) = l.at()?;
    // SAFETY: `stat` is plain old data; all zeros is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out-pointer.
    check(unsafe { libc::fstatat(fd, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st)
}

/// mknod(2): a special file (FIFO, socket, device) at `l`.
pub fn mknod(l: &Loc, mode: u32, rdev: u64) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::mknodat(fd, c.as_ptr(), mode as libc::mode_t, rdev as libc::dev_t) })
}

/// mkdir(2).
pub fn mkdir(l: &Loc, mode: u32) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::mkdirat(fd, c.as_ptr(), mode as libc::mode_t) })
}

/// unlink(2) of a non-directory (a symlink itself, never its target).
pub fn unlink(l: &Loc) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::unlinkat(fd, c.as_ptr(), 0) })
}

/// rmdir(2).
pub fn rmdir(l: &Loc) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::unlinkat(fd, c.as_ptr(), libc::AT_REMOVEDIR) })
}

/// symlink(2): a new symlink at `l` holding `target`.
pub fn symlink(target: &[u8], l: &Loc) -> Result<()> {
    let (fd, c) = l.at()?;
    let t = CString::new(target).map_err(|_| Errno::EINVAL)?;
    // SAFETY: valid C strings.
    check(unsafe { libc::symlinkat(t.as_ptr(), fd, c.as_ptr()) })
}

/// link(2) without following a symlink at `from`.
pub fn link(from: &Loc, to: &Loc) -> Result<()> {
    let ((a, ac), (b, bc)) = (from.at()?, to.at()?);
    // SAFETY: valid C strings.
    check(unsafe { libc::linkat(a, ac.as_ptr(), b, bc.as_ptr(), 0) })
}

/// readlink(2).
pub fn readlink(l: &Loc) -> Result<Vec<u8>> {
    let (fd, c) = l.at()?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buffer of `buf.len()` bytes.
    let n = check_len(unsafe { libc::readlinkat(fd, c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    if n >= buf.len() {
        return Err(Errno::ENAMETOOLONG);
    }
    buf.truncate(n);
    Ok(buf)
}

/// renameat2(2) with `flags` (`RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
pub fn rename(from: &Loc, to: &Loc, flags: u32) -> Result<()> {
    let ((a, ac), (b, bc)) = (from.at()?, to.at()?);
    // The raw system call: musl (the static build) has no renameat2().
    // SAFETY: valid C strings; the result is 0 or -1 (fits a c_int).
    check(unsafe { libc::syscall(libc::SYS_renameat2, a, ac.as_ptr(), b, bc.as_ptr(), flags) } as libc::c_int)
}

/// lchown(2) (`None` leaves an id unchanged).
pub fn lchown(l: &Loc, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
    let (fd, c) = l.at()?;
    let u = uid.unwrap_or(u32::MAX);
    let g = gid.unwrap_or(u32::MAX);
    // SAFETY: valid C string; -1 leaves an id unchanged.
    check(unsafe { libc::fchownat(fd, c.as_ptr(), u, g, libc::AT_SYMLINK_NOFOLLOW) })
}

/// The fchmodat2 system call number (Linux 6.6; the same on every
/// architecture with the unified table).
const SYS_FCHMODAT2: libc::c_long = 452;

/// chmod(2) of an entry, never of a symlink's target (a symlink is
/// EOPNOTSUPP): fchmodat2 with `AT_SYMLINK_NOFOLLOW`, or the C library's
/// emulation of that flag on older kernels.
pub fn chmod(l: &Loc, mode: u32) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    let rc = unsafe {
        libc::syscall(
            SYS_FCHMODAT2,
            fd,
            c.as_ptr(),
            mode as libc::mode_t,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    } as libc::c_int;
    match check(rc) {
        Err(Errno(libc::ENOSYS | libc::EPERM)) => {
            // SAFETY: valid C string.
            check(unsafe { libc::fchmodat(fd, c.as_ptr(), mode as libc::mode_t, libc::AT_SYMLINK_NOFOLLOW) })
        }
        r => r,
    }
}

/// access(2) of an entry for the daemon's effective ids, without following
/// a symlink (`mask`: `F_OK` or any of `R_OK`, `W_OK`, `X_OK`).
pub fn access(l: &Loc, mask: i32) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::faccessat(fd, c.as_ptr(), mask, libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW) })
}

/// A time for utimensat: None leaves it, Some(None) is "now".
pub type TimeSpec = Option<Option<(i64, i64)>>;

fn ts(t: TimeSpec) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(None) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        // `as _`: the C library's time_t (glibc's, musl's 64-bit one).
        Some(Some((s, ns))) => libc::timespec {
            tv_sec: s as _,
            tv_nsec: ns as libc::c_long,
        },
    }
}

/// utimensat(2) of an entry, not following a symlink.
pub fn utimens(l: &Loc, atime: TimeSpec, mtime: TimeSpec) -> Result<()> {
    let (fd, c) = l.at()?;
    let times = [ts(atime), ts(mtime)];
    // SAFETY: valid C string and array of two timespecs.
    check(unsafe { libc::utimensat(fd, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) })
}

/// futimens(2) of an open file.
pub fn futimens(fd: &impl std::os::fd::AsRawFd, atime: TimeSpec, mtime: TimeSpec) -> Result<()> {
    let times = [ts(atime), ts(mtime)];
    // SAFETY: valid fd and array.
    check(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) })
}

/// The current effective uid.
pub fn euid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}

/// The link count of `st` as a u64 (`nlink_t` is 32 bits on some targets).
#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
pub fn nlink(st: &libc::stat) -> u64 {
    st.st_nlink as u64
}
