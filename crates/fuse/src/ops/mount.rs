//! The mount as a whole: the INIT handshake, the end of the session, the
//! request gate a file system holds around each request, statfs.

use super::wire::Wire;
use super::{Ctx, Init, OpResult, Statfs};
use std::ffi::OsStr;
use std::sync::RwLockReadGuard;

/// Opcodes of this group.
pub mod op {
    pub const STATFS: u32 = 17;
    pub const DESTROY: u32 = 38;
}

/// The mount as a whole.
#[allow(unused_variables)]
pub trait MountOps: Send + Sync + 'static {
    /// Negotiate with the kernel (on /dev/fuse, before any other request):
    /// ask for capabilities and set limits in `init`.
    fn init(&mut self, init: &mut Init) -> std::io::Result<()> {
        Ok(())
    }
    /// The session ended (after the last request of every transport).
    fn destroy(&self) {}
    /// The mount is served by `transport` ("uring" or "dev"), for the
    /// reason `why` (the flag, or what `auto` found).
    fn transport_started(&self, transport: &'static str, why: &str) {}
    /// What the file system holds while it serves request `op` on node
    /// `ino` (`name`: the attribute a getxattr or setxattr names), taken
    /// once per request by the transport that carried it, before the
    /// request's method runs.
    fn serving(&self, op: u32, ino: u64, name: Option<&OsStr>) -> Option<RwLockReadGuard<'_, ()>> {
        None
    }
    fn statfs(&self, ctx: &Ctx, ino: u64) -> OpResult<Statfs> {
        Ok(Statfs {
            bsize: 512,
            namelen: 255,
            frsize: 512,
            ..Statfs::default()
        })
    }
}

/// This group's requests in wire form (`None`: another group's).
pub(super) fn wire<T: MountOps + ?Sized>(fs: &T, w: &mut Wire<'_>) -> Option<OpResult<usize>> {
    let (ctx, ino) = (w.ctx, w.ino);
    Some(match w.opcode {
        op::STATFS => fs.statfs(&ctx, ino).and_then(|s| w.out().statfs(&s)),
        // The session's end is the transport's business: nothing to say.
        op::DESTROY => Ok(0),
        _ => return None,
    })
}
