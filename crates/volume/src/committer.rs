//! A mount's committer: the file summary a file's last writable handle
//! leaves uncommitted at close, or an fsync leaves uncommitted (FORMAT.md
//! 12.3), is committed here, off the request's path and for many files
//! under one pair of syncs of the backing file system, where an inline
//! commit costs each file two `fdatasync`s of its own
//! (docs/decisions/0101-commits-after-close-in-batches.md). A file that
//! keeps changing is committed on its own once it has gone uncommitted for
//! [`MAX_UNCOMMITTED`].

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use warpfs_content::CipherFile;

/// How long a closed file waits for others to share its syncs: the
/// kernel's writeback interval (and ext4's journal commit interval).
const GATHER: Duration = Duration::from_secs(5);

/// How long a file that keeps changing (and so never holds still for a
/// batch) may go uncommitted before the committer commits it on its own,
/// holding its writers for the commit's two syncs.
pub const MAX_UNCOMMITTED: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Queue {
    files: Vec<Arc<CipherFile>>,
    /// The files of `files`, by address (one entry per file).
    held: std::collections::HashSet<usize>,
    /// A batch is being committed (taken from `files`).
    busy: bool,
    started: bool,
    stop: bool,
}

impl Queue {
    fn add(&mut self, f: &Arc<CipherFile>) {
        if self.held.insert(Arc::as_ptr(f) as usize) {
            self.files.push(f.clone());
        }
    }

    fn take(&mut self) -> Vec<Arc<CipherFile>> {
        self.held.clear();
        std::mem::take(&mut self.files)
    }
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
        self.enqueue(f, false)
    }

    /// [`Committer::defer`] of a file whose last handle closed: one queued
    /// is *parked* ([`CipherFile::set_parked`]) as it is queued, so a
    /// reopen checks it against the disk.
    pub fn defer_closed(self: &Arc<Self>, f: &Arc<CipherFile>) -> bool {
        self.enqueue(f, true)
    }

    fn enqueue(self: &Arc<Self>, f: &Arc<CipherFile>, park: bool) -> bool {
        if f.commit_pending().is_none() {
            return true;
        }
        let mut q = self.queue();
        if q.stop {
            return false;
        }
        if park {
            f.set_parked(true);
        }
        // Only a queue that was empty has a thread waiting for it: while
        // it gathers a batch, more files do not end the wait (and an
        // fsync-heavy file would wake it at every fsync).
        let wake = q.files.is_empty();
        q.add(f);
        if !q.started {
            q.started = true;
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("warpfs-commit".into())
                .spawn(move || me.run());
            if spawned.is_err() {
                // No thread: commit here.
                q.started = false;
                let files = q.take();
                drop(q);
                commit_batch(&files, true);
                released(&self.queue(), &files);
                return true;
            }
        }
        if wake {
            self.cv.notify_all();
        }
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
            let files = q.take();
            let stop = q.stop;
            q.busy = true;
            drop(q);
            let again = commit_batch(&files, stop);
            let mut q = self.queue();
            for f in again {
                q.add(&f);
            }
            released(&q, &files);
            drop(files);
            q.busy = false;
            drop(q);
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
            let files = q.take();
            drop(q);
            commit_batch(&files, true);
            released(&self.queue(), &files);
            return;
        }
        while !q.files.is_empty() || q.busy {
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The committer lets go of `files` but those queued again (for the next
/// batch, or by a close meanwhile): a file parked for its commit is parked
/// no more (what holds it now is not waiting for a commit).
fn released(q: &Queue, files: &[Arc<CipherFile>]) {
    for f in files {
        if !q.held.contains(&(Arc::as_ptr(f) as usize)) {
            f.set_parked(false);
        }
    }
}

/// Sync the file systems of `files` (each with the device its backing
/// file is on), once each.
fn sync_filesystems<'a>(files: impl Iterator<Item = (u64, &'a Arc<CipherFile>)>) -> bool {
    let mut by_dev: HashMap<u64, &Arc<CipherFile>> = HashMap::new();
    for (dev, f) in files {
        by_dev.entry(dev).or_insert(f);
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
/// that changed since its count was read is committed on its own when
/// `force` (an unmount) or when it has gone uncommitted for
/// [`MAX_UNCOMMITTED`], and otherwise returned, for the next batch.
fn commit_batch(files: &[Arc<CipherFile>], force: bool) -> Vec<Arc<CipherFile>> {
    // Each pending file with its backing device and change count. A file
    // removed since (its last name unlinked or renamed over) can never be
    // opened again: nothing to commit, now or as it drops.
    let mut pending: Vec<(&Arc<CipherFile>, u64, u64)> = Vec::new();
    for f in files {
        let Some(c) = f.commit_pending() else { continue };
        match warpfs_backing::fstat(f.backing()) {
            Ok(st) if st.st_nlink == 0 => f.drop_pending_commit(),
            Ok(st) => pending.push((f, st.st_dev, c)),
            Err(e) => tracing::error!("{}: file summary not committed: {e}", f.label()),
        }
    }
    let mut again = Vec::new();
    if pending.is_empty() {
        return again;
    }
    if !sync_filesystems(pending.iter().map(|&(f, dev, _)| (dev, f))) {
        // Their drops (or next commits) commit them one by one.
        return again;
    }
    let mut sealed = Vec::with_capacity(pending.len());
    for &(f, dev, c) in &pending {
        match f.seal_if_unchanged(c) {
            Ok(Some(old)) => sealed.push((f, dev, old)),
            // Still changing: committed on its own once it has waited long
            // enough, else tried again in the next batch.
            Ok(None) if force || f.uncommitted_for().is_some_and(|d| d >= MAX_UNCOMMITTED) => {
                if let Err(e) = f.commit_summary() {
                    tracing::error!("{}: file summary not committed: {e}", f.label());
                }
            }
            Ok(None) => again.push(f.clone()),
            Err(e) => tracing::error!("{}: file summary not committed: {e}", f.label()),
        }
    }
    if sealed.is_empty() || !sync_filesystems(sealed.iter().map(|&(f, dev, _)| (dev, f))) {
        return again;
    }
    for (f, _, old) in &sealed {
        if let Err(e) = f.erase_sealed(old) {
            tracing::warn!("{}: the markers of a committed summary not erased: {e}", f.label());
        }
    }
    again
}

#[cfg(test)]
mod tests;
