//! The mount daemon's virtual extended attributes on the mount root
//! (`trusted.warpfs.stats`, `trusted.warpfs.rekey`): how `warpfs stats`
//! and `warpfs rekey` talk to a live mount. The kernel lets only
//! CAP_SYS_ADMIN (root) read or set `trusted.*` attributes.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cstrings(mountpoint: &Path, name: &str) -> io::Result<(CString, CString)> {
    let nul = || io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path or name");
    Ok((
        CString::new(mountpoint.as_os_str().as_bytes()).map_err(|_| nul())?,
        CString::new(name).map_err(|_| nul())?,
    ))
}

/// The attribute's value; `Ok(None)` when the daemon has none (ENODATA).
pub fn get(mountpoint: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let (path, name) = cstrings(mountpoint, name)?;
    // One call with a buffer far larger than the value (a size probe
    // followed by a read could race with a value that grows).
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: valid C strings; buf is writable for buf.len() bytes.
    let n = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
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

/// Set the attribute to `value` (a request to the daemon).
pub fn set(mountpoint: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    let (path, name) = cstrings(mountpoint, name)?;
    // SAFETY: valid C strings; value is readable for value.len() bytes.
    let r = unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process may use `trusted.*` attributes at all.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
