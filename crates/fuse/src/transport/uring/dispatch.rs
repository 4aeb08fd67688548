//! One ring request through the operations layer: check the caller, then
//! hand it in wire form to the mount ([`Served::serve_wire`]), which
//! decodes it, calls its operation and encodes the answer into the
//! payload. Reads and listings are written straight into the payload
//! buffer.

use super::abi::{op, InHeader};
use crate::ops::wire::Wire;
use crate::ops::{Errno, Operations};
use crate::Served;

/// Whose requests are served: everyone's (`allow_other`), or only the
/// user the daemon runs as (the kernel's own default; some requests carry
/// no caller and are always served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acl {
    All,
    Owner(u32),
}

impl Acl {
    fn allows(self, opcode: u32, uid: u32) -> bool {
        match self {
            Acl::All => true,
            Acl::Owner(o) => {
                uid == o
                    || matches!(
                        opcode,
                        op::READ
                            | op::READDIR
                            | op::READDIRPLUS
                            | op::WRITE
                            | op::FSYNC
                            | op::FSYNCDIR
                            | op::RELEASE
                            | op::RELEASEDIR
                            | op::FORGET
                            | op::BATCH_FORGET
                            | op::DESTROY
                    )
            }
        }
    }
}

/// Serve the request in an entry: `op_in` is its per-op area, `payload`
/// the whole payload buffer of which the kernel filled `payload_sz` bytes.
/// Returns the reply's payload length, or the errno.
pub fn handle<T: Operations>(
    ops: &Served<T>,
    acl: Acl,
    hdr: &InHeader,
    op_in: &[u8],
    payload: &mut [u8],
    payload_sz: usize,
) -> Result<usize, Errno> {
    if !acl.allows(hdr.opcode, hdr.uid) {
        return Err(Errno::EACCES);
    }
    ops.serve_wire(&mut Wire::new(hdr, op_in, payload, payload_sz)?)
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
