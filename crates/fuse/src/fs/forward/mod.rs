//! The warpfs file system behind the transports: the operations layer
//! ([`crate::ops::Operations`]) over an unlocked volume. One file per group
//! of operations, each implementing its group's trait: the mount, entries
//! and attributes ([`entry`]), names ([`names`]), files ([`file`]),
//! directories ([`dir`]), extended attributes and the control channel
//! ([`xattr`]).

pub(crate) mod attr;
pub mod cache;
mod dir;
mod entry;
mod file;
mod names;
mod xattr;

use crate::handles::Handles;
use crate::nodes::{Location, Nodes};
use crate::ops::{Ctx, Entry, Errno, Notify};
use attr::to_fuse;
use cache::{Caches, Seen};
use std::ffi::OsStr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use warpfs_volume::{rekey, Attr, Caller, Error, Volume};

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

/// The virtual extended attribute of the mount root that names what this
/// daemon's control channel can do, one word each ([`CAP_VOLUME_KEY`],
/// [`CAP_UPGRADE`]); a daemon of an older warpfs has fewer or none.
/// `warpfs` asks before it changes the config.
pub const CAPS_XATTR: &str = "trusted.warpfs.caps";

/// A rekey to a new volume key on the mount (`Request::Volkey`).
pub const CAP_VOLUME_KEY: &str = "volume-key";
/// File summaries given to every file by the mount (`Request::Upgrade`).
pub const CAP_UPGRADE: &str = "upgrade";

/// What [`CAPS_XATTR`] says.
pub const CAPS: &str = "volume-key upgrade";

/// Told of every point of an online rekey (crash tests stop there).
pub type RekeyHook = Arc<dyn Fn(rekey::Event) + Send + Sync>;

/// The mounted file system.
pub struct WarpFs {
    vol: Volume,
    nodes: Nodes,
    handles: Handles,
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
    /// The kernel caches asked for.
    caches: Caches,
    /// Backing files as the kernel's page caches last saw them.
    seen: Seen,
    /// The session's notifier, once mounted: tells the kernel its cached
    /// attributes are stale after the daemon changed a mode on its own.
    notifier: Arc<OnceLock<Box<dyn Notify>>>,
    /// The transport serving the mount ("io_uring" or "/dev/fuse"), for
    /// the stats; set once the session runs.
    transport: OnceLock<(&'static str, String)>,
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

impl WarpFs {
    /// A file system over an unlocked volume.
    pub fn new(vol: Volume) -> std::io::Result<Self> {
        let st = vol.backing().top().stat()?;
        let nodes = Nodes::new(st.st_dev, st.st_ino);
        Ok(Self {
            vol,
            nodes,
            handles: Handles::default(),
            rekey_hook: None,
            writeback_cache: true,
            xattrs: true,
            xattrs_refused: AtomicU64::new(0),
            xattr_probes: AtomicU64::new(0),
            killpriv: false,
            caches: Caches::NONE,
            seen: Seen::default(),
            notifier: Arc::default(),
            transport: OnceLock::new(),
        })
    }

    /// Where the mount puts the session's notifier once the session exists
    /// (`Mounting::notifier`).
    pub fn notifier_slot(&self) -> Arc<OnceLock<Box<dyn Notify>>> {
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
    /// `write(2)` (docs/decisions/0003-fuse-handle-killpriv-v2.md).
    pub fn with_xattrs(mut self, on: bool) -> Self {
        self.xattrs = on;
        self
    }

    /// Tell `hook` of every point of an online rekey.
    pub fn with_rekey_hook(mut self, hook: Option<RekeyHook>) -> Self {
        self.rekey_hook = hook;
        self
    }

    /// The kernel caches to use ([`Caches::NONE`] until told).
    pub fn with_caches(mut self, caches: Caches) -> Self {
        self.caches = caches;
        self
    }

    /// Name the transport and why it serves the mount in the stats (once).
    pub fn set_transport(&self, name: &'static str, why: &str) {
        let _ = self.transport.set((name, why.to_string()));
    }

    fn loc(&self, ino: u64) -> Result<Location, Errno> {
        self.nodes.locate(ino).ok_or(Errno::ENOENT)
    }

    fn child_label(parent: &Location, name: &OsStr) -> String {
        let mut s = parent.plain.clone();
        if !s.ends_with('/') {
            s.push('/');
        }
        s.push_str(&name.to_string_lossy());
        s
    }

    /// The entry `name` (backing `cname`) of `parent`; `fresh` when the
    /// call just made it (see [`Nodes::remember`]).
    fn entry(&self, parent: u64, cname: &str, name: &OsStr, attr: &Attr, fresh: bool) -> Entry {
        let ino = self.nodes.node_id(attr.dev, attr.ino);
        let generation = self.nodes.remember(ino, parent, cname, name, fresh);
        self.entry_of(ino, attr, generation)
    }

    fn entry_of(&self, ino: u64, attr: &Attr, generation: u64) -> Entry {
        Entry {
            attr: to_fuse(ino, attr),
            generation,
            entry_ttl: self.caches.entry_ttl(),
            attr_ttl: self.caches.entry_ttl(),
        }
    }

    fn caller(ctx: &Ctx) -> Caller {
        Caller {
            uid: ctx.uid,
            gid: ctx.gid,
        }
    }

    /// Drop set-user-ID and set-group-ID of `f` (inode `ino`) and, when
    /// that changed its mode, tell the kernel that the attributes it
    /// caches are stale (the write and open replies carry none; without
    /// this `stat` would show the old mode until the attribute timeout).
    fn kill_privs(&self, ino: u64, f: &warpfs_volume::OpenFile) -> Result<(), Error> {
        if self.vol.kill_suidgid_open(f)? {
            self.inval_attrs(ino);
        }
        Ok(())
    }

    /// Invalidate the kernel's cached attributes of `ino` (not its pages).
    fn inval_attrs(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            if let Err(e) = n.inval_inode(ino, -1, 0) {
                tracing::debug!("attribute invalidation of inode {ino}: {e}");
            }
        }
    }

    /// Whether a truncation (setattr, open with O_TRUNC) or fallocate by
    /// `ctx`'s caller drops set-user-ID and set-group-ID here. Under
    /// FUSE_HANDLE_KILLPRIV_V2 the kernel leaves that to the daemon and
    /// says whether the caller lacks CAP_FSETID (FATTR_KILL_SUIDGID,
    /// FUSE_OPEN_KILL_SUIDGID), but fuser 0.18 does not pass those flags
    /// on; a caller other than root stands in for "lacks CAP_FSETID" (a
    /// write carries its own flag, which every transport passes).
    fn kills_for(&self, ctx: &Ctx) -> bool {
        self.killpriv && ctx.uid != 0
    }

    fn vol_writable(&self) -> Result<(), Error> {
        if self.vol.read_only() {
            Err(Error(libc::EROFS))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
