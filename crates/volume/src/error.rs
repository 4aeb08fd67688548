//! Errors of the volume layer: an errno for the kernel (details are logged
//! where they happen).

use warpfs_content::ContentError;

/// An operation failed with this errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error(pub i32);

/// Result of a volume operation.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The errno value (positive).
    pub fn errno(self) -> i32 {
        self.0
    }
    pub(crate) const EIO: Error = Error(libc::EIO);
    pub(crate) const EINVAL: Error = Error(libc::EINVAL);
    pub(crate) const ENOTSUP: Error = Error(libc::EOPNOTSUPP);
    pub(crate) const ENAMETOOLONG: Error = Error(libc::ENAMETOOLONG);
    pub(crate) const EROFS: Error = Error(libc::EROFS);
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl From<ContentError> for Error {
    fn from(e: ContentError) -> Self {
        Error(e.errno())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Error {}
