//! The kernel's FUSE-over-io_uring ABI (`include/uapi/linux/fuse.h`, 7.42):
//! the per-entry header buffer, the command in the SQE, the opcodes and the
//! fixed-size argument and reply structs, as byte offsets. Everything here
//! reads and writes little-endian bytes through checked slices: a short or
//! malformed buffer is an error, never a panic.

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

/// `struct fuse_in_header`.
pub const IN_HEADER_SZ: usize = 40;
/// `struct fuse_out_header`.
pub const OUT_HEADER_SZ: usize = 16;

/// Opcodes (`enum fuse_opcode`) the daemon answers.
pub mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const ACCESS: u32 = 34;
    pub const CREATE: u32 = 35;
    pub const DESTROY: u32 = 38;
    pub const IOCTL: u32 = 39;
    pub const BATCH_FORGET: u32 = 42;
    pub const FALLOCATE: u32 = 43;
    pub const READDIRPLUS: u32 = 44;
    pub const RENAME2: u32 = 45;
    pub const LSEEK: u32 = 46;
}

/// `fuse_setattr_in.valid` bits.
pub mod fattr {
    pub const MODE: u32 = 1 << 0;
    pub const UID: u32 = 1 << 1;
    pub const GID: u32 = 1 << 2;
    pub const SIZE: u32 = 1 << 3;
    pub const ATIME: u32 = 1 << 4;
    pub const MTIME: u32 = 1 << 5;
    pub const FH: u32 = 1 << 6;
    pub const ATIME_NOW: u32 = 1 << 7;
    pub const MTIME_NOW: u32 = 1 << 8;
}

/// `FUSE_GETATTR_FH`: `fuse_getattr_in.fh` is valid.
pub const GETATTR_FH: u32 = 1;
/// `FUSE_FSYNC_FDATASYNC`.
pub const FSYNC_FDATASYNC: u32 = 1;

/// Sizes of the per-op header structs (`in_args[0]`), as the kernel sends
/// them to a daemon that negotiated none of the extensions that grow them.
pub mod size {
    pub const GETATTR_IN: usize = 16;
    pub const SETATTR_IN: usize = 88;
    pub const MKNOD_IN: usize = 16;
    pub const MKDIR_IN: usize = 8;
    pub const RENAME_IN: usize = 8;
    pub const RENAME2_IN: usize = 16;
    pub const LINK_IN: usize = 8;
    pub const OPEN_IN: usize = 8;
    pub const READ_IN: usize = 40;
    pub const WRITE_IN: usize = 40;
    pub const RELEASE_IN: usize = 24;
    pub const FLUSH_IN: usize = 24;
    pub const FSYNC_IN: usize = 16;
    pub const SETXATTR_IN: usize = 8;
    pub const GETXATTR_IN: usize = 8;
    pub const ACCESS_IN: usize = 8;
    pub const CREATE_IN: usize = 16;
    pub const IOCTL_IN: usize = 32;
    pub const FALLOCATE_IN: usize = 32;
    pub const LSEEK_IN: usize = 24;

    pub const ATTR: usize = 88;
    pub const ENTRY_OUT: usize = 40 + ATTR;
    pub const DIRENT: usize = 24;
}

/// A malformed request buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed ring request: {}", self.0)
    }
}

/// Little-endian reads at fixed offsets of a byte slice, each checked.
#[derive(Clone, Copy)]
pub struct Le<'a>(pub &'a [u8]);

impl Le<'_> {
    fn get<const N: usize>(&self, off: usize) -> Result<[u8; N], Malformed> {
        self.0
            .get(off..off.checked_add(N).ok_or(Malformed("offset overflow"))?)
            .and_then(|s| s.try_into().ok())
            .ok_or(Malformed("field past the end of its struct"))
    }
    pub fn u16(&self, off: usize) -> Result<u16, Malformed> {
        self.get::<2>(off).map(u16::from_le_bytes)
    }
    pub fn u32(&self, off: usize) -> Result<u32, Malformed> {
        self.get::<4>(off).map(u32::from_le_bytes)
    }
    pub fn i32(&self, off: usize) -> Result<i32, Malformed> {
        self.get::<4>(off).map(i32::from_le_bytes)
    }
    pub fn u64(&self, off: usize) -> Result<u64, Malformed> {
        self.get::<8>(off).map(u64::from_le_bytes)
    }
}

/// Little-endian writes into a reply buffer; the caller sized it.
pub struct Put<'a> {
    pub buf: &'a mut [u8],
    pub at: usize,
}

impl Put<'_> {
    fn bytes(&mut self, b: &[u8]) -> Result<(), Malformed> {
        let end = self.at.checked_add(b.len()).ok_or(Malformed("reply too long"))?;
        self.buf
            .get_mut(self.at..end)
            .ok_or(Malformed("reply larger than the buffer"))?
            .copy_from_slice(b);
        self.at = end;
        Ok(())
    }
    pub fn u32(&mut self, v: u32) -> Result<(), Malformed> {
        self.bytes(&v.to_le_bytes())
    }
    pub fn i32(&mut self, v: i32) -> Result<(), Malformed> {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> Result<(), Malformed> {
        self.bytes(&v.to_le_bytes())
    }
    pub fn raw(&mut self, b: &[u8]) -> Result<(), Malformed> {
        self.bytes(b)
    }
    /// Zeros up to the next multiple of 8.
    pub fn pad8(&mut self) -> Result<(), Malformed> {
        let n = self.at.next_multiple_of(8) - self.at;
        self.bytes(&[0u8; 8][..n])
    }
}

/// `struct fuse_in_header`, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InHeader {
    pub opcode: u32,
    pub unique: u64,
    pub nodeid: u64,
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
    pub total_extlen: u16,
}

impl InHeader {
    pub fn parse(b: &[u8]) -> Result<InHeader, Malformed> {
        let r = Le(b);
        if b.len() < IN_HEADER_SZ {
            return Err(Malformed("short in header"));
        }
        Ok(InHeader {
            opcode: r.u32(4)?,
            unique: r.u64(8)?,
            nodeid: r.u64(16)?,
            uid: r.u32(24)?,
            gid: r.u32(28)?,
            pid: r.u32(32)?,
            total_extlen: r.u16(36)?,
        })
    }
}

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
        assert_eq!(size::ENTRY_OUT, 128);
    }

    #[test]
    fn short_reads_are_errors() {
        let b = [1u8, 2, 3];
        assert!(Le(&b).u32(0).is_err());
        assert!(Le(&b).u16(2).is_err());
        assert!(Le(&b).u64(usize::MAX - 2).is_err());
        assert_eq!(Le(&b).u16(1).unwrap(), 0x0302);
        assert!(InHeader::parse(&[0u8; 39]).is_err());
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

    #[test]
    fn put_refuses_to_overrun() {
        let mut b = [0u8; 6];
        let mut p = Put { buf: &mut b, at: 0 };
        p.u32(1).unwrap();
        assert!(p.u32(2).is_err());
        assert!(p.pad8().is_err());
    }
}
