//! The /dev/fuse transport: a `fuser::Filesystem` that hands each request
//! fuser parsed to the operations layer ([`Operations`]) and encodes the
//! result with fuser's reply types. With FUSE over io_uring it still serves
//! what the kernel keeps on /dev/fuse: the INIT handshake, FORGET and
//! INTERRUPT, and every request when the ring could not start. The
//! operations layer's own types (errnos, attributes, the INIT negotiation)
//! are converted to and from fuser's here.

use crate::ops::{Attr, Ctx, DirAdd, DirPlusAdd, Errno, FileKind, Init, Operations, ReadOut, SetAttr, SetTime};
use fuser::{
    AccessFlags, BsdFileFlags, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow, WriteFlags,
};
use std::cell::RefCell;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

/// What the INIT handshake settled about FUSE over io_uring.
#[derive(Debug, Default)]
pub struct RingOffer {
    /// Ask the kernel for it (when it offers it).
    pub want: bool,
    /// The kernel offered it (`enable_uring` is on).
    pub offered: AtomicBool,
    /// Both: the kernel now waits for the ring queues.
    pub taken: AtomicBool,
}

/// fuser's view of a file system of the operations layer.
pub struct DevFuse<T: Operations> {
    ops: Arc<T>,
    ring: Arc<RingOffer>,
    /// Gets the file system once INIT is done (the session owns `self`).
    shared: Arc<OnceLock<Arc<T>>>,
}

impl<T: Operations> DevFuse<T> {
    /// Serve `ops`; `ring` says whether to take FUSE over io_uring.
    pub fn new(ops: Arc<T>, ring: Arc<RingOffer>, shared: Arc<OnceLock<Arc<T>>>) -> Self {
        Self { ops, ring, shared }
    }
}

fn ctx(req: &Request) -> Ctx {
    Ctx {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

fn set_time(t: Option<TimeOrNow>) -> Option<SetTime> {
    t.map(|t| match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(st) => SetTime::At(st),
    })
}

/// A FUSE thread's buffer for read answers (plaintext): overwritten with
/// zeros when it grows (the old allocation) and when the thread ends.
#[derive(Default)]
struct ReadBuf(Vec<u8>);

impl ReadBuf {
    /// At least `size` bytes.
    fn at_least(&mut self, size: usize) -> &mut [u8] {
        if self.0.len() < size {
            let mut grown = vec![0u8; size];
            zeroize::Zeroize::zeroize(&mut self.0);
            std::mem::swap(&mut self.0, &mut grown);
        }
        &mut self.0[..size]
    }
}

impl Drop for ReadBuf {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

thread_local! {
    static READ_BUF: RefCell<ReadBuf> = RefCell::new(ReadBuf::default());
}

/// A read reply through fuser: bytes straight from where they are, or from
/// the thread's buffer.
struct DevRead<'a> {
    buf: &'a mut ReadBuf,
    reply: Option<ReplyData>,
}

impl ReadOut for DevRead<'_> {
    fn buf(&mut self, size: usize) -> &mut [u8] {
        self.buf.at_least(size)
    }
    fn filled(&mut self, n: usize) {
        if let Some(r) = self.reply.take() {
            r.data(&self.buf.0[..n]);
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        if let Some(r) = self.reply.take() {
            r.data(b);
        }
    }
}

impl<T: Operations> Filesystem for DevFuse<T> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let ops = Arc::get_mut(&mut self.ops).ok_or_else(|| std::io::Error::other("file system shared before INIT"))?;
        let mut init = init_offer(config);
        ops.init(&mut init)?;
        init_apply(&init, config);
        let offered = config.capabilities().contains(InitFlags::FUSE_OVER_IO_URING);
        self.ring.offered.store(offered, Ordering::Relaxed);
        if self.ring.want && offered && config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_ok() {
            self.ring.taken.store(true, Ordering::Relaxed);
        }
        let _ = self.shared.set(self.ops.clone());
        Ok(())
    }

    // The session's end is the mount's: `destroy` runs once every
    // transport has stopped (see `session::serve`).
    fn destroy(&mut self) {}

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.ops.lookup(&ctx(req), parent.0, name) {
            Ok(e) if e.entry_ttl == e.attr_ttl || e.attr.ino == 0 => {
                reply.entry(&e.entry_ttl, &attr(&e.attr), Generation(e.generation))
            }
            // fuser has one timeout for both: the shorter.
            Ok(e) => reply.entry(&e.entry_ttl.min(e.attr_ttl), &attr(&e.attr), Generation(e.generation)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.ops.forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.ops.getattr(&ctx(req), ino.0, fh.map(|f| f.0)) {
            Ok(a) => reply.attr(&a.ttl, &attr(&a.attr)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: set_time(atime),
            mtime: set_time(mtime),
            fh: fh.map(|f| f.0),
        };
        match self.ops.setattr(&ctx(req), ino.0, &set) {
            Ok(a) => reply.attr(&a.ttl, &attr(&a.attr)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        empty(self.ops.access(&ctx(req), ino.0, mask.bits()), reply)
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.ops.readlink(&ctx(req), ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        entry(self.ops.mknod(&ctx(req), parent.0, name, mode, umask, rdev), reply)
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        entry(self.ops.mkdir(&ctx(req), parent.0, name, mode, umask), reply)
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.ops.unlink(&ctx(req), parent.0, name), reply)
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.ops.rmdir(&ctx(req), parent.0, name), reply)
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        entry(
            self.ops.symlink(&ctx(req), parent.0, link_name, target.as_os_str()),
            reply,
        )
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = self
            .ops
            .rename(&ctx(req), parent.0, name, newparent.0, newname, flags.bits());
        empty(r, reply)
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        entry(self.ops.link(&ctx(req), ino.0, newparent.0, newname), reply)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.ops.open(&ctx(req), ino.0, flags.0) {
            Ok(o) => reply.opened(FileHandle(o.fh), FopenFlags::from_bits_retain(o.flags)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        READ_BUF.with(|b| {
            let mut buf = b.borrow_mut();
            let mut out = DevRead {
                buf: &mut buf,
                reply: Some(reply),
            };
            if let Err(e) = self.ops.read(&ctx(req), ino.0, fh.0, offset, size, &mut out) {
                if let Some(r) = out.reply.take() {
                    r.error(errno(e));
                }
            }
        })
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.ops.write(&ctx(req), ino.0, fh.0, offset, data, write_flags.bits()) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(&self, req: &Request, ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        empty(self.ops.flush(&ctx(req), ino.0, fh.0), reply)
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        empty(self.ops.release(&ctx(req), ino.0, fh.0), reply)
    }

    fn fsync(&self, req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        empty(self.ops.fsync(&ctx(req), ino.0, fh.0, datasync), reply)
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.ops.opendir(&ctx(req), ino.0, flags.0) {
            Ok(o) => reply.opened(FileHandle(o.fh), FopenFlags::from_bits_retain(o.flags)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let mut add = |ino: u64, off: u64, k: FileKind, name: &OsStr| reply.add(INodeNo(ino), off, kind(k), name);
        let r = self
            .ops
            .readdir(&ctx(req), ino.0, fh.0, offset, &mut add as &mut DirAdd<'_>);
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdirplus(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let mut add = |e: &crate::ops::Entry, off: u64, name: &OsStr| {
            reply.add(
                INodeNo(e.attr.ino),
                off,
                name,
                &e.entry_ttl,
                &attr(&e.attr),
                Generation(e.generation),
            )
        };
        let r = self
            .ops
            .readdirplus(&ctx(req), ino.0, fh.0, offset, &mut add as &mut DirPlusAdd<'_>);
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn releasedir(&self, req: &Request, ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        empty(self.ops.releasedir(&ctx(req), ino.0, fh.0), reply)
    }

    fn fsyncdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        empty(self.ops.fsyncdir(&ctx(req), ino.0, fh.0, datasync), reply)
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        match self.ops.statfs(&ctx(req), ino.0) {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        empty(self.ops.setxattr(&ctx(req), ino.0, name, value, flags), reply)
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        xattr(self.ops.getxattr(&ctx(req), ino.0, name, size), reply)
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        xattr(self.ops.listxattr(&ctx(req), ino.0, size), reply)
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.ops.removexattr(&ctx(req), ino.0, name), reply)
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.ops.create(&ctx(req), parent.0, name, mode, umask, flags) {
            Ok((e, o)) => reply.created(
                &e.entry_ttl.min(e.attr_ttl),
                &attr(&e.attr),
                Generation(e.generation),
                FileHandle(o.fh),
                FopenFlags::from_bits_retain(o.flags),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        match self.ops.ioctl(&ctx(req), ino.0, fh.0, cmd, in_data, out_size) {
            Ok((result, out)) => reply.ioctl(result, &out),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        empty(self.ops.fallocate(&ctx(req), ino.0, fh.0, offset, length, mode), reply)
    }

    fn lseek(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        // The kernel's loff_t as the ring carries it: a negative offset is
        // one past any end (ENXIO).
        match self.ops.lseek(&ctx(req), ino.0, fh.0, offset as u64, whence) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(errno(e)),
        }
    }
}

fn empty(r: Result<(), Errno>, reply: ReplyEmpty) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

fn entry(r: Result<crate::ops::Entry, Errno>, reply: ReplyEntry) {
    match r {
        Ok(e) => reply.entry(&e.entry_ttl.min(e.attr_ttl), &attr(&e.attr), Generation(e.generation)),
        Err(e) => reply.error(errno(e)),
    }
}

fn xattr(r: Result<crate::ops::Xattr, Errno>, reply: ReplyXattr) {
    match r {
        Ok(crate::ops::Xattr::Size(n)) => reply.size(n),
        Ok(crate::ops::Xattr::Data(v)) => reply.data(&v),
        Err(e) => reply.error(errno(e)),
    }
}

/// fuser's errno for ours (the same number).
fn errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.code())
}

fn kind(k: FileKind) -> FileType {
    match k {
        FileKind::NamedPipe => FileType::NamedPipe,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
        FileKind::Directory => FileType::Directory,
        FileKind::RegularFile => FileType::RegularFile,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Socket => FileType::Socket,
    }
}

fn attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.crtime,
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: a.flags,
    }
}

/// What the kernel offered at INIT, for the file system.
fn init_offer(config: &KernelConfig) -> Init {
    Init::new(config.capabilities().bits())
}

/// fuser's flags for the capabilities the file system asked for (the same
/// bits: fuser's `InitFlags` mirror the kernel's).
fn init_flags(init: &Init) -> InitFlags {
    InitFlags::from_bits_retain(init.wanted())
}

/// What the file system asked for at INIT, into fuser's answer. A limit
/// fuser refuses (out of its range) leaves fuser's default.
fn init_apply(init: &Init, config: &mut KernelConfig) {
    let _ = config.add_capabilities(init_flags(init));
    if let Some(v) = init.max_write {
        let _ = config.set_max_write(v);
    }
    if let Some(v) = init.max_readahead {
        let _ = config.set_max_readahead(v);
    }
    if let Some(v) = init.max_background {
        let _ = config.set_max_background(v);
    }
    if let Some(v) = init.congestion_threshold {
        let _ = config.set_congestion_threshold(v);
    }
    if let Some(v) = init.time_gran {
        let _ = config.set_time_granularity(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn errnos_keep_their_number() {
        let named = [
            (Errno::EPERM, fuser::Errno::EPERM),
            (Errno::ENOENT, fuser::Errno::ENOENT),
            (Errno::EIO, fuser::Errno::EIO),
            (Errno::EBADF, fuser::Errno::EBADF),
            (Errno::EACCES, fuser::Errno::EACCES),
            (Errno::EEXIST, fuser::Errno::EEXIST),
            (Errno::ENOTDIR, fuser::Errno::ENOTDIR),
            (Errno::EISDIR, fuser::Errno::EISDIR),
            (Errno::EINVAL, fuser::Errno::EINVAL),
            (Errno::ERANGE, fuser::Errno::ERANGE),
            (Errno::EROFS, fuser::Errno::EROFS),
            (Errno::ENOSYS, fuser::Errno::ENOSYS),
            (Errno::ENOTEMPTY, fuser::Errno::ENOTEMPTY),
            (Errno::EOPNOTSUPP, fuser::Errno::EOPNOTSUPP),
        ];
        for (ours, theirs) in named {
            assert_eq!(errno(ours), theirs, "{ours:?}");
            assert_eq!(Errno::from_i32(theirs.code()), ours);
        }
        // Any number goes through unchanged, and both sides refuse the
        // same non-numbers.
        for n in [1, libc::EXDEV, libc::ENODATA, 4095] {
            assert_eq!(errno(Errno::from_i32(n)).code(), n);
        }
        for n in [0, -libc::ENOENT] {
            assert_eq!(errno(Errno::from_i32(n)), fuser::Errno::from_i32(n));
        }
    }

    #[test]
    fn attributes_go_to_fuser_field_by_field() {
        let kinds = [
            (FileKind::NamedPipe, FileType::NamedPipe),
            (FileKind::CharDevice, FileType::CharDevice),
            (FileKind::BlockDevice, FileType::BlockDevice),
            (FileKind::Directory, FileType::Directory),
            (FileKind::RegularFile, FileType::RegularFile),
            (FileKind::Symlink, FileType::Symlink),
            (FileKind::Socket, FileType::Socket),
        ];
        for (i, (ours, theirs)) in kinds.into_iter().enumerate() {
            let i = i as u32;
            let a = Attr {
                ino: 0x1_0000_0001 + u64::from(i),
                size: 1 << 40 | 3,
                blocks: 17 + u64::from(i),
                atime: UNIX_EPOCH + Duration::new(11, 1),
                mtime: UNIX_EPOCH + Duration::new(12, 2),
                ctime: UNIX_EPOCH + Duration::new(13, 3),
                crtime: UNIX_EPOCH - Duration::new(14, 4),
                kind: ours,
                perm: 0o4755,
                nlink: 3 + i,
                uid: 1000 + i,
                gid: 2000 + i,
                rdev: 0x0803 + i,
                blksize: 4096 + i,
                flags: 5 + i,
            };
            let f = attr(&a);
            assert_eq!(f.ino, INodeNo(a.ino));
            assert_eq!(f.size, a.size);
            assert_eq!(f.blocks, a.blocks);
            assert_eq!(f.atime, a.atime);
            assert_eq!(f.mtime, a.mtime);
            assert_eq!(f.ctime, a.ctime);
            assert_eq!(f.crtime, a.crtime);
            assert_eq!(f.kind, theirs);
            assert_eq!(f.perm, a.perm);
            assert_eq!(f.nlink, a.nlink);
            assert_eq!(f.uid, a.uid);
            assert_eq!(f.gid, a.gid);
            assert_eq!(f.rdev, a.rdev);
            assert_eq!(f.blksize, a.blksize);
            assert_eq!(f.flags, a.flags);
        }
    }

    #[test]
    fn init_flags_are_fusers_bit_for_bit() {
        let named = [
            (Init::FUSE_ATOMIC_O_TRUNC, InitFlags::FUSE_ATOMIC_O_TRUNC),
            (Init::FUSE_BIG_WRITES, InitFlags::FUSE_BIG_WRITES),
            (Init::FUSE_DO_READDIRPLUS, InitFlags::FUSE_DO_READDIRPLUS),
            (Init::FUSE_READDIRPLUS_AUTO, InitFlags::FUSE_READDIRPLUS_AUTO),
            (Init::FUSE_ASYNC_DIO, InitFlags::FUSE_ASYNC_DIO),
            (Init::FUSE_WRITEBACK_CACHE, InitFlags::FUSE_WRITEBACK_CACHE),
            (Init::FUSE_PARALLEL_DIROPS, InitFlags::FUSE_PARALLEL_DIROPS),
            (Init::FUSE_CACHE_SYMLINKS, InitFlags::FUSE_CACHE_SYMLINKS),
            (Init::FUSE_HANDLE_KILLPRIV_V2, InitFlags::FUSE_HANDLE_KILLPRIV_V2),
            (Init::FUSE_OVER_IO_URING, InitFlags::FUSE_OVER_IO_URING),
        ];
        for (ours, theirs) in named {
            let mut i = Init::new(InitFlags::all().bits());
            i.want(ours);
            assert_eq!(init_flags(&i), theirs, "{ours:#x}");
        }
        // What the forward file system asks of a kernel that offers all
        // but the writeback cache: the same set on fuser's side.
        let mut i = Init::new((InitFlags::all() - InitFlags::FUSE_WRITEBACK_CACHE).bits());
        i.want(
            Init::FUSE_WRITEBACK_CACHE
                | Init::FUSE_PARALLEL_DIROPS
                | Init::FUSE_BIG_WRITES
                | Init::FUSE_ATOMIC_O_TRUNC
                | Init::FUSE_DO_READDIRPLUS
                | Init::FUSE_READDIRPLUS_AUTO
                | Init::FUSE_HANDLE_KILLPRIV_V2
                | Init::FUSE_CACHE_SYMLINKS,
        );
        let want = InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_BIG_WRITES
            | InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_HANDLE_KILLPRIV_V2
            | InitFlags::FUSE_CACHE_SYMLINKS;
        assert_eq!(init_flags(&i).bits(), want.bits());
    }
}
