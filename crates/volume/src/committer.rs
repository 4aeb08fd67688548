//! A mount's committer: the file summary a file's last writable handle
//! leaves uncommitted at close (FORMAT.md 12.3) is committed here, off the
//! closing request's path and for many files under one pair of syncs of the
//! backing file system, where an inline commit costs each file two
//! `fdatasync`s of its own (docs/decisions/0101-commits-after-close-in-batches.md).

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use warpfs_content::CipherFile;

/// How long a closed file waits for others to share its syncs: the
/// kernel's writeback interval (and ext4's journal commit interval).
const GATHER: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Queue {
    files: Vec<Arc<CipherFile>>,
    /// A batch is being committed (taken from `files`).
    busy: bool,
    started: bool,
    stop: bool,
}

/// Commits closed files' summaries in batches, on a thread of its own.
#[derive(Default)]
pub struct Committer {
    q: Mutex<Queue>,
    cv: Condvar,
}

impl Committer {
    /// A committer; its thread starts with the first file given to it.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Commit `f`'s summary soon, if it needs a commit. `false` when the
    /// committer is stopped (the caller's drop then commits it inline).
    pub fn defer(self: &Arc<Self>, f: &Arc<CipherFile>) -> bool {
        if f.commit_pending().is_none() {
            return true;
        }
        let mut q = self.queue();
        if q.stop {
            return false;
        }
        if !q.files.iter().any(|g| Arc::ptr_eq(g, f)) {
            q.files.push(f.clone());
        }
        if !q.started {
            q.started = true;
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("warpfs-commit".into())
                .spawn(move || me.run());
            if spawned.is_err() {
                // No thread: commit here.
                q.started = false;
                let files = std::mem::take(&mut q.files);
                drop(q);
                commit_batch(&files);
                return true;
            }
        }
        self.cv.notify_all();
        true
    }

    fn run(self: Arc<Self>) {
        loop {
            let mut q = self.queue();
            while q.files.is_empty() && !q.stop {
                q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            if q.files.is_empty() && q.stop {
                return;
            }
            // Let more closes join this batch (their notifications do
            // not end the wait; an unmount does).
            let until = std::time::Instant::now() + GATHER;
            while !q.stop {
                let now = std::time::Instant::now();
                if now >= until {
                    break;
                }
                q = self
                    .cv
                    .wait_timeout(q, until - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            let files = std::mem::take(&mut q.files);
            q.busy = true;
            drop(q);
            commit_batch(&files);
            drop(files);
            self.queue().busy = false;
            self.cv.notify_all();
        }
    }

    /// Commit everything given so far and wait for it (unmount), and from
    /// now on refuse new files (their drops commit inline).
    pub fn finish(&self) {
        let mut q = self.queue();
        q.stop = true;
        self.cv.notify_all();
        if !q.started {
            let files = std::mem::take(&mut q.files);
            drop(q);
            commit_batch(&files);
            return;
        }
        while !q.files.is_empty() || q.busy {
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Sync the file systems the files of `files` live on, once each.
fn sync_filesystems(files: &[&Arc<CipherFile>]) -> bool {
    let mut by_dev: HashMap<u64, &Arc<CipherFile>> = HashMap::new();
    for f in files {
        if let Ok(st) = warpfs_backing::fstat(f.backing()) {
            by_dev.entry(st.st_dev).or_insert(f);
        }
    }
    let mut ok = true;
    for f in by_dev.values() {
        // SAFETY: syncfs on a descriptor the file holds open.
        if unsafe { libc::syncfs(f.backing().as_raw_fd()) } != 0 {
            tracing::error!(
                "{}: syncing the backing file system failed before a summary commit: {}",
                f.label(),
                std::io::Error::last_os_error()
            );
            ok = false;
        }
    }
    ok
}

/// Commit the summaries of `files` as one commit does each (FORMAT.md
/// 12.3), the syncs shared: the backing file system synced, each record
/// written, synced again, then each file's ended markers erased. A file
/// that changed since its count was read is left to its handles.
fn commit_batch(files: &[Arc<CipherFile>]) {
    let pending: Vec<(&Arc<CipherFile>, u64)> = files
        .iter()
        .filter_map(|f| f.commit_pending().map(|c| (f, c)))
        .collect();
    if pending.is_empty() {
        return;
    }
    let all: Vec<&Arc<CipherFile>> = pending.iter().map(|(f, _)| *f).collect();
    if !sync_filesystems(&all) {
        // Their drops (or next commits) commit them one by one.
        return;
    }
    let mut sealed = Vec::with_capacity(pending.len());
    for (f, c) in &pending {
        match f.seal_if_unchanged(*c) {
            Ok(Some(old)) => sealed.push((*f, old)),
            Ok(None) => {}
            Err(e) => tracing::error!("{}: file summary not committed after close: {e}", f.label()),
        }
    }
    if sealed.is_empty() {
        return;
    }
    let done: Vec<&Arc<CipherFile>> = sealed.iter().map(|(f, _)| *f).collect();
    if !sync_filesystems(&done) {
        return;
    }
    for (f, old) in &sealed {
        if let Err(e) = f.erase_sealed(old) {
            tracing::warn!("{}: the markers of a committed summary not erased: {e}", f.label());
        }
    }
}

#[cfg(test)]
mod tests;
