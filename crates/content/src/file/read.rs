//! The read path of an open cipher file: planned reads of block runs,
//! the nonce entries they need (handed ahead to the read window) and
//! single-block reads for read–modify–write.

use super::{CipherFile, Ctx};
use crate::entry;
use crate::layout::{block_count, block_len, data_offset, entry_offset, segment_runs, BLOCK, BLOCK_USIZE};
use crate::rangelock::Want;
use crate::scratch::{self, sized};
use crate::sysio;
use crate::{ContentError, Mode};
use std::io::IoSliceMut;
use warpfs_keystream::BlockReader;

/// A read request planned with the file's reader; finished on drop, also
/// when the read fails.
struct Planned<'r> {
    reader: &'r dyn BlockReader,
    start: u64,
    count: u64,
    /// End of the blocks whose nonces the reader wants.
    end: u64,
}

impl<'r> Planned<'r> {
    fn new(reader: &'r dyn BlockReader, start: u64, count: u64) -> Self {
        let end = reader.plan(start, count).end;
        Self {
            reader,
            start,
            count,
            end,
        }
    }
}

impl Drop for Planned<'_> {
    fn drop(&mut self) {
        self.reader.finish(self.start, self.count);
    }
}

impl CipherFile {
    /// Read up to `buf.len()` bytes at `offset`; short only at end of file.
    /// On any error nothing of the request is returned (`buf` is zeroed).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, ContentError> {
        self.read_with(offset, buf, false).map_err(|e| self.log("read", e))
    }

    /// [`read_at`](Self::read_at) for a decrypt-ahead job: masks made on
    /// the calling thread, the read window left alone, and no log line on
    /// failure (the job's result is dropped and the read it was for runs
    /// inline, which reports the error). Compare [`changes`](Self::changes)
    /// before the call and when using the result.
    pub fn read_ahead_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, ContentError> {
        self.read_with(offset, buf, true)
    }

    /// [`read_at`](Self::read_at) with every mask made on the calling
    /// thread and the read window left alone: for a reader whose next
    /// requests are being decrypted ahead (the window's look-ahead would
    /// make masks for blocks nobody applies).
    pub fn read_direct_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, ContentError> {
        self.read_with(offset, buf, true).map_err(|e| self.log("read", e))
    }

    /// Changes to this file (to any handle of its inode: writes,
    /// truncations, hole punches, rekey steps) finished so far. Equal values
    /// before a read and later mean the read's bytes are still the file's.
    pub fn changes(&self) -> u64 {
        self.sh.lock.changes()
    }

    fn read_with(&self, offset: u64, buf: &mut [u8], direct: bool) -> Result<usize, ContentError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let req_end = offset.saturating_add(buf.len() as u64);
        let (guard, st) = self
            .sh
            .lock
            .acquire(|st| (offset < st.size).then(|| Want::shared(offset / BLOCK, block_count(req_end.min(st.size)))));
        if guard.is_none() {
            return Ok(0);
        }
        let end = req_end.min(st.size);
        let n = (end - offset) as usize;
        let out = &mut buf[..n];
        let r = match st.hdr {
            None => Err(ContentError::corrupt("no header")),
            Some(hdr) => self.ctx(&hdr).and_then(|mut cx| {
                cx.direct = direct;
                scratch::with(|sc| {
                    let (first, last) = (offset / BLOCK, block_count(end));
                    let planned = Planned::new(cx.planner(first), first, last - first);
                    let ents = self.read_entries_planned(
                        &cx,
                        st.size,
                        first,
                        last,
                        planned.end,
                        &mut sc.entries,
                        &mut sc.nonces,
                    )?;
                    for (a, b) in segment_runs(first, last) {
                        let e = self.mode().entry_len();
                        let run_ents = &ents[(a - first) as usize * e..(b - first) as usize * e];
                        self.read_run(&cx, st.size, a, b, offset, out, run_ents, &mut sc.head, &mut sc.tail)?;
                    }
                    Ok(())
                })
            }),
        };
        drop(guard);
        match r {
            Ok(()) => Ok(n),
            Err(e) => {
                buf.fill(0);
                Err(e)
            }
        }
    }

    /// The nonce entries of the requested blocks `[first, last)` (returned,
    /// kept in `entries`) and of the blocks after them up to `plan_end`, as
    /// the file's reader planned (one pread per segment, so a planned
    /// window within one nonce page costs one read); then hands the nonces
    /// of the written blocks of the planned window to the reader, so their
    /// masks are made while the data is read. Entries past the request are a
    /// hint: they are read without the range lock (a concurrent write may
    /// change them; the reader only uses a mask whose nonce matches the one
    /// read under the lock) and any failure there only shortens the hint.
    /// Mid-rekey, only blocks of the window's key generation are handed on.
    #[allow(clippy::too_many_arguments)]
    fn read_entries_planned<'s>(
        &self,
        cx: &Ctx,
        size: u64,
        first: u64,
        last: u64,
        plan_end: u64,
        entries: &'s mut Vec<u8>,
        nonces: &mut Vec<(u64, warpfs_crypto::Nonce)>,
    ) -> Result<&'s [u8], ContentError> {
        let mode = self.mode();
        let e = mode.entry_len();
        if e == 0 {
            // xts: no entries, nothing to plan ahead.
            return Ok(&entries[..0]);
        }
        let mut pend = plan_end.min(block_count(size)).max(last);
        let ents = sized(entries, (pend - first) as usize * e);
        for (a, b) in segment_runs(first, pend) {
            let slot = &mut ents[(a - first) as usize * e..(b - first) as usize * e];
            match sysio::read_exact_at(&self.file, slot, entry_offset(mode, a)) {
                Ok(()) => {}
                Err(_) if a >= last => {
                    pend = a;
                    break;
                }
                Err(err) if b <= last => return Err(err),
                Err(_) => {
                    // The run mixes requested and look-ahead blocks: read
                    // the requested part alone, strictly.
                    let need = (last - a) as usize * e;
                    sysio::read_exact_at(&self.file, &mut slot[..need], entry_offset(mode, a))?;
                    pend = last;
                    break;
                }
            }
        }
        self.sum_mask(&mut ents[..(pend - first) as usize * e]);
        nonces.clear();
        for (i, ent) in ents[..(pend - first) as usize * e].chunks_exact(e).enumerate() {
            let x = first + i as u64;
            // Holes have no mask; a corrupt entry fails (or not) when read.
            if let Ok(Some(en)) = entry::parse(mode, ent, x) {
                if cx.windowed(x) {
                    nonces.push((x, en.nonce));
                }
            }
        }
        if !nonces.is_empty() {
            cx.reader.prefetch(nonces);
        }
        Ok(&ents[..(last - first) as usize * e])
    }

    /// Read blocks `[a, b)` (one segment) into `out`, where `out[0]` is
    /// plaintext offset `rs`, given the blocks' entries `ents`: one preadv
    /// of the written blocks' data straight into `out` (partially requested
    /// first and last blocks go through `head` / `tail`).
    #[allow(clippy::too_many_arguments)]
    fn read_run(
        &self,
        cx: &Ctx,
        size: u64,
        a: u64,
        b: u64,
        rs: u64,
        out: &mut [u8],
        ents: &[u8],
        head: &mut Vec<u8>,
        tail: &mut Vec<u8>,
    ) -> Result<(), ContentError> {
        let mode = self.mode();
        let e = mode.entry_len();
        let re = rs + out.len() as u64;
        debug_assert_eq!(ents.len(), (b - a) as usize * e);
        // xts has no entries: every block is read (the cipher reads an
        // all-zero full block as a hole).
        let written = |x: u64| {
            let i = (x - a) as usize * e;
            e == 0 || ents[i..i + e].iter().any(|&v| v != 0)
        };
        // Requested part of block x, as a range of `out`.
        let part = |x: u64| {
            let s = (x * BLOCK).max(rs);
            let t = (x * BLOCK + block_len(size, x) as u64).min(re);
            ((s - rs) as usize, (t - rs) as usize)
        };
        let w0 = (a..b).find(|&x| written(x));
        let Some(w0) = w0 else {
            let (s, _) = part(a);
            let (_, t) = part(b - 1);
            out[s..t].fill(0);
            return Ok(());
        };
        let w1 = (a..b).rev().find(|&x| written(x)).unwrap_or(w0);
        // Unwritten blocks outside [w0, w1] read as zeros.
        for x in (a..w0).chain(w1 + 1..b) {
            let (s, t) = part(x);
            out[s..t].fill(0);
        }
        let full = |x: u64| x * BLOCK >= rs && x * BLOCK + block_len(size, x) as u64 <= re;
        let head_partial = !full(w0);
        let tail_partial = w1 != w0 && !full(w1);
        let head_len = block_len(size, w0);
        let tail_len = block_len(size, w1);
        let head = sized(head, head_len);
        let tail = sized(tail, tail_len);
        let mid_first = if head_partial { w0 + 1 } else { w0 };
        let mid_end = if tail_partial { w1 } else { w1 + 1 };
        let (ms, me) = if mid_first < mid_end {
            (part(mid_first).0, part(mid_end - 1).1)
        } else {
            (0, 0)
        };
        {
            let mut iovs: [IoSliceMut<'_>; 3] = [
                IoSliceMut::new(if head_partial { &mut *head } else { &mut [] }),
                IoSliceMut::new(&mut out[ms..me]),
                IoSliceMut::new(if tail_partial { &mut *tail } else { &mut [] }),
            ];
            sysio::preadv_exact(&self.file, &mut iovs, data_offset(mode, w0))?;
        }
        let label = || self.label();
        let id = &cx.id;
        // An XTS run of full blocks under one key: to the device or split
        // across the engine's workers.
        let mc = cx.cipher(mid_first);
        let split = mid_first < mid_end && std::ptr::eq(mc, cx.cipher(mid_end - 1)) && mc.takes_xts_run(me - ms);
        if split {
            mc.open_xts_blocks(id, mid_first, &mut out[ms..me]);
        }
        // Last block first: workers make the masks of prefetched blocks
        // nearest first, so a reader that catches up with them makes the
        // far ones itself while they finish the near ones, instead of
        // racing them for the same mask.
        for x in (w0..=w1).rev() {
            if split && (mid_first..mid_end).contains(&x) {
                continue;
            }
            let ent = &ents[(x - a) as usize * e..][..e];
            let (s, t) = part(x);
            let (c, r) = (cx.cipher(x), cx.reader(x));
            if x == w0 && head_partial {
                c.open_block(r, id, x, ent, head, &label)?;
                let off = (s as u64 + rs - x * BLOCK) as usize;
                out[s..t].copy_from_slice(&head[off..off + (t - s)]);
            } else if x == w1 && tail_partial {
                c.open_block(r, id, x, ent, tail, &label)?;
                out[s..t].copy_from_slice(&tail[..t - s]);
            } else {
                c.open_block(r, id, x, ent, &mut out[s..t], &label)?;
            }
        }
        Ok(())
    }

    /// Read and decrypt block `x` (current length `dst.len()`). Returns
    /// whether the block was ever written (unwritten: zeros).
    pub(super) fn read_block(&self, cx: &Ctx, x: u64, dst: &mut [u8]) -> Result<bool, ContentError> {
        let mode = self.mode();
        if dst.is_empty() {
            return Ok(false);
        }
        let mut ent = [0u8; 32];
        let ent = &mut ent[..mode.entry_len()];
        if mode == Mode::Xts {
            sysio::read_exact_at(&self.file, dst, data_offset(mode, x))?;
            if dst.len() == BLOCK_USIZE && dst.iter().all(|&v| v == 0) {
                return Ok(false);
            }
            cx.cipher(x)
                .open_block(cx.reader(x), &cx.id, x, ent, dst, &|| self.label())?;
            return Ok(true);
        }
        sysio::read_exact_at(&self.file, ent, entry_offset(mode, x))?;
        self.sum_mask(ent);
        if ent.iter().all(|&v| v == 0) {
            dst.fill(0);
            return Ok(false);
        }
        sysio::read_exact_at(&self.file, dst, data_offset(mode, x))?;
        cx.cipher(x)
            .open_block(cx.reader(x), &cx.id, x, ent, dst, &|| self.label())?;
        Ok(true)
    }
}

/// A cipher file is what decrypt-ahead reads for a sequential reader of
/// one of its handles: chunks through [`CipherFile::read_ahead_at`], a
/// request whose chunks could not be used through
/// [`CipherFile::read_direct_at`], checked against [`CipherFile::changes`].
impl warpfs_engine::AheadSource for CipherFile {
    type Error = ContentError;

    fn read_ahead_at(&self, off: u64, buf: &mut [u8]) -> Result<usize, ContentError> {
        CipherFile::read_ahead_at(self, off, buf)
    }

    fn read_direct_at(&self, off: u64, buf: &mut [u8]) -> Result<usize, ContentError> {
        CipherFile::read_direct_at(self, off, buf)
    }

    fn changes(&self) -> u64 {
        CipherFile::changes(self)
    }

    fn size(&self) -> u64 {
        CipherFile::size(self)
    }
}
