//! Directories ([`DirOps`]): opendir, readdir, readdirplus, releasedir,
//! fsyncdir.

use super::attr::kind;
use super::{errno, WarpFs};
use crate::handles::Handle;
use crate::nodes::ROOT;
use crate::ops::{Ctx, DirAdd, DirOps, DirPlusAdd, Errno, FileKind, OpResult, Opened};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far a file system's change times may lag the clock (a timer tick
/// at HZ=100, with room to spare).
const TICK: Duration = Duration::from_millis(20);

impl DirOps for WarpFs {
    fn opendir(&self, _: &Ctx, ino: u64, _flags: i32) -> OpResult<Opened> {
        let l = self.loc(ino)?;
        let at = SystemTime::now();
        let dir = self.vol.open_dir(&l.backing).map_err(errno)?;
        let list = self.vol.readdir_in(&dir).map_err(errno)?;
        Ok(Opened {
            fh: self.handles.insert_dir(ino, dir, Arc::new(list), at),
            flags: 0,
        })
    }

    fn readdir(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirAdd<'_>) -> OpResult<()> {
        let list = self.listing(ino, fh, offset)?;
        let mut i = offset as usize;
        while i < list.len() + 2 {
            let full = match i {
                0 => add(ino, 1, FileKind::Directory, OsStr::new(".")),
                1 => add(ROOT, 2, FileKind::Directory, OsStr::new("..")),
                _ => {
                    let e = &list[i - 2];
                    add(self.nodes.node_id(e.dev, e.ino), (i + 1) as u64, kind(e.kind), &e.name)
                }
            };
            if full {
                break;
            }
            i += 1;
        }
        Ok(())
    }

    fn readdirplus(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirPlusAdd<'_>) -> OpResult<()> {
        let list = self.listing(ino, fh, offset)?;
        let dir = self.loc(ino)?;
        let first = (offset as usize).max(2) - 2;
        let names = list.iter().skip(first).map(|e| e.cname.as_str());
        let mut attrs = self.vol.getattrs_in(&dir.backing, names);
        let mut i = offset as usize;
        while i < list.len() + 2 {
            let full = match i {
                0 | 1 => {
                    let (name, node) = if i == 0 { (".", ino) } else { ("..", ROOT) };
                    let attr = self.attr_of(node, None)?;
                    let mut e = self.entry_of(node, &attr, 0);
                    e.entry_ttl = Duration::ZERO;
                    e.attr_ttl = Duration::ZERO;
                    add(&e, (i + 1) as u64, OsStr::new(name))
                }
                _ => {
                    let e = &list[i - 2];
                    // An entry that vanished since opendir is skipped.
                    let Some(Ok(attr)) = attrs.next() else {
                        i += 1;
                        continue;
                    };
                    let node = self.nodes.node_id(attr.dev, attr.ino);
                    // The kernel takes a lookup reference to every entry
                    // that fits; one that does not is given back.
                    let generation = self.nodes.remember(node, ino, &e.cname, &e.name, false);
                    let full = add(&self.entry_of(node, &attr, generation), (i + 1) as u64, &e.name);
                    if full {
                        self.nodes.forget(node, 1);
                    }
                    full
                }
            };
            if full {
                break;
            }
            i += 1;
        }
        Ok(())
    }

    fn releasedir(&self, _: &Ctx, _ino: u64, fh: u64) -> OpResult<()> {
        self.handles.remove(fh);
        Ok(())
    }

    fn fsyncdir(&self, _: &Ctx, ino: u64, _fh: u64, _datasync: bool) -> OpResult<()> {
        let l = self.loc(ino)?;
        self.vol.fsyncdir(&l.backing).map_err(errno)
    }
}

impl WarpFs {
    /// The listing of directory handle `fh` to serve from `offset`. Read
    /// from its start, the directory is listed anew if it may have changed
    /// since its listing was taken (POSIX: what opendir or rewinddir
    /// followed sees names made or removed before it): when this is a
    /// rewind (a second read from the start), or when the backing
    /// directory's change time is not older than the listing by more than
    /// [`TICK`] (file systems stamp changes with a clock that lags by up
    /// to a timer tick). A listing read once from opendir is still new.
    fn listing(&self, ino: u64, fh: u64, offset: u64) -> OpResult<Arc<Vec<warpfs_volume::DirEntry>>> {
        let Some(Handle::Dir(list)) = self.handles.get(fh) else {
            return Err(Errno::EBADF);
        };
        if offset != 0 {
            return Ok(list);
        }
        let (taken, again) = self.handles.read_from_start(fh);
        let l = self.loc(ino)?;
        let changed = |a: &warpfs_volume::Attr| {
            let t = |(s, ns): (i64, u32)| UNIX_EPOCH + Duration::new(s.max(0) as u64, ns);
            t(a.mtime).max(t(a.ctime)) + TICK >= taken
        };
        if !again && self.vol.getattr(&l.backing).is_ok_and(|a| !changed(&a)) {
            return Ok(list);
        }
        let at = SystemTime::now();
        let fresh = Arc::new(self.vol.readdir(&l.backing).map_err(errno)?);
        self.handles.set_listing(fh, fresh.clone(), at);
        Ok(fresh)
    }
}
