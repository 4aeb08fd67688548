//! Reverse mode (FORMAT.md 14): a read-only, encrypted view of a plaintext
//! tree, byte for byte the CIPHERDIR a forward volume with the same master
//! key would hold for it, made on demand and deterministic, so that a copy
//! of the view (`rsync -a`, `cp -a`) mounts with the ordinary forward
//! mount and a second copy transfers only what changed.
//!
//! - names: AES-SIV under a directory IV derived from the directory's
//!   plaintext path; long names as `warpfs.long.*` with generated sidecars;
//! - every directory shows a `warpfs.diriv`, the root also `warpfs.conf`
//!   (the reverse config, kept hidden in PLAINDIR or given with `--config`);
//! - regular files: `gcm` cipher files whose file ID derives from the path
//!   and whose nonces are synthetic ([`content`]);
//! - symlink targets sealed under a nonce derived from path and target,
//!   bound to their entry (directory IV and backing name) when the config
//!   has `bound-seals` (every new reverse config; a format 1 config keeps
//!   its unbound seals, so its view keeps its bytes); FIFOs, sockets and
//!   devices shown as entries of the same type.
//!
//! Nothing here talks to the kernel: the FUSE side (`warpfs_fuse::fs::reverse`)
//! asks for entries, attributes and bytes.

pub mod content;
mod entries;
pub mod exclude;
mod handle;
mod keys;
mod sums;
mod tree;

use crate::attr::{Attr, Kind};
use crate::attr_ops::StatFs;
use crate::error::{Error, Result};
pub use content::ViewFile;
pub use entries::ViewEntry;
pub use exclude::Excludes;
pub use handle::ViewHandle;
use keys::Keys;
use std::path::PathBuf;
use std::sync::Arc;
use tree::Tree;
use warpfs_config::{Config, FeatureFlag};
use warpfs_content::layout;
use warpfs_content::Mode;
use warpfs_crypto::seal::SYMLINK_AD;
use warpfs_crypto::MasterKey;
use warpfs_engine::{Engine, StatsSnapshot};

/// Name of the reverse config inside PLAINDIR; entries of the root whose
/// name starts with it (the config, its temp files) are never shown.
pub const HIDDEN_CONFIG: &str = warpfs_config::REVERSE_CONFIG_FILE;
/// Longest symlink target the view can show (the kernel's readlink limit).
const MAX_LINK: usize = 4095;
/// Tag of a bound symlink target's associated data (FORMAT.md 5.1).
const SYMLINK_AD_BOUND: &[u8] = b"warpfs symlink v2";

/// An object of the view.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    /// The plaintext entry at this path (empty: the root).
    Entry(Vec<u8>),
    /// The `warpfs.diriv` of the directory at this path.
    DirIv(Vec<u8>),
    /// `warpfs.conf` in the root.
    Conf,
    /// The long-name sidecar of the entry at this path.
    Sidecar(Vec<u8>),
}

/// How the view is made.
#[derive(Debug, Clone, Default)]
pub struct ReverseOptions {
    /// What to leave out.
    pub excludes: Excludes,
    /// Show directories on other file systems as empty (`--one-file-system`).
    pub one_file_system: bool,
}

/// The bytes and attributes of `warpfs.conf` in the view.
#[derive(Debug, Clone)]
pub struct ConfigShown {
    /// The config file's bytes.
    pub bytes: Vec<u8>,
    /// Its owner, group and times (the view's own files take its times).
    pub stat: libc::stat,
}

/// A reverse view of PLAINDIR.
pub struct ReverseView {
    tree: Tree,
    keys: Arc<Keys>,
    /// Symlink targets bound to their entry (`bound-seals`).
    bound_seals: bool,
    opts: ReverseOptions,
    config: ConfigShown,
    root_dev: u64,
    root_ino: u64,
    names: entries::NameCache,
    /// Runs the handles' encrypt-ahead ([`ReverseView::use_engine`]).
    engine: Option<Arc<Engine>>,
}

impl ReverseView {
    /// A view of `plaindir` under `master`, the key `cfg` unlocked (its
    /// key size and flags decide the view's bytes; `config` is how the
    /// view shows it).
    pub fn new(
        plaindir: PathBuf,
        master: &MasterKey,
        cfg: &Config,
        config: ConfigShown,
        opts: ReverseOptions,
    ) -> Result<Self> {
        let tree = Tree::new(&plaindir)?;
        let st = tree.lstat(b"")?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(Error(libc::ENOTDIR));
        }
        Ok(Self {
            tree,
            keys: Arc::new(Keys::derive(
                master,
                cfg.key_bits(),
                cfg.has_feature(FeatureFlag::FileSummary),
            )),
            bound_seals: cfg.has_feature(FeatureFlag::BoundSeals),
            opts,
            config,
            root_dev: st.st_dev,
            root_ino: st.st_ino,
            names: entries::NameCache::default(),
            engine: None,
        })
    }

    /// Read and encrypt a sequential reader's next requests ahead on
    /// `engine`'s decrypt-ahead threads (files opened from now on; none
    /// without such threads). Call it before any file is opened (at mount).
    pub fn use_engine(&mut self, engine: Arc<Engine>) {
        self.engine = Some(engine);
    }

    /// The engine's counters, when an engine is attached.
    pub fn engine_stats(&self) -> Option<StatsSnapshot> {
        self.engine.as_ref().map(|e| e.stats())
    }

    /// PLAINDIR.
    pub fn plaindir(&self) -> &std::path::Path {
        self.tree.root()
    }

    /// The node number of `node` with plaintext stat `st` (for entries):
    /// stable across mounts. The root is 1; an entry on PLAINDIR's file
    /// system that is not a multiply linked regular file has its plaintext
    /// inode number (the root's number stands in for a plaintext 1);
    /// anything else a keyed 63-bit hash of its kind and path, top bit set.
    pub fn node_id(&self, node: &Node, st: Option<&libc::stat>) -> u64 {
        match (node, st) {
            (Node::Entry(rel), _) if rel.is_empty() => 1,
            (Node::Entry(rel), Some(st)) => {
                let linked = st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_nlink > 1;
                if st.st_dev == self.root_dev && !linked && st.st_ino >> 63 == 0 {
                    if st.st_ino == 1 {
                        self.root_ino
                    } else {
                        st.st_ino
                    }
                } else {
                    self.keys.rev.inode(b"entry", rel)
                }
            }
            (Node::Entry(rel), None) => self.keys.rev.inode(b"entry", rel),
            (Node::DirIv(rel), _) => self.keys.rev.inode(b"diriv", rel),
            (Node::Conf, _) => self.keys.rev.inode(b"conf", b""),
            (Node::Sidecar(rel), _) => self.keys.rev.inode(b"sidecar", rel),
        }
    }

    /// Attributes of `node` as the view shows them.
    pub fn attr(&self, node: &Node) -> Result<Attr> {
        match node {
            Node::Entry(rel) => {
                let st = self.tree.lstat(rel)?;
                self.entry_attr(rel, &st)
            }
            Node::DirIv(_) | Node::Conf | Node::Sidecar(_) => {
                let size = self.virtual_bytes(node)?.len() as u64;
                let c = &self.config.stat;
                let t = (c.st_mtime, c.st_mtime_nsec as u32);
                Ok(Attr {
                    ino: self.node_id(node, None),
                    dev: 0,
                    size,
                    blocks: size.div_ceil(512),
                    atime: t,
                    mtime: t,
                    ctime: t,
                    kind: Kind::File,
                    perm: if *node == Node::Conf { 0o400 } else { 0o444 },
                    nlink: 1,
                    uid: c.st_uid,
                    gid: c.st_gid,
                    rdev: 0,
                })
            }
        }
    }

    /// Attributes of the plaintext entry `rel` with stat `st`.
    pub(crate) fn entry_attr(&self, rel: &[u8], st: &libc::stat) -> Result<Attr> {
        let mut a = Attr::from_stat(st).ok_or(Error::EIO)?;
        a.ino = self.node_id(&Node::Entry(rel.to_vec()), Some(st));
        match a.kind {
            Kind::File => {
                a.size = layout::backing_len(Mode::Gcm, st.st_size as u64);
                a.blocks = a.size.div_ceil(512);
                a.nlink = 1;
            }
            Kind::Symlink => {
                a.size = self.sealed_target(rel)?.len() as u64;
            }
            Kind::Dir => {}
            _ => a.size = 0,
        }
        Ok(a)
    }

    /// The view's target of the symlink `rel`: the plaintext target sealed
    /// as FORMAT.md 5.1 with a nonce derived from path and target.
    pub fn sealed_target(&self, rel: &[u8]) -> Result<Vec<u8>> {
        let target = self.tree.readlink(rel)?;
        let n = self.keys.rev.symlink_nonce(rel, &target);
        let b64 = self.keys.seal.seal_b64_with_nonce(&self.symlink_ad(rel)?, &n, &target);
        if b64.len() > MAX_LINK {
            return Err(Error::ENAMETOOLONG);
        }
        Ok(b64.into_bytes())
    }

    /// The associated data of the symlink `rel`'s target: format 1's fixed
    /// one, or with `bound-seals` the one naming its directory's IV and its
    /// backing name (`"warpfs symlink v2" ‖ L(diriv) ‖ L(backing name)`,
    /// `L(x) = u32le(len x) ‖ x`; FORMAT.md 5.1), as a forward mount of a
    /// copy of the view opens it.
    fn symlink_ad(&self, rel: &[u8]) -> Result<Vec<u8>> {
        if !self.bound_seals {
            return Ok(SYMLINK_AD.to_vec());
        }
        let (dir, name) = tree::split(rel);
        let iv = self.keys.rev.dir_iv(dir);
        let backing = self.keys.names.backing_name(&iv, name).map_err(|_| Error::EIO)?;
        let mut ad = SYMLINK_AD_BOUND.to_vec();
        for part in [&iv[..], backing.file().as_bytes()] {
            ad.extend_from_slice(&(part.len() as u32).to_le_bytes());
            ad.extend_from_slice(part);
        }
        Ok(ad)
    }

    /// The bytes of a view-made file (`warpfs.diriv`, `warpfs.conf`, a
    /// sidecar).
    pub fn virtual_bytes(&self, node: &Node) -> Result<Vec<u8>> {
        match node {
            Node::DirIv(rel) => Ok(self.keys.rev.dir_iv(rel).to_vec()),
            Node::Conf => Ok(self.config.bytes.clone()),
            Node::Sidecar(rel) => {
                let (dir, name) = tree::split(rel);
                match self.keys.names.backing_name(&self.keys.rev.dir_iv(dir), name) {
                    Ok(warpfs_crypto::BackingName::Long { encoded, .. }) => Ok(encoded.into_bytes()),
                    _ => Err(Error(libc::ENOENT)),
                }
            }
            Node::Entry(_) => Err(Error(libc::EISDIR)),
        }
    }

    /// Open the regular file `rel`: a handle of its own.
    pub fn open(&self, rel: &[u8]) -> Result<ViewHandle> {
        let (f, st) = self.tree.open_file(rel)?;
        let id = self.keys.rev.file_id(rel);
        let label = String::from_utf8_lossy(rel).into_owned();
        let file = ViewFile::new(f, st.st_size as u64, id, self.keys.clone(), label);
        Ok(ViewHandle::new(file, self.engine.as_ref()))
    }

    /// statfs of the file system holding PLAINDIR.
    pub fn statfs(&self) -> Result<StatFs> {
        let s = self.tree.statvfs()?;
        Ok(StatFs {
            blocks: s.f_blocks,
            bfree: s.f_bfree,
            bavail: s.f_bavail,
            files: s.f_files,
            ffree: s.f_ffree,
            bsize: s.f_bsize as u32,
            namelen: warpfs_crypto::MAX_NAME as u32,
            frsize: s.f_frsize as u32,
        })
    }
}

#[cfg(test)]
mod tests;
