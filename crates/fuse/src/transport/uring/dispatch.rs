//! One ring request through the operations layer: check the caller, parse,
//! call the [`Operations`] method, encode the answer into the payload.
//! Reads and listings are written straight into the payload buffer.

use super::abi::{op, InHeader, Malformed, Put};
use super::reply::{self, DirBuf};
use super::request::{parse, Req};
use crate::ops::{
    AttrOut, Ctx, DirAdd, DirPlusAdd, Entry, Errno, FileKind, Opened, Operations, ReadOut, Statfs, Xattr,
};
use std::ffi::OsStr;

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

/// What an operation answered, before it is encoded.
enum Out {
    Empty,
    Entry(Entry),
    Attr(AttrOut),
    Open(Opened),
    Create(Entry, Opened),
    Written(u32),
    Statfs(Statfs),
    Xattr(Xattr),
    Data(Vec<u8>),
    Ioctl(i32, Vec<u8>),
    Offset(u64),
}

/// The read reply goes straight into the payload buffer.
struct RingRead<'a> {
    payload: &'a mut [u8],
    len: usize,
    overflow: bool,
}

impl ReadOut for RingRead<'_> {
    fn buf(&mut self, size: usize) -> &mut [u8] {
        let n = size.min(self.payload.len());
        &mut self.payload[..n]
    }
    fn filled(&mut self, n: usize) {
        self.len = n.min(self.payload.len());
    }
    fn bytes(&mut self, b: &[u8]) {
        match self.payload.get_mut(..b.len()) {
            Some(d) => {
                d.copy_from_slice(b);
                self.len = b.len();
            }
            None => self.overflow = true,
        }
    }
}

fn io_err(m: Malformed) -> Errno {
    tracing::warn!("{m}");
    Errno::EIO
}

/// Serve the request in an entry: `op_in` is its per-op area, `payload`
/// the whole payload buffer of which the kernel filled `payload_sz` bytes.
/// Returns the reply's payload length, or the errno.
pub fn handle<T: Operations>(
    ops: &T,
    acl: Acl,
    hdr: &InHeader,
    op_in: &[u8],
    payload: &mut [u8],
    payload_sz: usize,
) -> Result<usize, Errno> {
    if !acl.allows(hdr.opcode, hdr.uid) {
        return Err(Errno::EACCES);
    }
    let ctx = Ctx {
        uid: hdr.uid,
        gid: hdr.gid,
        pid: hdr.pid,
    };
    let ino = hdr.nodeid;
    let filled = payload
        .get(..payload_sz)
        .ok_or_else(|| io_err(Malformed("payload size past the buffer")))?;
    // Reads carry nothing in the payload: parse them apart, so that the
    // answer can be written into it.
    if matches!(hdr.opcode, op::READ | op::READDIR | op::READDIRPLUS) {
        let req = parse(hdr, op_in, &[]).map_err(io_err)?;
        return read_into(ops, &ctx, ino, req, payload);
    }
    let out = match parse(hdr, op_in, filled).map_err(io_err)? {
        Req::Lookup { name } => Out::Entry(ops.lookup(&ctx, ino, name)?),
        Req::GetAttr { fh } => Out::Attr(ops.getattr(&ctx, ino, fh)?),
        Req::SetAttr(set) => Out::Attr(ops.setattr(&ctx, ino, &set)?),
        Req::ReadLink => Out::Data(ops.readlink(&ctx, ino)?),
        Req::Symlink { name, target } => Out::Entry(ops.symlink(&ctx, ino, name, target)?),
        Req::Mknod {
            name,
            mode,
            rdev,
            umask,
        } => Out::Entry(ops.mknod(&ctx, ino, name, mode, umask, rdev)?),
        Req::Mkdir { name, mode, umask } => Out::Entry(ops.mkdir(&ctx, ino, name, mode, umask)?),
        Req::Unlink { name } => ops.unlink(&ctx, ino, name).map(|()| Out::Empty)?,
        Req::Rmdir { name } => ops.rmdir(&ctx, ino, name).map(|()| Out::Empty)?,
        Req::Rename {
            name,
            newdir,
            newname,
            flags,
        } => ops
            .rename(&ctx, ino, name, newdir, newname, flags)
            .map(|()| Out::Empty)?,
        Req::Link { oldnodeid, newname } => Out::Entry(ops.link(&ctx, oldnodeid, ino, newname)?),
        Req::Open { flags } => Out::Open(ops.open(&ctx, ino, flags)?),
        Req::OpenDir { flags } => Out::Open(ops.opendir(&ctx, ino, flags)?),
        Req::Write {
            fh,
            offset,
            data,
            write_flags,
        } => Out::Written(ops.write(&ctx, ino, fh, offset, data, write_flags)?),
        Req::Statfs => Out::Statfs(ops.statfs(&ctx, ino)?),
        Req::Release { fh } => ops.release(&ctx, ino, fh).map(|()| Out::Empty)?,
        Req::ReleaseDir { fh } => ops.releasedir(&ctx, ino, fh).map(|()| Out::Empty)?,
        Req::Fsync { fh, datasync } => ops.fsync(&ctx, ino, fh, datasync).map(|()| Out::Empty)?,
        Req::FsyncDir { fh, datasync } => ops.fsyncdir(&ctx, ino, fh, datasync).map(|()| Out::Empty)?,
        Req::SetXattr { name, value, flags } => ops.setxattr(&ctx, ino, name, value, flags).map(|()| Out::Empty)?,
        Req::GetXattr { name, size } => Out::Xattr(ops.getxattr(&ctx, ino, name, size)?),
        Req::ListXattr { size } => Out::Xattr(ops.listxattr(&ctx, ino, size)?),
        Req::RemoveXattr { name } => ops.removexattr(&ctx, ino, name).map(|()| Out::Empty)?,
        Req::Flush { fh } => ops.flush(&ctx, ino, fh).map(|()| Out::Empty)?,
        Req::Access { mask } => ops.access(&ctx, ino, mask).map(|()| Out::Empty)?,
        Req::Create {
            name,
            mode,
            umask,
            flags,
        } => {
            let (e, o) = ops.create(&ctx, ino, name, mode, umask, flags)?;
            Out::Create(e, o)
        }
        Req::Ioctl {
            fh,
            cmd,
            input,
            out_size,
        } => {
            let (r, v) = ops.ioctl(&ctx, ino, fh, cmd, input, out_size)?;
            Out::Ioctl(r, v)
        }
        Req::Fallocate {
            fh,
            offset,
            length,
            mode,
        } => ops
            .fallocate(&ctx, ino, fh, offset, length, mode)
            .map(|()| Out::Empty)?,
        Req::Lseek { fh, offset, whence } => Out::Offset(ops.lseek(&ctx, ino, fh, offset, whence)?),
        Req::Destroy => Out::Empty,
        Req::Read { .. } | Req::ReadDir { .. } | Req::ReadDirPlus { .. } | Req::Other(_) => return Err(Errno::ENOSYS),
    };
    encode(out, payload).map_err(io_err)
}

fn read_into<T: Operations>(ops: &T, ctx: &Ctx, ino: u64, req: Req<'_>, payload: &mut [u8]) -> Result<usize, Errno> {
    let (fh, offset, size, kind) = match req {
        Req::Read { fh, offset, size } => (fh, offset, size, 0),
        Req::ReadDir { fh, offset, size } => (fh, offset, size, 1),
        Req::ReadDirPlus { fh, offset, size } => (fh, offset, size, 2),
        _ => return Err(Errno::ENOSYS),
    };
    let limit = (size as usize).min(payload.len());
    if kind == 0 {
        let mut out = RingRead {
            payload: &mut payload[..limit],
            len: 0,
            overflow: false,
        };
        ops.read(ctx, ino, fh, offset, size, &mut out)?;
        return if out.overflow { Err(Errno::EIO) } else { Ok(out.len) };
    }
    let mut d = DirBuf {
        put: Put { buf: payload, at: 0 },
        limit,
    };
    if kind == 1 {
        let mut add = |ino: u64, off: u64, k: FileKind, name: &OsStr| d.add(ino, off, k, name);
        ops.readdir(ctx, ino, fh, offset, &mut add as &mut DirAdd<'_>)?;
    } else {
        let mut add = |e: &Entry, off: u64, name: &OsStr| d.add_plus(e, off, name);
        ops.readdirplus(ctx, ino, fh, offset, &mut add as &mut DirPlusAdd<'_>)?;
    }
    Ok(d.put.at)
}

fn encode(out: Out, payload: &mut [u8]) -> Result<usize, Malformed> {
    let mut p = Put { buf: payload, at: 0 };
    match out {
        Out::Empty => {}
        Out::Entry(e) => reply::entry_out(&mut p, &e)?,
        Out::Attr(a) => reply::attr_out(&mut p, &a)?,
        Out::Open(o) => reply::open_out(&mut p, &o)?,
        Out::Create(e, o) => {
            reply::entry_out(&mut p, &e)?;
            reply::open_out(&mut p, &o)?;
        }
        Out::Written(n) => reply::write_out(&mut p, n)?,
        Out::Statfs(s) => reply::statfs_out(&mut p, &s)?,
        Out::Xattr(Xattr::Size(n)) => reply::xattr_size(&mut p, n)?,
        Out::Xattr(Xattr::Data(v)) | Out::Data(v) => p.raw(&v)?,
        Out::Ioctl(r, v) => reply::ioctl_out(&mut p, r, &v)?,
        Out::Offset(o) => reply::lseek_out(&mut p, o)?,
    }
    Ok(p.at)
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
