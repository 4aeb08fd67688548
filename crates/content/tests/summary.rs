//! File summaries (FORMAT.md 12): rolling back any subset of a file's
//! blocks, or mixing its blocks and nonce pages with another version of
//! it, fails the file (EIO on read, a problem in fsck's scan); a whole-file
//! rollback does not; a crash before a commit leaves a readable file.

mod common;

use common::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use warpfs_content::layout::{backing_len, data_offset, entry_offset};
use warpfs_content::scan::{self, Problem};
use warpfs_content::summary;
use warpfs_content::{CipherFile, ContentError, Keyring, Mode};
use warpfs_crypto::{MasterKey, SummaryKey};

const G: Mode = Mode::Gcm;
const B: u64 = 4096;

fn keys() -> Arc<Keyring> {
    let sk = SummaryKey::derive(&MasterKey::from_bytes(&[9u8; 32]).unwrap());
    Arc::new(Keyring::new(cipher(G), None).with_summary(Some(Arc::new(sk))))
}

fn open_s(path: &Path, k: &Arc<Keyring>) -> Result<CipherFile, ContentError> {
    CipherFile::open(rw(path), k.clone(), path.display().to_string())
}

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Copy `[off, off + len)` of `from` into `path`.
fn graft(path: &Path, from: &[u8], off: u64, len: u64) {
    rw(path)
        .write_all_at(&from[off as usize..(off + len) as usize], off)
        .unwrap();
}

/// Put block `b`'s entry (all 32 bytes, summary slot included) and data
/// from the older copy `old` back.
fn roll_back_block(path: &Path, old: &[u8], b: u64) {
    graft(path, old, entry_offset(G, b), 32);
    graft(path, old, data_offset(G, b), B);
}

fn reads_fail(f: &CipherFile) {
    let mut v = vec![7u8; f.size() as usize];
    let e = f.read_at(0, &mut v).unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert!(v.iter().all(|&x| x == 0), "a failed read returned bytes");
    assert!(f.summary_failure().is_some());
}

fn scan_problems(path: &Path, k: &Keyring) -> Vec<Problem> {
    let f = File::open(path).unwrap();
    scan::scan(&f, k, 1 << 20, &mut |_, _| {}, &mut |_| {})
        .unwrap()
        .problems
}

fn has_summary_problem(p: &[Problem]) -> bool {
    p.iter().any(|p| matches!(p, Problem::Summary(_)))
}

/// A file of 600 blocks (three segments) in two versions: `old` (copy of
/// the backing file) and the current one, where blocks 3, 20, 300 and 590
/// were rewritten; both closed (committed).
fn two_versions() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>, Vec<u8>, Arc<Keyring>) {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("f");
    let k = keys();
    let v1 = pattern(1, 600 * B as usize);
    open_s(&path, &k).unwrap().write_at(0, &v1).unwrap();
    let old = bytes(&path);
    let mut v2 = v1.clone();
    {
        let f = open_s(&path, &k).unwrap();
        for b in [3u64, 20, 300, 590] {
            let p = pattern(100 + b, B as usize);
            f.write_at(b * B, &p).unwrap();
            v2[(b * B) as usize..((b + 1) * B) as usize].copy_from_slice(&p);
        }
    }
    (d, path, old, v2, k)
}

#[test]
fn a_committed_file_reads_back_and_its_header_is_version_2() {
    let (_d, path, _old, v2, k) = two_versions();
    let f = open_s(&path, &k).unwrap();
    assert_eq!(read_all(&f), v2);
    assert!(f.summary_failure().is_none());
    assert_eq!(&bytes(&path)[4..6], &[2, 0]);
    assert!(scan_problems(&path, &k).is_empty());
}

#[test]
fn rolling_back_any_one_block_is_detected() {
    for b in [3u64, 20, 300, 590] {
        let (_d, path, old, _v2, k) = two_versions();
        roll_back_block(&path, &old, b);
        let f = open_s(&path, &k).unwrap();
        reads_fail(&f);
        assert!(has_summary_problem(&scan_problems(&path, &k)), "block {b}");
    }
}

#[test]
fn rolling_back_a_subset_of_blocks_is_detected() {
    let (_d, path, old, _v2, k) = two_versions();
    for b in [3u64, 300] {
        roll_back_block(&path, &old, b);
    }
    reads_fail(&open_s(&path, &k).unwrap());
}

#[test]
fn mixing_a_nonce_page_and_its_segment_from_another_version_is_detected() {
    let (_d, path, old, _v2, k) = two_versions();
    // Segment 1 (blocks 16..272): page 0 and the data behind it, whole.
    let page = entry_offset(G, 16);
    let end = data_offset(G, 271) + B;
    graft(&path, &old, page, end - page);
    let f = open_s(&path, &k).unwrap();
    reads_fail(&f);
    assert!(has_summary_problem(&scan_problems(&path, &k)));
}

#[test]
fn mixing_the_nnode_from_another_version_is_detected() {
    let (_d, path, old, _v2, k) = two_versions();
    // The header area and blocks 0..16 (record slots included).
    graft(&path, &old, 0, data_offset(G, 15) + B);
    reads_fail(&open_s(&path, &k).unwrap());
}

#[test]
fn a_whole_file_rollback_is_not_detected() {
    let (_d, path, old, _v2, k) = two_versions();
    std::fs::write(&path, &old).unwrap();
    let f = open_s(&path, &k).unwrap();
    assert_eq!(read_all(&f), pattern(1, 600 * B as usize));
}

#[test]
fn truncating_or_extending_the_backing_file_is_detected() {
    // Trailing holes contribute nothing to the sum: the size binds them.
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("f");
    let k = keys();
    {
        let f = open_s(&path, &k).unwrap();
        f.write_at(0, &pattern(2, 10)).unwrap();
        f.set_len(40 * B).unwrap();
    }
    assert!(open_s(&path, &k).unwrap().summary_failure().is_none());
    rw(&path).set_len(backing_len(G, 30 * B)).unwrap();
    reads_fail(&open_s(&path, &k).unwrap());
    rw(&path).set_len(backing_len(G, 50 * B)).unwrap();
    reads_fail(&open_s(&path, &k).unwrap());
}

#[test]
fn an_uncommitted_file_after_a_crash_reads_back() {
    // The state a power loss leaves when every write reached the disk but
    // the commit at close did not: the backing bytes copied while open.
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("f");
    let copy = d.path().join("crash");
    let k = keys();
    let v1 = pattern(3, 700 * B as usize);
    open_s(&path, &k).unwrap().write_at(0, &v1).unwrap();
    let f = open_s(&path, &k).unwrap();
    let mut want = v1.clone();
    for (b, len) in [(5u64, 100usize), (400, 4096), (699, 7)] {
        let p = pattern(b, len);
        f.write_at(b * B + 1, &p).unwrap();
        want[(b * B + 1) as usize..(b * B + 1) as usize + len].copy_from_slice(&p);
    }
    f.write_at(700 * B, &pattern(9, 3 * B as usize)).unwrap();
    want.extend_from_slice(&pattern(9, 3 * B as usize));
    f.set_len(702 * B + 5).unwrap();
    want.truncate((702 * B + 5) as usize);
    f.write_at(10 * B, &pattern(10, 10)).unwrap();
    want[(10 * B) as usize..(10 * B + 10) as usize].copy_from_slice(&pattern(10, 10));
    std::fs::write(&copy, bytes(&path)).unwrap();
    drop(f);
    let g = open_s(&copy, &k).unwrap();
    assert!(g.summary_failure().is_none(), "{:?}", g.summary_failure());
    assert_eq!(read_all(&g), want);
    assert!(!has_summary_problem(&scan_problems(&copy, &k)));
    // Its first commit makes it verified again; a later rollback fails it.
    drop(g);
    let h = open_s(&copy, &k).unwrap();
    h.write_at(0, b"x").unwrap();
    drop(h);
    let committed = bytes(&copy);
    let h = open_s(&copy, &k).unwrap();
    h.write_at(400 * B, &pattern(11, B as usize)).unwrap();
    drop(h);
    roll_back_block(&copy, &committed, 400);
    reads_fail(&open_s(&copy, &k).unwrap());
}

/// Copy the summary slots (bytes 12..16) of entries `first..first + 8`.
fn graft_slots(path: &Path, from: &[u8], first: u64) {
    for b in first..first + 8 {
        graft(path, from, entry_offset(G, b) + 12, 4);
    }
}

#[test]
fn a_crash_in_the_middle_of_a_truncation_reads_back() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("f");
    let k = keys();
    let v1 = pattern(4, 900 * B as usize);
    open_s(&path, &k).unwrap().write_at(0, &v1).unwrap();
    let full = bytes(&path);
    open_s(&path, &k).unwrap().set_len(300 * B + 9).unwrap();
    let after = bytes(&path);
    assert!(open_s(&path, &k).unwrap().summary_failure().is_none());
    // The new last block 300 is in segment 2, whose marker slots are the
    // entries of blocks 272..280; the record's are those of blocks 0..8.
    // Crash before the truncation: the tail marker is down, nothing else.
    let before = d.path().join("before");
    std::fs::write(&before, &full).unwrap();
    {
        let f = rw(&before);
        let id: [u8; 16] = full[8..24].try_into().unwrap();
        let sk = &k.summary().unwrap();
        let mut st = summary::check(&f, sk, &id, 900 * B).unwrap().state;
        summary::mark_tail(&f, sk, &id, 900 * B, 300 * B + 9, &mut st).unwrap();
    }
    let marked = bytes(&before);
    let f = open_s(&before, &k).unwrap();
    assert!(f.summary_failure().is_none(), "{:?}", f.summary_failure());
    assert_eq!(read_all(&f), v1);
    // Crash after the truncation, before the new record.
    let mid = d.path().join("mid");
    std::fs::write(&mid, &after).unwrap();
    graft_slots(&mid, &full, 0);
    graft_slots(&mid, &marked, 272);
    let f = open_s(&mid, &k).unwrap();
    assert!(f.summary_failure().is_none(), "{:?}", f.summary_failure());
    assert_eq!(read_all(&f), &v1[..(300 * B + 9) as usize]);
    // Without the tail marker the same cut is a truncation behind
    // warpfs's back.
    let cut = d.path().join("cut");
    std::fs::write(&cut, &full).unwrap();
    rw(&cut).set_len(after.len() as u64).unwrap();
    graft(&cut, &after, data_offset(G, 300), 9);
    graft(&cut, &after, entry_offset(G, 300), 32);
    reads_fail(&open_s(&cut, &k).unwrap());
}

#[test]
fn a_volume_with_summaries_refuses_a_file_without_one_and_the_other_way() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("f");
    open(&path, &cipher(G)).write_at(0, b"plain format 1").unwrap();
    let e = open_s(&path, &keys()).unwrap_err();
    assert!(e.to_string().contains("no file summary"), "{e}");
    let p2 = d.path().join("g");
    open_s(&p2, &keys()).unwrap().write_at(0, b"format 2").unwrap();
    assert!(CipherFile::open(rw(&p2), cipher(G), "g".into()).is_err());
}

#[test]
fn a_poisoned_file_refuses_writes_until_it_is_emptied() {
    let (_d, path, old, _v2, k) = two_versions();
    roll_back_block(&path, &old, 300);
    let f = open_s(&path, &k).unwrap();
    assert_eq!(f.write_at(0, b"y").unwrap_err().errno(), libc::EIO);
    f.set_len(0).unwrap();
    f.write_at(0, b"fresh").unwrap();
    drop(f);
    let g = open_s(&path, &k).unwrap();
    assert_eq!(read_all(&g), b"fresh");
}

#[test]
fn random_operations_keep_the_running_sum_right() {
    // The sum each commit seals is kept up to date write by write (not
    // recomputed): after any mix of writes, holes, extensions, shrinks and
    // fsyncs the file verifies when opened again and reads as the model.
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("f");
    let k = keys();
    let mut model: Vec<u8> = Vec::new();
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    for round in 0..6 {
        let f = open_s(&path, &k).unwrap();
        for _ in 0..40 {
            match next(10) {
                0..=4 => {
                    let off = next(700 * B);
                    let len = 1 + next(3 * B) as usize;
                    let data = pattern(next(1 << 30), len);
                    f.write_at(off, &data).unwrap();
                    let end = off as usize + len;
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(&data);
                }
                5 => {
                    let off = next(model.len() as u64 + 1);
                    let len = next(300 * B);
                    f.punch_hole(off, len).unwrap();
                    let end = ((off + len) as usize).min(model.len());
                    if (off as usize) < end {
                        model[off as usize..end].fill(0);
                    }
                }
                6 => {
                    let n = next(model.len() as u64 + 1) + if next(2) == 0 { 0 } else { 5 * B };
                    f.set_len(n).unwrap();
                    model.resize(n as usize, 0);
                }
                7 => f.sync(next(2) == 0).unwrap(),
                _ => {
                    let off = next(model.len() as u64 + 1);
                    let mut buf = vec![0u8; 9000];
                    let got = f.read_at(off, &mut buf).unwrap();
                    assert_eq!(&buf[..got], &model[off as usize..(off as usize + got)]);
                }
            }
        }
        drop(f);
        let g = open_s(&path, &k).unwrap();
        assert!(
            g.summary_failure().is_none(),
            "round {round}: {:?}",
            g.summary_failure()
        );
        assert_eq!(read_all(&g), model, "round {round}");
    }
}
