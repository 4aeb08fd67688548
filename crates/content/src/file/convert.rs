//! An open file given its summary while its volume is mounted (FORMAT.md
//! 12.6, `warpfs upgrade` of a mounted volume): the conversion runs through
//! the mount's open file, holding the whole file, so that no request sees
//! it half converted and the file keeps a summary state from then on.

use crate::file::{CipherFile, FileState, Summ};
use crate::rangelock::Want;
use crate::summary;
use crate::upgrade::{convert, Converted};
use crate::ContentError;
use std::sync::{Arc, Mutex, RwLock};
use warpfs_crypto::SummaryKey;

impl CipherFile {
    /// Give the file its summary under `key`: `Ok(true)` when it was
    /// converted now, `Ok(false)` for an empty file or one that has its
    /// summary. The caller opened it writable.
    pub fn take_summary(&self, key: &Arc<SummaryKey>) -> Result<bool, ContentError> {
        if self.read_only {
            return Err(ContentError::ReadOnly);
        }
        let (guard, st) = self.sh.lock.acquire(|_| Some(Want::whole()));
        let Some(guard) = guard else {
            return Err(ContentError::corrupt("range lock"));
        };
        let Some(mut hdr) = st.hdr else {
            return Ok(false);
        };
        if hdr.summary {
            return Ok(false);
        }
        let Converted::Now(size) = convert(&self.file, key)? else {
            return Ok(false);
        };
        hdr.summary = true;
        guard.set_state(FileState { size, hdr: Some(hdr) });
        let state = summary::check(&self.file, key, &hdr.file_id, size)?.state;
        let s = self.sh.sum.get_or_init(|| Summ {
            key: RwLock::new(key.clone()),
            st: Mutex::new(None),
        });
        *s.st.lock().unwrap_or_else(|e| e.into_inner()) = Some(state);
        Ok(true)
    }
}
