//! Errors of the content layer and their errno mapping.

/// What can go wrong reading or writing a cipher file.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    /// The backing file system failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The cipher file breaks FORMAT.md section 3.
    #[error("corrupt cipher file: {what}")]
    Corrupt {
        /// What was wrong.
        what: String,
    },
    /// A GCM tag did not verify (tampered, moved or torn block).
    #[error("block {block} failed authentication")]
    BadTag {
        /// The block number.
        block: u64,
    },
    /// A write to a file opened read-only.
    #[error("cipher file is open read-only")]
    ReadOnly,
}

impl ContentError {
    /// A corrupt-file error.
    pub(crate) fn corrupt(what: impl Into<String>) -> Self {
        ContentError::Corrupt { what: what.into() }
    }

    /// An I/O error from a raw errno.
    pub(crate) fn errno_err(code: i32) -> Self {
        ContentError::Io(std::io::Error::from_raw_os_error(code))
    }

    /// The errno to hand the kernel: the OS error for I/O, `EIO` for corrupt
    /// or unauthenticated data, `EBADF` for writes to a read-only file.
    pub fn errno(&self) -> i32 {
        match self {
            ContentError::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            ContentError::Corrupt { .. } | ContentError::BadTag { .. } => libc::EIO,
            ContentError::ReadOnly => libc::EBADF,
        }
    }
}

impl From<ContentError> for warpfs_backing::Errno {
    fn from(e: ContentError) -> Self {
        warpfs_backing::Errno(e.errno())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping() {
        assert_eq!(ContentError::errno_err(libc::ENOSPC).errno(), libc::ENOSPC);
        let other = std::io::Error::other("x");
        assert_eq!(ContentError::Io(other).errno(), libc::EIO);
        assert_eq!(ContentError::corrupt("x").errno(), libc::EIO);
        assert_eq!(ContentError::BadTag { block: 3 }.errno(), libc::EIO);
        assert_eq!(ContentError::ReadOnly.errno(), libc::EBADF);
    }
}
