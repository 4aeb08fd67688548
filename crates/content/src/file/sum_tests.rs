//! Unit tests of the running file-summary sums (`summary::Sums`): after
//! any writes, truncations and hole punches, the per-segment sums the
//! writes kept equal what the entries on disk give, and markers written
//! from them (no read of the entries back) name each dirty segment's
//! committed sum, so a file left uncommitted still checks.
use super::*;
use crate::layout::BLOCK;
use proptest::prelude::*;
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

fn cf() -> CipherFile {
    let key = ContentKey::new(&[1u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    let cipher = Arc::new(Cipher::new(Mode::Gcm, Arc::new(Direct::new(key)), tagger));
    let mk = warpfs_crypto::MasterKey::from_bytes(&[3; 32]).unwrap();
    let ring = Keyring::new(cipher, None).with_summary(Some(Arc::new(warpfs_crypto::SummaryKey::derive(&mk))));
    CipherFile::open(tempfile::tempfile().unwrap(), Arc::new(ring), "unit".into()).unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Write(u64, usize, u8),
    SetLen(u64),
    Punch(u64, u64),
    Commit,
}

fn op() -> impl Strategy<Value = Op> {
    // Offsets up to a little past two segments (blocks 0..~600), so runs
    // cross the nnode and nonce pages.
    let off = prop_oneof![0u64..20 * BLOCK, 0u64..600 * BLOCK];
    prop_oneof![
        4 => (off.clone(), 1usize..3 * BLOCK as usize, any::<u8>()).prop_map(|(o, l, v)| Op::Write(o, l, v)),
        1 => off.clone().prop_map(Op::SetLen),
        1 => (off, 1u64..300 * BLOCK).prop_map(|(o, l)| Op::Punch(o, l)),
        2 => Just(Op::Commit),
    ]
}

fn apply(f: &CipherFile, op: &Op) {
    match *op {
        Op::Write(off, len, v) => {
            f.write_at(off, &vec![v; len]).unwrap();
        }
        Op::SetLen(s) => f.set_len(s).unwrap(),
        Op::Punch(off, len) => f.punch_hole(off, len).unwrap(),
        Op::Commit => f.commit_summary().unwrap(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(warpfs_testkit::cases(48)))]

    #[test]
    fn running_sums_match_the_disk_and_markers_name_committed_sums(
        ops in proptest::collection::vec(op(), 1..16),
    ) {
        let f = cf();
        for op in &ops {
            apply(&f, op);
            let Some((running, disk)) = f.sums_and_disk() else { continue };
            // The file as it stands, never committed since these changes,
            // checks: each dirty segment's marker names its sum at the last
            // commit.
            prop_assert!(disk.poisoned.is_none(), "after {op:?}: {:?}", disk.poisoned);
            if let Some(r) = running {
                prop_assert_eq!(Some(r), disk.sums, "after {:?}", op);
            }
        }
    }
}

/// A write after a commit makes its segment dirty from the running sum,
/// without reading the segment's entries back: the marker names the sum
/// the file committed even when an entry on disk was changed behind the
/// file's back since, and the next commit then fails the check.
#[test]
fn a_marker_comes_from_the_running_sum_not_from_the_disk() {
    let f = cf();
    f.write_at(0, &vec![7u8; 300 * BLOCK as usize]).unwrap();
    f.commit_summary().unwrap();
    let k = crate::summary::seg_of(120);
    assert_eq!(crate::summary::seg_of(100), k);
    let (running, _) = f.sums_and_disk().unwrap();
    let committed = running.unwrap().seg(k);
    // Block 100's entry changed on disk behind the file (as storage
    // could): a marker read back from the disk would name another sum.
    let at = crate::layout::entry_offset(Mode::Gcm, 100);
    let mut e = [0u8; 12];
    std::os::unix::fs::FileExt::read_exact_at(&f.file, &mut e, at).unwrap();
    e[0] ^= 1;
    std::os::unix::fs::FileExt::write_all_at(&f.file, &e, at).unwrap();
    // A write to another block of the same segment marks it dirty.
    f.write_at(120 * BLOCK, b"x").unwrap();
    let (_, disk) = f.sums_and_disk().unwrap();
    assert_eq!(disk.dirty.get(&k).map(|d| d.sum), Some(committed));
    assert_ne!(disk.sums.unwrap().seg(k), committed, "the disk's entries changed");
    // The commit seals the sums the writes kept: the changed entry fails.
    f.commit_summary().unwrap();
    let (_, disk) = f.sums_and_disk().unwrap();
    assert!(
        disk.poisoned.is_some(),
        "the entry changed behind the file's back is found"
    );
}

/// A file changing in many segments pays one marker sync per segment only
/// up to `EAGER`: the next marks the rest of the file with it (up to
/// `EAGER_BATCH`), the file still checks as it stands, and the commit
/// leaves it clean.
#[test]
fn past_eager_marker_syncs_the_rest_of_the_file_is_marked_at_once() {
    use crate::summary::{seg_range, EAGER};
    let f = cf();
    let segs = 20u64;
    f.write_at(0, &vec![1u8; (seg_range(segs - 1).0 * BLOCK) as usize + 1])
        .unwrap();
    f.commit_summary().unwrap();
    for k in 1..=u64::from(EAGER) {
        f.write_at(seg_range(k).0 * BLOCK, b"w").unwrap();
    }
    let (_, disk) = f.sums_and_disk().unwrap();
    assert_eq!(
        disk.dirty.len() as u64,
        u64::from(EAGER),
        "one marker per changed segment"
    );
    f.write_at(seg_range(EAGER as u64 + 1).0 * BLOCK, b"w").unwrap();
    let (_, disk) = f.sums_and_disk().unwrap();
    assert_eq!(disk.dirty.len() as u64, segs, "every segment marked");
    assert!(disk.poisoned.is_none(), "{:?}", disk.poisoned);
    // A segment marked without a change still checks after more writes.
    f.write_at(seg_range(15).0 * BLOCK + 7, b"later").unwrap();
    assert!(f.sums_and_disk().unwrap().1.poisoned.is_none());
    f.commit_summary().unwrap();
    let (_, disk) = f.sums_and_disk().unwrap();
    assert!(disk.dirty.is_empty() && disk.poisoned.is_none());
}
