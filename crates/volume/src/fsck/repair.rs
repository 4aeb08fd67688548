//! fsck's repairs, each made only when its option was given and only where
//! no readable data is lost: a block that cannot be read anyway becomes a
//! hole (its old bytes saved to the run's undo file first), a torn tail
//! loses only a partial nonce page, an orphan sidecar is a leftover file.
//! A file is repaired through the descriptor it was scanned through, and
//! only while its path still leads to that file. Every finding gets its
//! [`Fix`] state here.

use super::report::{Finding, Fix, Kind};
use super::undo::Out;
use super::walk::Item;
use super::Repairs;
use crate::volume::Volume;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use warpfs_content::header::{self, Header};
use warpfs_content::scan::{self, Problem};
use warpfs_content::zeroundo::{self, Target, CHUNK_BLOCKS};

const ZERO: &str = "--zero-bad-blocks";
const TAIL: &str = "--fix-torn-tails";
const SIDECAR: &str = "--remove-orphan-sidecars";

fn result(r: std::io::Result<()>, how: &'static str) -> Fix {
    match r {
        Ok(()) => Fix::Done(how),
        Err(e) => Fix::Failed(e.to_string()),
    }
}

/// A file as its scan saw it.
pub(super) struct Scanned<'a> {
    /// The walked file.
    pub item: &'a Item,
    /// The descriptor it was scanned through (read-write when a repair
    /// was asked for, unless `read_only` says why not).
    pub file: &'a File,
    /// Why the file could not be opened for writing, if so.
    pub read_only: Option<String>,
    /// Plaintext size.
    pub size: u64,
    /// It has a file summary.
    pub summary: bool,
}

/// Whether the backing path still leads to the scanned file (not a
/// symlink, not another file put in its place): else why not.
fn still_there(vol: &Volume, s: &Scanned) -> Result<(), String> {
    let gone = |what: &str| format!("the backing file was {what} after the scan: not repaired");
    let (d, n) = vol
        .at(&s.item.rel)
        .map_err(|e| gone(&format!("made unreachable ({e})")))?;
    let st = warpfs_backing::lstat(&d.entry(&n)).map_err(|e| gone(&format!("removed ({e})")))?;
    match st.st_mode & libc::S_IFMT {
        libc::S_IFLNK => Err(gone("replaced by a symbolic link")),
        libc::S_IFREG if (st.st_dev, st.st_ino) == (s.item.dev, s.item.ino) => Ok(()),
        _ => Err(gone("replaced by another file")),
    }
}

/// Make `blocks` of the scanned file holes, each run of them saved to the
/// undo file first; in a file whose summary verified, seal the summary
/// again (saved as well). `Err((n, why))`: only the first `n` blocks were
/// zeroed.
fn zero(vol: &Volume, s: &Scanned, blocks: &[u64], reseal: bool, undo: &mut Out) -> Result<(), (usize, String)> {
    let mut h = [0u8; header::LEN];
    s.file.read_exact_at(&mut h, 0).map_err(|e| (0, e.to_string()))?;
    let hdr = Header::parse(&h).map_err(|e| (0, e.to_string()))?;
    let target = Target {
        dev: s.item.dev,
        ino: s.item.ino,
        file_id: hdr.file_id,
        path: s.item.rel.as_os_str().as_bytes().to_vec(),
    };
    let mut done = 0;
    for chunk in blocks.chunks(CHUNK_BLOCKS) {
        let mut step = || -> std::io::Result<()> {
            let st = zeroundo::capture_zero(s.file, vol.mode, s.size, s.summary, chunk, target.clone())?;
            let w = undo.writer(vol)?;
            let seq = w.step(&st)?;
            scan::zero_blocks(s.file, vol.mode, s.summary, chunk)?;
            undo.writer(vol)?.done(seq, &[])?;
            undo.blocks += chunk.len() as u64;
            Ok(())
        };
        step().map_err(|e| (done, e.to_string()))?;
        done += chunk.len();
    }
    if reseal && s.summary {
        let r = (|| -> std::io::Result<()> {
            let st = zeroundo::capture_reseal(s.file, s.size, target)?;
            let seq = undo.writer(vol)?.step(&st)?;
            scan::reseal_summary(s.file, vol.keys())?;
            let now = zeroundo::recorded_now(s.file, &st)?;
            undo.writer(vol)?.done(seq, &now)
        })();
        if let Err(e) = r {
            tracing::error!("{}: file summary not resealed: {e}", s.item.rel.display());
        }
    }
    Ok(())
}

/// Repair the findings of one scanned cipher file.
pub(super) fn file(vol: &Volume, s: &Scanned, findings: &mut [Finding], want: Repairs, undo: &mut Out) {
    let mut zeroable = Vec::new();
    let mut tail = None;
    for (i, f) in findings.iter_mut().enumerate() {
        match &f.kind {
            Kind::File(p) if p.zeroable() => {
                f.fix = Fix::NotAsked(ZERO);
                if want.zero_bad_blocks {
                    zeroable.push((i, p.block().expect("zeroable problems have a block")));
                }
            }
            Kind::File(Problem::TornTail { fixed_len, .. }) => {
                f.fix = Fix::NotAsked(TAIL);
                if want.fix_torn_tails {
                    tail = Some((i, *fixed_len));
                }
            }
            _ => {}
        }
    }
    if zeroable.is_empty() && tail.is_none() {
        return;
    }
    // Nothing is written unless the path still leads to the scanned file.
    let writable = match &s.read_only {
        Some(why) => Err(why.clone()),
        None => still_there(vol, s),
    };
    if let Err(why) = writable {
        for i in zeroable.iter().map(|z| z.0).chain(tail.map(|t| t.0)) {
            findings[i].fix = Fix::Failed(why.clone());
        }
        return;
    }
    // Zero bad blocks first: a torn-tail cut never touches a readable block.
    if !zeroable.is_empty() {
        // A file whose summary verified is resealed over its zeroed blocks.
        let summary_bad = findings
            .iter()
            .any(|f| matches!(f.kind, Kind::File(Problem::Summary(_))));
        let blocks: Vec<u64> = zeroable.iter().map(|z| z.1).collect();
        let r = zero(vol, s, &blocks, !summary_bad, undo);
        for (n, &(i, _)) in zeroable.iter().enumerate() {
            findings[i].fix = match &r {
                Err((done, why)) if n >= *done => Fix::Failed(why.clone()),
                _ => Fix::Done("block made a hole (reads as zeros; warpfs fsck --undo puts it back)"),
            };
        }
    }
    if let Some((i, fixed_len)) = tail {
        findings[i].fix = result(
            scan::fix_torn_tail(s.file, vol.mode, fixed_len),
            "partial nonce page cut off",
        );
    }
}

/// Remove orphan long-name sidecars (when asked).
pub(super) fn sidecars(vol: &Volume, findings: &mut [Finding], want: Repairs) {
    for f in findings.iter_mut().filter(|f| f.kind == Kind::OrphanSidecar) {
        f.fix = if want.remove_orphan_sidecars {
            result(vol.unlink_backing(&f.backing), "sidecar removed")
        } else {
            Fix::NotAsked(SIDECAR)
        };
    }
}
