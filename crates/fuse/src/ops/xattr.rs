//! Extended attributes and the control ioctl: setxattr, getxattr,
//! listxattr, removexattr, ioctl.

use super::wire::Wire;
use super::{answer, nosys, Ctx, OpResult, Xattr};
use std::ffi::OsStr;

/// Opcodes of this group.
pub mod op {
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const IOCTL: u32 = 39;
}

/// Extended attributes and the control ioctl.
#[allow(unused_variables)]
pub trait XattrOps: Send + Sync + 'static {
    fn setxattr(&self, ctx: &Ctx, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> OpResult<()> {
        nosys()
    }
    fn getxattr(&self, ctx: &Ctx, ino: u64, name: &OsStr, size: u32) -> OpResult<Xattr> {
        nosys()
    }
    fn listxattr(&self, ctx: &Ctx, ino: u64, size: u32) -> OpResult<Xattr> {
        nosys()
    }
    fn removexattr(&self, ctx: &Ctx, ino: u64, name: &OsStr) -> OpResult<()> {
        nosys()
    }
    /// A restricted ioctl: the result and the bytes to copy out.
    fn ioctl(&self, ctx: &Ctx, ino: u64, fh: u64, cmd: u32, input: &[u8], out_size: u32) -> OpResult<(i32, Vec<u8>)> {
        nosys()
    }
}

/// This group's requests in wire form (`None`: another group's).
pub(super) fn wire<T: XattrOps + ?Sized>(fs: &T, w: &mut Wire<'_>) -> Option<OpResult<usize>> {
    let (ctx, ino) = (w.ctx, w.ino);
    Some(match w.opcode {
        op::SETXATTR => answer(|| {
            // struct fuse_setxattr_in: size, flags; then the name and the
            // value.
            let h = w.head(8)?;
            let (name, value) = w.name_and_data(h.u32(0)? as usize)?;
            fs.setxattr(&ctx, ino, name, value, h.i32(4)?).map(|()| 0)
        }),
        op::GETXATTR => answer(|| {
            // struct fuse_getxattr_in: size, padding.
            let x = fs.getxattr(&ctx, ino, w.name()?, w.head(8)?.u32(0)?)?;
            w.out().xattr(&x)
        }),
        op::LISTXATTR => answer(|| {
            let x = fs.listxattr(&ctx, ino, w.head(8)?.u32(0)?)?;
            w.out().xattr(&x)
        }),
        op::REMOVEXATTR => answer(|| fs.removexattr(&ctx, ino, w.name()?).map(|()| 0)),
        op::IOCTL => answer(|| {
            // struct fuse_ioctl_in: fh, flags, cmd, arg, in_size,
            // out_size; then the input.
            let h = w.head(32)?;
            let input = w.data(h.u32(24)? as usize)?;
            let (r, v) = fs.ioctl(&ctx, ino, h.u64(0)?, h.u32(12)?, input, h.u32(28)?)?;
            w.out().ioctl(r, &v)
        }),
        _ => return None,
    })
}
