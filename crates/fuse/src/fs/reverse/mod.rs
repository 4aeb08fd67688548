//! The FUSE side of a reverse view (`warpfs mount --reverse`): the
//! operations layer ([`crate::ops::Operations`]) over a
//! [`warpfs_volume::reverse::ReverseView`], read-only. The node table maps
//! node numbers (the view's stable inode numbers) to view objects; open
//! files (each a [`ViewHandle`], which encrypts a sequential reader's next
//! requests ahead) and directory listings live in handles. The root answers
//! [`STATS_XATTR`] with the engine's counters when the view has an engine.

use crate::fs::forward::attr::{kind as fuse_kind, to_fuse};
use crate::fs::forward::STATS_XATTR;
use crate::ops::{
    AttrOut, Ctx, DirAdd, DirOps, DirPlusAdd, Entry, EntryOps, Errno, FileKind, FileOps, Init, MountOps, NameOps,
    OpResult, Opened, ReadOut, SetAttr, Statfs, XattrOps,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use warpfs_engine::Engine;
use warpfs_volume::reverse::{Node, ReverseView, ViewEntry, ViewHandle};
use warpfs_volume::{Attr, Error};

/// How long the kernel keeps a name → node binding and attributes:
/// short, since the plaintext tree changes behind the view (a change of
/// size or mtime shows within a second, as on gocryptfs -reverse).
const TTL: Duration = Duration::from_secs(1);
const ATTR_TTL: Duration = TTL;

/// What a handle holds.
enum Handle {
    File(Arc<ViewHandle>),
    Bytes(Arc<Vec<u8>>),
    Dir(Arc<Vec<ViewEntry>>),
}

/// A known node and the kernel's lookup count of it.
struct Known {
    node: Node,
    lookups: u64,
}

/// The mounted reverse view.
pub struct ReverseFs {
    view: ReverseView,
    nodes: Mutex<HashMap<u64, Known>>,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
}

fn errno(e: Error) -> Errno {
    Errno::from_i32(e.errno())
}

impl ReverseFs {
    /// Serve `view`.
    pub fn new(view: ReverseView) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            1,
            Known {
                node: Node::Entry(Vec::new()),
                lookups: 1,
            },
        );
        Self {
            view,
            nodes: Mutex::new(nodes),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    /// Encrypt a sequential reader's next requests ahead on `engine`'s
    /// decrypt-ahead threads; its counters answer [`STATS_XATTR`] on the
    /// root.
    pub fn with_engine(mut self, engine: Arc<Engine>) -> Self {
        self.view.use_engine(engine);
        self
    }

    fn node(&self, ino: u64) -> OpResult<Node> {
        let n = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        n.get(&ino).map(|k| k.node.clone()).ok_or(Errno::ENOENT)
    }

    /// The kernel now holds one more lookup of `ino`, which is `node`.
    fn remember(&self, ino: u64, node: Node) {
        let mut n = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let k = n.entry(ino).or_insert(Known {
            node: node.clone(),
            lookups: 0,
        });
        // A plaintext entry renamed meanwhile keeps its number: the
        // newest path is where it is now.
        k.node = node;
        k.lookups += 1;
    }

    fn dir_rel(&self, ino: u64) -> OpResult<Vec<u8>> {
        match self.node(ino)? {
            Node::Entry(rel) => Ok(rel),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn put(&self, h: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).insert(fh, h);
        fh
    }

    fn entry(attr: &Attr) -> Entry {
        Entry {
            attr: to_fuse(attr.ino, attr),
            generation: 0,
            entry_ttl: TTL,
            attr_ttl: ATTR_TTL,
        }
    }
}

/// An errno for a caller that asked to change the read-only view.
fn rofs<T>() -> OpResult<T> {
    Err(Errno::from_i32(libc::EROFS))
}

impl MountOps for ReverseFs {
    fn init(&mut self, init: &mut Init) -> std::io::Result<()> {
        init.want(
            Init::FUSE_PARALLEL_DIROPS | Init::FUSE_ASYNC_DIO | Init::FUSE_DO_READDIRPLUS | Init::FUSE_READDIRPLUS_AUTO,
        );
        // The ring transport's buffers are sized for 1 MiB requests.
        init.max_write = Some(1 << 20);
        init.max_readahead = Some(1 << 20);
        init.max_background = Some(64);
        Ok(())
    }

    fn statfs(&self, _: &Ctx, _ino: u64) -> OpResult<Statfs> {
        self.view.statfs().map(Statfs::from).map_err(errno)
    }
}

impl EntryOps for ReverseFs {
    fn lookup(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<Entry> {
        let rel = self.dir_rel(parent)?;
        let (node, attr) = self.view.lookup(&rel, name.as_bytes()).map_err(errno)?;
        self.remember(attr.ino, node);
        Ok(Self::entry(&attr))
    }

    fn forget(&self, ino: u64, nlookup: u64) {
        if ino == 1 {
            return;
        }
        let mut n = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = n.get_mut(&ino) {
            k.lookups = k.lookups.saturating_sub(nlookup);
            if k.lookups == 0 {
                n.remove(&ino);
            }
        }
    }

    fn getattr(&self, _: &Ctx, ino: u64, _fh: Option<u64>) -> OpResult<AttrOut> {
        let node = self.node(ino)?;
        let mut attr = self.view.attr(&node).map_err(errno)?;
        // The node keeps the number the kernel knows it by.
        attr.ino = ino;
        Ok(AttrOut {
            attr: to_fuse(ino, &attr),
            ttl: ATTR_TTL,
        })
    }

    fn setattr(&self, _: &Ctx, _ino: u64, _set: &SetAttr) -> OpResult<AttrOut> {
        rofs()
    }

    fn readlink(&self, _: &Ctx, ino: u64) -> OpResult<Vec<u8>> {
        match self.node(ino)? {
            Node::Entry(rel) => self.view.sealed_target(&rel).map_err(errno),
            _ => Err(Errno::EINVAL),
        }
    }

    fn access(&self, _: &Ctx, ino: u64, mask: i32) -> OpResult<()> {
        if mask & libc::W_OK != 0 {
            return rofs();
        }
        self.node(ino).map(|_| ())
    }
}

impl NameOps for ReverseFs {}

impl FileOps for ReverseFs {
    fn open(&self, _: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return rofs();
        }
        let h = match self.node(ino)? {
            Node::Entry(rel) => Handle::File(Arc::new(self.view.open(&rel).map_err(errno)?)),
            n => Handle::Bytes(Arc::new(self.view.virtual_bytes(&n).map_err(errno)?)),
        };
        Ok(Opened {
            fh: self.put(h),
            flags: 0,
        })
    }

    fn read(&self, _: &Ctx, _ino: u64, fh: u64, offset: u64, size: u32, out: &mut dyn ReadOut) -> OpResult<()> {
        let h = {
            let hs = self.handles.lock().unwrap_or_else(|e| e.into_inner());
            match hs.get(&fh) {
                Some(Handle::File(f)) => Handle::File(f.clone()),
                Some(Handle::Bytes(b)) => Handle::Bytes(b.clone()),
                _ => return Err(Errno::EBADF),
            }
        };
        match h {
            Handle::File(f) => f.read(offset, size as usize, out).map_err(errno)?,
            Handle::Bytes(b) => {
                let start = (offset as usize).min(b.len());
                let end = start.saturating_add(size as usize).min(b.len());
                out.bytes(&b[start..end]);
            }
            Handle::Dir(_) => return Err(Errno::EBADF),
        }
        Ok(())
    }

    fn release(&self, _: &Ctx, _ino: u64, fh: u64) -> OpResult<()> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).remove(&fh);
        Ok(())
    }
}

impl DirOps for ReverseFs {
    fn opendir(&self, _: &Ctx, ino: u64, _flags: i32) -> OpResult<Opened> {
        let rel = self.dir_rel(ino)?;
        let list = self.view.list(&rel).map_err(errno)?;
        Ok(Opened {
            fh: self.put(Handle::Dir(Arc::new(list))),
            flags: 0,
        })
    }

    fn readdir(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirAdd<'_>) -> OpResult<()> {
        let list = match self.handles.lock().unwrap_or_else(|e| e.into_inner()).get(&fh) {
            Some(Handle::Dir(l)) => l.clone(),
            _ => return Err(Errno::EBADF),
        };
        let mut i = offset as usize;
        while i < list.len() + 2 {
            let full = match i {
                0 => add(ino, 1, FileKind::Directory, OsStr::new(".")),
                1 => add(1, 2, FileKind::Directory, OsStr::new("..")),
                _ => {
                    let e = &list[i - 2];
                    add(e.ino, (i + 1) as u64, fuse_kind(e.kind), OsStr::new(&e.name))
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
        let list = match self.handles.lock().unwrap_or_else(|e| e.into_inner()).get(&fh) {
            Some(Handle::Dir(l)) => l.clone(),
            _ => return Err(Errno::EBADF),
        };
        let mut i = offset as usize;
        while i < list.len() + 2 {
            let full = if i < 2 {
                // "." and "..": attributes the kernel does not keep.
                let node = if i == 0 { ino } else { 1 };
                let mut e = Self::entry(&self.view.attr(&self.node(node)?).map_err(errno)?);
                e.attr.ino = node;
                e.entry_ttl = Duration::ZERO;
                e.attr_ttl = Duration::ZERO;
                add(&e, (i + 1) as u64, OsStr::new(if i == 0 { "." } else { ".." }))
            } else {
                let e = &list[i - 2];
                // The kernel takes a lookup reference to every entry that
                // fits; one that does not is given back.
                self.remember(e.ino, e.node.clone());
                let full = add(&Self::entry(&e.attr), (i + 1) as u64, OsStr::new(&e.name));
                if full {
                    self.forget(e.ino, 1);
                }
                full
            };
            if full {
                break;
            }
            i += 1;
        }
        Ok(())
    }

    fn releasedir(&self, _: &Ctx, _ino: u64, fh: u64) -> OpResult<()> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).remove(&fh);
        Ok(())
    }
}

impl XattrOps for ReverseFs {
    fn getxattr(&self, _: &Ctx, ino: u64, name: &OsStr, size: u32) -> OpResult<crate::ops::Xattr> {
        // The engine stats, as on a forward mount (root only: `trusted.*`).
        match self.view.engine_stats() {
            Some(s) if ino == 1 && name.as_bytes() == STATS_XATTR.as_bytes() => {
                crate::ops::Xattr::fit(s.to_json().into_bytes(), size)
            }
            _ => Err(Errno::from_i32(libc::ENODATA)),
        }
    }

    fn listxattr(&self, _: &Ctx, _ino: u64, size: u32) -> OpResult<crate::ops::Xattr> {
        crate::ops::Xattr::fit(Vec::new(), size)
    }
}
