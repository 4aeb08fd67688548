//! Entries and their attributes: lookup, forget, getattr, setattr,
//! readlink, access.

use super::wire::{self, Wire};
use super::{answer, nosys, AttrOut, Ctx, Entry, OpResult, SetAttr};
use std::ffi::OsStr;

/// Opcodes of this group.
pub mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const ACCESS: u32 = 34;
    pub const BATCH_FORGET: u32 = 42;
}

/// `FUSE_GETATTR_FH`: `fuse_getattr_in.fh` is valid.
const GETATTR_FH: u32 = 1;

/// Entries and their attributes.
#[allow(unused_variables)]
pub trait EntryOps: Send + Sync + 'static {
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
    fn access(&self, ctx: &Ctx, ino: u64, mask: i32) -> OpResult<()> {
        nosys()
    }
}

/// This group's requests in wire form (`None`: another group's). FORGET
/// stays on /dev/fuse, where fuser serves it.
pub(super) fn wire<T: EntryOps + ?Sized>(fs: &T, w: &mut Wire<'_>) -> Option<OpResult<usize>> {
    let (ctx, ino) = (w.ctx, w.ino);
    Some(match w.opcode {
        op::LOOKUP => answer(|| {
            let e = fs.lookup(&ctx, ino, w.name()?)?;
            w.out().entry(&e)
        }),
        op::GETATTR => answer(|| {
            // struct fuse_getattr_in: getattr_flags, dummy, fh.
            let h = w.head(16)?;
            let fh = (h.u32(0)? & GETATTR_FH != 0).then_some(h.u64(8)?);
            let a = fs.getattr(&ctx, ino, fh)?;
            w.out().attr(&a)
        }),
        op::SETATTR => answer(|| {
            let set = wire::setattr(w.head(88)?)?;
            let a = fs.setattr(&ctx, ino, &set)?;
            w.out().attr(&a)
        }),
        op::READLINK => fs.readlink(&ctx, ino).and_then(|t| w.out().bytes(&t)),
        op::ACCESS => answer(|| {
            // struct fuse_access_in: mask, padding.
            fs.access(&ctx, ino, w.head(8)?.i32(0)?)?;
            Ok(0)
        }),
        _ => return None,
    })
}
