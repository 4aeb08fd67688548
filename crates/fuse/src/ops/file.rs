//! File handles and their bytes: open, create, read, write, flush,
//! release, fsync, fallocate, lseek.

use super::dir::FSYNC_FDATASYNC;
use super::wire::Wire;
use super::{answer, nosys, Ctx, Entry, OpResult, Opened, ReadOut};
use std::ffi::OsStr;

/// Opcodes of this group.
pub mod op {
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const FLUSH: u32 = 25;
    pub const CREATE: u32 = 35;
    pub const FALLOCATE: u32 = 43;
    pub const LSEEK: u32 = 46;
}

/// File handles and their bytes.
#[allow(unused_variables)]
pub trait FileOps: Send + Sync + 'static {
    fn open(&self, ctx: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        Ok(Opened { fh: 0, flags: 0 })
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

/// This group's requests in wire form (`None`: another group's).
pub(super) fn wire<T: FileOps + ?Sized>(fs: &T, w: &mut Wire<'_>) -> Option<OpResult<usize>> {
    let (ctx, ino) = (w.ctx, w.ino);
    Some(match w.opcode {
        op::OPEN => answer(|| {
            // struct fuse_open_in: flags, open_flags.
            let o = fs.open(&ctx, ino, w.head(8)?.i32(0)?)?;
            w.out().open(&o)
        }),
        op::CREATE => answer(|| {
            // struct fuse_create_in: flags, mode, umask, open_flags.
            let h = w.head(16)?;
            let (e, o) = fs.create(&ctx, ino, w.name()?, h.u32(4)?, h.u32(8)?, h.i32(0)?)?;
            w.out().create(&e, &o)
        }),
        op::READ => answer(|| {
            // struct fuse_read_in: fh, offset, size, ...; the bytes go
            // straight into the payload, which carries nothing in.
            let h = w.head(40)?;
            let (fh, offset, size) = (h.u64(0)?, h.u64(8)?, h.u32(16)?);
            let mut out = w.out_limited(size).read();
            fs.read(&ctx, ino, fh, offset, size, &mut out)?;
            out.reply_len()
        }),
        op::WRITE => answer(|| {
            // struct fuse_write_in: fh, offset, size, write_flags, ...;
            // then the data.
            let h = w.head(40)?;
            let n = fs.write(
                &ctx,
                ino,
                h.u64(0)?,
                h.u64(8)?,
                w.data(h.u32(16)? as usize)?,
                h.u32(20)?,
            )?;
            w.out().written(n)
        }),
        op::FLUSH => answer(|| {
            // struct fuse_flush_in: fh, unused, padding, lock_owner.
            fs.flush(&ctx, ino, w.head(24)?.u64(0)?).map(|()| 0)
        }),
        op::RELEASE => answer(|| {
            // struct fuse_release_in: fh, flags, release_flags, lock_owner.
            fs.release(&ctx, ino, w.head(24)?.u64(0)?).map(|()| 0)
        }),
        op::FSYNC => answer(|| {
            // struct fuse_fsync_in: fh, fsync_flags, padding.
            let h = w.head(16)?;
            let datasync = h.u32(8)? & FSYNC_FDATASYNC != 0;
            fs.fsync(&ctx, ino, h.u64(0)?, datasync).map(|()| 0)
        }),
        op::FALLOCATE => answer(|| {
            // struct fuse_fallocate_in: fh, offset, length, mode, padding.
            let h = w.head(32)?;
            fs.fallocate(&ctx, ino, h.u64(0)?, h.u64(8)?, h.u64(16)?, h.i32(24)?)
                .map(|()| 0)
        }),
        op::LSEEK => answer(|| {
            // struct fuse_lseek_in: fh, offset, whence, padding.
            let h = w.head(24)?;
            let at = fs.lseek(&ctx, ino, h.u64(0)?, h.u64(8)?, h.i32(16)?)?;
            // struct fuse_lseek_out: offset.
            let mut r = w.out();
            r.put.u64(at)?;
            Ok(r.put.at)
        }),
        _ => return None,
    })
}
