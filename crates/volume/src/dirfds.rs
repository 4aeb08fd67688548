//! Backing directories kept open for a short while (docs/decisions/
//! 0070-backing-directory-descriptors.md), so that an operation on an entry
//! reuses its directory's descriptor instead of walking the backing path
//! beneath CIPHERDIR again. Keyed by the directory's backing path relative to CIPHERDIR;
//! a descriptor is used for at most [`DirFds::ttl`] after it was opened, and
//! dropped at once when the volume itself moves or removes the directory or
//! one above it. A directory moved in CIPHERDIR behind the mount's back is
//! thus followed for at most the TTL (the kernel's own entry cache keeps old
//! names longer); `--shared-storage` mounts keep none.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use warpfs_backing::Dir;

/// How long a directory's descriptor stands for its path when caching is on.
pub const DEFAULT_TTL: Duration = Duration::from_secs(1);

/// At most this many directories are kept open (each costs a descriptor
/// out of the daemon's limit, which open files share).
const MAX_OPEN: usize = 64;

/// Open backing directories by relative path.
#[derive(Default)]
pub(crate) struct DirFds {
    /// Zero: nothing is kept (every call opens the path as before).
    ttl: Duration,
    map: Mutex<HashMap<PathBuf, (Dir, Instant)>>,
}

impl DirFds {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (Dir, Instant)>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep descriptors for `ttl` (zero: keep none, and forget those kept).
    pub(crate) fn set_ttl(&mut self, ttl: Duration) {
        self.ttl = ttl;
        self.lock().clear();
    }

    /// The directory at relative path `rel`: the one kept if it is younger
    /// than the TTL, else opened now by `open` (and kept).
    pub(crate) fn get(&self, rel: &Path, open: impl Fn() -> Result<Dir>) -> Result<Dir> {
        if self.ttl.is_zero() {
            return open();
        }
        let now = Instant::now();
        if let Some((d, at)) = self.lock().get(rel) {
            if now.duration_since(*at) < self.ttl {
                return Ok(d.share());
            }
        }
        let d = match open() {
            Ok(d) => d,
            // Out of descriptors: give back those kept, and try once more
            // without keeping this one.
            Err(Error(libc::EMFILE | libc::ENFILE)) => {
                self.lock().clear();
                return open();
            }
            Err(e) => return Err(e),
        };
        let mut m = self.lock();
        if m.len() >= MAX_OPEN {
            m.retain(|_, (_, at)| now.duration_since(*at) < self.ttl);
            if m.len() >= MAX_OPEN {
                m.clear();
            }
        }
        m.insert(rel.to_path_buf(), (d.share(), now));
        Ok(d)
    }

    /// Close every directory kept (the backing names all changed).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// The directory at `rel` (and every one below it) was moved or
    /// removed: its descriptors no longer stand for these paths.
    pub(crate) fn forget_under(&self, rel: &Path) {
        if self.ttl.is_zero() {
            return;
        }
        let mut m = self.lock();
        if rel.as_os_str().is_empty() {
            m.clear();
        } else {
            m.retain(|k, _| !k.starts_with(rel));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use warpfs_backing::Root;

    fn cache(ttl: Duration) -> DirFds {
        let mut c = DirFds::default();
        c.set_ttl(ttl);
        c
    }

    #[test]
    fn a_kept_directory_follows_its_inode_until_forgotten() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a/b")).unwrap();
        let root = Root::open(t.path()).unwrap();
        let c = cache(Duration::from_secs(3600));
        let abs = |r: &str| t.path().join(r);
        let open = |r: &'static str| {
            let root = root.clone();
            move || root.dir(Path::new(r))
        };
        let d = c.get(Path::new("a/b"), open("a/b")).unwrap();
        let ino = d.stat().unwrap().st_ino;
        // Moved behind the cache's back: the kept descriptor still names the
        // old directory (what forget_under is for).
        std::fs::rename(abs("a"), abs("x")).unwrap();
        std::fs::create_dir_all(abs("a/b")).unwrap();
        assert_eq!(
            c.get(Path::new("a/b"), open("a/b")).unwrap().stat().unwrap().st_ino,
            ino
        );
        // Forgetting a directory above drops it; a sibling path stays.
        c.get(Path::new("ab"), open("x")).unwrap();
        c.forget_under(Path::new("a"));
        let now = c.get(Path::new("a/b"), open("a/b")).unwrap();
        assert_ne!(now.stat().unwrap().st_ino, ino);
        assert_eq!(c.lock().len(), 2, "a/b again, and ab (not under a)");
        // Entries are reached relative to the descriptor.
        std::fs::write(abs("a/b/f"), b"x").unwrap();
        assert!(warpfs_backing::lstat(&now.entry(OsStr::new("f"))).is_ok());
    }

    #[test]
    fn an_expired_directory_is_opened_again() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("a")).unwrap();
        let root = Root::open(t.path()).unwrap();
        let c = cache(Duration::from_nanos(1));
        let open = || root.dir(Path::new("a"));
        let ino = c.get(Path::new("a"), open).unwrap().stat().unwrap().st_ino;
        std::fs::rename(t.path().join("a"), t.path().join("old")).unwrap();
        std::fs::create_dir(t.path().join("a")).unwrap();
        std::thread::yield_now();
        assert_ne!(c.get(Path::new("a"), open).unwrap().stat().unwrap().st_ino, ino);
    }

    #[test]
    fn without_a_ttl_nothing_is_kept() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::open(t.path()).unwrap();
        let c = cache(Duration::ZERO);
        c.get(Path::new(""), || root.dir(Path::new(""))).unwrap();
        assert!(c.lock().is_empty());
    }

    #[test]
    fn a_symlink_is_not_opened_as_a_directory() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", t.path().join("link")).unwrap();
        let root = Root::open(t.path()).unwrap();
        let c = cache(Duration::from_secs(60));
        let e = c.get(Path::new("link"), || root.dir(Path::new("link"))).unwrap_err();
        assert_eq!(e, crate::error::Error(libc::ELOOP));
    }
}
