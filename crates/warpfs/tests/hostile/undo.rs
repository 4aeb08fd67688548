//! fsck's undo file in the matrix (FORMAT.md 6b): each undo cell's
//! scenario first damages a block of `file1` and runs `fsck
//! --zero-bad-blocks`, so that `warpfs.fsck.undo-1` is the genuine undo file
//! of this copy of the volume (its records name this copy's inodes); the
//! older genuine copy is the undo file of an earlier zeroing of the same
//! block, put back since and the block damaged otherwise; the foreign one
//! is the undo file of another volume. Afterwards, with the genuine file
//! back, `fsck --undo` must still put the damaged block back exactly.

use super::expect::{Findings, Op};
use super::scenario::Scenario;
use crate::common::*;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The undo file's name (the first of a volume).
pub const UNDO: &str = "warpfs.fsck.undo-1";
/// The file a block of which fsck zeroes.
pub const ZEROED: &str = "file1";
/// Its block that is damaged, then zeroed.
const BLOCK_NO: u64 = 1;

/// What the undo cells' scenario made.
pub struct Made {
    /// `file1`'s backing file (absolute).
    pub back: PathBuf,
    /// Its bytes when fsck zeroed the block (what `fsck --undo` puts back).
    pub damaged: Vec<u8>,
    /// The older genuine undo file (of an earlier zeroing, since put back).
    pub stale: Vec<u8>,
}

fn fsck(v: &Volume, args: &[&str]) -> Out {
    let mut c = Command::new(BIN);
    c.arg("fsck")
        .args(args)
        .arg("--passfile")
        .arg(&v.passfile)
        .arg(&v.cipher);
    run_cmd(c, Duration::from_secs(120))
}

/// Change one byte of `file1`'s block `BLOCK_NO` (its tag no longer
/// verifies), `delta` bytes into the block's data.
fn damage(mode: Mode, back: &Path, delta: u64) {
    let f = fs::OpenOptions::new().read(true).write(true).open(back).unwrap();
    let at = mode.block_data_offset(BLOCK_NO) + delta;
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
}

/// In the scenario's fresh copy `v` of the template: `file1`'s block
/// damaged and zeroed by `fsck --zero-bad-blocks`, its undo file in
/// CIPHERDIR; with `stale`, an earlier undo file of the same block first
/// (made, then put back by `fsck --undo`, the block damaged otherwise).
pub fn prepare(back_rel: &Path, v: &Volume, stale: bool) -> Made {
    let back = v.cipher.join(back_rel);
    let undo = v.cipher.join(UNDO);
    let mut old = Vec::new();
    if stale {
        damage(v.mode, &back, 3);
        fsck(v, &["--zero-bad-blocks"]).expect_code(21, "harness: the earlier zeroing");
        old = fs::read(&undo).unwrap();
        fsck(v, &["--undo"]).expect_ok("harness: the earlier zeroing put back");
        assert!(!undo.exists(), "harness: the spent undo file is removed");
        damage(v.mode, &back, 3);
    }
    damage(v.mode, &back, 11);
    let damaged = fs::read(&back).unwrap();
    fsck(v, &["--zero-bad-blocks"]).expect_code(21, "harness: the zeroing");
    assert!(undo.exists(), "harness: fsck --zero-bad-blocks wrote {UNDO}");
    Made {
        back,
        damaged,
        stale: old,
    }
}

/// `file1` as the mount shows it once its block is zeroed (a hole).
pub fn zeroed(genuine: &[u8]) -> Vec<u8> {
    let mut b = genuine.to_vec();
    let (s, e) = ((BLOCK_NO * BLOCK) as usize, ((BLOCK_NO + 1) * BLOCK) as usize);
    b[s..e.min(genuine.len())].fill(0);
    b
}

/// The undo file of another volume (same password, another key): a volume
/// of one damaged file, zeroed by fsck. Only `gcm` finds bad blocks.
pub fn foreign(mode: Mode) -> Vec<u8> {
    if mode.base() != Mode::Gcm {
        return Vec::new();
    }
    // Other KDF parameters than the template's: another init, another key.
    let mut w = Volume::init_with(mode, &["--kdf-memory", "32768", "--kdf-iterations", "3"]);
    w.mount();
    write_file(&w.p(ZEROED), &Rng::new(11).bytes(10_000));
    w.unmount();
    let back = w
        .backing_paths()
        .into_iter()
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with("warpfs."))
        .expect("the foreign volume's file");
    damage(mode, &back, 11);
    fsck(&w, &["--zero-bad-blocks"]).expect_code(21, "harness: the foreign volume's zeroing");
    fs::read(w.cipher.join(UNDO)).unwrap()
}

/// With the genuine undo file back (after the data check): `fsck --undo`
/// puts `file1` back exactly as fsck found it and removes the undo file
/// (after a rekey, which wrote every other block anew: the damaged block).
pub fn still_restores(s: &mut Scenario, op: Op, f: &mut Findings) {
    let Some(m) = &s.undo else { return };
    let (back, mut damaged) = (m.back.clone(), m.damaged.clone());
    let block = |b: &[u8]| {
        let at = s.v.mode.block_data_offset(BLOCK_NO) as usize;
        b.get(at..at + BLOCK as usize).map(<[u8]>::to_vec).unwrap_or_default()
    };
    let part = op == Op::Rekey;
    if part {
        damaged = block(&damaged);
    }
    let c = s.warpfs_cmd(&["fsck", "--undo"], &s.v.passfile);
    let o = match s.scope.cmd("warpfs fsck --undo (genuine, afterwards)", c) {
        Ok(o) => o,
        Err(e) => return f.fail(format!("{op:?}: fsck --undo afterwards: {e}")),
    };
    let mut now = fs::read(&back).unwrap_or_default();
    if part {
        now = block(&now);
    }
    if o.ok() && now == damaged && !s.v.cipher.join(UNDO).exists() {
        f.pass(format!("{op:?}: the genuine {UNDO} still puts the zeroed block back"));
    } else {
        f.fail(format!(
            "{op:?}: the genuine {UNDO} no longer puts the zeroed block back (exit {:?}, block back: {}): {}",
            o.code,
            now == damaged,
            o.stderr.trim()
        ));
    }
}
