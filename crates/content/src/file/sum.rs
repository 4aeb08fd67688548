//! The summary side of an open cipher file (FORMAT.md 12): entries are
//! masked after every read and their slots filled before every write,
//! segments are made dirty before they change, and the summary is
//! committed on fsync, after a truncation and when the last writable
//! handle closes; fsync commits it before syncing the backing file. A
//! mount leaves the commits of fsync and close to its committer
//! ([`CipherFile::sync_uncommitted`], [`CipherFile::seal_if_unchanged`]).
//! Files of volumes without summaries skip all of it.

use crate::file::CipherFile;
use crate::rangelock::Want;
use crate::summary::{self, LastSync, SumState};
use crate::ContentError;

impl CipherFile {
    /// Run `f` on the summary state, if the file has one.
    pub(crate) fn with_sum<R>(&self, f: impl FnOnce(&mut SumState) -> R) -> Option<R> {
        let s = self.summ()?;
        let mut g = s.st.lock().unwrap_or_else(|e| e.into_inner());
        g.as_mut().map(f)
    }

    /// Zero the summary slots of entries just read.
    pub(crate) fn sum_mask(&self, ents: &mut [u8]) {
        if self.summ().is_some() {
            summary::mask(ents);
        }
    }

    /// Fill the summary slots of (masked) entries about to be written (the
    /// first being block `first`) and account for the change in the
    /// file's sum (the old entries are read back first). If the write
    /// then fails, call [`sum_unknown`](Self::sum_unknown).
    pub(crate) fn sum_patch(&self, first: u64, ents: &mut [u8]) {
        let Some(s) = self.summ() else {
            return;
        };
        let n = crate::layout::block_count(self.sh.lock.state().size);
        let mut old = vec![0u8; ents.len()];
        // Entries at or past the block count were never counted: nothing
        // to read back for them (a file growing writes only those).
        let read = if n <= first {
            Err(crate::ContentError::Io(std::io::ErrorKind::UnexpectedEof.into()))
        } else {
            crate::sysio::read_exact_at(&self.file, &mut old, crate::layout::entry_offset(self.mode(), first))
        };
        let mut g = s.st.lock().unwrap_or_else(|e| e.into_inner());
        let Some(st) = g.as_mut() else {
            return;
        };
        match read {
            Ok(()) => {
                summary::mask(&mut old);
                st.account(&s.key(), first, n, &old, ents);
            }
            // Past the end (new blocks): nothing counted there yet, unless
            // the read failed for another reason.
            Err(_) if n <= first => st.account(&s.key(), first, n, &[], ents),
            Err(_) => st.unknown(),
        }
        st.patch(first, ents);
        st.changes = st.changes.wrapping_add(1);
    }

    /// A write of entries failed or the file was cut: the running sum is
    /// recomputed at the next commit.
    pub(crate) fn sum_unknown(&self) {
        self.with_sum(|st| {
            st.unknown();
            st.changes = st.changes.wrapping_add(1);
        });
    }

    /// Before blocks `[a, b)` change in a file of plaintext `size` (and,
    /// with `grow`, before it grows): their segments' dirty markers are
    /// written and synced.
    pub(crate) fn sum_dirty(&self, id: &[u8; 16], size: u64, a: u64, b: u64, grow: bool) -> Result<(), ContentError> {
        let Some(s) = self.summ() else {
            return Ok(());
        };
        let mut g = s.st.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(st) => {
                let key = s.key();
                self.lease_enter(&key, id, st)?;
                st.changes = st.changes.wrapping_add(1);
                summary::make_dirty(&self.file, &key, id, size, st, summary::segs(a, b), grow)
            }
            None => Ok(()),
        }
    }

    /// Before a truncation from `size` to `new_size` (> 0).
    pub(crate) fn sum_tail(&self, id: &[u8; 16], size: u64, new_size: u64) -> Result<(), ContentError> {
        let Some(s) = self.summ() else {
            return Ok(());
        };
        let mut g = s.st.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(st) => {
                let key = s.key();
                self.lease_enter(&key, id, st)?;
                st.changes = st.changes.wrapping_add(1);
                summary::mark_tail(&self.file, &key, id, size, new_size, st)
            }
            None => Ok(()),
        }
    }

    /// Commit the summary of the file as it is (`size`). The caller holds
    /// the whole file.
    pub(crate) fn sum_commit(&self, id: &[u8; 16], size: u64) -> Result<(), ContentError> {
        self.sum_commit_then(id, size, LastSync::Data).map(|_| ())
    }

    /// [`Self::sum_commit`] with its last sync as `last` asks; `Ok(true)`
    /// when a commit ran and made that sync.
    fn sum_commit_then(&self, id: &[u8; 16], size: u64, last: LastSync) -> Result<bool, ContentError> {
        let Some(s) = self.summ() else {
            return Ok(false);
        };
        let mut g = s.st.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(st) if self.coordinated() => self.commit_coordinated(&s.key(), id, st, last),
            Some(st) if summary::needs_commit(st) => {
                let key = s.key();
                summary::commit_then(&self.file, size, st, last, |st| self.seal_and_tell(&key, id, size, st))
            }
            _ => Ok(false),
        }
    }

    /// Write a new record for the file as it is ([`summary::seal_record`])
    /// and tell the witness of versions seen the version it ended.
    pub(super) fn seal_and_tell(
        &self,
        key: &warpfs_crypto::SummaryKey,
        id: &[u8; 16],
        size: u64,
        st: &mut SumState,
    ) -> Result<Vec<u64>, ContentError> {
        let before = st.rec;
        let old = summary::seal_record(&self.file, key, id, size, st)?;
        if let Some(w) = self.sh.keys.witness() {
            w.replaced(id, &before, Some(&st.rec));
        }
        Ok(old)
    }

    /// A new header with file ID `id` is being written: its record and
    /// segment 0's grow marker go into the nnode with it. Returns the
    /// state to patch the nnode with; `None` without summaries.
    pub(crate) fn sum_fresh(&self, id: &[u8; 16]) -> Option<SumState> {
        // A file opened before the volume got summaries (an upgrade while
        // mounted) gets one with its first header.
        let s = match self.summ() {
            Some(s) => s,
            None => {
                let key = self.sh.keys.summary()?;
                self.sh.sum.get_or_init(|| crate::file::Summ {
                    key: std::sync::RwLock::new(key),
                    st: std::sync::Mutex::new(None),
                })
            }
        };
        let st = SumState::fresh(&s.key(), id);
        *s.st.lock().unwrap_or_else(|e| e.into_inner()) = Some(st.clone());
        Some(st)
    }

    /// The file (of ID `id`, when it had a header) was emptied: no header,
    /// no summary; its last committed version is gone.
    pub(crate) fn sum_reset(&self, id: Option<[u8; 16]>) {
        // Shared with other hosts: the next change starts from the disk.
        self.let_go();
        if let Some(s) = self.summ() {
            let old = s.st.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let (Some(st), Some(id), Some(w)) = (old, id, self.sh.keys.witness()) {
                w.replaced(&id, &st.rec, None);
            }
        }
    }

    /// Why the file failed its summary check, if it did.
    pub fn summary_failure(&self) -> Option<String> {
        self.with_sum(|st| st.poisoned.clone()).flatten()
    }

    /// Commit the summary if anything changed since the last commit
    /// (fsync does this; so does dropping the last writable handle).
    pub fn commit_summary(&self) -> Result<(), ContentError> {
        self.commit_summary_then(LastSync::Data).map(|_| ())
    }

    /// [`Self::commit_summary`] with its last sync as `last` asks; `Ok(true)`
    /// when a commit ran and made that sync.
    fn commit_summary_then(&self, last: LastSync) -> Result<bool, ContentError> {
        if self.summ().is_none() || self.read_only {
            return Ok(false);
        }
        if !self.with_sum(|st| summary::needs_commit(st)).unwrap_or(false) {
            return Ok(false);
        }
        let (guard, st) = self.sh.lock.acquire(|_| Some(Want::whole()));
        let r = match st.hdr {
            Some(h) => self.sum_commit_then(&h.file_id, st.size, last),
            None => Ok(false),
        };
        drop(guard);
        r
    }

    /// A commit made in steps by a caller that syncs many files at once
    /// (a mount's committer, after the last writable handle closed): the
    /// file's change count when it needs a commit, read before the caller
    /// syncs the backing file system; `None` when there is nothing to
    /// commit.
    pub fn commit_pending(&self) -> Option<u64> {
        if self.read_only {
            return None;
        }
        self.with_sum(|st| (summary::needs_commit(st) && st.poisoned.is_none()).then_some(st.changes))
            .flatten()
    }

    /// The file was removed (its backing file has no name left, so it can
    /// never be opened again): its pending commit is dropped, and its
    /// summary is left as it is on disk.
    pub fn drop_pending_commit(&self) {
        self.with_sum(|st| st.dirty.clear());
    }

    /// The caller synced the backing file system after reading `changes`
    /// from [`Self::commit_pending`]: if the file did not change since,
    /// its new record is written (the caller syncs again, then calls
    /// [`Self::erase_sealed`] with what this returns); `None` when it
    /// changed (a handle's own close or fsync commits it then).
    pub fn seal_if_unchanged(&self, changes: u64) -> Result<Option<Vec<u64>>, ContentError> {
        let Some(s) = self.summ() else {
            return Ok(None);
        };
        let (guard, fs) = self.sh.lock.acquire(|_| Some(Want::whole()));
        let Some(h) = fs.hdr else {
            return Ok(None);
        };
        let mut g = s.st.lock().unwrap_or_else(|e| e.into_inner());
        let r = match g.as_mut() {
            // Shared with other hosts: committed here, on its own, if this
            // host writes it last (nothing left to erase after the batch's
            // sync).
            Some(st) if self.coordinated() && summary::needs_commit(st) && st.poisoned.is_none() => self
                .commit_coordinated(&s.key(), &h.file_id, st, LastSync::Data)?
                .then(Vec::new),
            Some(st) if st.changes == changes && summary::needs_commit(st) && st.poisoned.is_none() => {
                Some(self.seal_and_tell(&s.key(), &h.file_id, fs.size, st)?)
            }
            _ => None,
        };
        drop(g);
        drop(guard);
        Ok(r)
    }

    /// After the caller synced the record [`Self::seal_if_unchanged`]
    /// wrote: erase the markers that commit ended.
    pub fn erase_sealed(&self, old: &[u64]) -> Result<(), ContentError> {
        let Some(s) = self.summ() else {
            return Ok(());
        };
        let (guard, fs) = self.sh.lock.acquire(|_| Some(Want::whole()));
        let g = s.st.lock().unwrap_or_else(|e| e.into_inner());
        let r = match g.as_ref() {
            Some(st) => summary::erase_markers(&self.file, fs.size, old, st),
            None => Ok(()),
        };
        drop(g);
        drop(guard);
        r
    }

    /// The file's summary is now under `key` (a rekey to a new volume key
    /// sealed it again on disk, [`crate::summary::commit`]): its state is
    /// read back under that key, as at open. The caller makes sure no
    /// request is in flight on the file (and committed it before).
    pub fn rekey_summary(&self, key: &std::sync::Arc<warpfs_crypto::SummaryKey>) -> Result<(), ContentError> {
        let Some(s) = self.summ() else {
            return Ok(());
        };
        let (guard, st) = self.sh.lock.acquire(|_| Some(Want::whole()));
        let fresh = match st.hdr {
            Some(h) if h.summary => Some(summary::check(&self.file, key, &h.file_id, st.size)?.state),
            _ => None,
        };
        let mut g = s.st.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = fresh {
            *g = Some(f);
        }
        *s.key.write().unwrap_or_else(|e| e.into_inner()) = key.clone();
        drop(g);
        drop(guard);
        Ok(())
    }

    /// How long the file has had changes its summary's record does not
    /// cover (`None`: none, or no summary).
    pub fn uncommitted_for(&self) -> Option<std::time::Duration> {
        self.with_sum(|st| st.since.map(|t| t.elapsed())).flatten()
    }

    /// Flush data and entries to stable storage and leave the summary's
    /// commit to the caller (a mount's committer): every segment changed
    /// since the record has its marker synced before the change, so the
    /// file verifies after a crash at any point, its changed segments
    /// checked by their tags alone until the commit. `Ok(true)` when a
    /// commit is pending.
    pub fn sync_uncommitted(&self, datasync: bool) -> Result<bool, ContentError> {
        let r = if datasync {
            self.file.sync_data()
        } else {
            self.file.sync_all()
        };
        r.map_err(|e| self.log("fsync", ContentError::Io(e)))?;
        Ok(self.commit_pending().is_some())
    }

    /// Flush data and entries to stable storage. A summary commit makes
    /// the sync asked for as its last one (after its record), so an fsync
    /// of a changed file costs the commit's two syncs, not three.
    pub fn sync(&self, datasync: bool) -> Result<(), ContentError> {
        let last = if datasync { LastSync::Data } else { LastSync::All };
        if self.commit_summary_then(last).map_err(|e| self.log("fsync", e))? {
            return Ok(());
        }
        let r = if datasync {
            self.file.sync_data()
        } else {
            self.file.sync_all()
        };
        r.map_err(|e| self.log("fsync", ContentError::Io(e)))
    }
}

impl Drop for CipherFile {
    fn drop(&mut self) {
        if let Err(e) = self.commit_summary() {
            tracing::error!("{}: file summary not committed at close: {e}", self.label());
        }
        self.let_go();
    }
}

#[cfg(test)]
impl CipherFile {
    /// The running sums, and what the file on disk checks to now (its
    /// state read back as at open), for the tests.
    pub(crate) fn sums_and_disk(&self) -> Option<(Option<summary::Sums>, summary::SumState)> {
        let s = self.summ()?;
        let st = self.sh.lock.state();
        let h = st.hdr?;
        let disk = summary::check(&self.file, &s.key(), &h.file_id, st.size).ok()?.state;
        Some((self.with_sum(|st| st.sums.clone())?, disk))
    }
}
