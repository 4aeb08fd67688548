//! In-place rekey of one open cipher file (FORMAT.md 10): one segment at a
//! time under that segment's range lock, so reads and writes of the rest of
//! the file go on; the old bytes go to an undo journal first, and the
//! header's watermark records how far the file is.

use crate::file::{CipherFile, FileState};
use crate::header::{self, Header};
use crate::layout::{block_count, block_len, data_offset, entry_offset, segment_end, segment_start, BLOCK_USIZE};
use crate::rangelock::Want;
use crate::{entry, sysio, Cipher, ContentError, Mode};

/// What one [`CipherFile::rekey_step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// One segment moved to the write generation.
    Moved {
        /// Plaintext bytes of the segment.
        bytes: u64,
        /// Blocks that could not be decrypted (bad GCM tag, corrupt entry):
        /// left exactly as they were, so they stay unreadable.
        unreadable: u64,
    },
    /// The whole file uses the write generation (or is empty).
    Done,
}

/// Points of a segment's move, for crash tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The undo record is durable; nothing of the segment is touched yet.
    Saved,
    /// The segment's new data is written; entries and header are not.
    DataWritten,
}

/// Where the rekey of a file keeps its undo record.
pub trait RekeyIo {
    /// Make the undo record (the file's ID and the old bytes at their
    /// offsets) durable before the segment is overwritten.
    fn save(&mut self, file_id: &[u8; 16], ranges: &[(u64, &[u8])]) -> std::io::Result<()>;
    /// The moved segment is durable: forget the record, durably.
    fn done(&mut self) -> std::io::Result<()>;
    /// A point of the move was reached (crash tests stop here).
    fn reached(&mut self, stage: Stage) {
        let _ = stage;
    }
}

impl CipherFile {
    /// Move the next segment of this file from its key generation to the
    /// keyring's write generation (its generation plus one), or, when every
    /// segment is moved, record the new generation in the header. Only the
    /// segment is locked; other blocks are read and written meanwhile. The
    /// segment's old header, entries and data are saved through `io` before
    /// anything is overwritten, and the file is synced before `io` forgets
    /// them. Call until [`Step::Done`].
    pub fn rekey_step(&self, io: &mut dyn RekeyIo) -> Result<Step, ContentError> {
        if self.read_only {
            return Err(ContentError::ReadOnly);
        }
        let target = self.sh.keys.write_cipher();
        let tg = target.generation();
        let (guard, st) = self.sh.lock.acquire(|st| {
            let h = st.hdr?;
            if h.generation == tg {
                return None;
            }
            let (a, n) = (segment_start(h.rekeyed), block_count(st.size));
            Some(if a >= n {
                Want::whole()
            } else {
                Want::exclusive(a, segment_end(a).min(n))
            })
        });
        let (Some(guard), Some(hdr)) = (guard, st.hdr) else {
            return Ok(Step::Done);
        };
        if hdr.generation.checked_add(1) != Some(tg) {
            return Err(ContentError::corrupt(format!(
                "uses key generation {}, which a rekey to generation {tg} cannot move",
                hdr.generation
            )));
        }
        let n = block_count(st.size);
        let a = segment_start(hdr.rekeyed);
        if a >= n {
            // Every block uses the new key: say so in the header (the same
            // blocks either way, so this write needs no undo record).
            let new = Header {
                generation: tg,
                rekeyed: 0,
                ..hdr
            };
            sysio::write_all_at(&self.file, &new.to_bytes(), 0)?;
            self.file.sync_data()?;
            guard.set_state(FileState {
                size: st.size,
                hdr: Some(new),
            });
            self.retune_reader(tg);
            return Ok(Step::Done);
        }
        let rekeyed = hdr
            .rekeyed
            .checked_add(1)
            .ok_or_else(|| ContentError::corrupt("file too large to rekey"))?;
        let b = segment_end(a).min(n);
        let cx = self.ctx(&hdr)?;
        let mut old_hdr = [0u8; header::LEN];
        sysio::read_exact_at(&self.file, &mut old_hdr, 0)?;
        // The segment's buffers are reused from the last step on this
        // thread (about 2 MiB: allocating and zeroing them per segment
        // cost as much as the cipher work).
        let mut bufs = BUFS.with(|c| c.take());
        let r = self.move_segment(io, &cx, &target, &hdr, st.size, (a, b), old_hdr, &mut bufs);
        BUFS.with(|c| c.replace(bufs));
        let (bytes, unreadable) = r?;
        let new_hdr = Header { rekeyed, ..hdr };
        guard.update(|s| s.hdr = Some(new_hdr));
        Ok(Step::Moved { bytes, unreadable })
    }

    /// Move blocks `[a, b)` (one segment; its range lock held) to the
    /// keyring's write generation: save the undo record, write the new
    /// data, entries and header (watermark `hdr.rekeyed + 1`), sync.
    #[allow(clippy::too_many_arguments)]
    fn move_segment(
        &self,
        io: &mut dyn RekeyIo,
        cx: &crate::file::Ctx,
        target: &Cipher,
        hdr: &Header,
        size: u64,
        (a, b): (u64, u64),
        old_hdr: [u8; header::LEN],
        bufs: &mut SegmentBufs,
    ) -> Result<(u64, u64), ContentError> {
        let mode = self.mode();
        let e = mode.entry_len();
        let base = &cx.base;
        let rekeyed = hdr.rekeyed + 1;
        let SegmentBufs {
            old_ents,
            ents,
            old_data,
            data,
        } = bufs;
        // The segment's dirty marker is down before its old bytes are read
        // (so the journal restores them with it).
        self.sum_dirty(&cx.id, size, a, b, false)?;
        old_ents.resize((b - a) as usize * e, 0);
        if e > 0 {
            sysio::read_exact_at(&self.file, old_ents, entry_offset(mode, a))?;
        }
        let dlen: usize = (a..b).map(|x| block_len(size, x)).sum();
        old_data.resize(dlen, 0);
        sysio::read_exact_at(&self.file, old_data, data_offset(mode, a))?;
        data.clear();
        data.extend_from_slice(old_data);
        ents.clear();
        ents.extend_from_slice(old_ents);
        self.sum_mask(ents);
        let old_view = ents.clone();
        let mut unreadable = 0u64;
        let mut pos = 0usize;
        // Runs of written blocks (relative to `a`): only their data is
        // saved and rewritten, so holes stay holes.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for x in a..b {
            let len = block_len(size, x);
            let blk = &mut data[pos..pos + len];
            let old = &old_data[pos..pos + len];
            pos += len;
            let (ent, old_ent) = (
                &mut ents[(x - a) as usize * e..][..e],
                &old_view[(x - a) as usize * e..][..e],
            );
            let written = match mode {
                // An all-zero full block is an xts hole (FORMAT.md 7).
                Mode::Xts => !(len == BLOCK_USIZE && blk.iter().all(|&v| v == 0)),
                Mode::Ctr | Mode::Gcm => !matches!(entry::parse(mode, ent, x), Ok(None)),
            };
            if !written {
                continue;
            }
            let i = (x - a) as usize;
            match runs.last_mut() {
                Some(r) if r.1 == i => r.1 = i + 1,
                _ => runs.push((i, i + 1)),
            }
            match base.open_block_quiet(base.on_demand(), &cx.id, x, old_ent, blk) {
                Ok(()) => target.seal_block(&cx.id, x, blk, ent),
                Err(_) => {
                    // Keep the block as it was: unreadable before, unreadable after.
                    unreadable += 1;
                    blk.copy_from_slice(old);
                    ent.copy_from_slice(old_ent);
                }
            }
        }
        let new_hdr = Header { rekeyed, ..*hdr };
        // Byte range of data run (i, j) within the segment's data.
        let span = |(i, j): (usize, usize)| (i * BLOCK_USIZE, (j * BLOCK_USIZE).min(dlen));
        let mut ranges: Vec<(u64, &[u8])> = vec![(0, &old_hdr[..])];
        if e > 0 {
            ranges.push((entry_offset(mode, a), &old_ents[..]));
        }
        for &r in &runs {
            let (s, t) = span(r);
            ranges.push((data_offset(mode, a) + s as u64, &old_data[s..t]));
        }
        io.save(&hdr.file_id, &ranges)?;
        io.reached(Stage::Saved);
        let written = (|| -> Result<(), ContentError> {
            if e > 0 {
                // Space for the entries first: once new data is down, a full
                // disk must not stop the entries (see CipherFile::reserve_entries).
                let from = entry_offset(mode, a);
                sysio::reserve(&self.file, from, from + ents.len() as u64)?;
            }
            for &r in &runs {
                let (s, t) = span(r);
                sysio::write_all_at(&self.file, &data[s..t], data_offset(mode, a) + s as u64)?;
            }
            io.reached(Stage::DataWritten);
            if e > 0 {
                self.sum_patch(a, ents);
                sysio::write_all_at(&self.file, ents, entry_offset(mode, a))?;
            }
            sysio::write_all_at(&self.file, &new_hdr.to_bytes(), 0)?;
            self.file.sync_data()?;
            Ok(())
        })();
        if let Err(err) = written {
            self.sum_unknown();
            // Put the segment back now; if even that fails, the record
            // stays for the next mount or rekey to apply.
            let back = ranges
                .iter()
                .try_for_each(|(off, b)| sysio::write_all_at(&self.file, b, *off))
                .and_then(|()| self.file.sync_data().map_err(ContentError::Io));
            if back.is_ok() {
                io.done()?;
            } else {
                tracing::error!(
                    "{}: rekey of blocks {a}..{b} failed and could not be undone; the undo journal restores them at the next mount or rekey",
                    self.label()
                );
            }
            return Err(err);
        }
        io.done()?;
        Ok((dlen as u64, unreadable))
    }
}

/// A rekey step's buffers: a segment's old and new entries and data.
#[derive(Default)]
struct SegmentBufs {
    old_ents: Vec<u8>,
    ents: Vec<u8>,
    old_data: Vec<u8>,
    data: Vec<u8>,
}

thread_local! {
    static BUFS: std::cell::Cell<SegmentBufs> = std::cell::Cell::new(SegmentBufs::default());
}
