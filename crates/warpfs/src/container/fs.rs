//! The FUSE view of an open container: a root directory holding one file,
//! `volume`, whose bytes are the image's plaintext sectors. Served through
//! the operations layer (`fuse::ops`), so on either transport.

use super::image::Image;
use crate::fuse::ctl;
use crate::fuse::ops::{
    Attr, AttrOut, Ctx, DirAdd, DirOps, Entry, EntryOps, Errno, FileKind, FileOps, Init, MountOps, NameOps, OpResult,
    Opened, ReadOut, SetAttr, Xattr, XattrOps,
};
use crate::fuse::STATS_XATTR;
use std::ffi::OsStr;
use std::time::{Duration, SystemTime};

const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;
const VOLUME: u64 = 2;
/// Name of the exposed file.
pub const VOLUME_NAME: &str = "volume";

/// The container file system.
pub struct ContainerFs {
    image: Image,
    /// The XTS device the image's requests may run on (`--engine`).
    xts: Option<Box<dyn warpfs_engine::XtsDevicePort>>,
    uid: u32,
    gid: u32,
    created: SystemTime,
}

impl ContainerFs {
    /// Serve `image`.
    pub fn new(image: Image) -> Self {
        // SAFETY: getuid/getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Self {
            image,
            xts: None,
            uid,
            gid,
            created: SystemTime::now(),
        }
    }

    /// Count what `dev` (the device the image's XTS key was handed to)
    /// runs, for `warpfs stats`.
    pub fn with_xts_device(mut self, dev: Box<dyn warpfs_engine::XtsDevicePort>) -> Self {
        self.xts = Some(dev);
        self
    }

    /// `warpfs stats` of a container: no keystream engine, only where its
    /// XTS ran (the `xts_device*` fields; empty `xts_device`: the cpu).
    fn stats_json(&self) -> Vec<u8> {
        let mut s = warpfs_engine::StatsSnapshot {
            backend: "container (XTS only, no keystream engine)".into(),
            ..Default::default()
        };
        if let Some(x) = &self.xts {
            let c = x.counts();
            s.xts_device = x.name();
            (s.xts_device_requests, s.xts_device_bytes, s.xts_device_fallbacks) = (c.requests, c.bytes, c.fallbacks);
        }
        s.to_json().into_bytes()
    }

    fn attr(&self, ino: u64) -> Attr {
        let (kind, perm, size, nlink) = if ino == ROOT {
            (FileKind::Directory, 0o700, 0, 2)
        } else {
            (FileKind::RegularFile, 0o600, self.image.size(), 1)
        };
        Attr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            crtime: self.created,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn attr_out(&self, ino: u64) -> AttrOut {
        AttrOut {
            attr: self.attr(ino),
            ttl: TTL,
        }
    }
}

fn io_errno(e: std::io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

impl MountOps for ContainerFs {
    fn init(&mut self, init: &mut Init) -> std::io::Result<()> {
        init.max_write = Some(1 << 20);
        init.max_readahead = Some(1 << 20);
        Ok(())
    }
}

impl EntryOps for ContainerFs {
    fn lookup(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<Entry> {
        if parent == ROOT && name == VOLUME_NAME {
            Ok(Entry {
                attr: self.attr(VOLUME),
                generation: 0,
                entry_ttl: TTL,
                attr_ttl: TTL,
            })
        } else {
            Err(Errno::ENOENT)
        }
    }

    fn getattr(&self, _: &Ctx, ino: u64, _fh: Option<u64>) -> OpResult<AttrOut> {
        match ino {
            ROOT | VOLUME => Ok(self.attr_out(ino)),
            _ => Err(Errno::ENOENT),
        }
    }

    fn setattr(&self, _: &Ctx, ino: u64, set: &SetAttr) -> OpResult<AttrOut> {
        // The size changes only with `warpfs container resize`.
        if set.size.is_some_and(|s| ino != VOLUME || s != self.image.size()) {
            return Err(Errno::from_i32(libc::EPERM));
        }
        Ok(self.attr_out(ino))
    }
}

impl NameOps for ContainerFs {}

impl FileOps for ContainerFs {
    fn open(&self, _: &Ctx, ino: u64, _flags: i32) -> OpResult<Opened> {
        if ino == VOLUME {
            Ok(Opened { fh: 0, flags: 0 })
        } else {
            Err(Errno::EISDIR)
        }
    }

    fn read(&self, _: &Ctx, _ino: u64, _fh: u64, offset: u64, size: u32, out: &mut dyn ReadOut) -> OpResult<()> {
        let n = self.image.read_at(offset, out.buf(size as usize)).map_err(io_errno)?;
        out.filled(n);
        Ok(())
    }

    fn write(&self, _: &Ctx, _ino: u64, _fh: u64, offset: u64, data: &[u8], _flags: u32) -> OpResult<u32> {
        self.image.write_at(offset, data).map_err(io_errno)?;
        Ok(data.len() as u32)
    }

    fn fsync(&self, _: &Ctx, _ino: u64, _fh: u64, _datasync: bool) -> OpResult<()> {
        self.image.sync().map_err(io_errno)
    }

    fn fallocate(&self, _: &Ctx, _ino: u64, _fh: u64, offset: u64, length: u64, mode: i32) -> OpResult<()> {
        let end = offset.saturating_add(length);
        match mode {
            0 | libc::FALLOC_FL_KEEP_SIZE if end <= self.image.size() => Ok(()),
            0 | libc::FALLOC_FL_KEEP_SIZE => Err(Errno::from_i32(libc::ENOSPC)),
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => {
                self.image.punch(offset, length).map_err(io_errno)
            }
            _ => Err(Errno::from_i32(libc::EOPNOTSUPP)),
        }
    }
}

impl DirOps for ContainerFs {
    fn readdir(&self, _: &Ctx, ino: u64, _fh: u64, offset: u64, add: &mut DirAdd<'_>) -> OpResult<()> {
        if ino != ROOT {
            return Err(Errno::ENOTDIR);
        }
        let entries = [
            (ROOT, FileKind::Directory, "."),
            (ROOT, FileKind::Directory, ".."),
            (VOLUME, FileKind::RegularFile, VOLUME_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if add(*ino, (i + 1) as u64, *kind, OsStr::new(name)) {
                break;
            }
        }
        Ok(())
    }
}

impl XattrOps for ContainerFs {
    fn getxattr(&self, _: &Ctx, ino: u64, name: &OsStr, size: u32) -> OpResult<Xattr> {
        if ino == ROOT && name == STATS_XATTR {
            return Xattr::fit(self.stats_json(), size);
        }
        Err(Errno::from_i32(libc::ENODATA))
    }

    /// The root's control ioctl, [`ctl::GET`] of the stats only (root and
    /// the daemon's user, as on a volume).
    fn ioctl(&self, ctx: &Ctx, ino: u64, _fh: u64, cmd: u32, input: &[u8], out_size: u32) -> OpResult<(i32, Vec<u8>)> {
        if ino != ROOT || cmd != ctl::GET {
            return Err(Errno::from_i32(libc::ENOTTY));
        }
        if !ctl::allowed(ctx.uid, cmd, || false) {
            return Err(Errno::from_i32(libc::EPERM));
        }
        let req = ctl::parse(input).ok_or(Errno::from_i32(libc::EINVAL))?;
        if req.name != STATS_XATTR {
            return Err(Errno::from_i32(libc::EINVAL));
        }
        let v = self.stats_json();
        if v.len() > out_size as usize {
            return Err(Errno::from_i32(libc::ERANGE));
        }
        Ok((v.len() as i32, v))
    }
}
