//! Directories of a reverse view: the listing (the directory IV, the root's
//! config, one encrypted name per visible plaintext entry, and a sidecar
//! beside each long name) and the lookup of a view name back to its
//! plaintext entry. Long names are hashes, so finding their entry means
//! encrypting the directory's long plaintext names: cached per directory
//! until its mtime changes.

use super::tree::join;
use super::{Node, ReverseView, HIDDEN_CONFIG};
use crate::attr::{Attr, Kind};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;
use warpfs_crypto::names::{is_long_file, is_reserved, is_sidecar, long_sidecar, BackingName, SIDECAR_SUFFIX};
use warpfs_crypto::DIRIV_FILE;

/// Name of the config in the view's root.
pub const CONF_NAME: &str = warpfs_config::CONFIG_FILE;
/// Shortest plaintext name whose encrypted name is a long name.
const LONG_FROM: usize = 176;
/// Directories whose long names are kept.
const CACHE_DIRS: usize = 1024;

/// One entry of a view directory.
#[derive(Debug, Clone)]
pub struct ViewEntry {
    /// The name in the view.
    pub name: String,
    /// What it is.
    pub node: Node,
    /// Its kind.
    pub kind: Kind,
    /// Its node number.
    pub ino: u64,
    /// Its attributes when listed.
    pub attr: Attr,
}

/// Long names of recently seen directories: path → (mtime key, long file
/// name → plaintext name).
type LongNames = HashMap<String, Vec<u8>>;

/// A directory's identity and mtime: its long names stay valid while equal.
type DirKey = (i64, i64, u64);

/// One directory's long names, valid while its key is.
type Cached = (DirKey, std::sync::Arc<LongNames>);

#[derive(Default)]
pub(crate) struct NameCache {
    dirs: Mutex<HashMap<Vec<u8>, Cached>>,
}

fn key(st: &libc::stat) -> DirKey {
    (st.st_mtime, st.st_mtime_nsec, st.st_ino)
}

fn enoent<T>() -> Result<T> {
    Err(Error(libc::ENOENT))
}

impl ReverseView {
    /// Whether the plaintext entry `rel` (in a directory on the file system
    /// `dev_ok` says is served) is shown.
    fn visible(&self, rel: &[u8], st: &libc::stat) -> bool {
        let (dir, name) = super::tree::split(rel);
        if dir.is_empty() && name.starts_with(HIDDEN_CONFIG.as_bytes()) {
            return false;
        }
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        if self.opts.excludes.excluded(rel, is_dir) {
            return false;
        }
        if self.opts.one_file_system && st.st_dev != self.root_dev && !is_dir {
            return false;
        }
        Kind::from_mode(st.st_mode).is_some()
    }

    /// Whether the directory `rel` (stat `st`) shows its entries: not a
    /// directory of another file system under `--one-file-system`.
    fn served(&self, st: &libc::stat) -> bool {
        !(self.opts.one_file_system && st.st_dev != self.root_dev)
    }

    /// A symlink whose sealed target does not fit in the view is left out
    /// (logged).
    fn link_fits(&self, rel: &[u8]) -> bool {
        match self.sealed_target(rel) {
            Err(Error(libc::ENAMETOOLONG)) => {
                tracing::warn!(
                    "reverse view: symlink {} left out: its encrypted target would be longer than 4095 bytes",
                    String::from_utf8_lossy(rel)
                );
                false
            }
            _ => true,
        }
    }

    /// The listing of directory `rel`, sorted by view name.
    pub fn list(&self, rel: &[u8]) -> Result<Vec<ViewEntry>> {
        let dst = self.tree.lstat(rel)?;
        if dst.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(Error(libc::ENOTDIR));
        }
        let virt = |node: Node, name: &str| -> Result<ViewEntry> {
            Ok(ViewEntry {
                name: name.to_owned(),
                ino: self.node_id(&node, None),
                attr: self.attr(&node)?,
                node,
                kind: Kind::File,
            })
        };
        let mut out = vec![virt(Node::DirIv(rel.to_vec()), DIRIV_FILE)?];
        if rel.is_empty() {
            out.push(virt(Node::Conf, CONF_NAME)?);
        }
        if !self.served(&dst) {
            return Ok(out);
        }
        let iv = self.keys.rev.dir_iv(rel);
        let mut longs = LongNames::new();
        for (name, st) in self.tree.list_stat(rel)? {
            let child = join(rel, name.as_bytes());
            if !self.visible(&child, &st) {
                continue;
            }
            let kind = Kind::from_mode(st.st_mode).ok_or(Error::EIO)?;
            if kind == Kind::Symlink && !self.link_fits(&child) {
                continue;
            }
            let Ok(bn) = self.keys.names.backing_name(&iv, name.as_bytes()) else {
                continue;
            };
            // An entry that went away meanwhile is left out.
            let Ok(attr) = self.entry_attr(&child, &st) else {
                continue;
            };
            let ino = attr.ino;
            match bn {
                BackingName::Short(s) => out.push(ViewEntry {
                    name: s,
                    node: Node::Entry(child),
                    kind,
                    ino,
                    attr,
                }),
                BackingName::Long { file, .. } => {
                    longs.insert(file.clone(), name.as_bytes().to_vec());
                    out.push(virt(Node::Sidecar(child.clone()), &long_sidecar(&file))?);
                    out.push(ViewEntry {
                        name: file,
                        node: Node::Entry(child),
                        kind,
                        ino,
                        attr,
                    });
                }
            }
        }
        self.remember_longs(rel, &dst, longs);
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn remember_longs(&self, rel: &[u8], dst: &libc::stat, longs: LongNames) -> std::sync::Arc<LongNames> {
        let longs = std::sync::Arc::new(longs);
        let mut c = self.names.dirs.lock().unwrap_or_else(|e| e.into_inner());
        if c.len() >= CACHE_DIRS {
            c.clear();
        }
        c.insert(rel.to_vec(), (key(dst), longs.clone()));
        longs
    }

    /// The plaintext name of the long-name entry `file` in directory `rel`.
    fn long_name(&self, rel: &[u8], dst: &libc::stat, file: &str) -> Result<Vec<u8>> {
        let cached = {
            let c = self.names.dirs.lock().unwrap_or_else(|e| e.into_inner());
            c.get(rel).filter(|(k, _)| *k == key(dst)).map(|(_, m)| m.clone())
        };
        let map = match cached {
            Some(m) => m,
            None => {
                let iv = self.keys.rev.dir_iv(rel);
                let mut longs = LongNames::new();
                for (name, _, _) in self.tree.list(rel)? {
                    if name.len() < LONG_FROM {
                        continue;
                    }
                    if let Ok(BackingName::Long { file, .. }) = self.keys.names.backing_name(&iv, name.as_bytes()) {
                        longs.insert(file, name.as_bytes().to_vec());
                    }
                }
                self.remember_longs(rel, dst, longs)
            }
        };
        map.get(file).cloned().ok_or(Error(libc::ENOENT))
    }

    /// The entry named `name` in the view directory `rel`, and its
    /// attributes.
    pub fn lookup(&self, rel: &[u8], name: &[u8]) -> Result<(Node, Attr)> {
        let Ok(name) = std::str::from_utf8(name) else {
            return enoent();
        };
        let virt = |node: Node| -> Result<(Node, Attr)> {
            let a = self.attr(&node)?;
            Ok((node, a))
        };
        // The parent's stat is needed for the view's own files, long names
        // and --one-file-system only.
        let parent = || -> Result<libc::stat> {
            let dst = self.tree.lstat(rel)?;
            if dst.st_mode & libc::S_IFMT != libc::S_IFDIR {
                return Err(Error(libc::ENOTDIR));
            }
            Ok(dst)
        };
        if name == DIRIV_FILE {
            parent()?;
            return virt(Node::DirIv(rel.to_vec()));
        }
        if rel.is_empty() && name == CONF_NAME {
            return virt(Node::Conf);
        }
        if self.opts.one_file_system && !self.served(&parent()?) {
            return enoent();
        }
        let (plain, sidecar) = if is_sidecar(name) {
            let file = &name[..name.len() - SIDECAR_SUFFIX.len()];
            (self.long_name(rel, &parent()?, file)?, true)
        } else if is_long_file(name) {
            (self.long_name(rel, &parent()?, name)?, false)
        } else if is_reserved(name) || name.len() > warpfs_crypto::MAX_NAME {
            return enoent();
        } else {
            let iv = self.keys.rev.dir_iv(rel);
            let Ok(plain) = self.keys.names.decrypt_name(&iv, name) else {
                return enoent();
            };
            // Only the canonical view name of an entry finds it.
            match self.keys.names.backing_name(&iv, &plain) {
                Ok(BackingName::Short(s)) if s == name => {}
                _ => return enoent(),
            }
            (plain, false)
        };
        let child = join(rel, &plain);
        let st = self.tree.lstat(&child)?;
        if !self.visible(&child, &st) {
            return enoent();
        }
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK && !self.link_fits(&child) {
            return enoent();
        }
        if sidecar {
            return virt(Node::Sidecar(child));
        }
        let a = self.entry_attr(&child, &st)?;
        Ok((Node::Entry(child), a))
    }
}
