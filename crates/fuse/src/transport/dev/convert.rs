//! fuser's types and ours, at the /dev/fuse transport's edge: the caller,
//! times, errnos, file kinds, attributes, the INIT negotiation, and the
//! replies every operation shares (empty, xattr).

use crate::ops::{Attr, Ctx, Errno, FileKind, Init, SetTime};
use fuser::{FileAttr, FileType, INodeNo, InitFlags, KernelConfig, ReplyEmpty, ReplyXattr, Request, TimeOrNow};

pub(super) fn ctx(req: &Request) -> Ctx {
    Ctx {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

pub(super) fn set_time(t: Option<TimeOrNow>) -> Option<SetTime> {
    t.map(|t| match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(st) => SetTime::At(st),
    })
}

pub(super) fn empty(r: Result<(), Errno>, reply: ReplyEmpty) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

pub(super) fn xattr(r: Result<crate::ops::Xattr, Errno>, reply: ReplyXattr) {
    match r {
        Ok(crate::ops::Xattr::Size(n)) => reply.size(n),
        Ok(crate::ops::Xattr::Data(v)) => reply.data(&v),
        Err(e) => reply.error(errno(e)),
    }
}

/// fuser's errno for ours (the same number).
pub(super) fn errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.code())
}

pub(super) fn kind(k: FileKind) -> FileType {
    match k {
        FileKind::NamedPipe => FileType::NamedPipe,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
        FileKind::Directory => FileType::Directory,
        FileKind::RegularFile => FileType::RegularFile,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Socket => FileType::Socket,
    }
}

pub(super) fn attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.crtime,
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: a.flags,
    }
}

/// What the kernel offered at INIT, for the file system.
pub(super) fn init_offer(config: &KernelConfig) -> Init {
    Init::new(config.capabilities().bits())
}

/// fuser's flags for the capabilities the file system asked for (the same
/// bits: fuser's `InitFlags` mirror the kernel's).
pub(super) fn init_flags(init: &Init) -> InitFlags {
    InitFlags::from_bits_retain(init.wanted())
}

/// What the file system asked for at INIT, into fuser's answer. A limit
/// fuser refuses (out of its range) leaves fuser's default.
pub(super) fn init_apply(init: &Init, config: &mut KernelConfig) {
    let _ = config.add_capabilities(init_flags(init));
    if let Some(v) = init.max_write {
        let _ = config.set_max_write(v);
    }
    if let Some(v) = init.max_readahead {
        let _ = config.set_max_readahead(v);
    }
    if let Some(v) = init.max_background {
        let _ = config.set_max_background(v);
    }
    if let Some(v) = init.congestion_threshold {
        let _ = config.set_congestion_threshold(v);
    }
    if let Some(v) = init.time_gran {
        let _ = config.set_time_granularity(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn errnos_keep_their_number() {
        let named = [
            (Errno::EPERM, fuser::Errno::EPERM),
            (Errno::ENOENT, fuser::Errno::ENOENT),
            (Errno::EIO, fuser::Errno::EIO),
            (Errno::EBADF, fuser::Errno::EBADF),
            (Errno::EACCES, fuser::Errno::EACCES),
            (Errno::EEXIST, fuser::Errno::EEXIST),
            (Errno::ENOTDIR, fuser::Errno::ENOTDIR),
            (Errno::EISDIR, fuser::Errno::EISDIR),
            (Errno::EINVAL, fuser::Errno::EINVAL),
            (Errno::ERANGE, fuser::Errno::ERANGE),
            (Errno::EROFS, fuser::Errno::EROFS),
            (Errno::ENOSYS, fuser::Errno::ENOSYS),
            (Errno::ENOTEMPTY, fuser::Errno::ENOTEMPTY),
            (Errno::EOPNOTSUPP, fuser::Errno::EOPNOTSUPP),
        ];
        for (ours, theirs) in named {
            assert_eq!(errno(ours), theirs, "{ours:?}");
            assert_eq!(Errno::from_i32(theirs.code()), ours);
        }
        // Any number goes through unchanged, and both sides refuse the
        // same non-numbers.
        for n in [1, libc::EXDEV, libc::ENODATA, 4095] {
            assert_eq!(errno(Errno::from_i32(n)).code(), n);
        }
        for n in [0, -libc::ENOENT] {
            assert_eq!(errno(Errno::from_i32(n)), fuser::Errno::from_i32(n));
        }
    }

    #[test]
    fn attributes_go_to_fuser_field_by_field() {
        let kinds = [
            (FileKind::NamedPipe, FileType::NamedPipe),
            (FileKind::CharDevice, FileType::CharDevice),
            (FileKind::BlockDevice, FileType::BlockDevice),
            (FileKind::Directory, FileType::Directory),
            (FileKind::RegularFile, FileType::RegularFile),
            (FileKind::Symlink, FileType::Symlink),
            (FileKind::Socket, FileType::Socket),
        ];
        for (i, (ours, theirs)) in kinds.into_iter().enumerate() {
            let i = i as u32;
            let a = Attr {
                ino: 0x1_0000_0001 + u64::from(i),
                size: 1 << 40 | 3,
                blocks: 17 + u64::from(i),
                atime: UNIX_EPOCH + Duration::new(11, 1),
                mtime: UNIX_EPOCH + Duration::new(12, 2),
                ctime: UNIX_EPOCH + Duration::new(13, 3),
                crtime: UNIX_EPOCH - Duration::new(14, 4),
                kind: ours,
                perm: 0o4755,
                nlink: 3 + i,
                uid: 1000 + i,
                gid: 2000 + i,
                rdev: 0x0803 + i,
                blksize: 4096 + i,
                flags: 5 + i,
            };
            let f = attr(&a);
            assert_eq!(f.ino, INodeNo(a.ino));
            assert_eq!(f.size, a.size);
            assert_eq!(f.blocks, a.blocks);
            assert_eq!(f.atime, a.atime);
            assert_eq!(f.mtime, a.mtime);
            assert_eq!(f.ctime, a.ctime);
            assert_eq!(f.crtime, a.crtime);
            assert_eq!(f.kind, theirs);
            assert_eq!(f.perm, a.perm);
            assert_eq!(f.nlink, a.nlink);
            assert_eq!(f.uid, a.uid);
            assert_eq!(f.gid, a.gid);
            assert_eq!(f.rdev, a.rdev);
            assert_eq!(f.blksize, a.blksize);
            assert_eq!(f.flags, a.flags);
        }
    }

    #[test]
    fn init_flags_are_fusers_bit_for_bit() {
        let named = [
            (Init::FUSE_ATOMIC_O_TRUNC, InitFlags::FUSE_ATOMIC_O_TRUNC),
            (Init::FUSE_BIG_WRITES, InitFlags::FUSE_BIG_WRITES),
            (Init::FUSE_DO_READDIRPLUS, InitFlags::FUSE_DO_READDIRPLUS),
            (Init::FUSE_READDIRPLUS_AUTO, InitFlags::FUSE_READDIRPLUS_AUTO),
            (Init::FUSE_ASYNC_DIO, InitFlags::FUSE_ASYNC_DIO),
            (Init::FUSE_WRITEBACK_CACHE, InitFlags::FUSE_WRITEBACK_CACHE),
            (Init::FUSE_PARALLEL_DIROPS, InitFlags::FUSE_PARALLEL_DIROPS),
            (Init::FUSE_CACHE_SYMLINKS, InitFlags::FUSE_CACHE_SYMLINKS),
            (Init::FUSE_HANDLE_KILLPRIV_V2, InitFlags::FUSE_HANDLE_KILLPRIV_V2),
            (Init::FUSE_OVER_IO_URING, InitFlags::FUSE_OVER_IO_URING),
        ];
        for (ours, theirs) in named {
            let mut i = Init::new(InitFlags::all().bits());
            i.want(ours);
            assert_eq!(init_flags(&i), theirs, "{ours:#x}");
        }
        // What the forward file system asks of a kernel that offers all
        // but the writeback cache: the same set on fuser's side.
        let mut i = Init::new((InitFlags::all() - InitFlags::FUSE_WRITEBACK_CACHE).bits());
        i.want(
            Init::FUSE_WRITEBACK_CACHE
                | Init::FUSE_PARALLEL_DIROPS
                | Init::FUSE_BIG_WRITES
                | Init::FUSE_ATOMIC_O_TRUNC
                | Init::FUSE_DO_READDIRPLUS
                | Init::FUSE_READDIRPLUS_AUTO
                | Init::FUSE_HANDLE_KILLPRIV_V2
                | Init::FUSE_CACHE_SYMLINKS,
        );
        let want = InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_BIG_WRITES
            | InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_HANDLE_KILLPRIV_V2
            | InitFlags::FUSE_CACHE_SYMLINKS;
        assert_eq!(init_flags(&i).bits(), want.bits());
    }
}
