//! The write path of an open cipher file: sealing blocks under fresh
//! nonces, the header of a new file, writes within the size and writes
//! that extend it (segment runs, with entries reserved before data).

use super::{efbig, page_of_exists, CipherFile, Ctx, FileState};
use crate::header::{self, Header};
use crate::layout::{
    self, backing_len, block_count, block_len, data_offset, entry_offset, segment_end, segment_runs, BLOCK,
    BLOCK_USIZE, MAX_PLAIN_SIZE,
};
use crate::rangelock::{RangeGuard, Want};
use crate::scratch::{self, sized, Scratch};
use crate::sysio;
use crate::ContentError;

/// Zeros for one nonce page of the widest entries (`gcm`).
pub(super) static ZERO_PAGE: [u8; (layout::PAGE_BLOCKS * 32) as usize] = [0; (layout::PAGE_BLOCKS * 32) as usize];

/// The first block of block `b`'s segment (blocks 0-15 form segment 0's
/// nnode part and map to block 0).
fn segment_first(b: u64) -> u64 {
    if b < layout::NNODE_BLOCKS {
        0
    } else {
        layout::NNODE_BLOCKS + (b - layout::NNODE_BLOCKS) / layout::PAGE_BLOCKS * layout::PAGE_BLOCKS
    }
}

impl CipherFile {
    /// Encrypt `plain` (block `x`'s full new content) under a fresh nonce
    /// and write data, then entry.
    pub(super) fn write_block(&self, cx: &Ctx, x: u64, plain: &mut [u8]) -> Result<(), ContentError> {
        let mode = self.mode();
        let mut ent = [0u8; 32];
        let ent = &mut ent[..mode.entry_len()];
        self.reserve_entries(x, x + 1, None)?;
        cx.cipher(x).seal_block(&cx.id, x, plain, ent);
        self.sum_patch(x, ent);
        sysio::write_all_at(&self.file, plain, data_offset(mode, x))
            .and_then(|()| sysio::write_all_at(&self.file, ent, entry_offset(mode, x)))
            .inspect_err(|_| self.sum_unknown())
    }

    /// Make sure the entries of blocks `[a, b)` (one segment) can be
    /// written once their new data is: after new data is down, the entries
    /// write must not fail for lack of space, since new data under the old
    /// entry is a torn block (a GCM block that fails its tag, a CTR block
    /// that decrypts to garbage). The entries of blocks never written may
    /// lie in a page the backing FS never allocated, next to entries of
    /// written blocks in one that it did. `len` is the backing length
    /// before this run, where the caller knows it.
    ///
    /// - Blocks 0-15: nothing to do, their entries were written (zeroed)
    ///   with the header.
    /// - A segment the file reaches at its end (`len` is where the
    ///   segment's nonce page starts, as in every sequential append): the
    ///   whole page is written as zeros first. A length ending inside a
    ///   nonce page reads as the old size (FORMAT.md 3.4), and the page is
    ///   then stored like the data after it (a delayed allocation on ext4,
    ///   placed with that data at writeback), where a reservation would
    ///   allocate it at once, apart from data allocated later (a file of
    ///   up to 64 KiB used to lie in 2 extents, a 64 MiB one in 166).
    /// - Otherwise: `fallocate` the entries' range. (Asking `SEEK_HOLE`
    ///   whether the page is already there would spare the allocation, but
    ///   tmpfs answers it by walking every page up to the next hole: a
    ///   4 KiB write in a 256 MiB file took 1.4 ms.)
    fn reserve_entries(&self, a: u64, b: u64, len: Option<u64>) -> Result<(), ContentError> {
        let mode = self.mode();
        let e = mode.entry_len() as u64;
        if e == 0 || b <= a {
            return Ok(());
        }
        let from = entry_offset(mode, a);
        let to = from + (b - a) * e;
        if to <= layout::header_len(mode) {
            return Ok(());
        }
        let page = entry_offset(mode, segment_first(a));
        if len == Some(page) {
            return sysio::write_all_at(&self.file, &ZERO_PAGE[..layout::page_len(mode) as usize], page);
        }
        sysio::reserve(&self.file, from, to)
    }

    /// Re-encrypt block `x` from length `old_len` to `new_len` (zero-padded
    /// or cut).
    pub(super) fn rewrite_block(
        &self,
        cx: &Ctx,
        x: u64,
        old_len: usize,
        new_len: usize,
        sc: &mut Scratch,
    ) -> Result<(), ContentError> {
        let buf = sized(&mut sc.head, old_len.max(new_len));
        self.read_block(cx, x, &mut buf[..old_len])?;
        if new_len > old_len {
            buf[old_len..new_len].fill(0);
        }
        self.write_block(cx, x, &mut buf[..new_len])
    }

    /// Zero the entries of blocks `[from, to)` (one segment) with one pwrite.
    pub(super) fn zero_entries(&self, from: u64, to: u64, sc: &mut Scratch) -> Result<(), ContentError> {
        if from >= to {
            return Ok(());
        }
        let mode = self.mode();
        let z = sized(&mut sc.entries, (to - from) as usize * mode.entry_len());
        z.fill(0);
        self.sum_patch(from, z);
        sysio::write_all_at(&self.file, z, entry_offset(mode, from)).inspect_err(|_| self.sum_unknown())
    }

    /// Zero stale entries after the last block `n - 1` of a file with `n`
    /// blocks, up to block `upto`, where that segment's entry area exists.
    pub(super) fn clear_tail_entries(&self, n: u64, upto: u64, sc: &mut Scratch) -> Result<(), ContentError> {
        if !page_of_exists(n) {
            return Ok(());
        }
        self.zero_entries(n, segment_end(n).min(upto), sc)
    }

    /// Write the header (of the keyring's write generation) with an
    /// all-zero nnode (one pwrite), and make the read window one for that
    /// generation. Only while the whole file is held.
    pub(super) fn create_header(&self, sc: &mut Scratch) -> Result<Header, ContentError> {
        let mode = self.mode();
        let mut hdr = Header::new_random_gen(mode, self.sh.keys.write_generation());
        let buf = sized(&mut sc.entries, layout::header_len(mode) as usize);
        buf.fill(0);
        if let Some(st) = self.sum_fresh(&hdr.file_id) {
            hdr.summary = true;
            st.patch(0, &mut buf[header::LEN..]);
        }
        buf[..header::LEN].copy_from_slice(&hdr.to_bytes());
        if let Err(e) = sysio::write_all_at(&self.file, buf, 0) {
            // Never leave a torn header (0 < L < H reads as corrupt).
            let _ = self.file.set_len(0);
            return Err(e);
        }
        self.retune_reader(hdr.generation);
        Ok(hdr)
    }

    /// Write `data` at `offset`, extending the file if needed (holes stay
    /// sparse). Partial blocks are read–modified–written under fresh nonces.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), ContentError> {
        if self.read_only {
            return Err(ContentError::ReadOnly);
        }
        if data.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= MAX_PLAIN_SIZE)
            .ok_or_else(efbig)?;
        let (guard, st) = self.sh.lock.acquire(|st| {
            Some(if end > st.size || st.hdr.is_none() {
                Want::whole()
            } else {
                Want::exclusive(offset / BLOCK, block_count(end))
            })
        });
        let Some(guard) = guard else {
            return Err(ContentError::corrupt("range lock"));
        };
        let r = scratch::with(|sc| match st.hdr {
            Some(hdr) if end <= st.size => {
                let cx = self.ctx(&hdr)?;
                self.sum_dirty(&cx.id, st.size, offset / BLOCK, block_count(end), false)?;
                let mut committed = st.size;
                self.write_runs(&cx, st.size, st.size, offset, data, &mut committed, sc)
            }
            _ => self.write_extending(&guard, st, offset, data, sc),
        });
        r.map_err(|e| self.log("write", e))
    }

    pub(super) fn write_extending(
        &self,
        guard: &RangeGuard<'_, FileState>,
        st: FileState,
        offset: u64,
        data: &[u8],
        sc: &mut Scratch,
    ) -> Result<(), ContentError> {
        let old = st.size;
        let end = offset + data.len() as u64;
        let new_size = old.max(end);
        let fresh = st.hdr.is_none();
        // The old partial last block grows past the old end: allocate that
        // part first, so a full disk fails the write before the block is
        // touched instead of half way through it (which would tear it).
        // Other new space needs no reservation: a write that stops there
        // leaves whole new blocks or holes (see write_runs).
        let mode = self.mode();
        if !fresh && !old.is_multiple_of(BLOCK) {
            let lb = block_count(old) - 1;
            let to = (data_offset(mode, lb) + BLOCK).min(backing_len(mode, new_size));
            sysio::reserve(&self.file, backing_len(mode, old), to)?;
        }
        let hdr = match st.hdr {
            Some(h) => h,
            None => {
                let h = self.create_header(sc)?;
                guard.set_state(FileState { size: 0, hdr: Some(h) });
                h
            }
        };
        let cx = self.ctx(&hdr)?;
        // The old last block (padded) and the old last page's stale
        // entries change too; the file grows past its committed size.
        let from = (offset / BLOCK).min(block_count(old).saturating_sub(1));
        self.sum_dirty(&cx.id, old, from, block_count(end), true)?;
        let mut committed = old;
        let r = (|| {
            let old_n = block_count(old);
            let first = offset / BLOCK;
            // Pad a partial last block that the write does not touch.
            if !old.is_multiple_of(BLOCK) && first > old_n - 1 {
                let lb = old_n - 1;
                self.rewrite_block(&cx, lb, block_len(old, lb), BLOCK_USIZE, sc)?;
                committed = old_n * BLOCK;
            }
            // Stale entries in the old last segment's page must not revive.
            if first > old_n && !fresh {
                self.clear_tail_entries(old_n, first, sc)?;
            }
            self.write_runs(&cx, old, new_size, offset, data, &mut committed, sc)
        })();
        match r {
            Ok(()) => {
                guard.set_state(FileState {
                    size: new_size,
                    hdr: Some(hdr),
                });
                Ok(())
            }
            Err(e) => {
                // Best effort: leave a consistent file of the committed size.
                let _ = self.clear_tail_entries(block_count(committed), block_count(new_size), sc);
                let _ = self.file.set_len(backing_len(self.mode(), committed));
                self.sum_unknown();
                guard.set_state(FileState {
                    size: committed,
                    hdr: if committed == 0 { None } else { Some(hdr) },
                });
                if committed == 0 {
                    let _ = self.file.set_len(0);
                }
                Err(e)
            }
        }
    }

    /// Encrypt and write `data` at `offset` in a file growing from
    /// `old_size` to `new_size`, one segment run at a time: one pwrite for
    /// the run's data, then one for its entries. `committed` advances to the
    /// end of each completed run.
    #[allow(clippy::too_many_arguments)]
    fn write_runs(
        &self,
        cx: &Ctx,
        old_size: u64,
        new_size: u64,
        offset: u64,
        data: &[u8],
        committed: &mut u64,
        sc: &mut Scratch,
    ) -> Result<(), ContentError> {
        let mode = self.mode();
        let e = mode.entry_len();
        let end = offset + data.len() as u64;
        for (a, b) in segment_runs(offset / BLOCK, block_count(end)) {
            self.reserve_entries(a, b, Some(backing_len(mode, (*committed).max(old_size))))?;
            let rstart = a * BLOCK;
            let rend = (b * BLOCK).min(new_size);
            let buf = sized(&mut sc.data, (rend - rstart) as usize);
            // Old content the write does not cover: before `offset` in block
            // a, after `end` in block b-1 (only if it existed).
            if offset > rstart {
                let ol = block_len(old_size, a);
                let nl = block_len(new_size, a);
                self.read_block(cx, a, &mut buf[..ol])?;
                buf[ol..nl].fill(0);
            }
            // (read_block of a 0-length block reads nothing.)
            if end < rend {
                let lb = b - 1;
                let s = ((lb - a) * BLOCK) as usize;
                if !(offset > rstart && lb == a) {
                    let ol = block_len(old_size, lb);
                    self.read_block(cx, lb, &mut buf[s..s + ol])?;
                }
            }
            let cs = offset.max(rstart);
            let ce = end.min(rend);
            buf[(cs - rstart) as usize..(ce - rstart) as usize]
                .copy_from_slice(&data[(cs - offset) as usize..(ce - offset) as usize]);
            let ents = sized(&mut sc.entries, (b - a) as usize * e);
            if std::ptr::eq(cx.cipher(a), cx.cipher(b - 1)) {
                cx.cipher(a).seal_blocks(&cx.id, a, buf, ents);
            } else {
                for (i, blk) in buf.chunks_mut(BLOCK_USIZE).enumerate() {
                    let ent = &mut ents[i * e..(i + 1) * e];
                    let x = a + i as u64;
                    cx.cipher(x).seal_block(&cx.id, x, blk, ent);
                }
            }
            self.sum_patch(a, ents);
            if let Err((done, err)) = sysio::write_all_at_progress(&self.file, buf, data_offset(mode, a)) {
                self.sum_unknown();
                // Full disk (or other fault) part-way: blocks whose new data
                // is wholly written get their entries, so none of them is
                // left with new data under an old entry; the block at the
                // failure point keeps its old entry (it was a hole or
                // past the old end, whose space was reserved first).
                let whole = (done / BLOCK_USIZE) as u64;
                if whole > 0
                    && sysio::write_all_at(&self.file, &ents[..whole as usize * e], entry_offset(mode, a)).is_ok()
                {
                    *committed = (*committed).max((rstart + whole * BLOCK).min(rend));
                }
                return Err(err);
            }
            sysio::write_all_at(&self.file, ents, entry_offset(mode, a)).inspect_err(|_| self.sum_unknown())?;
            *committed = (*committed).max(rend);
        }
        Ok(())
    }
}
