//! Open cipher files: one `CipherFile` per backing inode, shared by every
//! handle open on it (`crate::OpenFile`), so all handles see one size and
//! one block lock.

use crate::error::Result;
use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, Mutex, Weak};
use warpfs_content::{CipherFile, Keyring};

/// What SEEK_DATA / SEEK_HOLE look for ([`CipherFile::seek`]), and a
/// writable handle counted on an open file ([`CipherFile::writer`]).
pub use warpfs_content::file::{Seek, Writer};

/// A shared open file and whether its backing fd is writable.
type Slot = (Weak<CipherFile>, bool);

/// Backing (dev, ino) → the shared open file.
#[derive(Default)]
pub(crate) struct FileTable {
    map: Mutex<HashMap<(u64, u64), Slot>>,
    /// The map's size at which its next pass drops closed files.
    prune_at: Mutex<usize>,
}

impl FileTable {
    /// The open file for the inode of `file`: the existing one if any handle
    /// has it open (then `file` is closed), else a new one around `file`.
    /// `writable` says whether `file` was opened read-write; when only
    /// read-only handles had the inode open, a writer gets a new writable
    /// file sharing their state (size, header, locks), so all see one file.
    pub(crate) fn open(
        &self,
        file: File,
        writable: bool,
        keys: &Arc<Keyring>,
        label: String,
    ) -> Result<Arc<CipherFile>> {
        self.open_labelled(file, writable, keys, label, true)
    }

    /// [`FileTable::open`] that keeps the plaintext label of a file some
    /// handle has open (for the rekey, which knows only the backing path).
    pub(crate) fn open_keep_label(&self, file: File, keys: &Arc<Keyring>, label: String) -> Result<Arc<CipherFile>> {
        self.open_labelled(file, true, keys, label, false)
    }

    fn open_labelled(
        &self,
        file: File,
        writable: bool,
        keys: &Arc<Keyring>,
        label: String,
        relabel: bool,
    ) -> Result<Arc<CipherFile>> {
        let st = warpfs_backing::fstat(&file)?;
        let key = (st.st_dev, st.st_ino);
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((w, was_writable)) = map.get(&key) {
            let cached = w.upgrade().filter(|f| {
                // No handle has it open and nothing else holds it (a rekey
                // or an upgrade moving it) but a committer waiting to
                // commit it (and this lookup): if it changed behind the
                // mount's back since its close, it is opened anew and the
                // commit dropped, which would seal a stale summary over it.
                let idle = f.parked() && Arc::strong_count(f) <= 2;
                let stale = idle && !f.is_current(st.st_size as u64);
                if stale {
                    f.drop_pending_commit();
                } else {
                    f.set_parked(false);
                }
                !stale
            });
            if let Some(f) = cached {
                if relabel {
                    f.set_label(label);
                }
                if *was_writable || !writable {
                    return Ok(f);
                }
                let g = Arc::new(f.share(file)?);
                map.insert(key, (Arc::downgrade(&g), true));
                return Ok(g);
            }
        }
        let f = match CipherFile::open(file, keys.clone(), label.clone()) {
            Ok(f) => Arc::new(f),
            Err(e) => {
                // A bad header or length: name the file in the log.
                if let warpfs_content::ContentError::Corrupt { what } = &e {
                    tracing::error!("{label}: {what}");
                }
                return Err(e.into());
            }
        };
        // Drop the entries of files no longer open once the map has
        // doubled since the last pass (files a committer still holds stay:
        // a pass on every open would make creating many files quadratic).
        let mut prune = self.prune_at.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= (*prune).max(1024) {
            map.retain(|_, (w, _)| w.strong_count() > 0);
            *prune = map.len() * 2;
        }
        drop(prune);
        map.insert(key, (Arc::downgrade(&f), writable));
        Ok(f)
    }

    /// Every file some handle has open.
    pub(crate) fn all(&self) -> Vec<Arc<CipherFile>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values().filter_map(|(w, _)| w.upgrade()).collect()
    }

    /// The open file of an inode, if some handle has it open.
    pub(crate) fn get(&self, dev: u64, ino: u64) -> Option<Arc<CipherFile>> {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(dev, ino))
            .and_then(|(w, _)| w.upgrade())
    }
}
