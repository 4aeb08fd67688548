//! [`Operations`] for [`WarpFs`]: each request goes to the method of its
//! group (inherent methods of the same name, which Rust resolves first),
//! holding the volume's request gate (`Volume::serving`) while it runs:
//! the mount root's control requests excepted, which the name part of a
//! rekey to a new volume key runs in while it holds every other off.

use super::WarpFs;
use crate::nodes::ROOT;
use crate::ops::{
    AttrOut, Ctx, DirAdd, DirPlusAdd, Entry, Errno, Init, OpResult, Opened, Operations, ReadOut, SetAttr, Statfs, Xattr,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// A request for one of the mount root's virtual attributes.
fn is_control(ino: u64, name: &OsStr) -> bool {
    ino == ROOT && name.as_bytes().starts_with(b"trusted.warpfs.")
}

impl Operations for WarpFs {
    fn init(&mut self, init: &mut Init) -> std::io::Result<()> {
        WarpFs::init(self, init)
    }
    fn destroy(&self) {
        WarpFs::destroy(self)
    }
    fn transport_started(&self, transport: &'static str, why: &str) {
        self.set_transport(transport, why)
    }
    fn busy_cpus(&self) -> Vec<usize> {
        self.vol.engine().map(|e| e.mask_cpus().to_vec()).unwrap_or_default()
    }
    fn lookup(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<Entry> {
        let _serving = self.vol.serving();
        WarpFs::lookup(self, parent, name)
    }
    fn forget(&self, ino: u64, nlookup: u64) {
        self.nodes.forget(ino, nlookup)
    }
    fn getattr(&self, _: &Ctx, ino: u64, fh: Option<u64>) -> OpResult<AttrOut> {
        let _serving = self.vol.serving();
        WarpFs::getattr(self, ino, fh)
    }
    fn setattr(&self, ctx: &Ctx, ino: u64, set: &SetAttr) -> OpResult<AttrOut> {
        let _serving = self.vol.serving();
        WarpFs::setattr(self, ctx, ino, set)
    }
    fn readlink(&self, _: &Ctx, ino: u64) -> OpResult<Vec<u8>> {
        let _serving = self.vol.serving();
        WarpFs::readlink(self, ino)
    }
    fn mknod(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32, rdev: u32) -> OpResult<Entry> {
        let _serving = self.vol.serving();
        WarpFs::mknod(self, ctx, parent, name, mode, umask, rdev)
    }
    fn mkdir(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32) -> OpResult<Entry> {
        let _serving = self.vol.serving();
        WarpFs::mkdir(self, ctx, parent, name, mode, umask)
    }
    fn unlink(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::unlink(self, parent, name)
    }
    fn rmdir(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::rmdir(self, parent, name)
    }
    fn symlink(&self, ctx: &Ctx, parent: u64, name: &OsStr, target: &OsStr) -> OpResult<Entry> {
        let _serving = self.vol.serving();
        WarpFs::symlink(self, ctx, parent, name, target)
    }
    fn rename(&self, _: &Ctx, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr, flags: u32) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::rename(self, parent, name, newparent, newname, flags)
    }
    fn link(&self, _: &Ctx, ino: u64, newparent: u64, newname: &OsStr) -> OpResult<Entry> {
        let _serving = self.vol.serving();
        WarpFs::link(self, ino, newparent, newname)
    }
    fn open(&self, ctx: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        let _serving = self.vol.serving();
        WarpFs::open(self, ctx, ino, flags)
    }
    fn read(&self, _: &Ctx, _ino: u64, fh: u64, offset: u64, size: u32, out: &mut dyn ReadOut) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::read(self, fh, offset, size, out)
    }
    fn write(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, data: &[u8], write_flags: u32) -> OpResult<u32> {
        let _serving = self.vol.serving();
        WarpFs::write(self, ino, fh, offset, data, write_flags)
    }
    fn flush(&self, _: &Ctx, _ino: u64, _fh: u64) -> OpResult<()> {
        // Nothing to do at close: with `noflush` the kernel learns that
        // from the first ENOSYS and stops asking.
        if self.caches.noflush {
            Err(Errno::ENOSYS)
        } else {
            Ok(())
        }
    }
    fn release(&self, _: &Ctx, _ino: u64, fh: u64) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::release(self, fh);
        Ok(())
    }
    fn fsync(&self, _: &Ctx, _ino: u64, fh: u64, datasync: bool) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::fsync(self, fh, datasync)
    }
    fn opendir(&self, _: &Ctx, ino: u64, _flags: i32) -> OpResult<Opened> {
        let _serving = self.vol.serving();
        WarpFs::opendir(self, ino)
    }
    fn readdir(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirAdd<'_>) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::readdir(self, ino, fh, offset, add)
    }
    fn readdirplus(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirPlusAdd<'_>) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::readdirplus(self, ino, fh, offset, add)
    }
    fn releasedir(&self, _: &Ctx, _ino: u64, fh: u64) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::releasedir(self, fh);
        Ok(())
    }
    fn fsyncdir(&self, _: &Ctx, ino: u64, _fh: u64, _datasync: bool) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::fsyncdir(self, ino)
    }
    fn statfs(&self, _: &Ctx, _ino: u64) -> OpResult<Statfs> {
        let _serving = self.vol.serving();
        WarpFs::statfs(self)
    }
    fn setxattr(&self, _: &Ctx, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> OpResult<()> {
        let _serving = (!is_control(ino, name)).then(|| self.vol.serving());
        WarpFs::setxattr(self, ino, name, value, flags)
    }
    fn getxattr(&self, _: &Ctx, ino: u64, name: &OsStr, size: u32) -> OpResult<Xattr> {
        let _serving = (!is_control(ino, name)).then(|| self.vol.serving());
        WarpFs::getxattr(self, ino, name, size)
    }
    fn listxattr(&self, _: &Ctx, ino: u64, size: u32) -> OpResult<Xattr> {
        let _serving = self.vol.serving();
        WarpFs::listxattr(self, ino, size)
    }
    fn removexattr(&self, _: &Ctx, ino: u64, name: &OsStr) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::removexattr(self, ino, name)
    }
    fn access(&self, _: &Ctx, ino: u64, mask: i32) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::access(self, ino, mask)
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
        let _serving = self.vol.serving();
        WarpFs::create(self, ctx, parent, name, mode, umask, flags)
    }
    fn ioctl(&self, ctx: &Ctx, ino: u64, _fh: u64, cmd: u32, input: &[u8], out_size: u32) -> OpResult<(i32, Vec<u8>)> {
        // The mount root's control ioctls touch no entry.
        let _serving = (ino != ROOT).then(|| self.vol.serving());
        WarpFs::ioctl(self, ctx.uid, ino, cmd, input, out_size)
    }
    fn fallocate(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, length: u64, mode: i32) -> OpResult<()> {
        let _serving = self.vol.serving();
        WarpFs::fallocate(self, ctx, ino, fh, offset, length, mode)
    }
    fn lseek(&self, _: &Ctx, _ino: u64, fh: u64, offset: u64, whence: i32) -> OpResult<u64> {
        let _serving = self.vol.serving();
        WarpFs::lseek(self, fh, offset, whence)
    }
}
