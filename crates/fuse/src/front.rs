//! What a mount adds around its file system, for every transport: it counts
//! requests in flight, the time of the last one and the open files and
//! directories (for `--idle`, [`super::idle`]), and with `--force-owner`
//! reports every file as owned by one user and group (as gocryptfs's
//! `-force_owner`). Each request goes on to the file system unchanged.

use super::idle::Activity;
use super::ops::{
    Attr, AttrOut, Ctx, DirAdd, DirPlusAdd, Entry, Init, OpResult, Opened, Operations, ReadOut, SetAttr, Statfs, Xattr,
};
use std::ffi::OsStr;
use std::sync::Arc;

/// A file system with the mount's activity counted and owners replaced.
pub struct Front<T: Operations> {
    inner: T,
    /// Counted only for an idle watcher (`None`: nothing to count).
    act: Option<Arc<Activity>>,
    owner: Option<(u32, u32)>,
}

impl<T: Operations> Front<T> {
    /// Serve `inner`, counting into `act` if given; `owner`: the (uid,
    /// gid) every file is reported with, or `None` for the real owners.
    pub fn new(inner: T, act: Option<Arc<Activity>>, owner: Option<(u32, u32)>) -> Self {
        Self { inner, act, owner }
    }

    /// A request begins (ends when the result is dropped).
    fn req(&self) -> Option<super::idle::Request<'_>> {
        self.act.as_deref().map(Activity::request)
    }

    fn note_open(&self) {
        if let Some(a) = &self.act {
            a.opened();
        }
    }

    fn note_close(&self) {
        if let Some(a) = &self.act {
            a.closed();
        }
    }

    fn attr(&self, mut a: Attr) -> Attr {
        // A negative entry (node 0) carries no owner.
        if let (Some((uid, gid)), true) = (self.owner, a.ino != 0) {
            a.uid = uid;
            a.gid = gid;
        }
        a
    }

    fn entry(&self, mut e: Entry) -> Entry {
        e.attr = self.attr(e.attr);
        e
    }

    fn attr_out(&self, mut a: AttrOut) -> AttrOut {
        a.attr = self.attr(a.attr);
        a
    }

    fn opened(&self, r: OpResult<Opened>) -> OpResult<Opened> {
        if r.is_ok() {
            self.note_open();
        }
        r
    }
}

impl<T: Operations> Operations for Front<T> {
    fn init(&mut self, init: &mut Init) -> std::io::Result<()> {
        self.inner.init(init)
    }
    fn destroy(&self) {
        self.inner.destroy()
    }
    fn transport_started(&self, transport: &'static str, why: &str) {
        self.inner.transport_started(transport, why)
    }
    fn busy_cpus(&self) -> Vec<usize> {
        self.inner.busy_cpus()
    }
    fn lookup(&self, ctx: &Ctx, parent: u64, name: &OsStr) -> OpResult<Entry> {
        let _g = self.req();
        self.inner.lookup(ctx, parent, name).map(|e| self.entry(e))
    }
    // The kernel forgets nodes on its own (memory pressure, unmount): not
    // a sign of use.
    fn forget(&self, ino: u64, nlookup: u64) {
        self.inner.forget(ino, nlookup)
    }
    fn getattr(&self, ctx: &Ctx, ino: u64, fh: Option<u64>) -> OpResult<AttrOut> {
        let _g = self.req();
        self.inner.getattr(ctx, ino, fh).map(|a| self.attr_out(a))
    }
    fn setattr(&self, ctx: &Ctx, ino: u64, set: &SetAttr) -> OpResult<AttrOut> {
        let _g = self.req();
        self.inner.setattr(ctx, ino, set).map(|a| self.attr_out(a))
    }
    fn readlink(&self, ctx: &Ctx, ino: u64) -> OpResult<Vec<u8>> {
        let _g = self.req();
        self.inner.readlink(ctx, ino)
    }
    fn mknod(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32, rdev: u32) -> OpResult<Entry> {
        let _g = self.req();
        self.inner
            .mknod(ctx, parent, name, mode, umask, rdev)
            .map(|e| self.entry(e))
    }
    fn mkdir(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32) -> OpResult<Entry> {
        let _g = self.req();
        self.inner.mkdir(ctx, parent, name, mode, umask).map(|e| self.entry(e))
    }
    fn unlink(&self, ctx: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        let _g = self.req();
        self.inner.unlink(ctx, parent, name)
    }
    fn rmdir(&self, ctx: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        let _g = self.req();
        self.inner.rmdir(ctx, parent, name)
    }
    fn symlink(&self, ctx: &Ctx, parent: u64, name: &OsStr, target: &OsStr) -> OpResult<Entry> {
        let _g = self.req();
        self.inner.symlink(ctx, parent, name, target).map(|e| self.entry(e))
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
        let _g = self.req();
        self.inner.rename(ctx, parent, name, newparent, newname, flags)
    }
    fn link(&self, ctx: &Ctx, ino: u64, newparent: u64, newname: &OsStr) -> OpResult<Entry> {
        let _g = self.req();
        self.inner.link(ctx, ino, newparent, newname).map(|e| self.entry(e))
    }
    fn open(&self, ctx: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        let _g = self.req();
        self.opened(self.inner.open(ctx, ino, flags))
    }
    fn read(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, size: u32, out: &mut dyn ReadOut) -> OpResult<()> {
        let _g = self.req();
        self.inner.read(ctx, ino, fh, offset, size, out)
    }
    fn write(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, data: &[u8], write_flags: u32) -> OpResult<u32> {
        let _g = self.req();
        self.inner.write(ctx, ino, fh, offset, data, write_flags)
    }
    fn flush(&self, ctx: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        let _g = self.req();
        self.inner.flush(ctx, ino, fh)
    }
    fn release(&self, ctx: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        let _g = self.req();
        self.note_close();
        self.inner.release(ctx, ino, fh)
    }
    fn fsync(&self, ctx: &Ctx, ino: u64, fh: u64, datasync: bool) -> OpResult<()> {
        let _g = self.req();
        self.inner.fsync(ctx, ino, fh, datasync)
    }
    fn opendir(&self, ctx: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        let _g = self.req();
        self.opened(self.inner.opendir(ctx, ino, flags))
    }
    fn readdir(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirAdd<'_>) -> OpResult<()> {
        let _g = self.req();
        self.inner.readdir(ctx, ino, fh, offset, add)
    }
    fn readdirplus(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirPlusAdd<'_>) -> OpResult<()> {
        let _g = self.req();
        if self.owner.is_none() {
            return self.inner.readdirplus(ctx, ino, fh, offset, add);
        }
        let mut owned = |e: &Entry, off: u64, name: &OsStr| add(&self.entry(e.clone()), off, name);
        self.inner.readdirplus(ctx, ino, fh, offset, &mut owned)
    }
    fn releasedir(&self, ctx: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        let _g = self.req();
        self.note_close();
        self.inner.releasedir(ctx, ino, fh)
    }
    fn fsyncdir(&self, ctx: &Ctx, ino: u64, fh: u64, datasync: bool) -> OpResult<()> {
        let _g = self.req();
        self.inner.fsyncdir(ctx, ino, fh, datasync)
    }
    fn statfs(&self, ctx: &Ctx, ino: u64) -> OpResult<Statfs> {
        let _g = self.req();
        self.inner.statfs(ctx, ino)
    }
    fn setxattr(&self, ctx: &Ctx, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> OpResult<()> {
        let _g = self.req();
        self.inner.setxattr(ctx, ino, name, value, flags)
    }
    fn getxattr(&self, ctx: &Ctx, ino: u64, name: &OsStr, size: u32) -> OpResult<Xattr> {
        let _g = self.req();
        self.inner.getxattr(ctx, ino, name, size)
    }
    fn listxattr(&self, ctx: &Ctx, ino: u64, size: u32) -> OpResult<Xattr> {
        let _g = self.req();
        self.inner.listxattr(ctx, ino, size)
    }
    fn removexattr(&self, ctx: &Ctx, ino: u64, name: &OsStr) -> OpResult<()> {
        let _g = self.req();
        self.inner.removexattr(ctx, ino, name)
    }
    fn access(&self, ctx: &Ctx, ino: u64, mask: i32) -> OpResult<()> {
        let _g = self.req();
        self.inner.access(ctx, ino, mask)
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
        let _g = self.req();
        let r = self.inner.create(ctx, parent, name, mode, umask, flags);
        if r.is_ok() {
            self.note_open();
        }
        r.map(|(e, o)| (self.entry(e), o))
    }
    fn ioctl(&self, ctx: &Ctx, ino: u64, fh: u64, cmd: u32, input: &[u8], out_size: u32) -> OpResult<(i32, Vec<u8>)> {
        let _g = self.req();
        self.inner.ioctl(ctx, ino, fh, cmd, input, out_size)
    }
    fn fallocate(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, length: u64, mode: i32) -> OpResult<()> {
        let _g = self.req();
        self.inner.fallocate(ctx, ino, fh, offset, length, mode)
    }
    fn lseek(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, whence: i32) -> OpResult<u64> {
        let _g = self.req();
        self.inner.lseek(ctx, ino, fh, offset, whence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Errno, FileKind};
    use std::time::{Duration, SystemTime};

    /// A file system of one node (1), owned by 7:8, that opens everything.
    struct One;

    fn attr(ino: u64) -> Attr {
        Attr {
            ino,
            size: 0,
            blocks: 0,
            atime: SystemTime::UNIX_EPOCH,
            mtime: SystemTime::UNIX_EPOCH,
            ctime: SystemTime::UNIX_EPOCH,
            crtime: SystemTime::UNIX_EPOCH,
            kind: FileKind::RegularFile,
            perm: 0o644,
            nlink: 1,
            uid: 7,
            gid: 8,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    impl Operations for One {
        fn getattr(&self, _: &Ctx, ino: u64, _: Option<u64>) -> OpResult<AttrOut> {
            Ok(AttrOut {
                attr: attr(ino),
                ttl: Duration::ZERO,
            })
        }
        fn lookup(&self, _: &Ctx, _: u64, name: &OsStr) -> OpResult<Entry> {
            if name == "none" {
                return Ok(Entry::negative(Duration::ZERO));
            }
            Ok(Entry {
                attr: attr(2),
                generation: 0,
                entry_ttl: Duration::ZERO,
                attr_ttl: Duration::ZERO,
            })
        }
        fn readdirplus(&self, _: &Ctx, _: u64, _: u64, _: u64, add: &mut DirPlusAdd<'_>) -> OpResult<()> {
            let e = self.lookup(&Ctx::default(), 1, OsStr::new("x"))?;
            add(&e, 1, OsStr::new("x"));
            Ok(())
        }
    }

    #[test]
    fn force_owner_replaces_every_reported_owner() {
        let f = Front::new(One, None, Some((1000, 100)));
        let c = Ctx::default();
        let a = f.getattr(&c, 1, None).unwrap().attr;
        assert_eq!((a.uid, a.gid), (1000, 100));
        let e = f.lookup(&c, 1, OsStr::new("x")).unwrap().attr;
        assert_eq!((e.uid, e.gid), (1000, 100));
        assert_eq!(f.lookup(&c, 1, OsStr::new("none")).unwrap().attr.uid, 0);
        let mut seen = Vec::new();
        f.readdirplus(&c, 1, 0, 0, &mut |e: &Entry, _, _: &OsStr| {
            seen.push((e.attr.uid, e.attr.gid));
            false
        })
        .unwrap();
        assert_eq!(seen, [(1000, 100)]);
        // Without it the real owners show.
        let plain = Front::new(One, None, None);
        assert_eq!(plain.getattr(&c, 1, None).unwrap().attr.uid, 7);
    }

    #[test]
    fn counts_open_handles_and_requests() {
        let act = Arc::new(Activity::new());
        let f = Front::new(One, Some(act.clone()), None);
        let c = Ctx::default();
        f.open(&c, 2, 0).unwrap();
        f.opendir(&c, 1, 0).unwrap();
        assert_eq!(act.open(), 2);
        f.release(&c, 2, 0).unwrap();
        assert_eq!(act.open(), 1);
        f.releasedir(&c, 1, 0).unwrap();
        assert_eq!(act.open(), 0);
        assert_eq!(act.in_flight(), 0);
        // A failed open is not an open file.
        struct Refuses;
        impl Operations for Refuses {
            fn open(&self, _: &Ctx, _: u64, _: i32) -> OpResult<Opened> {
                Err(Errno::EACCES)
            }
        }
        let r = Front::new(Refuses, Some(act.clone()), None);
        assert!(r.open(&c, 2, 0).is_err());
        assert_eq!(act.open(), 0);
    }
}
