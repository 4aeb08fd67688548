//! One regular file of a reverse view: the bytes of the `gcm` cipher file
//! (FORMAT.md 3) a forward volume would hold for the plaintext file, made
//! on demand. Every block's nonce is synthetic (FORMAT.md 14), so a block's
//! nonce entry and its ciphertext both need its plaintext: the unit of work
//! is a *segment* (the nnode's 16 blocks, or the 256 blocks behind one
//! nonce page), read from the plaintext file in one piece, encrypted, and
//! kept in a small per-open-file cache, so the page and the data that a
//! reader fetches in separate requests come from the same encryption.
//!
//! A segment is read twice and used only when both reads agree (a writer
//! changing the file meanwhile makes it retry, then EIO), and a plaintext
//! file that is shorter than it was at open gives EIO: what the view serves
//! for a block is always one consistent encryption of one version of it.
//! With `file-summary` the whole file is summed once before its first
//! segment is served ([`super::sums`]), and a segment that no longer
//! gives the sum it was summed with gives EIO: what the view serves of a
//! file is then one version of all of it.

use super::keys::Keys;
use super::sums::Sums;
use crate::error::{Error, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use warpfs_content::header::Header;
use warpfs_content::layout::{self, BLOCK, BLOCK_USIZE, NNODE_BLOCKS, PAGE_BLOCKS};
use warpfs_content::summary::{scatter, segments};
use warpfs_content::Mode;

const MODE: Mode = Mode::Gcm;
/// Nonce entry length in `gcm`.
const E: u64 = 32;
/// Segments kept per open file.
const CACHED: usize = 4;
/// Reads of a segment that may disagree before the read fails.
const TRIES: usize = 4;

/// An encrypted segment: its blocks' entries and ciphertext.
struct Segment {
    entries: Vec<u8>,
    data: Vec<u8>,
}

/// An open regular file of the view.
pub struct ViewFile {
    file: File,
    file_id: [u8; 16],
    size: u64,
    keys: Arc<Keys>,
    cache: Mutex<Vec<(u64, Arc<Segment>)>>,
    /// The buffer of a segment's second read.
    scratch: Mutex<Vec<u8>>,
    /// With `file-summary`: the file's sums, once made.
    sums: Mutex<Option<Arc<Sums>>>,
    label: String,
}

/// Blocks of segment `s`: `[first, end)`.
pub(super) fn seg_blocks(s: u64) -> (u64, u64) {
    if s == 0 {
        (0, NNODE_BLOCKS)
    } else {
        let first = NNODE_BLOCKS + (s - 1) * PAGE_BLOCKS;
        (first, first + PAGE_BLOCKS)
    }
}

/// What lies at view offset `o` (at least the header length): the segment,
/// whether it is its entries (else its data), and the offset inside.
fn locate(o: u64) -> (u64, bool, u64) {
    let h = layout::header_len(MODE);
    if o < h {
        return (0, true, o - layout::HEADER_LEN);
    }
    if o < h + layout::NNODE_BYTES {
        return (0, false, o - h);
    }
    let r = o - h - layout::NNODE_BYTES;
    let (p, seg) = (layout::page_len(MODE), layout::page_len(MODE) + layout::SEGMENT);
    let (k, q) = (r / seg, r % seg);
    if q < p {
        (k + 1, true, q)
    } else {
        (k + 1, false, q - p)
    }
}

impl ViewFile {
    pub(crate) fn new(file: File, size: u64, file_id: [u8; 16], keys: Arc<Keys>, label: String) -> Self {
        Self {
            file,
            file_id,
            size,
            keys,
            cache: Mutex::new(Vec::new()),
            scratch: Mutex::new(Vec::new()),
            sums: Mutex::new(None),
            label,
        }
    }

    /// Length of the view file (the cipher file's length).
    pub fn len(&self) -> u64 {
        layout::backing_len(MODE, self.size)
    }

    /// Whether the view file is empty (an empty plaintext file).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The cipher file's header.
    fn header(&self) -> [u8; layout::HEADER_LEN as usize] {
        Header {
            mode: MODE,
            file_id: self.file_id,
            generation: 0,
            rekeyed: 0,
            // Version 2 with `file-summary` (FORMAT.md 14).
            summary: self.keys.summary.is_some(),
        }
        .to_bytes()
    }

    /// Read the view file at `off` into `buf`; returns the bytes read
    /// (short only at the end).
    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        let end = self.len().min(off.saturating_add(buf.len() as u64));
        let mut o = off;
        while o < end {
            let at = (o - off) as usize;
            let n = if o < layout::HEADER_LEN {
                let h = self.header();
                let n = (end.min(layout::HEADER_LEN) - o) as usize;
                buf[at..at + n].copy_from_slice(&h[o as usize..o as usize + n]);
                n
            } else {
                let (s, entries, inside) = locate(o);
                let seg = self.segment(s)?;
                let part: &[u8] = if entries { &seg.entries } else { &seg.data };
                // Past the encrypted bytes of a part (the unused entries of
                // a last, short segment) the view holds zeros.
                let room = if entries {
                    if s == 0 {
                        NNODE_BLOCKS * E - inside
                    } else {
                        PAGE_BLOCKS * E - inside
                    }
                } else {
                    part.len() as u64 - inside.min(part.len() as u64)
                };
                let n = room.min(end - o) as usize;
                let src = part.get(inside as usize..).unwrap_or(&[]);
                let k = src.len().min(n);
                buf[at..at + k].copy_from_slice(&src[..k]);
                buf[at + k..at + n].fill(0);
                if n == 0 {
                    // Data of a segment the file does not reach: nothing more.
                    break;
                }
                n
            };
            o += n as u64;
        }
        Ok((o - off) as usize)
    }

    fn segment(&self, s: u64) -> Result<Arc<Segment>> {
        {
            let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = c.iter().position(|(k, _)| *k == s) {
                let hit = c.remove(i);
                let seg = hit.1.clone();
                c.push(hit);
                return Ok(seg);
            }
        }
        let seg = Arc::new(self.encrypt(s)?);
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        // Another request may have made it meanwhile: serve that one, so
        // every request sees the same encryption of the segment.
        if let Some((_, have)) = c.iter().find(|(k, _)| *k == s) {
            return Ok(have.clone());
        }
        if c.len() >= CACHED {
            c.remove(0);
        }
        c.push((s, seg.clone()));
        Ok(seg)
    }

    /// Read the plaintext of blocks `[first, end)` (as far as the size
    /// reaches) twice until both reads agree. The second read goes to a
    /// buffer kept with the open file; neither is zeroed first.
    fn read_plain(&self, first: u64, end: u64) -> Result<Vec<u8>> {
        let (start, len) = self.span(first, end);
        let mut a = Vec::new();
        let mut own = Vec::new();
        let mut kept = self.scratch.try_lock();
        let b = match kept.as_mut() {
            Ok(g) => &mut **g,
            Err(_) => &mut own,
        };
        for _ in 0..TRIES {
            self.fill(&mut a, start, len)?;
            self.fill(b, start, len)?;
            if a == *b {
                return Ok(a);
            }
        }
        tracing::warn!(
            "reverse view: {} kept changing while read at {start}..{}: EIO",
            self.label,
            start + len as u64
        );
        Err(Error::EIO)
    }

    /// Where the plaintext of blocks `[first, end)` lies (as far as the
    /// size reaches): its offset and length.
    fn span(&self, first: u64, end: u64) -> (u64, usize) {
        let start = first * BLOCK;
        let stop = (end * BLOCK).min(self.size);
        (start, stop.saturating_sub(start) as usize)
    }

    /// The file's sums under `key`, made on the first call.
    fn sums(&self, key: &warpfs_crypto::SummaryKey) -> Result<Arc<Sums>> {
        let mut g = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = &*g {
            return Ok(s.clone());
        }
        let n = layout::block_count(self.size);
        let s = Arc::new(Sums::make(
            &self.keys,
            key,
            &self.file_id,
            (self.size, segments(self.size)),
            |k, buf| {
                let (first, end) = seg_blocks(k);
                let (start, len) = self.span(first, end.min(n));
                self.fill(buf, start, len)
            },
        )?);
        *g = Some(s.clone());
        Ok(s)
    }

    /// Make `v` the `len` bytes of the plaintext file at `off`.
    fn fill(&self, v: &mut Vec<u8>, off: u64, len: usize) -> Result<()> {
        v.clear();
        v.reserve_exact(len);
        while v.len() < len {
            let done = v.len();
            let spare = &mut v.spare_capacity_mut()[..len - done];
            // SAFETY: pread writes at most `spare.len()` bytes into the
            // vector's spare capacity, which is that long.
            let n = unsafe {
                libc::pread(
                    self.file.as_raw_fd(),
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                    (off + done as u64) as libc::off_t,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            if n == 0 {
                tracing::warn!("reverse view: {} is shorter than when it was opened: EIO", self.label);
                return Err(Error::EIO);
            }
            // SAFETY: pread initialised the next `n` bytes (n <= spare.len()).
            unsafe { v.set_len(done + n as usize) };
        }
        Ok(())
    }

    fn encrypt(&self, s: u64) -> Result<Segment> {
        let (first, end) = seg_blocks(s);
        let end = end.min(layout::block_count(self.size));
        let sums = match &self.keys.summary {
            Some(key) => Some((key, self.sums(key)?)),
            None => None,
        };
        let mut data = self.read_plain(first, end)?;
        let mut entries = vec![0u8; ((end.saturating_sub(first)) * E) as usize];
        for (i, b) in (first..end).enumerate() {
            let lo = i * BLOCK_USIZE;
            let hi = (lo + BLOCK_USIZE).min(data.len());
            let entry = &mut entries[i * E as usize..(i + 1) * E as usize];
            self.keys.seal_block(&self.file_id, b, &mut data[lo..hi], entry);
        }
        if let Some((key, sums)) = sums {
            if !sums.agrees(key, s, first, &entries) {
                tracing::warn!(
                    "reverse view: {} changed since it was summed (segment {s}): EIO",
                    self.label
                );
                return Err(Error::EIO);
            }
            if s == 0 {
                // The record in the slots of nnode entries 0–7, however
                // few blocks the file has (FORMAT.md 12.2).
                let rec = (8 * E) as usize;
                if entries.len() < rec {
                    entries.resize(rec, 0);
                }
                scatter(&sums.record, &mut entries[..rec]);
            }
        }
        Ok(Segment { entries, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_follows_the_layout() {
        for b in [0u64, 1, 15, 16, 17, 271, 272, 1000] {
            let (s, entries, inside) = locate(layout::data_offset(MODE, b));
            let (first, _) = seg_blocks(s);
            assert!(!entries);
            assert_eq!(inside, (b - first) * BLOCK, "block {b}");
            let (s2, entries, inside) = locate(layout::entry_offset(MODE, b));
            assert_eq!(s2, s);
            assert!(entries);
            assert_eq!(inside, (b - first) * E);
        }
    }
}
