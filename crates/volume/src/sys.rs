//! Thin, checked wrappers over the libc calls on backing entries, each on a
//! [`Loc`] (the `*at` form, so long backing paths work), plus the few calls
//! std does not offer (statvfs; the xattr calls are in `sysxattr`).

use crate::at::Loc;
use crate::error::{Error, Result};
use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub(crate) fn cstr(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Error::EINVAL)
}

fn check(rc: libc::c_int) -> Result<()> {
    if rc < 0 {
        Err(Error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO),
        ))
    } else {
        Ok(())
    }
}

pub(crate) fn check_len(rc: libc::ssize_t) -> Result<usize> {
    if rc < 0 {
        Err(Error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO),
        ))
    } else {
        Ok(rc as usize)
    }
}

/// lstat(2) of an absolute path.
pub(crate) fn lstat_path(p: &Path) -> Result<libc::stat> {
    let c = cstr(p)?;
    // SAFETY: `stat` is plain old data; all zeros is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out-pointer.
    check(unsafe { libc::lstat(c.as_ptr(), &mut st) })?;
    Ok(st)
}

/// lstat(2) of an entry (fstatat without following a symlink).
pub(crate) fn lstat(l: &Loc) -> Result<libc::stat> {
    let (fd, c) = l.at()?;
    // SAFETY: `stat` is plain old data; all zeros is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out-pointer.
    check(unsafe { libc::fstatat(fd, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st)
}

/// fstat(2).
pub(crate) fn fstat(fd: &impl std::os::fd::AsRawFd) -> Result<libc::stat> {
    // SAFETY: `stat` is plain old data; all zeros is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// openat(2) (close-on-exec).
pub(crate) fn open(l: &Loc, flags: i32, mode: u32) -> Result<std::fs::File> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    let f = unsafe { libc::openat(fd, c.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
    if f < 0 {
        return Err(crate::at::errno());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(f) }))
}

/// The whole content of a small file (directory IVs, long-name sidecars):
/// at most `max` bytes are read, a longer file gives `max + 1`.
pub(crate) fn read_small(l: &Loc, max: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = open(l, libc::O_RDONLY, 0)?;
    let mut out = Vec::new();
    f.take(max as u64 + 1).read_to_end(&mut out)?;
    Ok(out)
}

/// Create a new file (never replacing one) holding `data`; fsynced when asked.
pub(crate) fn create_file(l: &Loc, mode: u32, data: &[u8], sync: bool) -> Result<()> {
    use std::io::Write;
    let mut f = open(
        l,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        mode,
    )?;
    f.write_all(data)?;
    if sync {
        f.sync_all()?;
    }
    Ok(())
}

pub(crate) fn mknod(l: &Loc, mode: u32, rdev: u64) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::mknodat(fd, c.as_ptr(), mode as libc::mode_t, rdev as libc::dev_t) })
}

pub(crate) fn mkdir(l: &Loc, mode: u32) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::mkdirat(fd, c.as_ptr(), mode as libc::mode_t) })
}

/// unlink(2) of a non-directory.
pub(crate) fn unlink(l: &Loc) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::unlinkat(fd, c.as_ptr(), 0) })
}

/// rmdir(2).
pub(crate) fn rmdir(l: &Loc) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::unlinkat(fd, c.as_ptr(), libc::AT_REMOVEDIR) })
}

/// symlink(2): a new symlink at `l` holding `target`.
pub(crate) fn symlink(target: &[u8], l: &Loc) -> Result<()> {
    let (fd, c) = l.at()?;
    let t = CString::new(target).map_err(|_| Error::EINVAL)?;
    // SAFETY: valid C strings.
    check(unsafe { libc::symlinkat(t.as_ptr(), fd, c.as_ptr()) })
}

/// link(2) without following a symlink at `from`.
pub(crate) fn link(from: &Loc, to: &Loc) -> Result<()> {
    let ((a, ac), (b, bc)) = (from.at()?, to.at()?);
    // SAFETY: valid C strings.
    check(unsafe { libc::linkat(a, ac.as_ptr(), b, bc.as_ptr(), 0) })
}

/// readlink(2).
pub(crate) fn readlink(l: &Loc) -> Result<Vec<u8>> {
    let (fd, c) = l.at()?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buffer of `buf.len()` bytes.
    let n = check_len(unsafe { libc::readlinkat(fd, c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    if n >= buf.len() {
        return Err(Error::ENAMETOOLONG);
    }
    buf.truncate(n);
    Ok(buf)
}

pub(crate) fn renameat2(from: &Loc, to: &Loc, flags: u32) -> Result<()> {
    let ((a, ac), (b, bc)) = (from.at()?, to.at()?);
    // The raw system call: musl (the static build) has no renameat2().
    // SAFETY: valid C strings; the result is 0 or -1 (fits a c_int).
    check(unsafe { libc::syscall(libc::SYS_renameat2, a, ac.as_ptr(), b, bc.as_ptr(), flags) } as libc::c_int)
}

pub(crate) fn lchown(l: &Loc, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
    let (fd, c) = l.at()?;
    let u = uid.unwrap_or(u32::MAX);
    let g = gid.unwrap_or(u32::MAX);
    // SAFETY: valid C string; -1 leaves an id unchanged.
    check(unsafe { libc::fchownat(fd, c.as_ptr(), u, g, libc::AT_SYMLINK_NOFOLLOW) })
}

pub(crate) fn chmod(l: &Loc, mode: u32) -> Result<()> {
    let (fd, c) = l.at()?;
    // SAFETY: valid C string.
    check(unsafe { libc::fchmodat(fd, c.as_ptr(), mode as libc::mode_t, 0) })
}

/// access(2) of an entry for the daemon's effective ids, without following
/// a symlink (`mask`: `F_OK` or any of `R_OK`, `W_OK`, `X_OK`).
pub(crate) fn access(l: &Loc, mask: i32) -> Result<()> {
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
        Some(Some((s, ns))) => libc::timespec {
            tv_sec: s as libc::time_t,
            tv_nsec: ns as libc::c_long,
        },
    }
}

pub(crate) fn utimens(l: &Loc, atime: TimeSpec, mtime: TimeSpec) -> Result<()> {
    let (fd, c) = l.at()?;
    let times = [ts(atime), ts(mtime)];
    // SAFETY: valid C string and array of two timespecs.
    check(unsafe { libc::utimensat(fd, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) })
}

pub(crate) fn futimens(fd: &impl std::os::fd::AsRawFd, atime: TimeSpec, mtime: TimeSpec) -> Result<()> {
    let times = [ts(atime), ts(mtime)];
    // SAFETY: valid fd and array.
    check(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) })
}

pub(crate) fn statvfs(p: &Path) -> Result<libc::statvfs> {
    let c = cstr(p)?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out-pointer.
    check(unsafe { libc::statvfs(c.as_ptr(), &mut st) })?;
    Ok(st)
}

/// The current effective uid.
pub(crate) fn euid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}
