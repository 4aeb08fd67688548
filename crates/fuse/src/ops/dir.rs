//! Directory handles: opendir, readdir, readdirplus, releasedir,
//! fsyncdir.

use super::wire::Wire;
use super::{answer, nosys, Ctx, DirAdd, DirPlusAdd, Entry, FileKind, OpResult, Opened};
use std::ffi::OsStr;

/// Opcodes of this group.
pub mod op {
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const READDIRPLUS: u32 = 44;
}

/// Directory handles.
#[allow(unused_variables)]
pub trait DirOps: Send + Sync + 'static {
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
}

/// `FUSE_FSYNC_FDATASYNC`.
pub(super) const FSYNC_FDATASYNC: u32 = 1;

/// This group's requests in wire form (`None`: another group's).
pub(super) fn wire<T: DirOps + ?Sized>(fs: &T, w: &mut Wire<'_>) -> Option<OpResult<usize>> {
    let (ctx, ino) = (w.ctx, w.ino);
    Some(match w.opcode {
        op::OPENDIR => answer(|| {
            // struct fuse_open_in: flags, open_flags.
            let o = fs.opendir(&ctx, ino, w.head(8)?.i32(0)?)?;
            w.out().open(&o)
        }),
        op::READDIR | op::READDIRPLUS => answer(|| {
            // struct fuse_read_in: fh, offset, size, ...; the listing goes
            // into the payload, which carries nothing in.
            let h = w.head(40)?;
            let (fh, offset, size) = (h.u64(0)?, h.u64(8)?, h.u32(16)?);
            let plus = w.opcode == op::READDIRPLUS;
            let mut d = w.out_limited(size).dir();
            if plus {
                let mut add = |e: &Entry, off: u64, name: &OsStr| d.add_plus(e, off, name);
                fs.readdirplus(&ctx, ino, fh, offset, &mut add as &mut DirPlusAdd<'_>)?;
            } else {
                let mut add = |ino: u64, off: u64, k: FileKind, name: &OsStr| d.add(ino, off, k, name);
                fs.readdir(&ctx, ino, fh, offset, &mut add as &mut DirAdd<'_>)?;
            }
            Ok(d.reply_len())
        }),
        op::RELEASEDIR => answer(|| {
            // struct fuse_release_in: fh, flags, release_flags, lock_owner.
            fs.releasedir(&ctx, ino, w.head(24)?.u64(0)?).map(|()| 0)
        }),
        op::FSYNCDIR => answer(|| {
            // struct fuse_fsync_in: fh, fsync_flags, padding.
            let h = w.head(16)?;
            let datasync = h.u32(8)? & FSYNC_FDATASYNC != 0;
            fs.fsyncdir(&ctx, ino, h.u64(0)?, datasync).map(|()| 0)
        }),
        _ => return None,
    })
}
