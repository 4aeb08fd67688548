//! The mount daemon's virtual attributes on the mount root
//! (`trusted.warpfs.stats`, `trusted.warpfs.rekey`): how `warpfs stats`
//! and `warpfs rekey` talk to a live mount. They go through the control
//! ioctls of the mount root (`fuse::ctl`: root or the user the daemon runs
//! as, who sets only with proof of the password; with or without
//! `--no-xattr`), and through the extended attributes
//! themselves where the ioctls are unknown (root only: the kernel lets only
//! CAP_SYS_ADMIN use `trusted.*` attributes).

use crate::fuse::ctl;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

fn cname(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the name"))
}

/// The mount's root directory, opened (the mountpoint the user named).
fn open_mount(mountpoint: &Path) -> io::Result<File> {
    warpfs_backing::host::open_with(mountpoint, File::options().read(true).custom_flags(libc::O_DIRECTORY))
}

/// Whether `e` says the mount has no control ioctls (not a warpfs mount).
fn no_ioctl(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::ENOSYS))
}

/// Send control ioctl `cmd` with `name`, `value` and `tag` to the mount at
/// `mountpoint`; the reply's bytes.
fn control(
    mountpoint: &Path,
    cmd: u32,
    name: &str,
    value: &[u8],
    tag: Option<&[u8; ctl::TAG_LEN]>,
) -> io::Result<Vec<u8>> {
    let mut buf = ctl::encode(name, value, tag)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "request too large for a control ioctl"))?;
    let dir = open_mount(mountpoint)?;
    // SAFETY: the descriptor is open; `buf` holds ctl::SIZE bytes, the size
    // encoded in `cmd`, which the kernel reads and (for GET) writes.
    let n = unsafe { libc::ioctl(dir.as_raw_fd(), cmd as _, buf.as_mut_ptr()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate((n as usize).min(ctl::SIZE));
    Ok(buf)
}

/// The attribute's value; `Ok(None)` when the daemon has none (ENODATA).
pub fn get(mountpoint: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    match control(mountpoint, ctl::GET, name, b"", None) {
        Ok(v) => return Ok(Some(v)),
        Err(e) if e.raw_os_error() == Some(libc::ENODATA) => return Ok(None),
        Err(e) if !no_ioctl(&e) => return Err(e),
        Err(_) => {}
    }
    let dir = open_mount(mountpoint)?;
    let name = cname(name)?;
    // One call with a buffer far larger than the value (a size probe
    // followed by a read could race with a value that grows).
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: valid descriptor and C string; buf is writable for buf.len() bytes.
    let n = unsafe { libc::fgetxattr(dir.as_raw_fd(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENODATA) => Ok(None),
            _ => Err(e),
        };
    }
    buf.truncate(n as usize);
    Ok(Some(buf))
}

/// Set the attribute to `value` (a request to the daemon), with `tag`, the
/// request's proof of the password (`warpfs_crypto::ControlKey`), which
/// the mount's user needs and root does not. The extended attribute (where
/// the ioctls are unknown) carries no tag.
pub fn set(mountpoint: &Path, name: &str, value: &[u8], tag: Option<&[u8; ctl::TAG_LEN]>) -> io::Result<()> {
    match control(mountpoint, ctl::SET, name, value, tag) {
        Err(e) if no_ioctl(&e) => {}
        r => return r.map(drop),
    }
    let dir = open_mount(mountpoint)?;
    let name = cname(name)?;
    // SAFETY: valid descriptor and C string; value is readable for value.len() bytes.
    let r = unsafe { libc::fsetxattr(dir.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
