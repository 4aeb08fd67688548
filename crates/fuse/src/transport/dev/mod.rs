//! The /dev/fuse transport: a `fuser::Filesystem` that hands each request
//! fuser parsed to the operations layer ([`Operations`]) and encodes the
//! result with fuser's reply types. With FUSE over io_uring it still serves
//! what the kernel keeps on /dev/fuse: the INIT handshake, FORGET and
//! INTERRUPT, and every request when the ring could not start. Each
//! request is served as the mount serves every request
//! ([`Served::call`], once); the operations layer's own types are
//! converted to and from fuser's in [`convert`].

use crate::ops::{op, Attr, DirAdd, DirPlusAdd, FileKind, OpResult, Operations, ReadOut, SetAttr};
use crate::Served;

mod convert;
use convert::{attr, ctx, empty, errno, init_apply, init_offer, kind, set_time, xattr};
use fuser::{
    AccessFlags, BsdFileFlags, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
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
    ops: Arc<Served<T>>,
    ring: Arc<RingOffer>,
    /// Gets the file system once INIT is done (the session owns `self`).
    shared: Arc<OnceLock<Arc<Served<T>>>>,
}

impl<T: Operations> DevFuse<T> {
    /// Serve `ops`; `ring` says whether to take FUSE over io_uring.
    pub fn new(ops: Arc<Served<T>>, ring: Arc<RingOffer>, shared: Arc<OnceLock<Arc<Served<T>>>>) -> Self {
        Self { ops, ring, shared }
    }

    /// One request, opcode `op` on node `ino` (`name`: an xattr's), served
    /// as the mount serves every request ([`Served::call`]).
    fn call<R>(&self, op: u32, ino: u64, name: Option<&OsStr>, f: impl FnOnce(&T) -> OpResult<R>) -> OpResult<R> {
        self.ops.call(op, ino, name, f)
    }

    /// fuser's attributes, with `--force-owner`'s owner on every node.
    fn attr(&self, a: &Attr) -> FileAttr {
        let mut f = attr(a);
        if let (Some((uid, gid)), true) = (self.ops.owner(), a.ino != 0) {
            f.uid = uid;
            f.gid = gid;
        }
        f
    }

    fn entry(&self, r: OpResult<crate::ops::Entry>, reply: ReplyEntry) {
        match r {
            Ok(e) => reply.entry(
                &e.entry_ttl.min(e.attr_ttl),
                &self.attr(&e.attr),
                Generation(e.generation),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }
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
        ops.fs_mut().init(&mut init)?;
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
        match self.call(op::LOOKUP, parent.0, None, |fs| fs.lookup(&ctx(req), parent.0, name)) {
            Ok(e) if e.entry_ttl == e.attr_ttl || e.attr.ino == 0 => {
                reply.entry(&e.entry_ttl, &self.attr(&e.attr), Generation(e.generation))
            }
            // fuser has one timeout for both: the shorter.
            Ok(e) => reply.entry(
                &e.entry_ttl.min(e.attr_ttl),
                &self.attr(&e.attr),
                Generation(e.generation),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.ops.forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.call(op::GETATTR, ino.0, None, |fs| {
            fs.getattr(&ctx(req), ino.0, fh.map(|f| f.0))
        }) {
            Ok(a) => reply.attr(&a.ttl, &self.attr(&a.attr)),
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
        match self.call(op::SETATTR, ino.0, None, |fs| fs.setattr(&ctx(req), ino.0, &set)) {
            Ok(a) => reply.attr(&a.ttl, &self.attr(&a.attr)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        empty(
            self.call(op::ACCESS, ino.0, None, |fs| fs.access(&ctx(req), ino.0, mask.bits())),
            reply,
        )
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.call(op::READLINK, ino.0, None, |fs| fs.readlink(&ctx(req), ino.0)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        self.entry(
            self.call(op::MKNOD, parent.0, None, |fs| {
                fs.mknod(&ctx(req), parent.0, name, mode, umask, rdev)
            }),
            reply,
        )
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        self.entry(
            self.call(op::MKDIR, parent.0, None, |fs| {
                fs.mkdir(&ctx(req), parent.0, name, mode, umask)
            }),
            reply,
        )
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            self.call(op::UNLINK, parent.0, None, |fs| fs.unlink(&ctx(req), parent.0, name)),
            reply,
        )
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            self.call(op::RMDIR, parent.0, None, |fs| fs.rmdir(&ctx(req), parent.0, name)),
            reply,
        )
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        self.entry(
            self.call(op::SYMLINK, parent.0, None, |fs| {
                fs.symlink(&ctx(req), parent.0, link_name, target.as_os_str())
            }),
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
        let r = self.call(op::RENAME, parent.0, None, |fs| {
            fs.rename(&ctx(req), parent.0, name, newparent.0, newname, flags.bits())
        });
        empty(r, reply)
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        self.entry(
            self.call(op::LINK, ino.0, None, |fs| {
                fs.link(&ctx(req), ino.0, newparent.0, newname)
            }),
            reply,
        )
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.call(op::OPEN, ino.0, None, |fs| fs.open(&ctx(req), ino.0, flags.0)) {
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
            if let Err(e) = self.call(op::READ, ino.0, None, |fs| {
                fs.read(&ctx(req), ino.0, fh.0, offset, size, &mut out)
            }) {
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
        match self.call(op::WRITE, ino.0, None, |fs| {
            fs.write(&ctx(req), ino.0, fh.0, offset, data, write_flags.bits())
        }) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(&self, req: &Request, ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        empty(
            self.call(op::FLUSH, ino.0, None, |fs| fs.flush(&ctx(req), ino.0, fh.0)),
            reply,
        )
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
        empty(
            self.call(op::RELEASE, ino.0, None, |fs| fs.release(&ctx(req), ino.0, fh.0)),
            reply,
        )
    }

    fn fsync(&self, req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        empty(
            self.call(op::FSYNC, ino.0, None, |fs| fs.fsync(&ctx(req), ino.0, fh.0, datasync)),
            reply,
        )
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.call(op::OPENDIR, ino.0, None, |fs| fs.opendir(&ctx(req), ino.0, flags.0)) {
            Ok(o) => reply.opened(FileHandle(o.fh), FopenFlags::from_bits_retain(o.flags)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let mut add = |ino: u64, off: u64, k: FileKind, name: &OsStr| reply.add(INodeNo(ino), off, kind(k), name);
        let r = self.call(op::READDIR, ino.0, None, |fs| {
            fs.readdir(&ctx(req), ino.0, fh.0, offset, &mut add as &mut DirAdd<'_>)
        });
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
                &self.attr(&e.attr),
                Generation(e.generation),
            )
        };
        let r = self.call(op::READDIRPLUS, ino.0, None, |fs| {
            fs.readdirplus(&ctx(req), ino.0, fh.0, offset, &mut add as &mut DirPlusAdd<'_>)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn releasedir(&self, req: &Request, ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        empty(
            self.call(op::RELEASEDIR, ino.0, None, |fs| fs.releasedir(&ctx(req), ino.0, fh.0)),
            reply,
        )
    }

    fn fsyncdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        empty(
            self.call(op::FSYNCDIR, ino.0, None, |fs| {
                fs.fsyncdir(&ctx(req), ino.0, fh.0, datasync)
            }),
            reply,
        )
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        match self.call(op::STATFS, ino.0, None, |fs| fs.statfs(&ctx(req), ino.0)) {
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
        empty(
            self.call(op::SETXATTR, ino.0, Some(name), |fs| {
                fs.setxattr(&ctx(req), ino.0, name, value, flags)
            }),
            reply,
        )
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        xattr(
            self.call(op::GETXATTR, ino.0, Some(name), |fs| {
                fs.getxattr(&ctx(req), ino.0, name, size)
            }),
            reply,
        )
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        xattr(
            self.call(op::LISTXATTR, ino.0, None, |fs| fs.listxattr(&ctx(req), ino.0, size)),
            reply,
        )
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            self.call(op::REMOVEXATTR, ino.0, None, |fs| {
                fs.removexattr(&ctx(req), ino.0, name)
            }),
            reply,
        )
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
        match self.call(op::CREATE, parent.0, None, |fs| {
            fs.create(&ctx(req), parent.0, name, mode, umask, flags)
        }) {
            Ok((e, o)) => reply.created(
                &e.entry_ttl.min(e.attr_ttl),
                &self.attr(&e.attr),
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
        match self.call(op::IOCTL, ino.0, None, |fs| {
            fs.ioctl(&ctx(req), ino.0, fh.0, cmd, in_data, out_size)
        }) {
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
        empty(
            self.call(op::FALLOCATE, ino.0, None, |fs| {
                fs.fallocate(&ctx(req), ino.0, fh.0, offset, length, mode)
            }),
            reply,
        )
    }

    fn lseek(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        // The kernel's loff_t as the ring carries it: a negative offset is
        // one past any end (ENXIO).
        match self.call(op::LSEEK, ino.0, None, |fs| {
            fs.lseek(&ctx(req), ino.0, fh.0, offset as u64, whence)
        }) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(errno(e)),
        }
    }
}
