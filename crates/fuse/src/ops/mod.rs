//! The operations layer: what a FUSE file system answers, as plain Rust
//! calls and results in the crate's own types, one trait per group of
//! operations ([`MountOps`], [`EntryOps`], [`NameOps`], [`FileOps`],
//! [`DirOps`], [`XattrOps`]; together [`Operations`]). Each group's file
//! holds, beside each operation's method, its opcode and its wire form:
//! the per-op struct decoded, the method called, the reply encoded
//! ([`serve_wire`], which the ring transport calls for every request).
//! fuser's /dev/fuse transport decodes for itself and calls the same
//! methods. The file systems (`fs::forward::WarpFs`,
//! `fs::reverse::ReverseFs`, the container's `ContainerFs`) implement the
//! groups once for both transports.

mod dir;
mod entry;
mod file;
mod mount;
mod names;
mod types;
pub mod wire;
mod xattr;

pub use dir::DirOps;
pub use entry::EntryOps;
pub use file::FileOps;
pub use mount::MountOps;
pub use names::NameOps;
pub use xattr::XattrOps;

/// Every group's trait, to call operations on a concrete file system.
pub mod prelude {
    pub use super::{DirOps, EntryOps, FileOps, MountOps, NameOps, Operations, XattrOps};
}

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

impl From<warpfs_volume::StatFs> for Statfs {
    fn from(s: warpfs_volume::StatFs) -> Self {
        Statfs {
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            bsize: s.bsize,
            namelen: s.namelen,
            frsize: s.frsize,
        }
    }
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

/// Where a read's bytes go: the volume's [`warpfs_volume::ReadSink`],
/// which its handles read into. A transport hands out its own buffer
/// (`buf`, then `filled`) so that data is decrypted straight into what
/// goes to the kernel, or takes bytes that are ready elsewhere (`bytes`).
pub use warpfs_volume::ReadSink as ReadOut;

/// Adds one directory entry to a reply; `true` when it did not fit (the
/// listing stops there).
pub type DirAdd<'a> = dyn FnMut(u64, u64, FileKind, &OsStr) -> bool + 'a;
/// Adds one directory entry with its attributes; `true` when it did not fit.
pub type DirPlusAdd<'a> = dyn FnMut(&Entry, u64, &OsStr) -> bool + 'a;

/// FUSE opcodes (`enum fuse_opcode`) the daemon knows, each defined
/// beside its operation.
pub mod op {
    pub use super::dir::op::*;
    pub use super::entry::op::*;
    pub use super::file::op::*;
    pub use super::mount::op::*;
    pub use super::names::op::*;
    pub use super::xattr::op::*;
}

/// A file system as the transports see it: every group of operations.
/// Each method of a group has a default answer (ENOSYS, or nothing) so a
/// small file system implements only what it serves; the forward file
/// system answers every request a mount sends (a unit test asks each).
pub trait Operations: MountOps + EntryOps + NameOps + FileOps + DirOps + XattrOps {}

impl<T: MountOps + EntryOps + NameOps + FileOps + DirOps + XattrOps> Operations for T {}

/// Serve one request in wire form: decode it, call the method of its
/// group, encode the answer into `w`'s payload. Returns the reply's
/// payload length; ENOSYS for an opcode no group knows.
pub fn serve_wire<T: Operations + ?Sized>(fs: &T, w: &mut wire::Wire<'_>) -> OpResult<usize> {
    entry::wire(fs, w)
        .or_else(|| names::wire(fs, w))
        .or_else(|| file::wire(fs, w))
        .or_else(|| dir::wire(fs, w))
        .or_else(|| xattr::wire(fs, w))
        .or_else(|| mount::wire(fs, w))
        .unwrap_or(Err(Errno::ENOSYS))
}

fn nosys<T>() -> OpResult<T> {
    Err(Errno::ENOSYS)
}

/// Run one request's decode, call and encode, so that each step can
/// return early with `?` (a malformed request becomes EIO).
fn answer(f: impl FnOnce() -> OpResult<usize>) -> OpResult<usize> {
    f()
}

#[cfg(test)]
pub(crate) mod tests;
