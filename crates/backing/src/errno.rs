//! The door's error: the errno of the failed system call (or of the check
//! that refused the entry), for the layers above to hand to the kernel.

/// An operation on the backing store failed with this errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

/// Result of an operation on the backing store.
pub type Result<T> = std::result::Result<T, Errno>;

impl Errno {
    /// The errno value (positive).
    pub fn errno(self) -> i32 {
        self.0
    }
    /// The errno of the last failed libc call on this thread.
    pub fn last() -> Errno {
        Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    }
    pub const EIO: Errno = Errno(libc::EIO);
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    pub const ENOTSUP: Errno = Errno(libc::EOPNOTSUPP);
    pub const ENAMETOOLONG: Errno = Errno(libc::ENAMETOOLONG);
    pub const EROFS: Errno = Errno(libc::EROFS);
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    /// A symbolic link where the door follows none.
    pub const ELOOP: Errno = Errno(libc::ELOOP);
    /// A directory where a regular file was expected.
    pub const EISDIR: Errno = Errno(libc::EISDIR);
    /// A reserved file (config, lock, directory IV, sidecar, journal) with
    /// more than one link: it may be a file outside CIPHERDIR.
    pub const EMLINK: Errno = Errno(libc::EMLINK);
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Self {
        Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> Self {
        std::io::Error::from_raw_os_error(e.0)
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}

/// `Ok(())` for a libc return value of zero or more, else the errno.
pub(crate) fn check(rc: libc::c_int) -> Result<()> {
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// The length a libc call returned, or its errno.
pub(crate) fn check_len(rc: libc::ssize_t) -> Result<usize> {
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(rc as usize)
    }
}
