//! The kernel's FUSE-over-io_uring ABI (`include/uapi/linux/fuse.h`, 7.42):
//! the per-entry header buffer and the command in the SQE, as byte
//! offsets. The requests and replies inside are the FUSE wire format of
//! the operations layer (`ops::wire`). Everything here reads and writes
//! little-endian bytes through checked slices: a short or malformed
//! buffer is an error, never a panic.

/// `FUSE_IO_URING_CMD_REGISTER`: hand an entry's buffers to a queue.
pub const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: answer, and take the next request.
pub const CMD_COMMIT_AND_FETCH: u32 = 2;

/// `struct fuse_uring_req_header`: in/out header area, per-op header
/// area, then `struct fuse_uring_ent_in_out`.
pub const IN_OUT_SZ: usize = 128;
pub const OP_IN_SZ: usize = 128;
pub const OP_IN_OFF: usize = IN_OUT_SZ;
pub const ENT_IN_OUT_OFF: usize = IN_OUT_SZ + OP_IN_SZ;
/// `struct fuse_uring_ent_in_out`: flags u64, commit_id u64, payload_sz
/// u32, padding u32, reserved u64.
pub const ENT_IN_OUT_SZ: usize = 32;
pub const HEADER_SZ: usize = ENT_IN_OUT_OFF + ENT_IN_OUT_SZ;
/// `fuse_uring_ent_in_out.commit_id`.
pub const COMMIT_ID_OFF: usize = ENT_IN_OUT_OFF + 8;
/// `fuse_uring_ent_in_out.payload_sz`.
pub const PAYLOAD_SZ_OFF: usize = ENT_IN_OUT_OFF + 16;

pub use crate::ops::op;
pub use crate::ops::wire::{InHeader, Le, Malformed, Put, IN_HEADER_SZ};

/// `struct fuse_out_header`.
pub const OUT_HEADER_SZ: usize = 16;

/// Write `struct fuse_out_header` (len, error, unique) at the start of `b`.
pub fn put_out_header(b: &mut [u8], payload: usize, error: i32, unique: u64) -> Result<(), Malformed> {
    let len = u32::try_from(OUT_HEADER_SZ + payload).map_err(|_| Malformed("reply too long"))?;
    let mut p = Put { buf: b, at: 0 };
    p.u32(len)?;
    p.i32(error)?;
    p.u64(unique)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_matches_the_kernel() {
        assert_eq!(HEADER_SZ, 288);
        assert_eq!(PAYLOAD_SZ_OFF, 272);
        assert_eq!(crate::ops::wire::encode::ENTRY_OUT, 128);
    }

    #[test]
    fn out_header_round_trip() {
        let mut b = [0u8; 16];
        put_out_header(&mut b, 8, -2, 77).unwrap();
        assert_eq!(Le(&b).u32(0).unwrap(), 24);
        assert_eq!(Le(&b).i32(4).unwrap(), -2);
        assert_eq!(Le(&b).u64(8).unwrap(), 77);
        assert!(put_out_header(&mut [0u8; 15], 0, 0, 1).is_err());
    }
}
