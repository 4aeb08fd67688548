//! The FUSE wire format (`include/uapi/linux/fuse.h`), the same on
//! /dev/fuse and on the ring: one request as the kernel lays it out
//! ([`Wire`]: its in header, its per-op struct, its payload of names and
//! data) and the reply structs written back into the payload
//! ([`encode`]). Every read and write goes through checked slices
//! ([`Le`], [`Put`]): a short or malformed buffer is an error
//! ([`Malformed`], answered EIO), never a panic. The per-op structs are
//! decoded beside the operation they carry, in the operation groups
//! (`ops::entry`, `ops::file`, ...).

pub mod encode;

use super::{Ctx, Errno, SetAttr, SetTime};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `struct fuse_in_header`.
pub const IN_HEADER_SZ: usize = 40;

/// A malformed request buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed FUSE request: {}", self.0)
    }
}

impl From<Malformed> for Errno {
    /// A request the daemon cannot read is answered EIO (and logged).
    fn from(m: Malformed) -> Errno {
        tracing::warn!("{m}");
        Errno::EIO
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

/// A NUL-terminated name at the start of `b`, and what follows it.
fn cstr(b: &[u8]) -> Result<(&OsStr, &[u8]), Malformed> {
    let end = b
        .iter()
        .position(|&c| c == 0)
        .ok_or(Malformed("name without a terminating NUL"))?;
    Ok((OsStr::from_bytes(&b[..end]), &b[end + 1..]))
}

/// A kernel timestamp (seconds may be negative: before the epoch).
pub fn time(s: u64, ns: u32) -> SystemTime {
    let (s, ns) = (s as i64, ns.min(999_999_999));
    if s >= 0 {
        UNIX_EPOCH + Duration::new(s as u64, ns)
    } else {
        UNIX_EPOCH - Duration::new(s.unsigned_abs(), 0) + Duration::new(0, ns)
    }
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

/// `struct fuse_setattr_in`: what it changes, by its `valid` bits.
pub fn setattr(h: Le<'_>) -> Result<SetAttr, Malformed> {
    let valid = h.u32(0)?;
    let has = |bit| valid & bit != 0;
    let when = |set, now, s, ns| -> Option<SetTime> {
        if has(now) {
            Some(SetTime::Now)
        } else if has(set) {
            Some(SetTime::At(time(s, ns)))
        } else {
            None
        }
    };
    Ok(SetAttr {
        fh: has(fattr::FH).then_some(h.u64(8)?),
        size: has(fattr::SIZE).then_some(h.u64(16)?),
        atime: when(fattr::ATIME, fattr::ATIME_NOW, h.u64(32)?, h.u32(56)?),
        mtime: when(fattr::MTIME, fattr::MTIME_NOW, h.u64(40)?, h.u32(60)?),
        mode: has(fattr::MODE).then_some(h.u32(68)?),
        uid: has(fattr::UID).then_some(h.u32(76)?),
        gid: has(fattr::GID).then_some(h.u32(80)?),
    })
}

/// One request in wire form, and the buffer its reply is written into
/// (the payload it came in: a request's names and data are read before
/// its answer is written).
pub struct Wire<'a> {
    pub opcode: u32,
    /// The node the request is about (`fuse_in_header.nodeid`).
    pub ino: u64,
    pub ctx: Ctx,
    op_in: &'a [u8],
    payload: &'a mut [u8],
    /// Payload bytes of the request, extension headers left out.
    filled: usize,
    /// `--force-owner`: the (uid, gid) every reported file has.
    owner: Option<(u32, u32)>,
}

impl<'a> Wire<'a> {
    /// The request of `hdr` with its per-op area `op_in` and a `payload`
    /// buffer of which the kernel filled `payload_sz` bytes.
    pub fn new(hdr: &InHeader, op_in: &'a [u8], payload: &'a mut [u8], payload_sz: usize) -> Result<Self, Malformed> {
        if payload_sz > payload.len() {
            return Err(Malformed("payload size past the buffer"));
        }
        // Extension headers (none are negotiated) sit at the payload's end.
        let filled = payload_sz
            .checked_sub(usize::from(hdr.total_extlen) * 8)
            .ok_or(Malformed("extension headers longer than the payload"))?;
        Ok(Wire {
            opcode: hdr.opcode,
            ino: hdr.nodeid,
            ctx: Ctx {
                uid: hdr.uid,
                gid: hdr.gid,
                pid: hdr.pid,
            },
            op_in,
            payload,
            filled,
            owner: None,
        })
    }

    /// Report every file as owned by `owner` in the replies.
    pub fn set_owner(&mut self, owner: Option<(u32, u32)>) {
        self.owner = owner;
    }

    /// The per-op struct: the first `n` bytes of the per-op area.
    pub fn head(&self, n: usize) -> Result<Le<'a>, Malformed> {
        self.op_in
            .get(..n)
            .map(Le)
            .ok_or(Malformed("per-op header larger than its area"))
    }

    fn input(&self) -> &[u8] {
        &self.payload[..self.filled]
    }

    /// The payload's NUL-terminated name.
    pub fn name(&self) -> Result<&OsStr, Malformed> {
        cstr(self.input()).map(|(n, _)| n)
    }

    /// Two NUL-terminated names in a row.
    pub fn two_names(&self) -> Result<(&OsStr, &OsStr), Malformed> {
        let (a, rest) = cstr(self.input())?;
        Ok((a, cstr(rest)?.0))
    }

    /// A name, then `n` bytes of data.
    pub fn name_and_data(&self, n: usize) -> Result<(&OsStr, &[u8]), Malformed> {
        let (a, rest) = cstr(self.input())?;
        Ok((a, rest.get(..n).ok_or(Malformed("data shorter than its size"))?))
    }

    /// The payload's first `n` bytes of data.
    pub fn data(&self, n: usize) -> Result<&[u8], Malformed> {
        self.input().get(..n).ok_or(Malformed("data shorter than its size"))
    }

    /// The name of a request that names an extended attribute, for what
    /// is decided before it runs (the volume's request gate).
    pub fn xattr_name(&self) -> Option<&OsStr> {
        matches!(self.opcode, super::op::GETXATTR | super::op::SETXATTR)
            .then(|| self.name().ok())
            .flatten()
    }

    /// Where the reply's structs go.
    pub fn out(&mut self) -> encode::Reply<'_> {
        encode::Reply {
            put: Put {
                buf: self.payload,
                at: 0,
            },
            owner: self.owner,
        }
    }

    /// The reply buffer for an answer of at most `size` bytes (a read or a
    /// listing, which carry nothing in the payload).
    pub fn out_limited(&mut self, size: u32) -> encode::Reply<'_> {
        let n = (size as usize).min(self.payload.len());
        encode::Reply {
            put: Put {
                buf: &mut self.payload[..n],
                at: 0,
            },
            owner: self.owner,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn put_refuses_to_overrun() {
        let mut b = [0u8; 6];
        let mut p = Put { buf: &mut b, at: 0 };
        p.u32(1).unwrap();
        assert!(p.u32(2).is_err());
        assert!(p.pad8().is_err());
    }

    fn hdr(opcode: u32, extlen: u16) -> InHeader {
        InHeader {
            opcode,
            unique: 9,
            nodeid: 1,
            uid: 0,
            gid: 0,
            pid: 1,
            total_extlen: extlen,
        }
    }

    #[test]
    fn names_and_data_are_checked_against_what_the_kernel_wrote() {
        let z = [0u8; 128];
        let mut p = b"a\0b\0TAIL".to_vec();
        let w = Wire::new(&hdr(0, 0), &z, &mut p, 8).unwrap();
        assert_eq!(w.two_names().unwrap(), (OsStr::new("a"), OsStr::new("b")));
        assert_eq!(w.data(8).unwrap(), b"a\0b\0TAIL");
        assert!(w.data(9).is_err(), "past what the kernel filled");
        assert!(w.head(129).is_err(), "past the per-op area");
        // Only the filled bytes count: the name's NUL lies beyond them.
        let mut p = b"abc\0".to_vec();
        assert!(Wire::new(&hdr(0, 0), &z, &mut p, 3).unwrap().name().is_err());
        assert!(Wire::new(&hdr(0, 0), &z, &mut p, 5).is_err(), "size past the buffer");
        // Extension headers longer than the payload.
        assert!(Wire::new(&hdr(0, 1), &z, &mut p, 4).is_err());
        let mut p = b"x\0".to_vec();
        let w = Wire::new(&hdr(0, 0), &z, &mut p, 2).unwrap();
        assert!(w.name_and_data(1).is_err(), "data shorter than its size");
    }
}
