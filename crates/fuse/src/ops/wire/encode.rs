//! Reply encoding into a request's payload buffer: the fixed reply structs
//! (`fuse_entry_out`, `fuse_attr_out`, `fuse_open_out`, ...) and directory
//! listings, each write bounds-checked ([`Put`]). With `--force-owner`
//! every attribute written carries the one owner ([`Reply::owner`]).

use super::{Malformed, Put};
use crate::ops::{Attr, AttrOut, Entry, Errno, FileKind, Opened, ReadOut, Statfs, Xattr};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `S_IF*` bits of a file type.
pub fn type_bits(k: FileKind) -> u32 {
    match k {
        FileKind::NamedPipe => libc::S_IFIFO,
        FileKind::CharDevice => libc::S_IFCHR,
        FileKind::BlockDevice => libc::S_IFBLK,
        FileKind::Directory => libc::S_IFDIR,
        FileKind::RegularFile => libc::S_IFREG,
        FileKind::Symlink => libc::S_IFLNK,
        FileKind::Socket => libc::S_IFSOCK,
    }
}

/// Seconds and nanoseconds since the epoch (negative before it).
fn epoch(t: SystemTime) -> (u64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs(), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (mut s, mut ns) = (-(d.as_secs() as i64), d.subsec_nanos());
            if ns > 0 {
                s -= 1;
                ns = 1_000_000_000 - ns;
            }
            (s as u64, ns)
        }
    }
}

fn valid(d: Duration) -> (u64, u32) {
    (d.as_secs(), d.subsec_nanos())
}

/// `struct fuse_attr` (88 bytes).
pub const ATTR: usize = 88;
/// `struct fuse_entry_out`.
pub const ENTRY_OUT: usize = 40 + ATTR;
/// `struct fuse_dirent` without its name.
pub const DIRENT: usize = 24;

/// Where a reply's structs go.
pub struct Reply<'a> {
    pub put: Put<'a>,
    /// `--force-owner`: the (uid, gid) every reported file has.
    pub owner: Option<(u32, u32)>,
}

impl<'a> Reply<'a> {
    /// Nothing but the header: the reply's length.
    pub fn empty(self) -> Result<usize, Errno> {
        Ok(0)
    }
    pub fn entry(mut self, e: &Entry) -> Result<usize, Errno> {
        entry_out(&mut self.put, e, self.owner)?;
        Ok(self.put.at)
    }
    pub fn attr(mut self, a: &AttrOut) -> Result<usize, Errno> {
        attr_out(&mut self.put, a, self.owner)?;
        Ok(self.put.at)
    }
    pub fn open(mut self, o: &Opened) -> Result<usize, Errno> {
        open_out(&mut self.put, o)?;
        Ok(self.put.at)
    }
    pub fn create(mut self, e: &Entry, o: &Opened) -> Result<usize, Errno> {
        entry_out(&mut self.put, e, self.owner)?;
        open_out(&mut self.put, o)?;
        Ok(self.put.at)
    }
    pub fn written(mut self, n: u32) -> Result<usize, Errno> {
        self.put.u32(n)?;
        self.put.u32(0)?;
        Ok(self.put.at)
    }
    pub fn statfs(mut self, s: &Statfs) -> Result<usize, Errno> {
        statfs_out(&mut self.put, s)?;
        Ok(self.put.at)
    }
    /// A getxattr/listxattr answer: `struct fuse_getxattr_out` (the size
    /// asked for) or the value.
    pub fn xattr(mut self, x: &Xattr) -> Result<usize, Errno> {
        match x {
            Xattr::Size(n) => {
                self.put.u32(*n)?;
                self.put.u32(0)?;
            }
            Xattr::Data(v) => self.put.raw(v)?,
        }
        Ok(self.put.at)
    }
    pub fn bytes(mut self, b: &[u8]) -> Result<usize, Errno> {
        self.put.raw(b)?;
        Ok(self.put.at)
    }
    /// `struct fuse_ioctl_out` and the bytes to copy out.
    pub fn ioctl(mut self, result: i32, data: &[u8]) -> Result<usize, Errno> {
        self.put.i32(result)?;
        self.put.u32(0)?;
        self.put.u32(1)?;
        self.put.u32(1)?;
        self.put.raw(data)?;
        Ok(self.put.at)
    }
    /// A read's answer, written by the file system straight into the
    /// buffer.
    pub fn read(self) -> PayloadRead<'a> {
        PayloadRead {
            buf: self.put.buf,
            len: 0,
            overflow: false,
        }
    }
    /// A directory listing packed into the buffer.
    pub fn dir(self) -> DirBuf<'a> {
        let limit = self.put.buf.len();
        DirBuf {
            put: self.put,
            limit,
            owner: self.owner,
        }
    }
}

/// A read's answer in the payload buffer.
pub struct PayloadRead<'a> {
    buf: &'a mut [u8],
    len: usize,
    overflow: bool,
}

impl PayloadRead<'_> {
    /// The reply's length (EIO if the file system gave more than fits).
    pub fn reply_len(&self) -> Result<usize, Errno> {
        if self.overflow {
            Err(Errno::EIO)
        } else {
            Ok(self.len)
        }
    }
}

impl ReadOut for PayloadRead<'_> {
    fn buf(&mut self, size: usize) -> &mut [u8] {
        let n = size.min(self.buf.len());
        &mut self.buf[..n]
    }
    fn filled(&mut self, n: usize) {
        self.len = n.min(self.buf.len());
    }
    fn bytes(&mut self, b: &[u8]) {
        match self.buf.get_mut(..b.len()) {
            Some(d) => {
                d.copy_from_slice(b);
                self.len = b.len();
            }
            None => self.overflow = true,
        }
    }
}

/// `struct fuse_attr`; a node other than 0 (a negative entry) shows
/// `owner` when one is forced.
fn attr(p: &mut Put<'_>, a: &Attr, owner: Option<(u32, u32)>) -> Result<(), Malformed> {
    let (uid, gid) = match owner {
        Some(o) if a.ino != 0 => o,
        _ => (a.uid, a.gid),
    };
    let (at, atn) = epoch(a.atime);
    let (mt, mtn) = epoch(a.mtime);
    let (ct, ctn) = epoch(a.ctime);
    for v in [a.ino, a.size, a.blocks, at, mt, ct] {
        p.u64(v)?;
    }
    let mode = type_bits(a.kind) | u32::from(a.perm);
    for v in [atn, mtn, ctn, mode, a.nlink, uid, gid, a.rdev, a.blksize, a.flags] {
        p.u32(v)?;
    }
    Ok(())
}

/// `struct fuse_entry_out`.
fn entry_out(p: &mut Put<'_>, e: &Entry, owner: Option<(u32, u32)>) -> Result<(), Malformed> {
    let (es, ens) = valid(e.entry_ttl);
    let (as_, ans) = valid(e.attr_ttl);
    p.u64(e.attr.ino)?;
    p.u64(e.generation)?;
    p.u64(es)?;
    p.u64(as_)?;
    p.u32(ens)?;
    p.u32(ans)?;
    attr(p, &e.attr, owner)
}

/// `struct fuse_attr_out`.
fn attr_out(p: &mut Put<'_>, a: &AttrOut, owner: Option<(u32, u32)>) -> Result<(), Malformed> {
    let (s, ns) = valid(a.ttl);
    p.u64(s)?;
    p.u32(ns)?;
    p.u32(0)?;
    attr(p, &a.attr, owner)
}

/// `struct fuse_open_out`.
fn open_out(p: &mut Put<'_>, o: &Opened) -> Result<(), Malformed> {
    p.u64(o.fh)?;
    p.u32(o.flags)?;
    p.u32(0)
}

/// `struct fuse_statfs_out`.
fn statfs_out(p: &mut Put<'_>, s: &Statfs) -> Result<(), Malformed> {
    for v in [s.blocks, s.bfree, s.bavail, s.files, s.ffree] {
        p.u64(v)?;
    }
    for v in [s.bsize, s.namelen, s.frsize, 0, 0, 0, 0, 0, 0, 0] {
        p.u32(v)?;
    }
    Ok(())
}

/// A directory listing being packed into at most `limit` bytes.
pub struct DirBuf<'a> {
    pub put: Put<'a>,
    pub limit: usize,
    pub owner: Option<(u32, u32)>,
}

impl DirBuf<'_> {
    fn dirent(&mut self, ino: u64, off: u64, kind: FileKind, name: &OsStr) -> Result<(), Malformed> {
        self.put.u64(ino)?;
        self.put.u64(off)?;
        self.put.u32(name.len() as u32)?;
        self.put.u32(type_bits(kind) >> 12)?;
        self.put.raw(name.as_bytes())?;
        self.put.pad8()
    }

    fn fits(&self, n: usize) -> bool {
        self.put.at + n <= self.limit
    }

    /// Add a `struct fuse_dirent`; `true` when it did not fit.
    pub fn add(&mut self, ino: u64, off: u64, kind: FileKind, name: &OsStr) -> bool {
        let n = (DIRENT + name.len()).next_multiple_of(8);
        !self.fits(n) || self.dirent(ino, off, kind, name).is_err()
    }

    /// Add a `struct fuse_direntplus`; `true` when it did not fit.
    pub fn add_plus(&mut self, e: &Entry, off: u64, name: &OsStr) -> bool {
        let n = ENTRY_OUT + (DIRENT + name.len()).next_multiple_of(8);
        if !self.fits(n) {
            return true;
        }
        entry_out(&mut self.put, e, self.owner).is_err() || self.dirent(e.attr.ino, off, e.attr.kind, name).is_err()
    }

    /// The listing's length.
    pub fn reply_len(&self) -> usize {
        self.put.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Entry;

    fn file_attr(ino: u64) -> Attr {
        let mut e = Entry::negative(Duration::ZERO).attr;
        e.ino = ino;
        e.kind = FileKind::Directory;
        e.perm = 0o755;
        e.mtime = UNIX_EPOCH + Duration::new(5, 7);
        e.atime = UNIX_EPOCH - Duration::new(1, 0) + Duration::new(0, 250);
        e
    }

    #[test]
    fn entry_out_layout() {
        let mut b = [0u8; 128];
        let e = Entry {
            attr: file_attr(42),
            generation: 3,
            entry_ttl: Duration::new(30, 5),
            attr_ttl: Duration::new(1, 0),
        };
        let mut p = Put { buf: &mut b, at: 0 };
        entry_out(&mut p, &e, None).unwrap();
        assert_eq!(p.at, ENTRY_OUT);
        let r = super::super::Le(&b);
        assert_eq!(r.u64(0).unwrap(), 42);
        assert_eq!(r.u64(8).unwrap(), 3);
        assert_eq!(r.u64(16).unwrap(), 30);
        assert_eq!(r.u32(32).unwrap(), 5);
        // fuse_attr at 40: ino, size, blocks, atime, mtime, ctime, then nsecs.
        assert_eq!(r.u64(40).unwrap(), 42);
        assert_eq!(r.u64(40 + 24).unwrap() as i64, -1, "atime before the epoch");
        assert_eq!(r.u32(40 + 48).unwrap(), 250);
        assert_eq!(r.u64(40 + 32).unwrap(), 5);
        assert_eq!(r.u32(40 + 52).unwrap(), 7);
        assert_eq!(r.u32(40 + 60).unwrap(), libc::S_IFDIR | 0o755);
        // Too small a buffer is an error, not a panic.
        let mut small = [0u8; 100];
        assert!(entry_out(&mut Put { buf: &mut small, at: 0 }, &e, None).is_err());
    }

    #[test]
    fn dir_entries_stop_at_the_limit() {
        let mut b = vec![0u8; 4096];
        let mut d = DirBuf {
            put: Put { buf: &mut b, at: 0 },
            limit: 64,
            owner: None,
        };
        assert!(!d.add(1, 1, FileKind::Directory, OsStr::new(".")));
        assert_eq!(d.put.at, 32);
        assert!(!d.add(2, 2, FileKind::RegularFile, OsStr::new("12345678")));
        assert_eq!(d.put.at, 64);
        assert!(d.add(3, 3, FileKind::RegularFile, OsStr::new("x")), "full");
        assert_eq!(d.put.at, 64, "a refused entry writes nothing");
        let r = super::super::Le(&b);
        assert_eq!(r.u32(32 + 16).unwrap(), 8, "name length");
        assert_eq!(r.u32(32 + 20).unwrap(), libc::DT_REG as u32);
    }
}
