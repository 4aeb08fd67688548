//! One open cipher file (FORMAT.md 3.6): reads, read–modify–write of
//! partial blocks, extension with holes, truncation and hole punching,
//! under a block range lock so reads of different blocks run together.

use crate::cipher::Cipher;
use crate::entry;
use crate::header::{self, Header};
use crate::keyring::{IntoKeyring, Keyring};
use crate::layout::{
    self, backing_len, block_count, block_len, data_offset, entry_offset, segment_end, segment_runs, BLOCK,
    BLOCK_USIZE, MAX_PLAIN_SIZE, NNODE_BLOCKS, PAGE_BLOCKS,
};
use crate::rangelock::{RangeGuard, RangeLock, Want};
use crate::scratch::{self, sized, Scratch};
use crate::summary::{self, SumState};
use crate::sysio;
use crate::{ContentError, Mode};
use std::fs::File;
use std::io::IoSliceMut;
use std::sync::{Arc, Mutex, RwLock};
use warpfs_keystream::BlockReader;

/// Size and header; changed only while the whole file is held, except the
/// rekey watermark (`hdr.rekeyed`, see `rekeystep.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileState {
    pub(crate) size: u64,
    /// `None` while the backing file is empty (no header yet).
    pub(crate) hdr: Option<Header>,
}

/// What every handle of one inode shares: the keys, the read window, the
/// range lock with size and header.
pub(crate) struct Shared {
    pub(crate) keys: Arc<Keyring>,
    mode: Mode,
    /// This file's reads' masks (a read window with a speculative engine),
    /// made with the key of the generation it names.
    reader: RwLock<(u32, Arc<dyn BlockReader>)>,
    label: Mutex<String>,
    pub(crate) lock: RangeLock<FileState>,
    /// The file's summary (FORMAT.md 12), when the volume has summaries;
    /// `None` inside while the file has no header.
    pub(crate) sum: Option<Summ>,
}

/// A file's summary key and state.
pub(crate) struct Summ {
    pub(crate) key: Arc<warpfs_crypto::SummaryKey>,
    pub(crate) st: Mutex<Option<SumState>>,
}

/// One open backing file. Handles of one inode share one; a read-only one
/// and a writable one of the same inode share their state (see
/// [`CipherFile::share`]).
pub struct CipherFile {
    pub(crate) file: File,
    pub(crate) read_only: bool,
    pub(crate) sh: Arc<Shared>,
}

/// What one request needs to encrypt and decrypt its blocks: the file ID,
/// the cipher of each block's key generation and the file's reader.
pub(crate) struct Ctx {
    pub(crate) id: [u8; 16],
    /// Blocks from `split` on.
    pub(crate) base: Arc<Cipher>,
    /// Blocks before `split` (mid-rekey; `None` when `split` is 0).
    pub(crate) next: Option<Arc<Cipher>>,
    pub(crate) split: u64,
    reader: Arc<dyn BlockReader>,
    reader_gen: u32,
    /// Every mask made on the calling thread, the read window untouched
    /// (decrypt-ahead reads: they run where masks would be made anyway).
    direct: bool,
}

impl Ctx {
    /// The cipher of block `x`'s key generation.
    pub(crate) fn cipher(&self, x: u64) -> &Cipher {
        match &self.next {
            Some(n) if x < self.split => n,
            _ => &self.base,
        }
    }

    /// Whether block `x`'s masks come from the file's read window (made
    /// for the block's key generation).
    fn windowed(&self, x: u64) -> bool {
        !self.direct && self.cipher(x).generation() == self.reader_gen
    }

    /// The reader that plans a request starting at block `x`.
    fn planner(&self, x: u64) -> &dyn BlockReader {
        if self.direct {
            self.cipher(x).on_demand()
        } else {
            &*self.reader
        }
    }

    /// The reader for block `x`: the file's read window when it was made
    /// for the block's key, else masks made on the calling thread.
    pub(crate) fn reader(&self, x: u64) -> &dyn BlockReader {
        if self.windowed(x) {
            &*self.reader
        } else {
            self.cipher(x).on_demand()
        }
    }
}

impl std::fmt::Debug for CipherFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CipherFile")
            .field("label", &self.label())
            .field("size", &self.size())
            .field("read_only", &self.read_only)
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

/// Whether the entry area of the segment holding block `n` exists in a file
/// whose blocks end at `n` (it does unless `n` starts a new segment).
fn page_of_exists(n: u64) -> bool {
    n < NNODE_BLOCKS || !(n - NNODE_BLOCKS).is_multiple_of(PAGE_BLOCKS)
}

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

fn efbig() -> ContentError {
    ContentError::errno_err(libc::EFBIG)
}

impl CipherFile {
    /// Take over an open backing file (O_RDWR, or O_RDONLY: writes then
    /// fail with `ReadOnly`), with the volume's keyring (or one cipher).
    /// Checks the header when the file is not empty (its key generations
    /// must be in the keyring); the size follows from the backing length.
    pub fn open(file: File, keys: impl IntoKeyring, label: String) -> Result<Self, ContentError> {
        let keys = keys.into_keyring();
        let read_only = sysio::is_read_only(&file)?;
        let mode = keys.mode();
        let len = file.metadata()?.len();
        let size = layout::plain_size(mode, len)?;
        let hdr = if len == 0 {
            None
        } else {
            let mut h = [0u8; header::LEN];
            sysio::read_exact_at(&file, &mut h, 0)?;
            let hdr = Header::parse(&h)?;
            if hdr.mode != mode {
                return Err(ContentError::corrupt(format!(
                    "cipher file mode {:?} differs from the volume's {:?}",
                    hdr.mode, mode
                )));
            }
            Some(hdr)
        };
        // A file keeps the key generations its header records (FORMAT.md 10).
        let gen = match hdr {
            Some(h) => {
                let missing = |g: u32| {
                    ContentError::corrupt(format!(
                        "cipher file uses key generation {g}, which this volume's config does not have"
                    ))
                };
                keys.get(h.generation).ok_or_else(|| missing(h.generation))?;
                if h.rekeyed != 0 {
                    keys.get(h.generation + 1).ok_or_else(|| missing(h.generation + 1))?;
                }
                h.generation
            }
            None => keys.write_generation(),
        };
        let sum = match (keys.summary(), hdr) {
            (None, Some(h)) if h.summary => {
                return Err(ContentError::corrupt(
                    "cipher file has a file summary (format 2) but the volume has none",
                ))
            }
            (Some(_), Some(h)) if !h.summary => {
                return Err(ContentError::corrupt(
                    "cipher file has no file summary (format 1), which this volume requires",
                ))
            }
            (Some(k), Some(h)) => {
                let c = summary::check(&file, k, &h.file_id, size)?;
                if let Some(w) = &c.state.poisoned {
                    tracing::error!("{label}: {w}");
                }
                Some(Summ {
                    key: k.clone(),
                    st: Mutex::new(Some(c.state)),
                })
            }
            (Some(k), None) => Some(Summ {
                key: k.clone(),
                st: Mutex::new(None),
            }),
            (None, _) => None,
        };
        let reader: Arc<dyn BlockReader> = match keys.get(gen) {
            Some(c) => Arc::from(c.reader()),
            None => Arc::from(keys.write_cipher().reader()),
        };
        Ok(Self {
            file,
            read_only,
            sh: Arc::new(Shared {
                keys,
                mode,
                reader: RwLock::new((gen, reader)),
                label: Mutex::new(label),
                lock: RangeLock::new(FileState { size, hdr }),
                sum,
            }),
        })
    }

    /// Another handle on the same inode (e.g. opened read-write where this
    /// one is read-only) sharing this one's size, header, keys, read window
    /// and range lock, so both see one file.
    pub fn share(&self, file: File) -> Result<Self, ContentError> {
        Ok(Self {
            read_only: sysio::is_read_only(&file)?,
            file,
            sh: self.sh.clone(),
        })
    }

    /// Key generation of the content key this file's blocks use (from the
    /// rekey watermark on, mid-rekey); the write generation when empty.
    pub fn generation(&self) -> u32 {
        match self.sh.lock.state().hdr {
            Some(h) => h.generation,
            None => self.sh.keys.write_generation(),
        }
    }

    /// Current plaintext size.
    pub fn size(&self) -> u64 {
        self.sh.lock.state().size
    }

    /// The plaintext path used in log lines (changes on rename).
    pub fn set_label(&self, label: String) {
        *self.sh.label.lock().unwrap_or_else(|e| e.into_inner()) = label;
    }

    pub(crate) fn label(&self) -> String {
        self.sh.label.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The backing file (for fstat/fchmod by the volume layer).
    pub fn backing(&self) -> &File {
        &self.file
    }

    pub(crate) fn mode(&self) -> Mode {
        self.sh.mode
    }

    /// The ciphers and reader for a request on a file with header `hdr`.
    pub(crate) fn ctx(&self, hdr: &Header) -> Result<Ctx, ContentError> {
        if let Some(w) = self.with_sum(|st| st.poisoned.clone()).flatten() {
            return Err(ContentError::corrupt(w));
        }
        let missing = |g: u32| {
            ContentError::corrupt(format!(
                "cipher file uses key generation {g}, which this volume's config does not have"
            ))
        };
        let base = self
            .sh
            .keys
            .get(hdr.generation)
            .ok_or_else(|| missing(hdr.generation))?;
        let (next, split) = if hdr.rekeyed == 0 {
            (None, 0)
        } else {
            let g = hdr.generation + 1;
            (
                Some(self.sh.keys.get(g).ok_or_else(|| missing(g))?),
                layout::segment_start(hdr.rekeyed),
            )
        };
        let (reader_gen, reader) = self.sh.reader.read().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(Ctx {
            id: hdr.file_id,
            base,
            next,
            split,
            reader,
            reader_gen,
            direct: false,
        })
    }

    /// Make the read window one for key generation `gen` (the file's
    /// generation changed). Only while the whole file is held.
    pub(crate) fn retune_reader(&self, gen: u32) {
        let mut r = self.sh.reader.write().unwrap_or_else(|e| e.into_inner());
        if r.0 != gen {
            if let Some(c) = self.sh.keys.get(gen) {
                *r = (gen, Arc::from(c.reader()));
            }
        }
    }

    fn log(&self, op: &str, e: ContentError) -> ContentError {
        match &e {
            ContentError::Corrupt { what } => tracing::error!("{}: {}", self.label(), what),
            ContentError::Io(_) => crate::faultlog::fault(op, &self.label(), e.errno()),
            _ => {}
        }
        e
    }

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
        // An XTS run of full blocks under one key: split across the engine's workers.
        let mc = cx.cipher(mid_first);
        let split = mid_first < mid_end && std::ptr::eq(mc, cx.cipher(mid_end - 1)) && mc.splits_xts(me - ms);
        if split {
            mc.open_xts_blocks(id, mid_first, &mut out[ms..me]);
        }
        for x in w0..=w1 {
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
    fn read_block(&self, cx: &Ctx, x: u64, dst: &mut [u8]) -> Result<bool, ContentError> {
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

    /// Encrypt `plain` (block `x`'s full new content) under a fresh nonce
    /// and write data, then entry.
    fn write_block(&self, cx: &Ctx, x: u64, plain: &mut [u8]) -> Result<(), ContentError> {
        let mode = self.mode();
        let mut ent = [0u8; 32];
        let ent = &mut ent[..mode.entry_len()];
        self.reserve_entries(x, x + 1)?;
        cx.cipher(x).seal_block(&cx.id, x, plain, ent);
        self.sum_patch(x, ent);
        sysio::write_all_at(&self.file, plain, data_offset(mode, x))
            .and_then(|()| sysio::write_all_at(&self.file, ent, entry_offset(mode, x)))
            .inspect_err(|_| self.sum_unknown())
    }

    /// Allocate the backing space of the entries of blocks `[a, b)` (one
    /// segment) before their data is written. Once new data is down, the
    /// entries write must not fail for lack of space: new data under the
    /// old entry is a torn block (a GCM block that fails its tag, a CTR
    /// block that decrypts to garbage). The entries of blocks never
    /// written may lie in a page the backing FS never allocated, next to
    /// entries of written blocks in one that it did.
    fn reserve_entries(&self, a: u64, b: u64) -> Result<(), ContentError> {
        let mode = self.mode();
        let e = mode.entry_len() as u64;
        if e == 0 || b <= a {
            return Ok(());
        }
        let from = entry_offset(mode, a);
        sysio::reserve(&self.file, from, from + (b - a) * e)
    }

    /// Re-encrypt block `x` from length `old_len` to `new_len` (zero-padded
    /// or cut).
    fn rewrite_block(
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
    fn zero_entries(&self, from: u64, to: u64, sc: &mut Scratch) -> Result<(), ContentError> {
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
    fn clear_tail_entries(&self, n: u64, upto: u64, sc: &mut Scratch) -> Result<(), ContentError> {
        if !page_of_exists(n) {
            return Ok(());
        }
        self.zero_entries(n, segment_end(n).min(upto), sc)
    }

    /// Write the header (of the keyring's write generation) with an
    /// all-zero nnode (one pwrite), and make the read window one for that
    /// generation. Only while the whole file is held.
    fn create_header(&self, sc: &mut Scratch) -> Result<Header, ContentError> {
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

    fn write_extending(
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
            self.reserve_entries(a, b)?;
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
            self.sum_reset();
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

    /// Flush data and entries to stable storage.
    pub fn sync(&self, datasync: bool) -> Result<(), ContentError> {
        self.commit_summary().map_err(|e| self.log("fsync", e))?;
        let r = if datasync {
            self.file.sync_data()
        } else {
            self.file.sync_all()
        };
        r.map_err(|e| self.log("fsync", ContentError::Io(e)))
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
