//! The per-directory cache behind lookups: a backing directory's IVs and
//! the shown names a lookup cannot compute, kept while the directory's
//! stamp stays the same.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};
use warpfs_backing::Dir;
use warpfs_crypto::names::{BackingName, DIRIV_LEN};

/// What changes when a directory's entries change (mtime, ctime, links, size).
pub(crate) type Stamp = (i64, i64, i64, i64, libc::nlink_t, i64);

pub(super) fn stamp_of(st: &libc::stat) -> Stamp {
    (
        st.st_mtime,
        st.st_mtime_nsec,
        st.st_ctime,
        st.st_ctime_nsec,
        st.st_nlink,
        st.st_size,
    )
}

/// The IVs of one backing directory and the shown names a lookup cannot
/// compute, as of `stamp`.
#[derive(Debug, Clone)]
pub(crate) struct DirState {
    pub(super) stamp: Stamp,
    /// `warpfs.diriv`.
    pub primary: [u8; DIRIV_LEN],
    /// Copies of it a sync tool made: (the tool's marker, IV).
    pub alts: Vec<(String, [u8; DIRIV_LEN])>,
    /// Shown name → backing name and the long-name sidecar it owns, for
    /// conflict copies, names of another IV, undecryptable names.
    pub(super) marked: Vec<(OsString, String, Option<BackingName>)>,
}

impl DirState {
    pub(super) fn ivs(&self) -> impl Iterator<Item = &[u8; DIRIV_LEN]> {
        std::iter::once(&self.primary).chain(self.alts.iter().map(|(_, iv)| iv))
    }
}

/// Cache of [`DirState`] keyed by the backing directory's (dev, ino),
/// refreshed when the directory's [`Stamp`] changes under us.
#[derive(Default)]
pub(crate) struct DirCache {
    map: Mutex<HashMap<(u64, u64), Arc<DirState>>>,
}

impl DirCache {
    /// The map, locked.
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, u64), Arc<DirState>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep `s` for the directory `key`.
    pub(super) fn put(&self, key: (u64, u64), s: Arc<DirState>) {
        let mut m = self.lock();
        if m.len() > 100_000 {
            m.clear();
        }
        m.insert(key, s);
    }

    /// Forget every directory (the names moved to a new volume key).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// Forget a directory (after rmdir: its inode number may be reused).
    pub(crate) fn forget(&self, dev: u64, ino: u64) {
        self.lock().remove(&(dev, ino));
    }

    /// This process changed the directory (an entry made, removed or
    /// renamed) since it saw `before`: if the cache was current then, it
    /// is current now (our own changes add no copies or IVs), so the next
    /// lookup does not list the directory again.
    pub(crate) fn touched(&self, dir: &Dir, before: Stamp) {
        let Ok(st) = dir.stat() else { return };
        let key = (st.st_dev, st.st_ino);
        let mut m = self.lock();
        if let Some(s) = m.get_mut(&key) {
            if s.stamp == before {
                Arc::make_mut(s).stamp = stamp_of(&st);
            }
        }
    }
}
