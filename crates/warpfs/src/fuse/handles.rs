//! Open file and directory handles (the `fh` the kernel passes back).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use warpfs_volume::{DirEntry, OpenFile};

/// What a handle refers to.
#[derive(Clone)]
pub enum Handle {
    /// An open regular file.
    File(OpenFile),
    /// An open directory: its listing, taken at opendir.
    Dir(Arc<Vec<DirEntry>>),
}

/// fh → handle.
#[derive(Default)]
pub struct Handles {
    next: AtomicU64,
    map: RwLock<HashMap<u64, Handle>>,
}

impl Handles {
    /// Store a handle; returns its fh.
    pub fn insert(&self, h: Handle) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.map.write().unwrap_or_else(|e| e.into_inner()).insert(fh, h);
        fh
    }

    /// The handle `fh`.
    pub fn get(&self, fh: u64) -> Option<Handle> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).get(&fh).cloned()
    }

    /// The open file of `fh`, if it is one.
    pub fn file(&self, fh: u64) -> Option<OpenFile> {
        match self.map.read().unwrap_or_else(|e| e.into_inner()).get(&fh) {
            Some(Handle::File(f)) => Some(f.clone()),
            _ => None,
        }
    }

    /// Drop `fh`.
    pub fn remove(&self, fh: u64) -> Option<Handle> {
        self.map.write().unwrap_or_else(|e| e.into_inner()).remove(&fh)
    }
}
