//! Volume attributes → FUSE attributes.

use crate::ops::{Attr as FuseAttr, FileKind};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use warpfs_volume::{Attr, Kind};

fn time((s, ns): (i64, u32)) -> SystemTime {
    if s >= 0 {
        UNIX_EPOCH + Duration::new(s as u64, ns)
    } else {
        UNIX_EPOCH - Duration::new(s.unsigned_abs(), 0) + Duration::new(0, ns)
    }
}

/// FUSE file type of a volume kind.
pub fn kind(k: Kind) -> FileKind {
    match k {
        Kind::File => FileKind::RegularFile,
        Kind::Dir => FileKind::Directory,
        Kind::Symlink => FileKind::Symlink,
        Kind::Fifo => FileKind::NamedPipe,
        Kind::Socket => FileKind::Socket,
        Kind::CharDev => FileKind::CharDevice,
        Kind::BlockDev => FileKind::BlockDevice,
    }
}

/// FUSE attributes for node `ino`.
pub fn to_fuse(ino: u64, a: &Attr) -> FuseAttr {
    FuseAttr {
        ino,
        size: a.size,
        blocks: a.blocks,
        atime: time(a.atime),
        mtime: time(a.mtime),
        ctime: time(a.ctime),
        crtime: time(a.ctime),
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev as u32,
        blksize: 4096,
        flags: 0,
    }
}
