//! fsck's per-file scan: every check a reader makes on one cipher file
//! (FORMAT.md 3) run over the whole file, collecting every problem instead
//! of stopping at the first; and the two block-level repairs fsck may make
//! (zero a bad block's entry, cut a torn tail).

use crate::entry;
use crate::header::{self, Header};
use crate::keyring::Keyring;
use crate::layout::{self, block_count, block_len, data_offset, entry_offset, segment_runs};
use crate::{ContentError, Mode};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
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
    /// `gcm`: the block's tag does not verify (tampered, moved or torn).
    BadTag {
        /// Block number.
        block: u64,
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
}

/// Scan one cipher file opened read-only: header, length, every nonce
/// entry, nonces repeated within the file (at most `nonce_cap` remembered)
/// and, in `gcm`, every tag. `on_nonce(block, nonce)` is called for each
/// written block (for the volume-wide check), `on_bytes(n)` after each
/// segment with the plaintext bytes checked. Errors only when the file's
/// length cannot be read.
pub fn scan(
    file: &File,
    keys: &Keyring,
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
    match (keys.summary(), hdr.summary) {
        (Some(k), true) => match crate::summary::check(file, k, &id, size) {
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
                match c.open_block_quiet(c.on_demand(), &id, x, ent, buf) {
                    Ok(()) => {}
                    Err(ContentError::BadTag { block }) => out.problems.push(Problem::BadTag { block }),
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
    let z = [0u8; 32];
    let mut h = [0u8; header::LEN];
    let summary = file.read_exact_at(&mut h, 0).is_ok() && Header::parse(&h).is_ok_and(|h| h.summary);
    let at = entry_offset(mode, block);
    if summary {
        file.write_all_at(&z[..12], at)?;
        file.write_all_at(&z[16..], at + 16)?;
    } else {
        file.write_all_at(&z[..mode.entry_len()], at)?;
    }
    file.sync_data()
}

/// After fsck zeroed blocks of a file whose summary verified: a new
/// record over the file as it now is (its summary would fail otherwise).
/// Does nothing for a file without a summary.
pub fn reseal_summary(file: &File, keys: &Keyring) -> std::io::Result<()> {
    let io = |e: ContentError| std::io::Error::other(e.to_string());
    let Some(key) = keys.summary() else {
        return Ok(());
    };
    let mut h = [0u8; header::LEN];
    file.read_exact_at(&mut h, 0)?;
    let hdr = Header::parse(&h).map_err(io)?;
    if !hdr.summary {
        return Ok(());
    }
    let size = layout::plain_size(keys.mode(), file.metadata()?.len()).map_err(io)?;
    let mut st = crate::summary::check(file, key, &hdr.file_id, size).map_err(io)?.state;
    st.poisoned = None;
    crate::summary::commit(file, key, &hdr.file_id, size, &mut st).map_err(io)
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
mod tests {
    use super::*;
    use crate::cipher::Cipher;
    use crate::CipherFile;
    use std::sync::Arc;
    use warpfs_crypto::{ContentKey, GcmTagger};
    use warpfs_keystream::Direct;

    fn cipher(mode: Mode) -> Arc<Cipher> {
        let key = ContentKey::new(&[9u8; 32]).unwrap();
        let tagger = GcmTagger::new(&key);
        Arc::new(Cipher::new(mode, Arc::new(Direct::new(key)), tagger))
    }

    fn file_with(mode: Mode, data: &[u8]) -> (tempfile::NamedTempFile, Arc<Cipher>) {
        let c = cipher(mode);
        let t = tempfile::NamedTempFile::new().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap();
        let cf = CipherFile::open(f, c.clone(), "t".into()).unwrap();
        cf.write_at(0, data).unwrap();
        (t, c)
    }

    fn run(t: &tempfile::NamedTempFile, c: &Arc<Cipher>) -> (Scan, Vec<u64>, u64) {
        let f = File::open(t.path()).unwrap();
        let mut blocks = Vec::new();
        let mut bytes = 0;
        let k = Keyring::new(c.clone(), None);
        let s = scan(&f, &k, 1 << 20, &mut |b, _| blocks.push(b), &mut |n| bytes += n).unwrap();
        (s, blocks, bytes)
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    #[test]
    fn clean_files_have_no_problems() {
        for mode in [Mode::Ctr, Mode::Gcm] {
            let n = 300 * 4096 + 77; // nnode, one full page, part of the next
            let (t, c) = file_with(mode, &data(n));
            let (s, blocks, bytes) = run(&t, &c);
            assert!(s.problems.is_empty(), "{mode:?}: {:?}", s.problems);
            assert_eq!(s.size, n as u64);
            assert_eq!(s.blocks, 301);
            assert_eq!(s.written, 301);
            assert_eq!(blocks, (0..301).collect::<Vec<_>>());
            assert_eq!(bytes, n as u64);
        }
    }

    #[test]
    fn flipped_data_bit_is_a_bad_tag_at_its_block_and_zeroing_makes_a_hole() {
        let (t, c) = file_with(Mode::Gcm, &data(40 * 4096));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap();
        let off = data_offset(Mode::Gcm, 20) + 5;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, off).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], off).unwrap();
        let (s, _, _) = run(&t, &c);
        assert_eq!(s.problems, vec![Problem::BadTag { block: 20 }]);
        assert!(s.problems[0].zeroable());
        zero_block(&f, Mode::Gcm, 20).unwrap();
        let (s, _, _) = run(&t, &c);
        assert!(s.problems.is_empty());
        assert_eq!(s.written, 39);
        let cf = CipherFile::open(f, c, "t".into()).unwrap();
        let mut buf = vec![1u8; 4096 * 3];
        cf.read_at(19 * 4096, &mut buf).unwrap();
        let want = data(40 * 4096);
        assert_eq!(&buf[..4096], &want[19 * 4096..20 * 4096]);
        assert!(buf[4096..8192].iter().all(|&x| x == 0));
        assert_eq!(&buf[8192..], &want[21 * 4096..22 * 4096]);
    }

    #[test]
    fn ctr_cannot_see_flipped_data_but_sees_bad_entries_and_repeats() {
        let (t, c) = file_with(Mode::Ctr, &data(5 * 4096));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap();
        f.write_all_at(&[0xff], data_offset(Mode::Ctr, 1)).unwrap();
        assert!(run(&t, &c).0.problems.is_empty());
        // Block 3 gets block 1's entry; block 2 gets a key generation.
        let mut e1 = [0u8; 16];
        f.read_exact_at(&mut e1, entry_offset(Mode::Ctr, 1)).unwrap();
        f.write_all_at(&e1, entry_offset(Mode::Ctr, 3)).unwrap();
        f.write_all_at(&[7], entry_offset(Mode::Ctr, 2) + 12).unwrap();
        let (s, _, _) = run(&t, &c);
        assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
        assert!(matches!(&s.problems[0], Problem::Entry { block: 2, what } if what.contains("key generation")));
        assert_eq!(s.problems[1], Problem::RepeatedNonce { block: 3, first: 1 });
        assert!(!s.problems[1].zeroable());
    }

    #[test]
    fn torn_tail_is_found_and_cut_without_losing_data() {
        for mode in [Mode::Ctr, Mode::Gcm] {
            let n = 16 * 4096 + 3 * 4096;
            let (t, c) = file_with(mode, &data(n));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(t.path())
                .unwrap();
            // Shrink to exactly the end of the nnode's data plus half a page.
            let good = layout::backing_len(mode, 16 * 4096);
            let torn = good + layout::page_len(mode) / 2;
            f.set_len(torn).unwrap();
            let (s, _, _) = run(&t, &c);
            assert_eq!(
                s.problems,
                vec![Problem::TornTail {
                    backing_len: torn,
                    fixed_len: good
                }]
            );
            fix_torn_tail(&f, mode, good).unwrap();
            let (s, _, _) = run(&t, &c);
            assert!(s.problems.is_empty());
            assert_eq!(s.size, 16 * 4096);
            let cf = CipherFile::open(f, c, "t".into()).unwrap();
            let mut buf = vec![0u8; 16 * 4096];
            cf.read_at(0, &mut buf).unwrap();
            assert_eq!(buf, data(n)[..16 * 4096]);
        }
    }

    #[test]
    fn bad_header_and_length_stop_the_scan() {
        let (t, c) = file_with(Mode::Gcm, &data(5000));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap();
        f.write_all_at(b"X", 0).unwrap();
        let (s, _, _) = run(&t, &c);
        assert!(matches!(&s.problems[..], [Problem::Header(w)] if w.contains("magic")));
        // A ctr cipher sees the gcm header's mode.
        f.write_all_at(b"W", 0).unwrap();
        let (s, _, _) = run(&t, &cipher(Mode::Ctr));
        assert!(matches!(&s.problems[..], [Problem::Header(w)] if w.contains("differs")));
        f.set_len(100).unwrap();
        let (s, _, _) = run(&t, &c);
        assert!(matches!(&s.problems[..], [Problem::Length(_)]));
    }

    #[test]
    fn nonce_cap_is_reported() {
        let (t, c) = file_with(Mode::Gcm, &data(10 * 4096));
        let f = File::open(t.path()).unwrap();
        let s = scan(&f, &Keyring::new(c, None), 4, &mut |_, _| {}, &mut |_| {}).unwrap();
        assert!(s.nonce_cap_hit);
        assert!(s.problems.is_empty());
    }
}
