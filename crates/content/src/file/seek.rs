//! lseek(2)'s SEEK_DATA and SEEK_HOLE over an open cipher file: where the
//! next data or the next hole starts, at block granularity, from the nonce
//! entries (an all-zero entry is a hole, FORMAT.md 3.2), never from the
//! backing file's own holes; and the count of writable handles, which
//! says whether a page cache above may hold data the entries do not show.

use super::{CipherFile, Shared};
use crate::entry;
use crate::layout::{block_count, entry_offset, segment_end, BLOCK};
use crate::rangelock::Want;
use crate::sysio;
use crate::{ContentError, Mode};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What to look for from an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seek {
    /// The next byte that holds data (SEEK_DATA).
    Data,
    /// The next byte of a hole (SEEK_HOLE); the end of the file is one.
    Hole,
}

/// One writable handle of a file, counted while it lives (see
/// [`CipherFile::writer`]).
pub struct Writer {
    sh: Arc<Shared>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.sh.writers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Writer")
    }
}

impl CipherFile {
    /// Count a writable handle of this file (of any handle sharing its
    /// state) until the returned value is dropped.
    pub fn writer(&self) -> Writer {
        self.sh.writers.fetch_add(1, Ordering::AcqRel);
        Writer { sh: self.sh.clone() }
    }

    /// Whether a writable handle of this file is counted now.
    pub fn has_writers(&self) -> bool {
        self.sh.writers.load(Ordering::Acquire) > 0
    }

    /// lseek(2)'s SEEK_DATA / SEEK_HOLE from plaintext `offset`: the offset
    /// found, or `None` where lseek answers ENXIO (`offset` at or past the
    /// end, or no data from `offset` on). Holes are whole unwritten blocks
    /// (all-zero entries) and the end of the file; a block with a written
    /// entry is data even where its bytes are zeros. In `xts` (no entries:
    /// only the stored bytes tell a hole, so finding one costs what reading
    /// the file does) the whole file is data, which lseek allows. A corrupt
    /// entry on the way is an error, as reading its block would be.
    pub fn seek(&self, offset: u64, what: Seek) -> Result<Option<u64>, ContentError> {
        if self.mode() == Mode::Xts {
            let size = self.size();
            return Ok((offset < size).then_some(match what {
                Seek::Data => offset,
                Seek::Hole => size,
            }));
        }
        self.seek_entries(offset, what).map_err(|e| self.log("seek", e))
    }

    /// [`seek`](Self::seek) from the entries, one segment at a time, each
    /// read under a shared range lock of its blocks (a write in between
    /// moves the answer no more than one racing the call would).
    fn seek_entries(&self, offset: u64, what: Seek) -> Result<Option<u64>, ContentError> {
        let mode = self.mode();
        let e = mode.entry_len();
        let mut x = offset / BLOCK;
        let mut ents = Vec::new();
        loop {
            let mut end = x;
            let (guard, st) = self.sh.lock.acquire(|st| {
                let n = block_count(st.size);
                if offset >= st.size || x >= n {
                    return None;
                }
                end = segment_end(x).min(n);
                Some(Want::shared(x, end))
            });
            if offset >= st.size {
                return Ok(None);
            }
            let Some(guard) = guard else {
                // Past the last block: only the end of the file is left.
                return Ok(match what {
                    Seek::Data => None,
                    Seek::Hole => Some(st.size),
                });
            };
            if st.hdr.is_none() {
                return Err(ContentError::corrupt("no header"));
            }
            ents.resize((end - x) as usize * e, 0);
            sysio::read_exact_at(&self.file, &mut ents, entry_offset(mode, x))?;
            self.sum_mask(&mut ents);
            drop(guard);
            for (i, ent) in ents.chunks_exact(e).enumerate() {
                let b = x + i as u64;
                let written = entry::parse(mode, ent, b)?.is_some();
                if written == (what == Seek::Data) {
                    return Ok(Some(offset.max(b * BLOCK)));
                }
            }
            x = end;
        }
    }
}
