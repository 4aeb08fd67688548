//! A ring entry's request, parsed: the opcode from the in header, the
//! per-op struct from the header buffer's `op_in` area, names and data
//! from the payload. Every length is checked against what the kernel said
//! it wrote; anything short or unterminated is [`Malformed`].

use super::abi::{fattr, op, size, InHeader, Le, Malformed, FSYNC_FDATASYNC, GETATTR_FH};
use crate::ops::{SetAttr, SetTime};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One request, borrowing its names and data from the entry's buffers.
#[derive(Debug, PartialEq)]
pub enum Req<'a> {
    Lookup {
        name: &'a OsStr,
    },
    GetAttr {
        fh: Option<u64>,
    },
    SetAttr(SetAttr),
    ReadLink,
    Symlink {
        name: &'a OsStr,
        target: &'a OsStr,
    },
    Mknod {
        name: &'a OsStr,
        mode: u32,
        rdev: u32,
        umask: u32,
    },
    Mkdir {
        name: &'a OsStr,
        mode: u32,
        umask: u32,
    },
    Unlink {
        name: &'a OsStr,
    },
    Rmdir {
        name: &'a OsStr,
    },
    Rename {
        name: &'a OsStr,
        newdir: u64,
        newname: &'a OsStr,
        flags: u32,
    },
    Link {
        oldnodeid: u64,
        newname: &'a OsStr,
    },
    Open {
        flags: i32,
    },
    OpenDir {
        flags: i32,
    },
    Read {
        fh: u64,
        offset: u64,
        size: u32,
    },
    ReadDir {
        fh: u64,
        offset: u64,
        size: u32,
    },
    ReadDirPlus {
        fh: u64,
        offset: u64,
        size: u32,
    },
    Write {
        fh: u64,
        offset: u64,
        data: &'a [u8],
        write_flags: u32,
    },
    Statfs,
    Release {
        fh: u64,
    },
    ReleaseDir {
        fh: u64,
    },
    Fsync {
        fh: u64,
        datasync: bool,
    },
    FsyncDir {
        fh: u64,
        datasync: bool,
    },
    SetXattr {
        name: &'a OsStr,
        value: &'a [u8],
        flags: i32,
    },
    GetXattr {
        name: &'a OsStr,
        size: u32,
    },
    ListXattr {
        size: u32,
    },
    RemoveXattr {
        name: &'a OsStr,
    },
    Flush {
        fh: u64,
    },
    Access {
        mask: i32,
    },
    Create {
        name: &'a OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    },
    Ioctl {
        fh: u64,
        cmd: u32,
        input: &'a [u8],
        out_size: u32,
    },
    Fallocate {
        fh: u64,
        offset: u64,
        length: u64,
        mode: i32,
    },
    Lseek {
        fh: u64,
        offset: u64,
        whence: i32,
    },
    Destroy,
    /// An opcode the daemon does not serve (answered ENOSYS).
    Other(u32),
}

/// The per-op struct: the first `n` bytes of `op_in`.
fn head(op_in: &[u8], n: usize) -> Result<Le<'_>, Malformed> {
    op_in
        .get(..n)
        .map(Le)
        .ok_or(Malformed("per-op header larger than its area"))
}

/// A NUL-terminated name at the start of `b`, and what follows it.
fn cstr(b: &[u8]) -> Result<(&OsStr, &[u8]), Malformed> {
    let end = b
        .iter()
        .position(|&c| c == 0)
        .ok_or(Malformed("name without a terminating NUL"))?;
    Ok((OsStr::from_bytes(&b[..end]), &b[end + 1..]))
}

fn name(b: &[u8]) -> Result<&OsStr, Malformed> {
    cstr(b).map(|(n, _)| n)
}

fn two_names(b: &[u8]) -> Result<(&OsStr, &OsStr), Malformed> {
    let (a, rest) = cstr(b)?;
    Ok((a, name(rest)?))
}

fn time(s: u64, ns: u32) -> SystemTime {
    let (s, ns) = (s as i64, ns.min(999_999_999));
    if s >= 0 {
        UNIX_EPOCH + Duration::new(s as u64, ns)
    } else {
        UNIX_EPOCH - Duration::new(s.unsigned_abs(), 0) + Duration::new(0, ns)
    }
}

fn setattr(h: Le<'_>) -> Result<SetAttr, Malformed> {
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

/// Parse the request of opcode `hdr.opcode` from the entry's `op_in` area
/// and the `payload` the kernel filled (exactly its `payload_sz` bytes).
pub fn parse<'a>(hdr: &InHeader, op_in: &'a [u8], payload: &'a [u8]) -> Result<Req<'a>, Malformed> {
    // Extension headers (none are negotiated) sit at the payload's end.
    let ext = usize::from(hdr.total_extlen) * 8;
    let p = payload
        .len()
        .checked_sub(ext)
        .map(|n| &payload[..n])
        .ok_or(Malformed("extension headers longer than the payload"))?;
    let fh_read = |n: usize| -> Result<(u64, u64, u32), Malformed> {
        let h = head(op_in, n)?;
        Ok((h.u64(0)?, h.u64(8)?, h.u32(16)?))
    };
    Ok(match hdr.opcode {
        op::LOOKUP => Req::Lookup { name: name(p)? },
        op::GETATTR => {
            let h = head(op_in, size::GETATTR_IN)?;
            let fh = h.u64(8)?;
            Req::GetAttr {
                fh: (h.u32(0)? & GETATTR_FH != 0).then_some(fh),
            }
        }
        op::SETATTR => Req::SetAttr(setattr(head(op_in, size::SETATTR_IN)?)?),
        op::READLINK => Req::ReadLink,
        op::SYMLINK => {
            let (name, target) = two_names(p)?;
            Req::Symlink { name, target }
        }
        op::MKNOD => {
            let h = head(op_in, size::MKNOD_IN)?;
            Req::Mknod {
                name: name(p)?,
                mode: h.u32(0)?,
                rdev: h.u32(4)?,
                umask: h.u32(8)?,
            }
        }
        op::MKDIR => {
            let h = head(op_in, size::MKDIR_IN)?;
            Req::Mkdir {
                name: name(p)?,
                mode: h.u32(0)?,
                umask: h.u32(4)?,
            }
        }
        op::UNLINK => Req::Unlink { name: name(p)? },
        op::RMDIR => Req::Rmdir { name: name(p)? },
        op::RENAME | op::RENAME2 => {
            let (h, flags) = if hdr.opcode == op::RENAME {
                (head(op_in, size::RENAME_IN)?, 0)
            } else {
                let h = head(op_in, size::RENAME2_IN)?;
                (h, h.u32(8)?)
            };
            let (name, newname) = two_names(p)?;
            Req::Rename {
                name,
                newdir: h.u64(0)?,
                newname,
                flags,
            }
        }
        op::LINK => Req::Link {
            oldnodeid: head(op_in, size::LINK_IN)?.u64(0)?,
            newname: name(p)?,
        },
        op::OPEN => Req::Open {
            flags: head(op_in, size::OPEN_IN)?.i32(0)?,
        },
        op::OPENDIR => Req::OpenDir {
            flags: head(op_in, size::OPEN_IN)?.i32(0)?,
        },
        op::READ => {
            let (fh, offset, size) = fh_read(size::READ_IN)?;
            Req::Read { fh, offset, size }
        }
        op::READDIR => {
            let (fh, offset, size) = fh_read(size::READ_IN)?;
            Req::ReadDir { fh, offset, size }
        }
        op::READDIRPLUS => {
            let (fh, offset, size) = fh_read(size::READ_IN)?;
            Req::ReadDirPlus { fh, offset, size }
        }
        op::WRITE => {
            let h = head(op_in, size::WRITE_IN)?;
            let n = h.u32(16)? as usize;
            Req::Write {
                fh: h.u64(0)?,
                offset: h.u64(8)?,
                data: p.get(..n).ok_or(Malformed("write data shorter than its size"))?,
                write_flags: h.u32(20)?,
            }
        }
        op::STATFS => Req::Statfs,
        op::RELEASE => Req::Release {
            fh: head(op_in, size::RELEASE_IN)?.u64(0)?,
        },
        op::RELEASEDIR => Req::ReleaseDir {
            fh: head(op_in, size::RELEASE_IN)?.u64(0)?,
        },
        op::FSYNC | op::FSYNCDIR => {
            let h = head(op_in, size::FSYNC_IN)?;
            let (fh, datasync) = (h.u64(0)?, h.u32(8)? & FSYNC_FDATASYNC != 0);
            if hdr.opcode == op::FSYNC {
                Req::Fsync { fh, datasync }
            } else {
                Req::FsyncDir { fh, datasync }
            }
        }
        op::SETXATTR => {
            let h = head(op_in, size::SETXATTR_IN)?;
            let (name, rest) = cstr(p)?;
            let n = h.u32(0)? as usize;
            Req::SetXattr {
                name,
                value: rest.get(..n).ok_or(Malformed("xattr value shorter than its size"))?,
                flags: h.i32(4)?,
            }
        }
        op::GETXATTR => Req::GetXattr {
            name: name(p)?,
            size: head(op_in, size::GETXATTR_IN)?.u32(0)?,
        },
        op::LISTXATTR => Req::ListXattr {
            size: head(op_in, size::GETXATTR_IN)?.u32(0)?,
        },
        op::REMOVEXATTR => Req::RemoveXattr { name: name(p)? },
        op::FLUSH => Req::Flush {
            fh: head(op_in, size::FLUSH_IN)?.u64(0)?,
        },
        op::ACCESS => Req::Access {
            mask: head(op_in, size::ACCESS_IN)?.i32(0)?,
        },
        op::CREATE => {
            let h = head(op_in, size::CREATE_IN)?;
            Req::Create {
                name: name(p)?,
                flags: h.i32(0)?,
                mode: h.u32(4)?,
                umask: h.u32(8)?,
            }
        }
        op::IOCTL => {
            let h = head(op_in, size::IOCTL_IN)?;
            let n = h.u32(24)? as usize;
            Req::Ioctl {
                fh: h.u64(0)?,
                cmd: h.u32(12)?,
                input: p.get(..n).ok_or(Malformed("ioctl input shorter than its size"))?,
                out_size: h.u32(28)?,
            }
        }
        op::FALLOCATE => {
            let h = head(op_in, size::FALLOCATE_IN)?;
            Req::Fallocate {
                fh: h.u64(0)?,
                offset: h.u64(8)?,
                length: h.u64(16)?,
                mode: h.i32(24)?,
            }
        }
        op::LSEEK => {
            let h = head(op_in, size::LSEEK_IN)?;
            Req::Lseek {
                fh: h.u64(0)?,
                offset: h.u64(8)?,
                whence: h.i32(16)?,
            }
        }
        op::DESTROY => Req::Destroy,
        other => Req::Other(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hdr(opcode: u32) -> InHeader {
        InHeader {
            opcode,
            unique: 9,
            nodeid: 1,
            uid: 0,
            gid: 0,
            pid: 1,
            total_extlen: 0,
        }
    }

    fn op_in(fields: &[(usize, &[u8])]) -> [u8; 128] {
        let mut b = [0u8; 128];
        for (at, v) in fields {
            b[*at..*at + v.len()].copy_from_slice(v);
        }
        b
    }

    #[test]
    fn parses_names_and_data() {
        let z = [0u8; 128];
        assert_eq!(
            parse(&hdr(op::LOOKUP), &z, b"abc\0").unwrap(),
            Req::Lookup {
                name: OsStr::new("abc")
            }
        );
        assert_eq!(
            parse(&hdr(op::SYMLINK), &z, b"l\0/t/x\0").unwrap(),
            Req::Symlink {
                name: OsStr::new("l"),
                target: OsStr::new("/t/x")
            }
        );
        let w = op_in(&[
            (0, &7u64.to_le_bytes()),
            (8, &4096u64.to_le_bytes()),
            (16, &3u32.to_le_bytes()),
        ]);
        assert_eq!(
            parse(&hdr(op::WRITE), &w, b"xyzTRAILING").unwrap(),
            Req::Write {
                fh: 7,
                offset: 4096,
                data: b"xyz",
                write_flags: 0
            }
        );
        let r2 = op_in(&[(0, &5u64.to_le_bytes()), (8, &2u32.to_le_bytes())]);
        assert_eq!(
            parse(&hdr(op::RENAME2), &r2, b"a\0b\0").unwrap(),
            Req::Rename {
                name: OsStr::new("a"),
                newdir: 5,
                newname: OsStr::new("b"),
                flags: 2
            }
        );
    }

    #[test]
    fn parses_lseek() {
        // struct fuse_lseek_in: fh, offset, whence, padding.
        let l = op_in(&[
            (0, &7u64.to_le_bytes()),
            (8, &(-1i64).to_le_bytes()),
            (16, &4i32.to_le_bytes()),
            (20, &0xffu32.to_le_bytes()),
        ]);
        assert_eq!(
            parse(&hdr(op::LSEEK), &l, b"").unwrap(),
            Req::Lseek {
                fh: 7,
                offset: u64::MAX,
                whence: libc::SEEK_HOLE
            }
        );
        assert!(parse(&hdr(op::LSEEK), &l[..23], b"").is_err(), "short per-op area");
    }

    #[test]
    fn parses_setattr_fields_by_valid_bits() {
        let s = op_in(&[
            (
                0,
                &(fattr::MODE | fattr::SIZE | fattr::MTIME_NOW | fattr::FH).to_le_bytes(),
            ),
            (8, &11u64.to_le_bytes()),
            (16, &100u64.to_le_bytes()),
            (68, &0o100644u32.to_le_bytes()),
            (76, &55u32.to_le_bytes()),
        ]);
        let Req::SetAttr(a) = parse(&hdr(op::SETATTR), &s, b"").unwrap() else {
            panic!("not a setattr")
        };
        assert_eq!(a.fh, Some(11));
        assert_eq!(a.size, Some(100));
        assert_eq!(a.mode, Some(0o100644));
        assert_eq!(a.uid, None, "UID bit not set: the field is ignored");
        assert_eq!(a.mtime, Some(SetTime::Now));
        assert_eq!(a.atime, None);
    }

    #[test]
    fn malformed_buffers_are_errors() {
        let z = [0u8; 128];
        // No NUL.
        assert!(parse(&hdr(op::LOOKUP), &z, b"abc").is_err());
        assert!(parse(&hdr(op::SYMLINK), &z, b"only\0").is_err());
        assert!(parse(&hdr(op::RENAME), &z, b"a\0b").is_err());
        // Data shorter than the size field says.
        let w = op_in(&[(16, &10u32.to_le_bytes())]);
        assert!(parse(&hdr(op::WRITE), &w, b"short").is_err());
        let x = op_in(&[(0, &9u32.to_le_bytes())]);
        assert!(parse(&hdr(op::SETXATTR), &x, b"user.a\0v").is_err());
        // Extension headers longer than the payload.
        let mut h = hdr(op::LOOKUP);
        h.total_extlen = 1;
        assert!(parse(&h, &z, b"abc\0").is_err());
        // The per-op area is smaller than a struct.
        assert!(parse(&hdr(op::SETATTR), &z[..40], b"").is_err());
        // Unknown opcodes are not errors: they are answered ENOSYS.
        assert_eq!(parse(&hdr(4242), &z, b"").unwrap(), Req::Other(4242));
    }

    proptest! {
        #[test]
        fn any_buffer_parses_or_errs_without_panic(
            opcode in 0u32..60,
            extlen in 0u16..4,
            op_area in proptest::collection::vec(any::<u8>(), 0..=128),
            payload in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut h = hdr(opcode);
            h.total_extlen = extlen;
            let _ = parse(&h, &op_area, &payload);
        }

        #[test]
        fn names_round_trip(n in "[a-zA-Z0-9._-]{1,64}") {
            let mut p = n.as_bytes().to_vec();
            p.push(0);
            let z = [0u8; 128];
            prop_assert_eq!(parse(&hdr(op::UNLINK), &z, &p).unwrap(), Req::Unlink { name: OsStr::new(&n) });
        }
    }
}
