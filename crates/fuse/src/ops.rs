//! The operations layer: what a FUSE file system answers, as plain Rust
//! calls and results, independent of the transport that carried the request
//! (`transport::dev`: fuser over /dev/fuse; `transport::uring`: FUSE over
//! io_uring). Each transport parses a request, calls one method of
//! [`Operations`] and encodes its result; the file systems
//! (`fs::forward::WarpFs`, `fs::reverse::ReverseFs`, the container's
//! `ContainerFs`) implement the trait once for both.

mod types;

use std::ffi::OsStr;
use std::time::{Duration, SystemTime};
pub use types::{Attr, Errno, FileKind, Init, Notify};

/// Result of an operation: the value, or the errno for the kernel.
pub type OpResult<T> = Result<T, Errno>;

/// Who asked (the request header's credentials).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ctx {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

/// A looked-up or new entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub attr: Attr,
    pub generation: u64,
    /// How long the kernel may keep the name → node binding.
    pub entry_ttl: Duration,
    /// How long the kernel may keep the attributes.
    pub attr_ttl: Duration,
}

impl Entry {
    /// A negative entry: "no such name", cached for `ttl` (node id 0).
    pub fn negative(ttl: Duration) -> Self {
        Entry {
            attr: Attr {
                ino: 0,
                size: 0,
                blocks: 0,
                atime: SystemTime::UNIX_EPOCH,
                mtime: SystemTime::UNIX_EPOCH,
                ctime: SystemTime::UNIX_EPOCH,
                crtime: SystemTime::UNIX_EPOCH,
                kind: FileKind::RegularFile,
                perm: 0,
                nlink: 0,
                uid: 0,
                gid: 0,
                rdev: 0,
                blksize: 0,
                flags: 0,
            },
            generation: 0,
            entry_ttl: ttl,
            attr_ttl: Duration::ZERO,
        }
    }
}

/// Attributes with their cache timeout.
#[derive(Debug, Clone)]
pub struct AttrOut {
    pub attr: Attr,
    pub ttl: Duration,
}

/// An open file or directory handle and the `FOPEN_*` flags for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub fh: u64,
    pub flags: u32,
}

/// A time to set: now, or a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    Now,
    At(SystemTime),
}

/// What a setattr changes (`None`: leave as is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
    pub fh: Option<u64>,
}

/// statfs numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Statfs {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// Answer of getxattr/listxattr: the size asked for (size 0), or the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Xattr {
    Size(u32),
    Data(Vec<u8>),
}

impl Xattr {
    /// The answer for a caller that gave a buffer of `size` bytes (0: asks
    /// for the size): ERANGE when the value does not fit.
    pub fn fit(v: Vec<u8>, size: u32) -> OpResult<Xattr> {
        if size == 0 {
            Ok(Xattr::Size(v.len() as u32))
        } else if v.len() <= size as usize {
            Ok(Xattr::Data(v))
        } else {
            Err(Errno::ERANGE)
        }
    }
}

/// Where a read's bytes go. A transport hands out its own buffer
/// ([`ReadOut::buf`], then [`ReadOut::filled`]) so that data is decrypted
/// straight into what goes to the kernel, or takes bytes that are ready
/// elsewhere ([`ReadOut::bytes`]).
pub trait ReadOut {
    /// A buffer of at least `size` bytes to read into.
    fn buf(&mut self, size: usize) -> &mut [u8];
    /// The first `n` bytes of [`ReadOut::buf`] are the reply.
    fn filled(&mut self, n: usize);
    /// `b` is the reply.
    fn bytes(&mut self, b: &[u8]);
}

/// Adds one directory entry to a reply; `true` when it did not fit (the
/// listing stops there).
pub type DirAdd<'a> = dyn FnMut(u64, u64, FileKind, &OsStr) -> bool + 'a;
/// Adds one directory entry with its attributes; `true` when it did not fit.
pub type DirPlusAdd<'a> = dyn FnMut(&Entry, u64, &OsStr) -> bool + 'a;

fn nosys<T>() -> OpResult<T> {
    Err(Errno::ENOSYS)
}

/// A file system as the transports see it. Every method has a default
/// answer (ENOSYS, or nothing) so a small file system implements only what
/// it serves.
#[allow(unused_variables)]
pub trait Operations: Send + Sync + 'static {
    /// Negotiate with the kernel (on /dev/fuse, before any other request):
    /// ask for capabilities and set limits in `init`.
    fn init(&mut self, init: &mut Init) -> std::io::Result<()> {
        Ok(())
    }
    /// The session ended (after the last request of every transport).
    fn destroy(&self) {}
    /// The mount is served by `transport` ("uring" or "dev"), for the
    /// reason `why` (the flag, or what `auto` found).
    fn transport_started(&self, transport: &'static str, why: &str) {}
    /// CPUs the file system's own threads keep busy (speculation's keystream
    /// workers): FUSE threads are not moved there (`uring::roam`).
    fn busy_cpus(&self) -> Vec<usize> {
        Vec::new()
    }
    fn lookup(&self, ctx: &Ctx, parent: u64, name: &OsStr) -> OpResult<Entry> {
        nosys()
    }
    fn forget(&self, ino: u64, nlookup: u64) {}
    fn getattr(&self, ctx: &Ctx, ino: u64, fh: Option<u64>) -> OpResult<AttrOut> {
        nosys()
    }
    fn setattr(&self, ctx: &Ctx, ino: u64, set: &SetAttr) -> OpResult<AttrOut> {
        nosys()
    }
    fn readlink(&self, ctx: &Ctx, ino: u64) -> OpResult<Vec<u8>> {
        nosys()
    }
    fn mknod(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32, rdev: u32) -> OpResult<Entry> {
        nosys()
    }
    fn mkdir(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32) -> OpResult<Entry> {
        nosys()
    }
    fn unlink(&self, ctx: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        nosys()
    }
    fn rmdir(&self, ctx: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        nosys()
    }
    fn symlink(&self, ctx: &Ctx, parent: u64, name: &OsStr, target: &OsStr) -> OpResult<Entry> {
        nosys()
    }
    fn rename(
        &self,
        ctx: &Ctx,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> OpResult<()> {
        nosys()
    }
    fn link(&self, ctx: &Ctx, ino: u64, newparent: u64, newname: &OsStr) -> OpResult<Entry> {
        nosys()
    }
    fn open(&self, ctx: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        Ok(Opened { fh: 0, flags: 0 })
    }
    fn read(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, size: u32, out: &mut dyn ReadOut) -> OpResult<()> {
        nosys()
    }
    /// Returns the bytes written.
    fn write(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, data: &[u8], write_flags: u32) -> OpResult<u32> {
        nosys()
    }
    fn flush(&self, ctx: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        Ok(())
    }
    fn release(&self, ctx: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        Ok(())
    }
    fn fsync(&self, ctx: &Ctx, ino: u64, fh: u64, datasync: bool) -> OpResult<()> {
        nosys()
    }
    fn opendir(&self, ctx: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        Ok(Opened { fh: 0, flags: 0 })
    }
    fn readdir(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirAdd<'_>) -> OpResult<()> {
        nosys()
    }
    fn readdirplus(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirPlusAdd<'_>) -> OpResult<()> {
        nosys()
    }
    fn releasedir(&self, ctx: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        Ok(())
    }
    fn fsyncdir(&self, ctx: &Ctx, ino: u64, fh: u64, datasync: bool) -> OpResult<()> {
        nosys()
    }
    fn statfs(&self, ctx: &Ctx, ino: u64) -> OpResult<Statfs> {
        Ok(Statfs {
            bsize: 512,
            namelen: 255,
            frsize: 512,
            ..Statfs::default()
        })
    }
    fn setxattr(&self, ctx: &Ctx, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> OpResult<()> {
        nosys()
    }
    fn getxattr(&self, ctx: &Ctx, ino: u64, name: &OsStr, size: u32) -> OpResult<Xattr> {
        nosys()
    }
    fn listxattr(&self, ctx: &Ctx, ino: u64, size: u32) -> OpResult<Xattr> {
        nosys()
    }
    fn removexattr(&self, ctx: &Ctx, ino: u64, name: &OsStr) -> OpResult<()> {
        nosys()
    }
    fn access(&self, ctx: &Ctx, ino: u64, mask: i32) -> OpResult<()> {
        nosys()
    }
    fn create(
        &self,
        ctx: &Ctx,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> OpResult<(Entry, Opened)> {
        nosys()
    }
    /// A restricted ioctl: the result and the bytes to copy out.
    fn ioctl(&self, ctx: &Ctx, ino: u64, fh: u64, cmd: u32, input: &[u8], out_size: u32) -> OpResult<(i32, Vec<u8>)> {
        nosys()
    }
    fn fallocate(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, length: u64, mode: i32) -> OpResult<()> {
        nosys()
    }
    /// lseek(2)'s SEEK_DATA / SEEK_HOLE (`whence`; the kernel answers the
    /// other kinds itself) from `offset`: the offset found. ENOSYS makes
    /// the kernel stop asking and treat every file as data.
    fn lseek(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, whence: i32) -> OpResult<u64> {
        nosys()
    }
}
