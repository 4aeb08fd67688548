//! fsck's per-file scan: every check a reader makes on one cipher file
//! (FORMAT.md 3) run over the whole file, collecting every problem instead
//! of stopping at the first; and the two block-level repairs fsck may make
//! (zero a bad block's entry, cut a torn tail). A `gcm` block is called bad
//! only when it fails under every key generation the volume has: the
//! header's generation and rekey watermark, which choose the key a reader
//! uses, are not authenticated (FORMAT.md 10.2).

use crate::entry;
use crate::header::{self, Header};
use crate::keyring::Keyring;
use crate::layout::{self, block_count, block_len, data_offset, entry_offset, segment_runs};
use crate::{Cipher, ContentError, Mode};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use warpfs_crypto::Nonce;

/// One problem found in a cipher file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Missing or corrupt header, or a mode other than the volume's: the
    /// blocks were not checked.
    Header(String),
    /// A backing length no writer produces (`0 < L < H`).
    Length(String),
    /// The backing file ends inside a nonce page (a crash while extending):
    /// cutting it to `fixed_len` drops only that page's stale part.
    TornTail {
        /// Backing length found.
        backing_len: u64,
        /// Backing length of the readable size (no data is lost).
        fixed_len: u64,
    },
    /// A nonce entry that breaks FORMAT.md 3.2 (the block reads as EIO).
    Entry {
        /// Block number.
        block: u64,
        /// What is wrong.
        what: String,
    },
    /// The backing file could not be read at this block.
    Unreadable {
        /// Block number.
        block: u64,
        /// The I/O error.
        what: String,
    },
    /// `gcm`: the block's tag does not verify under any key generation of
    /// the volume (tampered, moved or torn).
    BadTag {
        /// Block number.
        block: u64,
    },
    /// `gcm`: blocks `first..=last` verify, but under key generation
    /// `generation`, not the one the header's generation and rekey
    /// watermark name (which a reader uses): the header was changed. The
    /// blocks read as EIO, but their data is there; never zeroed.
    OtherGeneration {
        /// First block of the run.
        first: u64,
        /// Last block of the run.
        last: u64,
        /// The generation they verify under.
        generation: u32,
    },
    /// The file's summary (FORMAT.md 12) does not verify: some blocks or
    /// nonce pages were rolled back or mixed from another version of the
    /// file (every read of it fails with EIO).
    Summary(String),
    /// The block's nonce was already used by an earlier block of this file.
    RepeatedNonce {
        /// Block number.
        block: u64,
        /// The earlier block with the same nonce.
        first: u64,
    },
}

impl Problem {
    /// The block this problem is about, if any.
    pub fn block(&self) -> Option<u64> {
        match self {
            Problem::Entry { block, .. }
            | Problem::Unreadable { block, .. }
            | Problem::BadTag { block }
            | Problem::RepeatedNonce { block, .. } => Some(*block),
            Problem::OtherGeneration { first, .. } => Some(*first),
            _ => None,
        }
    }

    /// Whether zeroing the block's entry (making it a hole that reads as
    /// zeros) is the repair: only for blocks that cannot be read anyway.
    pub fn zeroable(&self) -> bool {
        matches!(self, Problem::Entry { .. } | Problem::BadTag { .. })
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Header(w) => write!(f, "bad header: {w}"),
            Problem::Summary(w) => write!(f, "{w}"),
            Problem::Length(w) => write!(f, "bad length: {w}"),
            Problem::TornTail { backing_len, fixed_len } => write!(
                f,
                "torn tail: backing file ends inside a nonce page ({backing_len} bytes, {fixed_len} without it)"
            ),
            Problem::Entry { block, what } => write!(f, "block {block}: corrupt nonce entry: {what}"),
            Problem::Unreadable { block, what } => write!(f, "block {block}: unreadable: {what}"),
            Problem::BadTag { block } => {
                write!(
                    f,
                    "block {block}: GCM tag does not verify (tampered, moved or torn block)"
                )
            }
            Problem::RepeatedNonce { block, first } => {
                write!(f, "block {block}: nonce repeats the one of block {first} of this file")
            }
            Problem::OtherGeneration {
                first,
                last,
                generation,
            } => {
                if first == last {
                    write!(f, "block {first}: ")?;
                } else {
                    write!(f, "blocks {first}..{last}: ")?;
                }
                write!(
                    f,
                    "verify under key generation {generation}, not the one the header names \
                     (its key generation or rekey watermark was changed): they read as errors, \
                     but their data is intact; never zeroed"
                )
            }
        }
    }
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Plaintext size (from the backing length).
    pub size: u64,
    /// Blocks checked.
    pub blocks: u64,
    /// Of them, written (non-hole) blocks.
    pub written: u64,
    /// Problems, in block order.
    pub problems: Vec<Problem>,
    /// The per-file repeated-nonce check stopped at its cap.
    pub nonce_cap_hit: bool,
    /// Segments the summary could not vouch for: changed since the file's
    /// last commit (open for writing, or a crash before its close or
    /// fsync); their blocks are checked by their tags alone.
    pub unverified_segments: u64,
    /// The file has a summary (FORMAT.md 12; header version 2).
    pub summary: bool,
}

/// Scan one cipher file: header, length, every nonce entry, nonces
/// repeated within the file (at most `nonce_cap` remembered) and, in
/// `gcm`, every tag: under the generation the header names for the block,
/// then under the volume's other one (mid-rekey), so that a changed
/// header never makes a readable block look bad. `on_nonce(block, nonce)`
/// is called for each written block (for the volume-wide check),
/// `on_bytes(n)` after each segment with the plaintext bytes checked.
/// Errors only when the file's length cannot be read.
pub fn scan(
    file: &File,
    keys: &Keyring,
    nonce_cap: usize,
    on_nonce: &mut dyn FnMut(u64, &Nonce),
    on_bytes: &mut dyn FnMut(u64),
) -> Result<Scan, ContentError> {
    scan_with(file, keys, &[], nonce_cap, on_nonce, on_bytes)
}

/// [`scan`], trying `extra` ciphers too before a `gcm` block is called bad
/// (fsck adds the generation before the volume's after a rekey: a file
/// left behind, or put back from a backup, may still be of it). A header
/// naming a generation `keys` lacks is a problem as for a reader.
pub fn scan_with(
    file: &File,
    keys: &Keyring,
    extra: &[Arc<Cipher>],
    nonce_cap: usize,
    on_nonce: &mut dyn FnMut(u64, &Nonce),
    on_bytes: &mut dyn FnMut(u64),
) -> Result<Scan, ContentError> {
    let mode = keys.mode();
    let len = file.metadata()?.len();
    let mut out = Scan::default();
    if len == 0 {
        return Ok(out);
    }
    let size = match layout::plain_size(mode, len) {
        Ok(s) => s,
        Err(e) => {
            out.problems.push(Problem::Length(e.to_string()));
            return Ok(out);
        }
    };
    let mut h = [0u8; header::LEN];
    if let Err(e) = file.read_exact_at(&mut h, 0) {
        out.problems.push(Problem::Header(e.to_string()));
        return Ok(out);
    }
    // The ciphers of the blocks from the rekey watermark on and before it.
    let (hdr, ciphers) = match Header::parse(&h) {
        Ok(hdr) if hdr.mode == mode => {
            let base = keys.get(hdr.generation);
            let next = (hdr.rekeyed != 0).then(|| keys.get(hdr.generation + 1));
            match (base, next) {
                (Some(b), None) => (hdr, [b.clone(), b]),
                (Some(b), Some(Some(n))) => (hdr, [b, n]),
                (None, _) | (_, Some(None)) => {
                    out.problems.push(Problem::Header(format!(
                        "key generation {}{} is not one of the volume's",
                        hdr.generation,
                        if hdr.rekeyed != 0 { " (or the next one)" } else { "" }
                    )));
                    return Ok(out);
                }
            }
        }
        Ok(hdr) => {
            out.problems.push(Problem::Header(format!(
                "mode {:?} differs from the volume's {:?}",
                hdr.mode, mode
            )));
            return Ok(out);
        }
        Err(e) => {
            out.problems.push(Problem::Header(entry_what(e)));
            return Ok(out);
        }
    };
    out.size = size;
    let fixed_len = layout::backing_len(mode, size);
    if fixed_len != len {
        out.problems.push(Problem::TornTail {
            backing_len: len,
            fixed_len,
        });
    }
    let id = hdr.file_id;
    out.summary = hdr.summary;
    // Every generation the volume has, for blocks that fail under the one
    // the header names.
    let all: Vec<_> = [Some(keys.write_generation()), keys.write_generation().checked_sub(1)]
        .into_iter()
        .flatten()
        .filter_map(|g| keys.get(g))
        .chain(extra.iter().cloned())
        .collect();
    let mut saved = Vec::new();
    match (keys.summary(), hdr.summary) {
        (Some(k), true) => match crate::summary::check(file, &k, &id, size) {
            Ok(c) => {
                out.unverified_segments = c.unverified.len() as u64;
                if let Some(w) = c.state.poisoned {
                    out.problems.push(Problem::Summary(w));
                }
            }
            Err(err) => out
                .problems
                .push(Problem::Summary(format!("file summary unreadable: {err}"))),
        },
        (Some(_), false) => out.problems.push(Problem::Summary(
            "cipher file has no file summary (format 1), which this volume requires".into(),
        )),
        (None, true) => out.problems.push(Problem::Header(
            "cipher file has a file summary (format 2) but the volume has none".into(),
        )),
        (None, false) => {}
    }
    let e = mode.entry_len();
    let mut seen: HashMap<Nonce, u64> = HashMap::new();
    let (mut ents, mut data) = (Vec::new(), Vec::new());
    for (a, b) in segment_runs(0, block_count(size)) {
        ents.resize((b - a) as usize * e, 0);
        let run_bytes: usize = (a..b).map(|x| block_len(size, x)).sum();
        data.resize(run_bytes, 0);
        let read = file
            .read_exact_at(&mut ents, entry_offset(mode, a))
            .and_then(|()| file.read_exact_at(&mut data, data_offset(mode, a)));
        if let Err(err) = read {
            out.problems.push(Problem::Unreadable {
                block: a,
                what: err.to_string(),
            });
            out.blocks += b - a;
            on_bytes(run_bytes as u64);
            continue;
        }
        if hdr.summary {
            crate::summary::mask(&mut ents);
        }
        let mut pos = 0;
        for x in a..b {
            let ent = &ents[(x - a) as usize * e..][..e];
            let blen = block_len(size, x);
            let buf = &mut data[pos..pos + blen];
            pos += blen;
            out.blocks += 1;
            let en = match entry::parse(mode, ent, x) {
                Ok(Some(en)) => en,
                Ok(None) => continue,
                Err(err) => {
                    out.problems.push(Problem::Entry {
                        block: x,
                        what: entry_what(err),
                    });
                    continue;
                }
            };
            out.written += 1;
            on_nonce(x, &en.nonce);
            if let Some(&first) = seen.get(&en.nonce) {
                out.problems.push(Problem::RepeatedNonce { block: x, first });
            } else if seen.len() < nonce_cap {
                seen.insert(en.nonce, x);
            } else {
                out.nonce_cap_hit = true;
            }
            if mode == Mode::Gcm {
                let c = &ciphers[usize::from(hdr.block_generation(x) != hdr.generation)];
                let others: Vec<_> = all.iter().filter(|o| o.generation() != c.generation()).collect();
                if !others.is_empty() {
                    saved.clear();
                    saved.extend_from_slice(buf);
                }
                match c.open_block_quiet(c.on_demand(), &id, x, ent, buf) {
                    Ok(()) => {}
                    Err(ContentError::BadTag { block }) => {
                        let under = others.into_iter().find(|o| {
                            buf.copy_from_slice(&saved);
                            o.open_block_quiet(o.on_demand(), &id, x, ent, buf).is_ok()
                        });
                        match under {
                            Some(o) => other_generation(&mut out.problems, x, o.generation()),
                            None => out.problems.push(Problem::BadTag { block }),
                        }
                    }
                    Err(err) => out.problems.push(Problem::Entry {
                        block: x,
                        what: entry_what(err),
                    }),
                }
            }
        }
        on_bytes(run_bytes as u64);
    }
    Ok(out)
}

/// Add block `x` to the run of blocks verifying under `generation` it
/// continues, or start one.
fn other_generation(problems: &mut Vec<Problem>, x: u64, generation: u32) {
    if let Some(Problem::OtherGeneration {
        last, generation: g, ..
    }) = problems.last_mut()
    {
        if *g == generation && *last + 1 == x {
            *last = x;
            return;
        }
    }
    problems.push(Problem::OtherGeneration {
        first: x,
        last: x,
        generation,
    });
}

fn entry_what(e: ContentError) -> String {
    match e {
        ContentError::Corrupt { what } => what,
        other => other.to_string(),
    }
}

/// Make block `block` a hole (all-zero entry): it then reads as zeros.
/// Used by fsck only for blocks that cannot be read (bad tag, corrupt
/// entry), so no readable data is lost.
/// In a file with a summary (FORMAT.md 12) the entry's summary slot
/// stays, and [`reseal_summary`] must follow.
pub fn zero_block(file: &File, mode: Mode, block: u64) -> std::io::Result<()> {
    let mut h = [0u8; header::LEN];
    let summary = file.read_exact_at(&mut h, 0).is_ok() && Header::parse(&h).is_ok_and(|h| h.summary);
    zero_blocks(file, mode, summary, &[block])
}

/// [`zero_block`] for each of `blocks` of a file with (`summary`) or
/// without a summary, synced once.
pub fn zero_blocks(file: &File, mode: Mode, summary: bool, blocks: &[u64]) -> std::io::Result<()> {
    let z = [0u8; 32];
    for &block in blocks {
        let at = entry_offset(mode, block);
        for &(a, b) in crate::zeroundo::entry_zero_parts(mode, summary) {
            file.write_all_at(&z[a..b], at + a as u64)?;
        }
    }
    file.sync_data()
}

/// After fsck zeroed blocks of a file whose summary verified: a new
/// record over the file as it now is (its summary would fail otherwise).
/// Does nothing for a file without a summary.
pub fn reseal_summary(file: &File, keys: &Keyring) -> std::io::Result<()> {
    let Some(mut d) = on_disk(file, keys)? else {
        return Ok(());
    };
    d.st.poisoned = None;
    crate::summary::commit(file, &d.key, &d.id, d.size, &mut d.st).map_err(|e| std::io::Error::other(e.to_string()))
}

/// Why `file`'s summary does not verify as it is on disk, if it does not
/// (a file without one verifies).
pub fn summary_failure(file: &File, keys: &Keyring) -> std::io::Result<Option<String>> {
    Ok(on_disk(file, keys)?.and_then(|d| d.st.poisoned))
}

/// A file's summary as it is on disk.
struct OnDisk {
    key: std::sync::Arc<warpfs_crypto::SummaryKey>,
    id: [u8; 16],
    size: u64,
    st: crate::summary::SumState,
}

/// `file`'s summary read back as at open; `None` without one (in the
/// volume or the file).
fn on_disk(file: &File, keys: &Keyring) -> std::io::Result<Option<OnDisk>> {
    let io = |e: ContentError| std::io::Error::other(e.to_string());
    let Some(key) = keys.summary() else {
        return Ok(None);
    };
    let mut h = [0u8; header::LEN];
    file.read_exact_at(&mut h, 0)?;
    let hdr = Header::parse(&h).map_err(io)?;
    if !hdr.summary {
        return Ok(None);
    }
    let size = layout::plain_size(keys.mode(), file.metadata()?.len()).map_err(io)?;
    let st = crate::summary::check(file, &key, &hdr.file_id, size).map_err(io)?.state;
    Ok(Some(OnDisk {
        key,
        id: hdr.file_id,
        size,
        st,
    }))
}

/// Cut a torn tail: set the backing length to `fixed_len` (from
/// [`Problem::TornTail`]), which drops only a partial nonce page.
pub fn fix_torn_tail(file: &File, mode: Mode, fixed_len: u64) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    let size = layout::plain_size(mode, len).map_err(|e| std::io::Error::other(e.to_string()))?;
    if layout::backing_len(mode, size) != fixed_len || fixed_len > len {
        return Err(std::io::Error::other("file changed since the scan"));
    }
    file.set_len(fixed_len)?;
    file.sync_data()
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
