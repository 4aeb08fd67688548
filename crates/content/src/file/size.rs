//! Size changes of an open cipher file: truncation (growing with a
//! sparse hole, shrinking with a re-encrypted partial last block), hole
//! punching and preallocation.

use super::{efbig, CipherFile, FileState};
use crate::layout::{
    backing_len, block_count, block_len, data_offset, entry_offset, segment_runs, BLOCK, BLOCK_USIZE, MAX_PLAIN_SIZE,
};
use crate::rangelock::{RangeGuard, Want};
use crate::scratch::{self, sized, Scratch};
use crate::sysio;
use crate::{ContentError, Mode};

impl CipherFile {
    /// Set the plaintext size (FORMAT.md 3.6): growing pads a partial last
    /// block and leaves a sparse hole; shrinking re-encrypts a new partial
    /// last block; 0 leaves an empty backing file.
    pub fn set_len(&self, size: u64) -> Result<(), ContentError> {
        if self.read_only {
            return Err(ContentError::ReadOnly);
        }
        if size > MAX_PLAIN_SIZE {
            return Err(efbig());
        }
        let (guard, st) = self.sh.lock.acquire(|_| Some(Want::whole()));
        let Some(guard) = guard else {
            return Err(ContentError::corrupt("range lock"));
        };
        let r = scratch::with(|sc| self.set_len_locked(&guard, st, size, sc));
        r.map_err(|e| self.log("truncate", e))
    }

    fn set_len_locked(
        &self,
        guard: &RangeGuard<'_, FileState>,
        st: FileState,
        new: u64,
        sc: &mut Scratch,
    ) -> Result<(), ContentError> {
        let mode = self.mode();
        let old = st.size;
        if new == old && (new != 0 || st.hdr.is_none()) {
            return Ok(());
        }
        if new == 0 {
            self.file.set_len(0)?;
            guard.set_state(FileState { size: 0, hdr: None });
            self.sum_reset(st.hdr.map(|h| h.file_id));
            return Ok(());
        }
        let (old_n, new_n) = (block_count(old), block_count(new));
        if new > old {
            let hdr = match st.hdr {
                Some(h) => h,
                None => {
                    let h = self.create_header(sc)?;
                    guard.set_state(FileState { size: 0, hdr: Some(h) });
                    h
                }
            };
            let cx = self.ctx(&hdr)?;
            if st.hdr.is_some() {
                self.sum_dirty(&cx.id, old, old_n.saturating_sub(1), old_n + 1, true)?;
            }
            if !old.is_multiple_of(BLOCK) {
                let lb = old_n - 1;
                // The padded block grows past the old end: allocate first.
                let to = data_offset(mode, lb) + block_len(new, lb) as u64;
                sysio::reserve(&self.file, backing_len(mode, old), to)?;
                self.rewrite_block(&cx, lb, block_len(old, lb), block_len(new, lb), sc)?;
            }
            self.clear_tail_entries(old_n, new_n, sc)?;
            self.file.set_len(backing_len(mode, new))?;
            guard.set_state(FileState {
                size: new,
                hdr: Some(hdr),
            });
            // xts: only a full 4 KiB block of zeros is a hole, so a new
            // partial last block is written (encrypted zeros).
            if mode == Mode::Xts && !new.is_multiple_of(BLOCK) && new_n > old_n {
                let buf = sized(&mut sc.head, block_len(new, new_n - 1));
                buf.fill(0);
                self.write_block(&cx, new_n - 1, buf)?;
            }
            return self.sum_commit(&hdr.file_id, new);
        }
        // Shrink. Masks made ahead for blocks past the new end are useless.
        let Some(hdr) = st.hdr else {
            return Err(ContentError::corrupt("no header"));
        };
        let cx = self.ctx(&hdr)?;
        self.sum_tail(&cx.id, old, new)?;
        cx.reader.clear();
        let keep = block_len(new, new_n - 1);
        let partial = keep < BLOCK_USIZE;
        let mut written = false;
        if partial {
            let buf = sized(&mut sc.head, block_len(old, new_n - 1));
            written = self.read_block(&cx, new_n - 1, buf)?;
        }
        self.clear_tail_entries(new_n, old_n, sc)?;
        self.file.set_len(backing_len(mode, new))?;
        // Later segments went with their entries: the sum is recomputed.
        self.sum_unknown();
        guard.set_state(FileState {
            size: new,
            hdr: Some(hdr),
        });
        // xts: a partial last block must hold data even if it was a hole.
        if partial && (written || mode == Mode::Xts) {
            let mut head = std::mem::take(&mut sc.head);
            let r = self.write_block(&cx, new_n - 1, &mut head[..keep]);
            sc.head = head;
            r?;
        }
        self.sum_commit(&hdr.file_id, new)
    }

    /// Allocate the backing bytes of plaintext `[offset, offset + len)`
    /// (its blocks, their nonce entries and the pages between) without
    /// changing the size, as fallocate(2) promises: a full disk fails here
    /// (ENOSPC), not at a later write into the range. A backing file
    /// system without fallocate is left to take its chance, as elsewhere.
    pub fn allocate(&self, offset: u64, len: u64) -> Result<(), ContentError> {
        if self.read_only {
            return Err(ContentError::ReadOnly);
        }
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= MAX_PLAIN_SIZE)
            .ok_or_else(efbig)?;
        if len == 0 {
            return Ok(());
        }
        let mode = self.mode();
        let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
        let from = entry_offset(mode, first).min(data_offset(mode, first));
        sysio::reserve(&self.file, from, data_offset(mode, last).saturating_add(BLOCK))
    }

    /// Zero `[offset, offset + len)` (clipped to the size) without changing
    /// the size: whole blocks get a zero entry and their data deallocated,
    /// partial blocks are read–modified–written.
    pub fn punch_hole(&self, offset: u64, len: u64) -> Result<(), ContentError> {
        if self.read_only {
            return Err(ContentError::ReadOnly);
        }
        if len == 0 {
            return Ok(());
        }
        let req_end = offset.saturating_add(len);
        let (guard, st) = self.sh.lock.acquire(|st| {
            (offset < st.size).then(|| Want::exclusive(offset / BLOCK, block_count(req_end.min(st.size))))
        });
        let (Some(guard), Some(hdr)) = (guard, st.hdr) else {
            return Ok(());
        };
        let end = req_end.min(st.size);
        let mode = self.mode();
        let r = scratch::with(|sc| -> Result<(), ContentError> {
            let cx = self.ctx(&hdr)?;
            let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
            self.sum_dirty(&cx.id, st.size, first, last + 1, false)?;
            // xts: a partial last block cannot be a hole; it is rewritten.
            let covers = |x: u64| {
                x * BLOCK >= offset
                    && x * BLOCK + block_len(st.size, x) as u64 <= end
                    && (mode != Mode::Xts || block_len(st.size, x) == BLOCK_USIZE)
            };
            let full_first = if covers(first) { first } else { first + 1 };
            let full_end = if covers(last) { last + 1 } else { last };
            for (a, b) in segment_runs(full_first, full_end.max(full_first)) {
                self.zero_entries(a, b, sc)?;
                let s = data_offset(mode, a);
                let t = data_offset(mode, b - 1) + block_len(st.size, b - 1) as u64;
                sysio::punch_hole(&self.file, s, t - s)?;
            }
            let mut partial = [None, None];
            if !covers(first) {
                partial[0] = Some(first);
            }
            if last != first && !covers(last) {
                partial[1] = Some(last);
            }
            for x in partial.into_iter().flatten() {
                let bl = block_len(st.size, x);
                let buf = sized(&mut sc.head, bl);
                if self.read_block(&cx, x, buf)? {
                    let s = offset.max(x * BLOCK) - x * BLOCK;
                    let t = end.min(x * BLOCK + bl as u64) - x * BLOCK;
                    buf[s as usize..t as usize].fill(0);
                    self.write_block(&cx, x, buf)?;
                }
            }
            Ok(())
        });
        drop(guard);
        r.map_err(|e| self.log("punch hole", e))
    }
}
