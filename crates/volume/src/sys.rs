//! Thin, checked wrappers over the libc calls std does not offer
//! (mknod, renameat2, utimensat, statvfs, xattrs, lchown).

use crate::error::{Error, Result};
use std::ffi::CString;
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

fn check_len(rc: libc::ssize_t) -> Result<usize> {
    if rc < 0 {
        Err(Error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO),
        ))
    } else {
        Ok(rc as usize)
    }
}

/// lstat(2).
pub(crate) fn lstat(p: &Path) -> Result<libc::stat> {
    let c = cstr(p)?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out-pointer.
    check(unsafe { libc::lstat(c.as_ptr(), &mut st) })?;
    Ok(st)
}

/// fstat(2).
pub(crate) fn fstat(fd: &impl std::os::fd::AsRawFd) -> Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

pub(crate) fn mknod(p: &Path, mode: u32, rdev: u64) -> Result<()> {
    let c = cstr(p)?;
    // SAFETY: valid C string.
    check(unsafe { libc::mknod(c.as_ptr(), mode as libc::mode_t, rdev as libc::dev_t) })
}

pub(crate) fn mkdir(p: &Path, mode: u32) -> Result<()> {
    let c = cstr(p)?;
    // SAFETY: valid C string.
    check(unsafe { libc::mkdir(c.as_ptr(), mode as libc::mode_t) })
}

pub(crate) fn renameat2(from: &Path, to: &Path, flags: u32) -> Result<()> {
    let (a, b) = (cstr(from)?, cstr(to)?);
    // SAFETY: valid C strings; AT_FDCWD with absolute paths.
    check(unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags) })
}

pub(crate) fn lchown(p: &Path, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
    let c = cstr(p)?;
    let u = uid.unwrap_or(u32::MAX);
    let g = gid.unwrap_or(u32::MAX);
    // SAFETY: valid C string; -1 leaves an id unchanged.
    check(unsafe { libc::lchown(c.as_ptr(), u, g) })
}

pub(crate) fn chmod(p: &Path, mode: u32) -> Result<()> {
    let c = cstr(p)?;
    // SAFETY: valid C string.
    check(unsafe { libc::chmod(c.as_ptr(), mode as libc::mode_t) })
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

pub(crate) fn utimens(p: &Path, atime: TimeSpec, mtime: TimeSpec) -> Result<()> {
    let c = cstr(p)?;
    let times = [ts(atime), ts(mtime)];
    // SAFETY: valid C string and array of two timespecs.
    check(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) })
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

pub(crate) fn lsetxattr(p: &Path, name: &str, value: &[u8], flags: i32) -> Result<()> {
    let (c, n) = (cstr(p)?, CString::new(name).map_err(|_| Error::EINVAL)?);
    // SAFETY: valid C strings and buffer.
    check(unsafe { libc::lsetxattr(c.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) })
}

pub(crate) fn lgetxattr(p: &Path, name: &str) -> Result<Vec<u8>> {
    let (c, n) = (cstr(p)?, CString::new(name).map_err(|_| Error::EINVAL)?);
    loop {
        // SAFETY: size query with a null buffer.
        let len = check_len(unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) })?;
        let mut buf = vec![0u8; len];
        // SAFETY: buffer of `len` bytes.
        match check_len(unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), len) }) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(Error(libc::ERANGE)) => continue,
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn llistxattr(p: &Path) -> Result<Vec<u8>> {
    let c = cstr(p)?;
    loop {
        // SAFETY: size query with a null buffer.
        let len = check_len(unsafe { libc::llistxattr(c.as_ptr(), std::ptr::null_mut(), 0) })?;
        let mut buf = vec![0u8; len];
        // SAFETY: buffer of `len` bytes.
        match check_len(unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), len) }) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(Error(libc::ERANGE)) => continue,
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn lremovexattr(p: &Path, name: &str) -> Result<()> {
    let (c, n) = (cstr(p)?, CString::new(name).map_err(|_| Error::EINVAL)?);
    // SAFETY: valid C strings.
    check(unsafe { libc::lremovexattr(c.as_ptr(), n.as_ptr()) })
}

/// The current effective uid.
pub(crate) fn euid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}
