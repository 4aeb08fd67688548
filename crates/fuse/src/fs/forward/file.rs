//! Files ([`FileOps`]): open, create, read, write, flush, release, fsync,
//! fallocate, lseek (SEEK_DATA / SEEK_HOLE).

use super::{errno, WarpFs};
use crate::ops::{Ctx, Entry, Errno, FileOps, OpResult, Opened, ReadOut};
use std::ffi::OsStr;
use warpfs_volume::Seek;

/// `FUSE_WRITE_KILL_SUIDGID` of a write request: the writer lacks
/// CAP_FSETID.
const WRITE_KILL_SUIDGID: u32 = 1 << 2;
/// `FOPEN_KEEP_CACHE`: the kernel keeps the file's pages from before.
const FOPEN_KEEP_CACHE: u32 = 1 << 1;

impl WarpFs {
    /// A handle of `f`, opened with `open_flags`, answered with FOPEN `flags`.
    fn opened(&self, f: warpfs_volume::OpenFile, open_flags: i32, flags: u32) -> Opened {
        let writable = open_flags & libc::O_ACCMODE != libc::O_RDONLY;
        Opened {
            fh: self.handles.insert_file(f, writable),
            flags,
        }
    }

    /// `FOPEN_KEEP_CACHE` when the backing file of `ino` is as at its last
    /// open (so its pages in the kernel are still right); when it changed
    /// behind the mount's back, the kernel's attributes are dropped too.
    fn keep_cache(&self, ino: u64, f: &warpfs_volume::OpenFile) -> u32 {
        if !self.caches.keep {
            return 0;
        }
        let Ok(a) = self.vol.getattr_open(f) else { return 0 };
        let (keep, stale) = self.seen.check(ino, &a);
        if stale {
            self.inval_attrs(ino);
        }
        if keep {
            FOPEN_KEEP_CACHE
        } else {
            0
        }
    }
}

impl FileOps for WarpFs {
    fn open(&self, ctx: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        let l = self.loc(ino)?;
        let f = self.vol.open_file(&l.backing, flags, l.plain).map_err(errno)?;
        if flags & libc::O_TRUNC != 0 && self.kills_for(ctx) {
            // The truncation is done by now, and a daemon that is not
            // root had the backing file system drop the bits already:
            // the kernel's cached mode is stale either way.
            let r = self.vol.kill_suidgid_open(&f);
            self.inval_attrs(ino);
            r.map_err(errno)?;
        }
        let keep = if flags & libc::O_TRUNC != 0 {
            self.seen.changed(ino);
            0
        } else {
            self.keep_cache(ino, &f)
        };
        Ok(self.opened(f, flags, keep))
    }

    fn create(
        &self,
        ctx: &Ctx,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> OpResult<(Entry, Opened)> {
        let p = self.loc(parent)?;
        let label = Self::child_label(&p, name);
        let (cname, mut attr, f, existed) = self
            .vol
            .create(
                &p.backing,
                name,
                mode & 0o7777 & !umask,
                flags,
                Self::caller(ctx),
                label,
            )
            .map_err(errno)?;
        // An existing file opened with O_TRUNC (the kernel sends CREATE
        // when it holds no valid entry for the name).
        if existed && flags & libc::O_TRUNC != 0 && self.kills_for(ctx) {
            attr = self
                .vol
                .kill_suidgid_open(&f)
                .and_then(|_| self.vol.getattr_open(&f))
                .map_err(errno)?;
        }
        let e = self.entry(parent, &cname, name, &attr, true);
        self.seen.changed(e.attr.ino);
        Ok((e, self.opened(f, flags, 0)))
    }

    /// A read through the handle (which decrypts a sequential reader's
    /// next requests ahead).
    fn read(&self, _: &Ctx, _ino: u64, fh: u64, offset: u64, size: u32, out: &mut dyn ReadOut) -> OpResult<()> {
        let f = self.handles.file(fh).ok_or(Errno::EBADF)?;
        f.read(offset, size as usize, out)
            .map_err(|e| Errno::from_i32(e.errno()))
    }

    fn write(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, data: &[u8], write_flags: u32) -> OpResult<u32> {
        let f = self.handles.file(fh).ok_or(Errno::EBADF)?;
        self.vol_writable().map_err(errno)?;
        self.seen.changed(ino);
        // The kernel sets the flag for a writer without CAP_FSETID.
        if write_flags & WRITE_KILL_SUIDGID != 0 {
            self.kill_privs(ino, &f).map_err(errno)?;
        }
        f.write_at(offset, data).map_err(|e| Errno::from_i32(e.errno()))?;
        Ok(data.len() as u32)
    }

    fn flush(&self, _: &Ctx, _ino: u64, _fh: u64) -> OpResult<()> {
        // Nothing to do at close: with `noflush` the kernel learns that
        // from the first ENOSYS and stops asking.
        if self.caches.noflush {
            Err(Errno::ENOSYS)
        } else {
            Ok(())
        }
    }

    fn release(&self, _: &Ctx, _ino: u64, fh: u64) -> OpResult<()> {
        self.handles.remove(fh);
        Ok(())
    }

    fn fsync(&self, _: &Ctx, _ino: u64, fh: u64, datasync: bool) -> OpResult<()> {
        let f = self.handles.file(fh).ok_or(Errno::EBADF)?;
        f.sync(datasync).map_err(|e| Errno::from_i32(e.errno()))
    }

    fn fallocate(&self, ctx: &Ctx, ino: u64, fh: u64, offset: u64, length: u64, mode: i32) -> OpResult<()> {
        let f = self.handles.file(fh).ok_or(Errno::EBADF)?;
        self.vol_writable().map_err(errno)?;
        self.seen.changed(ino);
        if self.kills_for(ctx) {
            self.kill_privs(ino, &f).map_err(errno)?;
        }
        let end = offset.saturating_add(length);
        match mode {
            // The backing bytes first, so that a full disk fails the call
            // and leaves the size as it was.
            0 | libc::FALLOC_FL_KEEP_SIZE => f.allocate(offset, length).and_then(|()| {
                if mode == 0 && end > f.size() {
                    f.set_len(end)
                } else {
                    Ok(())
                }
            }),
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => f.punch_hole(offset, length),
            _ => return Err(Errno::from_i32(libc::EOPNOTSUPP)),
        }
        .map_err(|e| Errno::from_i32(e.errno()))
    }

    /// SEEK_DATA / SEEK_HOLE from the file's nonce entries. The kernel
    /// sends FUSE_LSEEK without writing its dirty pages back first, so
    /// while a writable handle of the file is open (write(2) or a shared
    /// mapping may have left data in the page cache that the daemon has
    /// not seen, and a size beyond the one it knows) an answer from the
    /// entries could call that data a hole, and a copy by `cp` or `tar`
    /// would lose it: such a call is refused with EOPNOTSUPP (both fall
    /// back to reading the file). A writable handle's last dirty pages
    /// are written back before its RELEASE arrives.
    fn lseek(&self, _: &Ctx, _ino: u64, fh: u64, offset: u64, whence: i32) -> OpResult<u64> {
        let f = self.handles.file(fh).ok_or(Errno::EBADF)?;
        let what = match whence {
            libc::SEEK_DATA => Seek::Data,
            libc::SEEK_HOLE => Seek::Hole,
            _ => return Err(Errno::EINVAL),
        };
        if f.has_writers() {
            return Err(Errno::from_i32(libc::EOPNOTSUPP));
        }
        f.seek(offset, what)
            .map_err(|e| Errno::from_i32(e.errno()))?
            .ok_or(Errno::from_i32(libc::ENXIO))
    }
}
