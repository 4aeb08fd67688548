//! The values the operations layer speaks in, owned by this crate and free
//! of any transport's types: errnos, file kinds and attributes, the INIT
//! negotiation, cache invalidations. Each transport converts at its edge
//! (`transport::dev` to and from fuser; `transport::uring` encodes them
//! into the kernel ABI itself).

use std::ffi::OsStr;
use std::time::{Duration, SystemTime};

/// An error number for the kernel: always positive (`from_i32` turns
/// anything else into EIO).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(i32);

impl Errno {
    pub const EPERM: Errno = Errno(libc::EPERM);
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    pub const EINTR: Errno = Errno(libc::EINTR);
    pub const EIO: Errno = Errno(libc::EIO);
    pub const ENXIO: Errno = Errno(libc::ENXIO);
    pub const EBADF: Errno = Errno(libc::EBADF);
    pub const EAGAIN: Errno = Errno(libc::EAGAIN);
    pub const ENOMEM: Errno = Errno(libc::ENOMEM);
    pub const EACCES: Errno = Errno(libc::EACCES);
    pub const EBUSY: Errno = Errno(libc::EBUSY);
    pub const EEXIST: Errno = Errno(libc::EEXIST);
    pub const EXDEV: Errno = Errno(libc::EXDEV);
    pub const ENOTDIR: Errno = Errno(libc::ENOTDIR);
    pub const EISDIR: Errno = Errno(libc::EISDIR);
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    pub const EFBIG: Errno = Errno(libc::EFBIG);
    pub const ENOSPC: Errno = Errno(libc::ENOSPC);
    pub const EROFS: Errno = Errno(libc::EROFS);
    pub const ERANGE: Errno = Errno(libc::ERANGE);
    pub const ENAMETOOLONG: Errno = Errno(libc::ENAMETOOLONG);
    pub const ENOSYS: Errno = Errno(libc::ENOSYS);
    pub const ENOTEMPTY: Errno = Errno(libc::ENOTEMPTY);
    pub const ENODATA: Errno = Errno(libc::ENODATA);
    pub const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    pub const ENOTTY: Errno = Errno(libc::ENOTTY);

    /// The errno `err`; zero or negative (no error number) is EIO.
    pub fn from_i32(err: i32) -> Errno {
        if err > 0 {
            Errno(err)
        } else {
            Errno::EIO
        }
    }

    /// The error number (positive).
    pub fn code(self) -> i32 {
        self.0
    }
}

impl From<std::io::Error> for Errno {
    /// The error's OS error number; an error without one is EIO.
    fn from(e: std::io::Error) -> Self {
        Errno::from_i32(e.raw_os_error().unwrap_or(0))
    }
}

impl From<Errno> for i32 {
    fn from(e: Errno) -> i32 {
        e.0
    }
}

/// What kind of file a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    NamedPipe,
    CharDevice,
    BlockDevice,
    Directory,
    RegularFile,
    Symlink,
    Socket,
}

/// A node's attributes as the kernel gets them (`struct fuse_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Node id (0: a negative entry).
    pub ino: u64,
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    /// Creation time (macOS only; not sent on Linux).
    pub crtime: SystemTime,
    pub kind: FileKind,
    /// Permission bits (`mode & 07777`).
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub blksize: u32,
    /// BSD flags (macOS only; not sent on Linux).
    pub flags: u32,
}

/// The INIT negotiation: the capabilities the kernel offers and what the
/// file system asks for of them (`FUSE_*` bits of `struct fuse_init_in` /
/// `fuse_init_out`, the `flags | flags2 << 32` of the kernel's
/// include/uapi/linux/fuse.h), and the limits it sets (`None`: the
/// transport's default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Init {
    offered: u64,
    wanted: u64,
    /// Largest WRITE request, in bytes.
    pub max_write: Option<u32>,
    /// Largest read-ahead, in bytes (at most what the kernel offered).
    pub max_readahead: Option<u32>,
    /// Background requests (read-ahead, async direct I/O) in flight at once.
    pub max_background: Option<u16>,
    /// Background requests at which the kernel counts the mount congested.
    pub congestion_threshold: Option<u16>,
    /// Timestamp granularity (a power of ten nanoseconds, at most 1 s).
    pub time_gran: Option<Duration>,
}

impl Init {
    // The capabilities in use here, as include/uapi/linux/fuse.h numbers
    // them (bit 32 on: `flags2`).
    pub const FUSE_ATOMIC_O_TRUNC: u64 = 1 << 3;
    pub const FUSE_BIG_WRITES: u64 = 1 << 5;
    pub const FUSE_DO_READDIRPLUS: u64 = 1 << 13;
    pub const FUSE_READDIRPLUS_AUTO: u64 = 1 << 14;
    pub const FUSE_ASYNC_DIO: u64 = 1 << 15;
    pub const FUSE_WRITEBACK_CACHE: u64 = 1 << 16;
    pub const FUSE_PARALLEL_DIROPS: u64 = 1 << 18;
    pub const FUSE_CACHE_SYMLINKS: u64 = 1 << 23;
    pub const FUSE_HANDLE_KILLPRIV_V2: u64 = 1 << 28;
    pub const FUSE_OVER_IO_URING: u64 = 1 << 41;

    /// The kernel offers the capabilities `offered`; nothing asked yet.
    pub fn new(offered: u64) -> Self {
        Init {
            offered,
            wanted: 0,
            max_write: None,
            max_readahead: None,
            max_background: None,
            congestion_threshold: None,
            time_gran: None,
        }
    }

    /// The capabilities the kernel offers.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// Whether the kernel offers every capability of `flags`.
    pub fn offers(&self, flags: u64) -> bool {
        self.offered & flags == flags
    }

    /// Ask for those of `flags` that the kernel offers (the others are
    /// left out); returns the ones asked for.
    pub fn want(&mut self, flags: u64) -> u64 {
        let got = flags & self.offered;
        self.wanted |= got;
        got
    }

    /// The capabilities asked for (always a subset of those offered).
    pub fn wanted(&self) -> u64 {
        self.wanted
    }
}

/// Tells the kernel that what it caches is stale (FUSE notifications; on
/// /dev/fuse whatever the transport that serves the requests).
pub trait Notify: Send + Sync {
    /// Node `ino`'s attributes, and its cached pages from `off` for `len`
    /// bytes (`off` < 0: the attributes only; `len` 0: to the end).
    fn inval_inode(&self, ino: u64, off: i64, len: i64) -> std::io::Result<()>;
    /// The name `name` in directory `parent`.
    fn inval_entry(&self, parent: u64, name: &OsStr) -> std::io::Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_keeps_its_number_and_refuses_non_positive() {
        for e in [Errno::ENOENT, Errno::EIO, Errno::ERANGE, Errno::ENOTTY] {
            assert_eq!(Errno::from_i32(e.code()), e);
            assert_eq!(i32::from(e), e.code());
        }
        assert_eq!(Errno::from_i32(libc::EXDEV).code(), libc::EXDEV);
        for bad in [0, -1, -libc::ENOENT, i32::MIN] {
            assert_eq!(Errno::from_i32(bad), Errno::EIO, "{bad}");
        }
        assert_eq!(
            Errno::from(std::io::Error::from_raw_os_error(libc::EACCES)),
            Errno::EACCES
        );
        assert_eq!(Errno::from(std::io::Error::other("no number")), Errno::EIO);
    }

    #[test]
    fn init_asks_only_for_what_is_offered() {
        let mut i = Init::new(Init::FUSE_BIG_WRITES | Init::FUSE_HANDLE_KILLPRIV_V2 | Init::FUSE_OVER_IO_URING);
        assert!(i.offers(Init::FUSE_BIG_WRITES | Init::FUSE_OVER_IO_URING));
        assert!(!i.offers(Init::FUSE_BIG_WRITES | Init::FUSE_WRITEBACK_CACHE));
        let got = i.want(Init::FUSE_WRITEBACK_CACHE | Init::FUSE_HANDLE_KILLPRIV_V2);
        assert_eq!(got, Init::FUSE_HANDLE_KILLPRIV_V2);
        i.want(Init::FUSE_BIG_WRITES);
        assert_eq!(i.wanted(), Init::FUSE_HANDLE_KILLPRIV_V2 | Init::FUSE_BIG_WRITES);
    }
}
