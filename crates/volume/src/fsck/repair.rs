//! fsck's repairs, each made only when its option was given and only where
//! no readable data is lost: a block that cannot be read anyway becomes a
//! hole, a torn tail loses only a partial nonce page, an orphan sidecar is
//! a leftover file. Every finding gets its [`Fix`] state here.

use super::report::{Finding, Fix, Kind};
use super::Repairs;
use crate::volume::Volume;
use std::path::Path;
use warpfs_content::scan::{self, Problem};

const ZERO: &str = "--zero-bad-blocks";
const TAIL: &str = "--fix-torn-tails";
const SIDECAR: &str = "--remove-orphan-sidecars";

fn result(r: std::io::Result<()>, how: &'static str) -> Fix {
    match r {
        Ok(()) => Fix::Done(how),
        Err(e) => Fix::Failed(e.to_string()),
    }
}

/// Repair the findings of one cipher file (backing path `rel`, relative to CIPHERDIR).
pub(super) fn file(vol: &Volume, rel: &Path, findings: &mut [Finding], want: Repairs) {
    let mut rw = None;
    let mut open = |rel: &Path| -> std::io::Result<std::fs::File> {
        if rw.is_none() {
            rw = Some(vol.open_backing(rel, libc::O_RDWR)?);
        }
        rw.as_ref().expect("just opened").try_clone()
    };
    // Zero bad blocks first: a torn-tail cut never touches a readable block.
    for f in findings.iter_mut() {
        let Kind::File(p) = &f.kind else { continue };
        if !p.zeroable() {
            continue;
        }
        let block = p.block().expect("zeroable problems have a block");
        f.fix = if want.zero_bad_blocks {
            result(
                open(rel).and_then(|h| scan::zero_block(&h, vol.mode, block)),
                "block made a hole (reads as zeros)",
            )
        } else {
            Fix::NotAsked(ZERO)
        };
    }
    // A file whose summary verified is resealed over its zeroed blocks.
    let zeroed = findings.iter().any(|f| matches!(f.fix, Fix::Done(_)));
    let summary_bad = findings
        .iter()
        .any(|f| matches!(f.kind, Kind::File(Problem::Summary(_))));
    if zeroed && !summary_bad {
        if let Err(e) = open(rel).and_then(|h| scan::reseal_summary(&h, vol.keys())) {
            tracing::error!("{}: file summary not resealed: {e}", rel.display());
        }
    }
    for f in findings.iter_mut() {
        let Kind::File(Problem::TornTail { fixed_len, .. }) = &f.kind else {
            continue;
        };
        f.fix = if want.fix_torn_tails {
            result(
                open(rel).and_then(|h| scan::fix_torn_tail(&h, vol.mode, *fixed_len)),
                "partial nonce page cut off",
            )
        } else {
            Fix::NotAsked(TAIL)
        };
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
