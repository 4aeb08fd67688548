//! The `fuser::Filesystem` implementation: each request becomes volume calls.

use super::ahead::{Ahead, Found};
use super::attr::{kind, to_fuse};
use super::ctl;
use super::handles::{Handle, Handles};
use super::nodes::{Location, Nodes, ROOT};
use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use warpfs_volume::{rekey, Attr, Caller, Error, Volume};

/// How long the kernel may cache attributes and entries. Short, so two
/// mounts of one CIPHERDIR see each other's changes soon.
const TTL: Duration = Duration::from_secs(1);

/// The virtual extended attribute of the mount root whose value is the
/// live engine stats as JSON (`warpfs stats` reads it). `trusted.*` is never
/// user data in warpfs (only `user.*` xattrs are stored) and the kernel
/// lets only CAP_SYS_ADMIN read it.
pub const STATS_XATTR: &str = "trusted.warpfs.stats";

/// The virtual extended attribute of the mount root through which `warpfs
/// rekey` drives a rekey of the mounted volume (FORMAT.md 10): setting it
/// to a request (`warpfs_volume::rekey::Request`) starts or finishes one,
/// reading it gives the progress as JSON. Root only, like the stats.
pub const REKEY_XATTR: &str = "trusted.warpfs.rekey";

/// Told of every point of an online rekey (crash tests stop there).
pub type RekeyHook = Arc<dyn Fn(rekey::Event) + Send + Sync>;

/// The mounted file system.
pub struct WarpFs {
    vol: Volume,
    nodes: Nodes,
    handles: Handles,
    /// Decrypt-ahead for sequential readers (speculation on).
    ahead: Option<Ahead>,
    rekey_hook: Option<RekeyHook>,
    /// Ask the kernel for its writeback cache (`--no-writeback-cache`: no).
    writeback_cache: bool,
    /// Serve extended attributes (`--no-xattr`: no).
    xattrs: bool,
    /// xattr requests refused under `--no-xattr` (logged at unmount: the
    /// kernel stops sending each kind after the first ENOSYS).
    xattrs_refused: AtomicU64,
    /// getxattr requests for names other than `user.*` (the kernel's
    /// `security.capability` probe before a write; logged at unmount).
    xattr_probes: AtomicU64,
    /// The kernel took FUSE_HANDLE_KILLPRIV_V2: the daemon clears
    /// set-user-ID and set-group-ID on writes and truncations (see
    /// [`WarpFs::kills_for`]).
    killpriv: bool,
    /// The session's notifier, once mounted: tells the kernel its cached
    /// attributes are stale after the daemon changed a mode on its own.
    notifier: Arc<OnceLock<fuser::Notifier>>,
}

/// The errno for the kernel; a backing fault (disk full, read-only,
/// permission denied, I/O error) also gets a rate-limited log line. A
/// daemon that is not root gets EACCES whenever the mode bits refuse its
/// user (the kernel leaves that check to the backing file system without
/// `allow_other`): an answer, not a fault.
fn errno(e: Error) -> Errno {
    let n = e.errno();
    // SAFETY: geteuid has no preconditions.
    if n != libc::EACCES || unsafe { libc::geteuid() } == 0 {
        warpfs_volume::faultlog::fault("request", "on the backing file system", n);
    }
    Errno::from_i32(n)
}

thread_local! {
    static READ_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn time_spec(t: Option<TimeOrNow>) -> warpfs_volume::TimeSpec {
    match t {
        None => None,
        Some(TimeOrNow::Now) => Some(None),
        Some(TimeOrNow::SpecificTime(st)) => Some(Some(match st.duration_since(UNIX_EPOCH) {
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

impl WarpFs {
    /// A file system over an unlocked volume.
    pub fn new(vol: Volume) -> std::io::Result<Self> {
        let st = std::fs::symlink_metadata(vol.root())?;
        let nodes = Nodes::new(std::os::unix::fs::MetadataExt::ino(&st));
        let ahead = vol.engine().cloned().and_then(Ahead::new);
        Ok(Self {
            vol,
            nodes,
            handles: Handles::default(),
            ahead,
            rekey_hook: None,
            writeback_cache: true,
            xattrs: true,
            xattrs_refused: AtomicU64::new(0),
            xattr_probes: AtomicU64::new(0),
            killpriv: false,
            notifier: Arc::default(),
        })
    }

    /// Where the mount puts the session's notifier once the session exists
    /// (`fuser::Session::notifier`).
    pub fn notifier_slot(&self) -> Arc<OnceLock<fuser::Notifier>> {
        self.notifier.clone()
    }

    /// Use the kernel's writeback cache (the default) or send every write
    /// to the daemon at once, so that a backing fault fails the `write(2)`.
    pub fn with_writeback_cache(mut self, on: bool) -> Self {
        self.writeback_cache = on;
        self
    }

    /// Serve extended attributes (the default), or answer every xattr
    /// request ENOSYS, after which the kernel sends none on this mount:
    /// not even the `security.capability` lookup it makes before every
    /// `write(2)` (ARCHITECTURE.md, "Extended attributes and writes").
    pub fn with_xattrs(mut self, on: bool) -> Self {
        self.xattrs = on;
        self
    }

    /// ENOSYS for an xattr request under `--no-xattr`.
    fn xattrs_off(&self) -> Option<Errno> {
        (!self.xattrs).then(|| {
            self.xattrs_refused.fetch_add(1, Ordering::Relaxed);
            Errno::from_i32(libc::ENOSYS)
        })
    }

    /// Tell `hook` of every point of an online rekey.
    pub fn with_rekey_hook(mut self, hook: Option<RekeyHook>) -> Self {
        self.rekey_hook = hook;
        self
    }

    /// A `warpfs rekey` request written to [`REKEY_XATTR`]; a refused one
    /// is logged and its reason shows in the status.
    fn rekey_request(&self, value: &[u8]) -> Result<(), Errno> {
        let r = rekey::Request::parse(value).and_then(|req| match req {
            rekey::Request::Start { target, jobs, max_rate } => self.vol.rekey_start(
                target,
                rekey::RekeyOptions {
                    jobs,
                    max_rate,
                    on_event: self.rekey_hook.clone(),
                },
            ),
            rekey::Request::Finish => self.vol.rekey_finish(),
        });
        r.map_err(|m| {
            tracing::warn!("rekey request refused: {m}");
            Errno::from_i32(libc::EINVAL)
        })
    }

    /// The value of the mount root's virtual attribute `name` (through a
    /// getxattr or the [`ctl::GET`] ioctl); `None` when `name` is not one.
    fn virtual_get(&self, name: &[u8]) -> Option<Result<Vec<u8>, Errno>> {
        let nodata = || Errno::from_i32(libc::ENODATA);
        if name == STATS_XATTR.as_bytes() {
            return Some(
                self.vol
                    .engine_stats()
                    .map(|s| s.to_json().into_bytes())
                    .ok_or_else(nodata),
            );
        }
        if name == REKEY_XATTR.as_bytes() {
            return Some(self.vol.rekey_status().map(String::into_bytes).ok_or_else(nodata));
        }
        None
    }

    /// Set the mount root's virtual attribute `name` (through a setxattr
    /// or the [`ctl::SET`] ioctl); `None` when `name` is not a writable one.
    fn virtual_set(&self, name: &[u8], value: &[u8]) -> Option<Result<(), Errno>> {
        (name == REKEY_XATTR.as_bytes()).then(|| self.rekey_request(value))
    }

    /// A control ioctl ([`ctl`]) on the mount root.
    fn control(&self, uid: u32, cmd: u32, input: &[u8], out_size: u32) -> Result<Vec<u8>, Errno> {
        let req = ctl::parse(input);
        let proven = || {
            req.as_ref().is_some_and(|r| {
                r.tag
                    .is_some_and(|t| self.vol.control_proof_ok(r.name.as_bytes(), r.value, t))
            })
        };
        if !ctl::allowed(uid, cmd, proven) {
            if cmd == ctl::SET {
                tracing::warn!(
                    "control request of uid {uid} refused: only root, or the mount's user with proof of the password"
                );
            }
            return Err(Errno::from_i32(libc::EPERM));
        }
        let req = req.ok_or(Errno::from_i32(libc::EINVAL))?;
        let unknown = || Errno::from_i32(libc::EINVAL);
        if cmd == ctl::SET {
            return self
                .virtual_set(req.name.as_bytes(), req.value)
                .ok_or_else(unknown)?
                .map(|()| Vec::new());
        }
        let v = self.virtual_get(req.name.as_bytes()).ok_or_else(unknown)??;
        if v.len() > out_size as usize {
            return Err(Errno::from_i32(libc::ERANGE));
        }
        Ok(v)
    }

    fn loc(&self, ino: INodeNo) -> Result<Location, Errno> {
        self.nodes.locate(ino.0).ok_or(Errno::ENOENT)
    }

    fn child_label(parent: &Location, name: &OsStr) -> String {
        let mut s = parent.plain.clone();
        if !s.ends_with('/') {
            s.push('/');
        }
        s.push_str(&name.to_string_lossy());
        s
    }

    /// Reply with the entry `name` (backing `cname`) of `parent`; `fresh`
    /// when the call just made it (see [`Nodes::remember`]).
    fn entry(&self, parent: INodeNo, cname: &str, name: &OsStr, attr: &Attr, fresh: bool, reply: ReplyEntry) {
        let ino = self.nodes.node_id(attr.ino);
        let generation = self.nodes.remember(ino, parent.0, cname, name, fresh);
        reply.entry(&TTL, &to_fuse(ino, attr), Generation(generation));
    }

    fn attr_of(&self, ino: INodeNo, fh: Option<FileHandle>) -> Result<Attr, Errno> {
        if let Some(f) = fh.and_then(|fh| self.handles.file(fh.0)) {
            return self.vol.getattr_open(&f).map_err(errno);
        }
        match self.nodes.locate(ino.0) {
            Some(l) => match self.vol.getattr(&l.backing) {
                // Deleted under an open handle: the open file answers.
                Err(e) if e.errno() == libc::ENOENT => match self.vol.open_file_of(self.nodes.backing_ino(ino.0)) {
                    Some(f) => self.vol.getattr_open(&f).map_err(errno),
                    None => Err(errno(e)),
                },
                r => r.map_err(errno),
            },
            // Unlinked or replaced, but still open through some handle.
            None => match self.vol.open_file_of(self.nodes.backing_ino(ino.0)) {
                Some(f) => self.vol.getattr_open(&f).map_err(errno),
                None => Err(Errno::ENOENT),
            },
        }
    }

    fn caller(req: &Request) -> Caller {
        Caller {
            uid: req.uid(),
            gid: req.gid(),
        }
    }
}

impl Filesystem for WarpFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let writeback = if self.writeback_cache {
            InitFlags::FUSE_WRITEBACK_CACHE
        } else {
            InitFlags::empty()
        };
        let want = writeback
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_ASYNC_DIO
            | InitFlags::FUSE_BIG_WRITES
            | InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_HANDLE_KILLPRIV_V2;
        let have = config.capabilities();
        let _ = config.add_capabilities(want & have);
        // With it the kernel marks the super block SB_NOSEC, remembers per
        // inode that a file has no privileges to drop, and stops asking
        // for `security.capability` before every write(2) (one round trip
        // each); in exchange the daemon drops set-user-ID and
        // set-group-ID itself (ARCHITECTURE.md, "Extended attributes and
        // writes").
        self.killpriv = (want & have).contains(InitFlags::FUSE_HANDLE_KILLPRIV_V2);
        tracing::info!(
            "the kernel offers FUSE_HANDLE_KILLPRIV_V2: {}; set-id bits are dropped by the {}",
            have.contains(InitFlags::FUSE_HANDLE_KILLPRIV_V2),
            if self.killpriv { "daemon" } else { "kernel" }
        );
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(1 << 20);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn destroy(&mut self) {
        self.vol.rekey_stop();
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

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let p = match self.loc(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.vol.lookup(&p.backing, name) {
            Ok((cname, attr)) => self.entry(parent, &cname, name, &attr, false, reply),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.nodes.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr_of(ino, fh) {
            Ok(a) => reply.attr(&TTL, &to_fuse(ino.0, &a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let loc = self.nodes.locate(ino.0);
        // An open file is changed through its fd, never its path: the
        // backing file may have been deleted or replaced under the handle.
        let by_fh = fh.and_then(|fh| self.handles.file(fh.0));
        let open = by_fh
            .clone()
            .or_else(|| self.vol.open_file_of(self.nodes.backing_ino(ino.0)));
        let res = (|| -> Result<(), Error> {
            if loc.is_none() && open.is_none() {
                return Err(Error(libc::ENOENT));
            }
            if let Some(m) = mode {
                match (&open, &loc) {
                    (Some(f), _) => self.vol.chmod_open(f, m)?,
                    (None, Some(l)) => self.vol.chmod(&l.backing, m)?,
                    (None, None) => {}
                }
            }
            if uid.is_some() || gid.is_some() {
                match (&open, &loc) {
                    (Some(f), _) => self.vol.chown_open(f, uid, gid)?,
                    (None, Some(l)) => self.vol.chown(&l.backing, uid, gid)?,
                    (None, None) => {}
                }
            }
            if let Some(s) = size {
                self.vol_writable()?;
                if self.kills_for(req) {
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
            if atime.is_some() || mtime.is_some() {
                match (&open, &loc) {
                    (Some(f), _) => self.vol.utimens_open(f, time_spec(atime), time_spec(mtime))?,
                    (None, Some(l)) => self.vol.utimens(&l.backing, time_spec(atime), time_spec(mtime))?,
                    (None, None) => {}
                }
            }
            Ok(())
        })();
        if let Err(e) = res {
            return reply.error(errno(e));
        }
        match self.attr_of(ino, fh) {
            Ok(a) => reply.attr(&TTL, &to_fuse(ino.0, &a)),
            Err(e) => reply.error(e),
        }
    }

    /// access(2) and chdir: the kernel asks only without
    /// `default_permissions` (see `session::mount_config`).
    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        match self.loc(ino) {
            Ok(l) => match self.vol.access(&l.backing, mask.bits()) {
                Ok(()) => reply.ok(),
                // A refusal is the answer asked for: not logged.
                Err(e) => reply.error(Errno::from_i32(e.errno())),
            },
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.loc(ino) {
            Ok(l) => match self.vol.readlink(&l.backing) {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(errno(e)),
            },
            Err(e) => reply.error(e),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let p = match self.loc(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let mode = (mode & libc::S_IFMT) | (mode & 0o7777 & !umask);
        match self.vol.mknod(&p.backing, name, mode, rdev as u64, Self::caller(req)) {
            Ok((cname, attr)) => self.entry(parent, &cname, name, &attr, true, reply),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let p = match self.loc(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self
            .vol
            .mkdir(&p.backing, name, mode & 0o7777 & !umask, Self::caller(req))
        {
            Ok((cname, attr)) => self.entry(parent, &cname, name, &attr, true, reply),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = match self.loc(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.vol.unlink(&p.backing, name) {
            Ok(cname) => {
                self.nodes.unlinked(parent.0, &cname);
                reply.ok()
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = match self.loc(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.vol.rmdir(&p.backing, name) {
            Ok(cname) => {
                self.nodes.unlinked(parent.0, &cname);
                reply.ok()
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let p = match self.loc(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self
            .vol
            .symlink(&p.backing, link_name, target.as_os_str(), Self::caller(req))
        {
            Ok((cname, attr)) => self.entry(parent, &cname, link_name, &attr, true, reply),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (p, np) = match (self.loc(parent), self.loc(newparent)) {
            (Ok(p), Ok(np)) => (p, np),
            _ => return reply.error(Errno::ENOENT),
        };
        match self.vol.rename(&p.backing, name, &np.backing, newname, flags.bits()) {
            Ok((from, to)) => {
                let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
                self.nodes
                    .renamed((parent.0, &from, name), (newparent.0, &to, newname), exchange);
                reply.ok()
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let (l, np) = match (self.loc(ino), self.loc(newparent)) {
            (Ok(l), Ok(np)) => (l, np),
            _ => return reply.error(Errno::ENOENT),
        };
        match self.vol.link(&l.backing, &np.backing, newname) {
            Ok((cname, attr)) => self.entry(newparent, &cname, newname, &attr, false, reply),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let l = match self.loc(ino) {
            Ok(l) => l,
            Err(e) => return reply.error(e),
        };
        match self.vol.open_file(&l.backing, flags.0, l.plain) {
            Ok(f) if flags.0 & libc::O_TRUNC != 0 && self.kills_for(req) => {
                // The truncation is done by now, and a daemon that is not
                // root had the backing file system drop the bits already:
                // the kernel's cached mode is stale either way.
                let r = self.vol.kill_suidgid_open(&f);
                self.inval_attrs(ino);
                match r {
                    Ok(_) => reply.opened(FileHandle(self.handles.insert(Handle::File(f))), FopenFlags::empty()),
                    Err(e) => reply.error(errno(e)),
                }
            }
            Ok(f) => reply.opened(FileHandle(self.handles.insert(Handle::File(f))), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(f) = self.handles.file(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let mut direct = false;
        if let Some(a) = &self.ahead {
            match a.read(fh.0, &f, offset, size as usize) {
                Found::Ready(r) => {
                    reply.data(r.bytes());
                    return a.recycle(fh.0, r);
                }
                Found::Failed(e) => return reply.error(Errno::from_i32(e)),
                Found::Inline { direct: d } => direct = d,
            }
        }
        READ_BUF.with(|b| {
            let mut buf = b.borrow_mut();
            buf.resize(size as usize, 0);
            let r = if direct {
                f.read_direct_at(offset, &mut buf[..])
            } else {
                f.read_at(offset, &mut buf[..])
            };
            match r {
                Ok(n) => {
                    reply.data(&buf[..n]);
                    if let (true, Some(a)) = (direct, &self.ahead) {
                        a.count_inline(n);
                    }
                }
                Err(e) => reply.error(Errno::from_i32(e.errno())),
            }
        });
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(f) = self.handles.file(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        if let Err(e) = self.vol_writable() {
            return reply.error(errno(e));
        }
        // The kernel sets the flag for a writer without CAP_FSETID.
        if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
            if let Err(e) = self.kill_privs(ino, &f) {
                return reply.error(errno(e));
            }
        }
        match f.write_at(offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(Errno::from_i32(e.errno())),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.handles.remove(fh.0);
        if let Some(a) = &self.ahead {
            a.forget(fh.0);
        }
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        match self.handles.file(fh.0) {
            Some(f) => match f.sync(datasync) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(Errno::from_i32(e.errno())),
            },
            None => reply.error(Errno::EBADF),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let l = match self.loc(ino) {
            Ok(l) => l,
            Err(e) => return reply.error(e),
        };
        match self.vol.readdir(&l.backing) {
            Ok(list) => reply.opened(
                FileHandle(self.handles.insert(Handle::Dir(Arc::new(list)))),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let Some(Handle::Dir(list)) = self.handles.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let mut i = offset as usize;
        while i < list.len() + 2 {
            let full = match i {
                0 => reply.add(ino, 1, fuser::FileType::Directory, "."),
                1 => reply.add(INodeNo(ROOT), 2, fuser::FileType::Directory, ".."),
                _ => {
                    let e = &list[i - 2];
                    reply.add(
                        INodeNo(self.nodes.node_id(e.ino)),
                        (i + 1) as u64,
                        kind(e.kind),
                        &e.name,
                    )
                }
            };
            if full {
                break;
            }
            i += 1;
        }
        reply.ok();
    }

    fn readdirplus(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let Some(Handle::Dir(list)) = self.handles.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let Ok(dir) = self.loc(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let mut i = offset as usize;
        while i < list.len() + 2 {
            let full = match i {
                0 | 1 => {
                    let (name, node) = if i == 0 { (".", ino) } else { ("..", INodeNo(ROOT)) };
                    let attr = match self.attr_of(node, None) {
                        Ok(a) => a,
                        Err(e) => return reply.error(e),
                    };
                    reply.add(
                        node,
                        (i + 1) as u64,
                        name,
                        &Duration::ZERO,
                        &to_fuse(node.0, &attr),
                        Generation(0),
                    )
                }
                _ => {
                    let e = &list[i - 2];
                    // An entry that vanished since opendir is skipped.
                    let Ok(attr) = self.vol.getattr(&dir.backing.join(&e.cname)) else {
                        i += 1;
                        continue;
                    };
                    let node = self.nodes.node_id(attr.ino);
                    // The kernel takes a lookup reference to every entry
                    // that fits; one that does not is given back.
                    let generation = self.nodes.remember(node, ino.0, &e.cname, &e.name, false);
                    let full = reply.add(
                        INodeNo(node),
                        (i + 1) as u64,
                        &e.name,
                        &TTL,
                        &to_fuse(node, &attr),
                        Generation(generation),
                    );
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
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.handles.remove(fh.0);
        if let Some(a) = &self.ahead {
            a.forget(fh.0);
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let res = self.loc(ino).and_then(|l| self.vol.fsyncdir(&l.backing).map_err(errno));
        match res {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.vol.statfs() {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if let Some(e) = self.xattrs_off() {
            return reply.error(e);
        }
        if ino.0 == ROOT {
            if let Some(r) = self.virtual_set(name.as_bytes(), value) {
                return match r {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(e),
                };
            }
        }
        let res = self.loc(ino).and_then(|l| {
            self.vol
                .setxattr(&l.backing, name.as_bytes(), value, flags)
                .map_err(errno)
        });
        match res {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if let Some(e) = self.xattrs_off() {
            return reply.error(e);
        }
        if ino.0 == ROOT {
            if let Some(res) = self.virtual_get(name.as_bytes()) {
                return xattr_reply(res, size, reply);
            }
        }
        // The kernel asks for security.capability before writes: answer
        // without touching the backing file.
        if !name.as_bytes().starts_with(b"user.") {
            self.xattr_probes.fetch_add(1, Ordering::Relaxed);
            return reply.error(Errno::from_i32(libc::ENODATA));
        }
        let res = self
            .loc(ino)
            .and_then(|l| self.vol.getxattr(&l.backing, name.as_bytes()).map_err(errno));
        xattr_reply(res, size, reply)
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if let Some(e) = self.xattrs_off() {
            return reply.error(e);
        }
        let res = self
            .loc(ino)
            .and_then(|l| self.vol.listxattr(&l.backing).map_err(errno));
        xattr_reply(res, size, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Some(e) = self.xattrs_off() {
            return reply.error(e);
        }
        let res = self
            .loc(ino)
            .and_then(|l| self.vol.removexattr(&l.backing, name.as_bytes()).map_err(errno));
        match res {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let p = match self.loc(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let label = Self::child_label(&p, name);
        match self.vol.create(
            &p.backing,
            name,
            mode & 0o7777 & !umask,
            flags,
            Self::caller(req),
            label,
        ) {
            Ok((cname, mut attr, f, existed)) => {
                let ino = self.nodes.node_id(attr.ino);
                // An existing file opened with O_TRUNC (the kernel sends
                // CREATE when it holds no valid entry for the name).
                if existed && flags & libc::O_TRUNC != 0 && self.kills_for(req) {
                    match self.vol.kill_suidgid_open(&f).and_then(|_| self.vol.getattr_open(&f)) {
                        Ok(a) => attr = a,
                        Err(e) => return reply.error(errno(e)),
                    }
                }
                let generation = self.nodes.remember(ino, parent.0, &cname, name, true);
                let fh = self.handles.insert(Handle::File(f));
                reply.created(
                    &TTL,
                    &to_fuse(ino, &attr),
                    Generation(generation),
                    FileHandle(fh),
                    FopenFlags::empty(),
                );
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        if ino.0 != ROOT || (cmd != ctl::GET && cmd != ctl::SET) {
            // Not a terminal, no other ioctls (isatty() asks on every open).
            return reply.error(Errno::from_i32(libc::ENOTTY));
        }
        match self.control(req.uid(), cmd, in_data, out_size) {
            // The value fits in an ioctl (at most ctl::SIZE bytes).
            Ok(v) => reply.ioctl(v.len() as i32, &v),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(f) = self.handles.file(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        if let Err(e) = self.vol_writable() {
            return reply.error(errno(e));
        }
        if self.kills_for(req) {
            if let Err(e) = self.kill_privs(ino, &f) {
                return reply.error(errno(e));
            }
        }
        let end = offset.saturating_add(length);
        let res = match mode {
            0 if end > f.size() => f.set_len(end),
            0 | libc::FALLOC_FL_KEEP_SIZE => Ok(()),
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => f.punch_hole(offset, length),
            _ => return reply.error(Errno::from_i32(libc::EOPNOTSUPP)),
        };
        match res {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(Errno::from_i32(e.errno())),
        }
    }
}

impl WarpFs {
    /// Drop set-user-ID and set-group-ID of `f` (inode `ino`) and, when
    /// that changed its mode, tell the kernel that the attributes it
    /// caches are stale (the write and open replies carry none; without
    /// this `stat` would show the old mode until the attribute timeout).
    fn kill_privs(&self, ino: INodeNo, f: &warpfs_volume::OpenFile) -> Result<(), Error> {
        if self.vol.kill_suidgid_open(f)? {
            self.inval_attrs(ino);
        }
        Ok(())
    }

    /// Invalidate the kernel's cached attributes of `ino` (not its pages).
    fn inval_attrs(&self, ino: INodeNo) {
        if let Some(n) = self.notifier.get() {
            if let Err(e) = n.inval_inode(ino, -1, 0) {
                tracing::debug!("attribute invalidation of inode {}: {e}", ino.0);
            }
        }
    }

    /// Whether a truncation (setattr, open with O_TRUNC) or fallocate by
    /// `req`'s caller drops set-user-ID and set-group-ID here. Under
    /// FUSE_HANDLE_KILLPRIV_V2 the kernel leaves that to the daemon and
    /// says whether the caller lacks CAP_FSETID (FATTR_KILL_SUIDGID,
    /// FUSE_OPEN_KILL_SUIDGID), but fuser 0.18 does not pass those flags
    /// on; a caller other than root stands in for "lacks CAP_FSETID" (a
    /// write carries its own flag, which fuser does pass).
    fn kills_for(&self, req: &Request) -> bool {
        self.killpriv && req.uid() != 0
    }

    fn vol_writable(&self) -> Result<(), Error> {
        if self.vol_read_only() {
            Err(Error(libc::EROFS))
        } else {
            Ok(())
        }
    }

    fn vol_read_only(&self) -> bool {
        self.vol.read_only()
    }
}

fn xattr_reply(res: Result<Vec<u8>, Errno>, size: u32, reply: ReplyXattr) {
    match res {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() <= size as usize => reply.data(&v),
        Ok(_) => reply.error(Errno::from_i32(libc::ERANGE)),
        Err(e) => reply.error(e),
    }
}
