//! System-call wrappers (libc) and errno assertions: rename flags, mknod,
//! utimens, statvfs, fallocate, extended attributes.

use std::ffi::CString;
use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

pub(super) fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

/// Assert that `r` failed with `want` errno.
#[track_caller]
pub fn assert_errno<T: std::fmt::Debug>(r: io::Result<T>, want: i32, ctx: &str) {
    match r {
        Ok(v) => panic!(
            "{ctx}: expected {} but succeeded ({v:?})",
            io::Error::from_raw_os_error(want)
        ),
        Err(e) => assert_eq!(
            errno(&e),
            want,
            "{ctx}: expected {} got {e}",
            io::Error::from_raw_os_error(want)
        ),
    }
}

pub fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    let (a, b) = (cstr(from), cstr(to));
    check(unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags) })
}

pub fn mknod_fifo(p: &Path, mode: libc::mode_t) -> io::Result<()> {
    let c = cstr(p);
    check(unsafe { libc::mknod(c.as_ptr(), libc::S_IFIFO | mode, 0) })
}

pub fn utimens(p: &Path, atime: (i64, i64), mtime: (i64, i64), nofollow: bool) -> io::Result<()> {
    let c = cstr(p);
    let ts = [
        libc::timespec {
            tv_sec: atime.0 as _,
            tv_nsec: atime.1 as _,
        },
        libc::timespec {
            tv_sec: mtime.0 as _,
            tv_nsec: mtime.1 as _,
        },
    ];
    let flags = if nofollow { libc::AT_SYMLINK_NOFOLLOW } else { 0 };
    check(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), ts.as_ptr(), flags) })
}

pub fn statvfs(p: &Path) -> io::Result<libc::statvfs> {
    let c = cstr(p);
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::statvfs(c.as_ptr(), &mut s) })?;
    Ok(s)
}

pub fn fallocate(f: &File, mode: libc::c_int, off: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    check(unsafe { libc::fallocate(f.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) })
}

pub fn setxattr(p: &Path, name: &str, value: &[u8], flags: libc::c_int) -> io::Result<()> {
    let (c, n) = (cstr(p), CString::new(name).unwrap());
    check(unsafe { libc::setxattr(c.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) })
}

pub fn getxattr(p: &Path, name: &str) -> io::Result<Vec<u8>> {
    let (c, n) = (cstr(p), CString::new(name).unwrap());
    let size = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    if size < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; size as usize + 1];
    let got = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(got as usize);
    Ok(buf)
}

/// The size `getxattr` reports with a zero-sized buffer.
pub fn getxattr_size(p: &Path, name: &str) -> io::Result<usize> {
    let (c, n) = (cstr(p), CString::new(name).unwrap());
    let size = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    if size < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(size as usize)
    }
}

pub fn listxattr(p: &Path) -> io::Result<Vec<String>> {
    let c = cstr(p);
    let size = unsafe { libc::listxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    if size < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; size as usize + 256];
    let got = unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(got as usize);
    Ok(buf
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect())
}

pub fn removexattr(p: &Path, name: &str) -> io::Result<()> {
    let (c, n) = (cstr(p), CString::new(name).unwrap());
    check(unsafe { libc::removexattr(c.as_ptr(), n.as_ptr()) })
}

/// Whether the file system holding `dir` supports `user.*` xattrs.
pub fn backing_supports_user_xattrs(dir: &Path) -> bool {
    let probe = dir.join(".xattr-probe");
    fs::write(&probe, b"x").unwrap();
    let ok = setxattr(&probe, "user.probe", b"1", 0).is_ok();
    fs::remove_file(&probe).unwrap();
    ok
}
