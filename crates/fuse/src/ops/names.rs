//! Names in a directory: mknod, mkdir, symlink, link, unlink, rmdir,
//! rename.

use super::wire::Wire;
use super::{answer, nosys, Ctx, Entry, OpResult};
use std::ffi::OsStr;

/// Opcodes of this group.
pub mod op {
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const RENAME2: u32 = 45;
}

/// Names in a directory.
#[allow(unused_variables)]
pub trait NameOps: Send + Sync + 'static {
    fn mknod(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32, rdev: u32) -> OpResult<Entry> {
        nosys()
    }
    fn mkdir(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32) -> OpResult<Entry> {
        nosys()
    }
    fn symlink(&self, ctx: &Ctx, parent: u64, name: &OsStr, target: &OsStr) -> OpResult<Entry> {
        nosys()
    }
    fn link(&self, ctx: &Ctx, ino: u64, newparent: u64, newname: &OsStr) -> OpResult<Entry> {
        nosys()
    }
    fn unlink(&self, ctx: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        nosys()
    }
    fn rmdir(&self, ctx: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
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
}

/// This group's requests in wire form (`None`: another group's).
pub(super) fn wire<T: NameOps + ?Sized>(fs: &T, w: &mut Wire<'_>) -> Option<OpResult<usize>> {
    let (ctx, ino) = (w.ctx, w.ino);
    Some(match w.opcode {
        op::SYMLINK => answer(|| {
            let (name, target) = w.two_names()?;
            let e = fs.symlink(&ctx, ino, name, target)?;
            w.out().entry(&e)
        }),
        op::MKNOD => answer(|| {
            // struct fuse_mknod_in: mode, rdev, umask, padding.
            let h = w.head(16)?;
            let e = fs.mknod(&ctx, ino, w.name()?, h.u32(0)?, h.u32(8)?, h.u32(4)?)?;
            w.out().entry(&e)
        }),
        op::MKDIR => answer(|| {
            // struct fuse_mkdir_in: mode, umask.
            let h = w.head(8)?;
            let e = fs.mkdir(&ctx, ino, w.name()?, h.u32(0)?, h.u32(4)?)?;
            w.out().entry(&e)
        }),
        op::UNLINK => answer(|| fs.unlink(&ctx, ino, w.name()?).map(|()| 0)),
        op::RMDIR => answer(|| fs.rmdir(&ctx, ino, w.name()?).map(|()| 0)),
        op::RENAME | op::RENAME2 => answer(|| {
            // struct fuse_rename_in: newdir; fuse_rename2_in: newdir,
            // flags, padding.
            let (newdir, flags) = if w.opcode == op::RENAME {
                (w.head(8)?.u64(0)?, 0)
            } else {
                let h = w.head(16)?;
                (h.u64(0)?, h.u32(8)?)
            };
            let (name, newname) = w.two_names()?;
            fs.rename(&ctx, ino, name, newdir, newname, flags).map(|()| 0)
        }),
        op::LINK => answer(|| {
            // struct fuse_link_in: oldnodeid; the request's node is the
            // new parent.
            let old = w.head(8)?.u64(0)?;
            let e = fs.link(&ctx, old, ino, w.name()?)?;
            w.out().entry(&e)
        }),
        _ => return None,
    })
}
