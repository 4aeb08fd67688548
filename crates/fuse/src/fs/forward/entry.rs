//! The mount and its entries ([`MountOps`], [`EntryOps`]): INIT
//! negotiation, the request gate, statfs, the session's end; lookup,
//! forget, getattr, setattr, access, readlink.

use super::attr::to_fuse;
use super::{errno, WarpFs};
use crate::nodes::ROOT;
use crate::ops::{op, AttrOut, Ctx, Entry, EntryOps, Errno, Init, MountOps, OpResult, SetAttr, SetTime, Statfs};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::Ordering;
use std::sync::RwLockReadGuard;
use std::time::UNIX_EPOCH;
use warpfs_volume::{Attr, Error};

fn time_spec(t: Option<SetTime>) -> warpfs_volume::TimeSpec {
    match t {
        None => None,
        Some(SetTime::Now) => Some(None),
        Some(SetTime::At(st)) => Some(Some(match st.duration_since(UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos() as i64),
            Err(e) => {
                let d = e.duration();
                let (mut s, mut ns) = (-(d.as_secs() as i64), -(d.subsec_nanos() as i64));
                if ns < 0 {
                    s -= 1;
                    ns += 1_000_000_000;
                }
                (s, ns)
            }
        })),
    }
}

/// A request for one of the mount root's virtual attributes.
fn is_control(ino: u64, name: &OsStr) -> bool {
    ino == ROOT && name.as_bytes().starts_with(b"trusted.warpfs.")
}

impl MountOps for WarpFs {
    fn init(&mut self, init: &mut Init) -> std::io::Result<()> {
        let writeback = if self.writeback_cache {
            Init::FUSE_WRITEBACK_CACHE
        } else {
            0
        };
        // No FUSE_ASYNC_DIO: with it the kernel completes an asynchronous
        // direct write (io_submit, io_uring) that does not extend the file
        // without dropping the pages cached over its range after the
        // write, so pages read in while it was in flight (by another
        // reader, or by faulting in its own source buffer) keep the old
        // bytes. Without it such a write is sent synchronously and the
        // page cache is invalidated after it (docs/decisions/0087).
        let want = writeback
            | Init::FUSE_PARALLEL_DIROPS
            | Init::FUSE_BIG_WRITES
            | Init::FUSE_ATOMIC_O_TRUNC
            | Init::FUSE_DO_READDIRPLUS
            | Init::FUSE_READDIRPLUS_AUTO
            | Init::FUSE_HANDLE_KILLPRIV_V2
            | if self.caches.symlinks {
                Init::FUSE_CACHE_SYMLINKS
            } else {
                0
            };
        let got = init.want(want);
        // With it the kernel marks the super block SB_NOSEC, remembers per
        // inode that a file has no privileges to drop, and stops asking
        // for `security.capability` before every write(2) (one round trip
        // each); in exchange the daemon drops set-user-ID and
        // set-group-ID itself (docs/decisions/
        // 0003-fuse-handle-killpriv-v2.md).
        self.killpriv = got & Init::FUSE_HANDLE_KILLPRIV_V2 != 0;
        tracing::info!(
            "the kernel offers FUSE_HANDLE_KILLPRIV_V2: {}; set-id bits are dropped by the {}",
            init.offers(Init::FUSE_HANDLE_KILLPRIV_V2),
            if self.killpriv { "daemon" } else { "kernel" }
        );
        init.max_write = Some(1 << 20);
        init.max_readahead = Some(1 << 20);
        init.max_background = Some(64);
        Ok(())
    }

    fn destroy(&self) {
        self.vol.rekey_stop();
        self.vol.finish_commits();
        self.vol.flush_versions_seen();
        if let Some(s) = self.vol.engine_stats() {
            tracing::info!("at unmount: {}", s.summary());
        }
        if !self.xattrs {
            let n = self.xattrs_refused.load(Ordering::Relaxed);
            tracing::info!("at unmount: {n} xattr request(s) refused (--no-xattr)");
        } else {
            let n = self.xattr_probes.load(Ordering::Relaxed);
            tracing::info!("at unmount: {n} getxattr request(s) for names outside user.*");
        }
    }

    fn transport_started(&self, transport: &'static str, why: &str) {
        self.set_transport(transport, why)
    }

    /// Every request holds the volume's request gate while it runs
    /// (`Volume::serving`), but for those that touch no entry: FLUSH, and
    /// the mount root's control requests, which the name part of a rekey
    /// to a new volume key runs in while it holds every other off.
    fn serving(&self, op: u32, ino: u64, name: Option<&OsStr>) -> Option<RwLockReadGuard<'_, ()>> {
        let untouched = match op {
            op::FLUSH | op::FORGET | op::BATCH_FORGET => true,
            op::GETXATTR | op::SETXATTR => name.is_some_and(|n| is_control(ino, n)),
            op::IOCTL => ino == ROOT,
            _ => false,
        };
        (!untouched).then(|| self.vol.serving())
    }

    fn statfs(&self, _: &Ctx, _ino: u64) -> OpResult<Statfs> {
        self.vol.statfs().map(Statfs::from).map_err(errno)
    }
}

impl WarpFs {
    /// The open file of node `ino`, if a handle has its backing inode open.
    fn open_file_of(&self, ino: u64) -> Option<warpfs_volume::OpenFile> {
        let (dev, backing_ino) = self.nodes.backing(ino)?;
        self.vol.open_file_of(dev, backing_ino)
    }

    pub(super) fn attr_of(&self, ino: u64, fh: Option<u64>) -> OpResult<Attr> {
        if let Some(f) = fh.and_then(|fh| self.handles.file(fh)) {
            return self.vol.getattr_open(&f).map_err(errno);
        }
        match self.nodes.locate(ino) {
            Some(l) => match self.vol.getattr(&l.backing) {
                // Deleted under an open handle: the open file answers.
                Err(e) if e.errno() == libc::ENOENT => self.attr_of_open(ino).unwrap_or(Err(errno(e))),
                r => r.map_err(errno),
            },
            // Unlinked or replaced, but still open through some handle.
            None => self.attr_of_open(ino).unwrap_or(Err(Errno::ENOENT)),
        }
    }

    /// Attributes of node `ino` from a handle that holds it open, a file's
    /// or a directory's (the kernel asks for a directory by node only);
    /// `None` when no handle does.
    fn attr_of_open(&self, ino: u64) -> Option<OpResult<Attr>> {
        if let Some(f) = self.open_file_of(ino) {
            return Some(self.vol.getattr_open(&f).map_err(errno));
        }
        let d = self.handles.dir_of(ino)?;
        Some(self.vol.getattr_dir(&d).map_err(errno))
    }
}

impl EntryOps for WarpFs {
    fn lookup(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<Entry> {
        let p = self.loc(parent)?;
        match self.vol.lookup(&p.backing, name) {
            Ok((cname, attr)) => Ok(self.entry(parent, &cname, name, &attr, false)),
            Err(e) if e.errno() == libc::ENOENT && !self.caches.negative_ttl().is_zero() => {
                Ok(Entry::negative(self.caches.negative_ttl()))
            }
            Err(e) => Err(errno(e)),
        }
    }

    fn forget(&self, ino: u64, nlookup: u64) {
        self.nodes.forget(ino, nlookup)
    }

    fn getattr(&self, _: &Ctx, ino: u64, fh: Option<u64>) -> OpResult<AttrOut> {
        let a = self.attr_of(ino, fh)?;
        Ok(AttrOut {
            attr: to_fuse(ino, &a),
            ttl: self.caches.entry_ttl(),
        })
    }

    fn setattr(&self, ctx: &Ctx, ino: u64, set: &SetAttr) -> OpResult<AttrOut> {
        let loc = self.nodes.locate(ino);
        // An open file is changed through its fd, never its path: the
        // backing file may have been deleted or replaced under the handle.
        let by_fh = set.fh.and_then(|fh| self.handles.file(fh));
        let open = by_fh.clone().or_else(|| self.open_file_of(ino));
        let res = (|| -> Result<(), Error> {
            if loc.is_none() && open.is_none() {
                return Err(Error(libc::ENOENT));
            }
            if let Some(m) = set.mode {
                match (&open, &loc) {
                    (Some(f), _) => self.vol.chmod_open(f, m)?,
                    (None, Some(l)) => self.vol.chmod(&l.backing, m)?,
                    (None, None) => {}
                }
            }
            if set.uid.is_some() || set.gid.is_some() {
                match (&open, &loc) {
                    (Some(f), _) => self.vol.chown_open(f, set.uid, set.gid)?,
                    (None, Some(l)) => self.vol.chown(&l.backing, set.uid, set.gid)?,
                    (None, None) => {}
                }
            }
            if let Some(s) = set.size {
                self.vol_writable()?;
                self.seen.changed(ino);
                if self.kills_for(ctx) {
                    match (&open, &loc) {
                        (Some(f), _) => self.vol.kill_suidgid_open(f)?,
                        (None, Some(l)) => self.vol.kill_suidgid(&l.backing)?,
                        (None, None) => false,
                    };
                }
                // Through the caller's handle, else by path (opened for
                // writing), else through any open file of a deleted inode.
                match (&by_fh, &loc, &open) {
                    (Some(f), _, _) | (None, None, Some(f)) => f.set_len(s)?,
                    (None, Some(l), _) => self.vol.truncate(&l.backing, s, l.plain.clone())?,
                    (None, None, None) => {}
                }
            }
            if set.atime.is_some() || set.mtime.is_some() {
                let (a, m) = (time_spec(set.atime), time_spec(set.mtime));
                match (&open, &loc) {
                    (Some(f), _) => self.vol.utimens_open(f, a, m)?,
                    (None, Some(l)) => self.vol.utimens(&l.backing, a, m)?,
                    (None, None) => {}
                }
            }
            Ok(())
        })();
        res.map_err(errno)?;
        self.getattr(ctx, ino, set.fh)
    }

    /// access(2) and chdir: the kernel asks only without
    /// `default_permissions` (see `session::mount_config`).
    fn access(&self, _: &Ctx, ino: u64, mask: i32) -> OpResult<()> {
        let l = self.loc(ino)?;
        // A refusal is the answer asked for: not logged.
        self.vol
            .access(&l.backing, mask)
            .map_err(|e| Errno::from_i32(e.errno()))
    }

    fn readlink(&self, _: &Ctx, ino: u64) -> OpResult<Vec<u8>> {
        let l = self.loc(ino)?;
        self.vol.readlink(&l.backing).map_err(errno)
    }
}
