//! Open file and directory handles (the `fh` the kernel passes back).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;
use warpfs_backing::Dir;
use warpfs_volume::{DirEntry, OpenFile, Writer};

/// What a handle refers to.
#[derive(Clone)]
pub enum Handle {
    /// An open regular file.
    File(OpenFile),
    /// An open directory: its listing, taken at opendir and again when
    /// read from the start ([`Handles::read_from_start`]).
    Dir(Arc<Vec<DirEntry>>),
}

/// fh → handle.
#[derive(Default)]
pub struct Handles {
    next: AtomicU64,
    map: RwLock<HashMap<u64, Handle>>,
    /// Directory handles: when their listing was taken, and whether it
    /// was read from its start since.
    listings: Mutex<HashMap<u64, (SystemTime, bool)>>,
    /// Directory handles: their node and the backing directory held open
    /// (its attributes answer after it was removed or renamed over).
    dirs: Mutex<HashMap<u64, (u64, Dir)>>,
    /// File handles opened for writing: each counted on its file until
    /// released (the kernel may hold data of such a file not yet written).
    writers: Mutex<HashMap<u64, Writer>>,
}

impl Handles {
    /// Store a handle; returns its fh.
    pub fn insert(&self, h: Handle) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.map.write().unwrap_or_else(|e| e.into_inner()).insert(fh, h);
        fh
    }

    /// Store a handle of open file `f`, opened for writing or not;
    /// returns its fh.
    pub fn insert_file(&self, f: OpenFile, writable: bool) -> u64 {
        let w = writable.then(|| f.writer());
        let fh = self.insert(Handle::File(f));
        if let Some(w) = w {
            self.writers.lock().unwrap_or_else(|e| e.into_inner()).insert(fh, w);
        }
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

    /// Every backing name changed (a rekey to a new volume key): each open
    /// directory's listing keeps its entries and their order (the
    /// kernel's offsets into it), with each backing name made again by
    /// `name(directory node, plaintext name)` where it can be.
    pub fn relink(&self, mut name: impl FnMut(u64, &std::ffi::OsStr) -> Option<String>) {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        for (fh, h) in map.iter_mut() {
            let (Handle::Dir(list), Some((node, _))) = (&*h, dirs.get(fh)) else {
                continue;
            };
            let new: Vec<DirEntry> = list
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    if let Some(c) = name(*node, &e.name) {
                        e.cname = c;
                    }
                    e
                })
                .collect();
            *h = Handle::Dir(Arc::new(new));
        }
    }

    /// Drop `fh`.
    pub fn remove(&self, fh: u64) -> Option<Handle> {
        self.listings.lock().unwrap_or_else(|e| e.into_inner()).remove(&fh);
        self.dirs.lock().unwrap_or_else(|e| e.into_inner()).remove(&fh);
        self.writers.lock().unwrap_or_else(|e| e.into_inner()).remove(&fh);
        self.map.write().unwrap_or_else(|e| e.into_inner()).remove(&fh)
    }

    /// Insert a handle of directory node `ino`, held open as `dir`, with
    /// listing `list` taken at `at`; returns its fh.
    pub fn insert_dir(&self, ino: u64, dir: Dir, list: Arc<Vec<DirEntry>>, at: SystemTime) -> u64 {
        let fh = self.insert(Handle::Dir(list));
        self.listings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(fh, (at, false));
        self.dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(fh, (ino, dir));
        fh
    }

    /// The backing directory of an open handle of directory node `ino`.
    pub fn dir_of(&self, ino: u64) -> Option<Dir> {
        self.dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|(i, _)| *i == ino)
            .map(|(_, d)| d.share())
    }

    /// A read of directory handle `fh` from its start: when its listing
    /// was taken, and whether it was read from its start before (then
    /// this is rewinddir(3) or a seek back to 0).
    pub fn read_from_start(&self, fh: u64) -> (SystemTime, bool) {
        let mut l = self.listings.lock().unwrap_or_else(|e| e.into_inner());
        let e = l.entry(fh).or_insert((SystemTime::UNIX_EPOCH, true));
        let before = e.1;
        e.1 = true;
        (e.0, before)
    }

    /// Replace the listing of directory handle `fh` (if it is still open),
    /// taken at `at`.
    pub fn set_listing(&self, fh: u64, list: Arc<Vec<DirEntry>>, at: SystemTime) {
        if let Some(h @ Handle::Dir(_)) = self.map.write().unwrap_or_else(|e| e.into_inner()).get_mut(&fh) {
            *h = Handle::Dir(list);
            self.listings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(fh, (at, true));
        }
    }
}
