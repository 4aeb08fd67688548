//! Summaries of a file other hosts write too (a mount of shared storage,
//! FORMAT.md 12.7). Each host's running sums and markers would be its own,
//! so a host writing the file first marks it dirty as a whole and holds the
//! writers' lock shared; only a host that can take that lock exclusive
//! (every other writer has synced and let go) commits, over the sums read
//! back from the disk. A host that cannot leaves the commit to the last
//! writer and lets go; its next change reads the summary back first.

use crate::file::{CipherFile, Lease};
use crate::hostlock::{self, Kind, ENTRY, WRITERS};
use crate::summary::{self, LastSync, SumState};
use crate::ContentError;
use std::sync::atomic::Ordering;
use warpfs_crypto::SummaryKey;

impl CipherFile {
    /// Whether this file's summary is coordinated with other hosts.
    pub(crate) fn coordinated(&self) -> bool {
        self.summ().is_some()
            && !self.read_only
            && self.sh.keys.shared_storage()
            && self.lease.load(Ordering::Relaxed) != Lease::Unsupported as u8
    }

    /// Before this host changes the file (the caller holds the summary
    /// state `st`): unless it holds the writers' lock, take it shared and
    /// read the summary back from the disk, the whole file marked dirty.
    pub(crate) fn lease_enter(&self, key: &SummaryKey, id: &[u8; 16], st: &mut SumState) -> Result<(), ContentError> {
        if !self.coordinated() || self.lease.load(Ordering::Relaxed) == Lease::Held as u8 {
            return Ok(());
        }
        match hostlock::set(&self.file, ENTRY, Kind::Exclusive, true) {
            Ok(_) => {}
            Err(e) if hostlock::unsupported(&e) => {
                tracing::warn!(
                    "{}: the backing store keeps no byte-range locks: this file's summary is not coordinated with other hosts ({e})",
                    self.label()
                );
                self.lease.store(Lease::Unsupported as u8, Ordering::Relaxed);
                return Ok(());
            }
            Err(e) => return Err(ContentError::Io(e)),
        }
        let r = (|| {
            hostlock::set(&self.file, WRITERS, Kind::Shared, true)?;
            self.reload(key, id, st)?;
            let size = self.disk_size()?;
            summary::mark_whole(&self.file, key, id, size, st)?;
            // Other hosts write too: a commit reads the sums back.
            st.unknown();
            st.changes = st.changes.wrapping_add(1);
            Ok(())
        })();
        if r.is_ok() {
            self.lease.store(Lease::Held as u8, Ordering::Relaxed);
        } else {
            self.let_go();
        }
        let _ = hostlock::set(&self.file, ENTRY, Kind::Unlock, false);
        r
    }

    /// Commit the summary if this host is the last one writing the file
    /// (the caller holds the whole file and the summary state `st`);
    /// `Ok(false)` when another host still writes it (the commit is its to
    /// make) or there was nothing to commit. Either way this host lets go
    /// of the file: its next change reads the summary back.
    pub(crate) fn commit_coordinated(
        &self,
        key: &SummaryKey,
        id: &[u8; 16],
        st: &mut SumState,
        last: LastSync,
    ) -> Result<bool, ContentError> {
        let r = match hostlock::set(&self.file, WRITERS, Kind::Exclusive, false) {
            Ok(true) => (|| {
                self.reload(key, id, st)?;
                if !summary::needs_commit(st) {
                    return Ok(false); // another host committed it
                }
                let size = self.disk_size()?;
                summary::commit_then(&self.file, size, st, last, |st| self.seal_and_tell(key, id, size, st))
            })(),
            // Another host writes it: its commit covers this host's writes
            // (synced before this call).
            Ok(false) => Ok(false),
            Err(e) => Err(ContentError::Io(e)),
        };
        self.let_go();
        r
    }

    /// Read the summary back from the disk as it is now into `st` (the
    /// file poisoned, with a log line, when it does not verify).
    fn reload(&self, key: &SummaryKey, id: &[u8; 16], st: &mut SumState) -> Result<(), ContentError> {
        let size = self.disk_size()?;
        let c = summary::check(&self.file, key, id, size)?;
        let changes = st.changes.wrapping_add(1);
        *st = c.state;
        st.changes = changes;
        if let Some(w) = &st.poisoned {
            tracing::error!("{}: {w}", self.label());
            return Err(ContentError::corrupt(w.clone()));
        }
        Ok(())
    }

    /// The plaintext size the backing file's length gives (another host
    /// may have changed it).
    fn disk_size(&self) -> Result<u64, ContentError> {
        crate::layout::plain_size(self.mode(), self.file.metadata()?.len())
    }

    /// Let go of the writers' lock, if this host holds it.
    pub(crate) fn let_go(&self) {
        let held = self.lease.compare_exchange(
            Lease::Held as u8,
            Lease::None as u8,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        if held.is_ok() || self.coordinated() {
            if let Err(e) = hostlock::set(&self.file, WRITERS, Kind::Unlock, false) {
                tracing::warn!("{}: letting go of the writers' lock: {e}", self.label());
            }
        }
    }
}
