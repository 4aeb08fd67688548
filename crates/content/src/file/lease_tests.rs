//! Unit tests of summaries shared between hosts (`lease.rs`): two handles
//! on one backing file, each with a state of its own as two hosts'
//! mounts have, write it in any interleaving; the file checks at every
//! step, a third host reads what was written last, and once both let go
//! the file is committed and a rolled-back block is found. Without the
//! coordination the same two writers break each other's summary.
use super::*;
use crate::layout::BLOCK;
use proptest::prelude::*;
use std::path::Path;
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

/// The file's size: three segments.
const BLOCKS: u64 = 600;

fn ring(shared: bool) -> Arc<Keyring> {
    let key = ContentKey::new(&[1u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    let cipher = Arc::new(Cipher::new(Mode::Gcm, Arc::new(Direct::new(key)), tagger));
    let mk = warpfs_crypto::MasterKey::from_bytes(&[3; 32]).unwrap();
    let ring = Keyring::new(cipher, None).with_summary(Some(Arc::new(warpfs_crypto::SummaryKey::derive(&mk))));
    ring.set_shared_storage(shared);
    Arc::new(ring)
}

/// A host's handle on the file: its own descriptor, keyring and state.
fn host(p: &Path, shared: bool) -> CipherFile {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(p).unwrap();
    CipherFile::open(f, ring(shared), "unit".into()).unwrap()
}

/// A host only reading the file (its drop commits nothing).
fn reader(p: &Path) -> CipherFile {
    CipherFile::open(std::fs::File::open(p).unwrap(), ring(false), "unit".into()).unwrap()
}

/// What a host opening the file now finds.
fn look(p: &Path) -> SumState {
    let f = reader(p);
    let h = f.sh.lock.state().hdr.unwrap();
    let key = f.summ().unwrap().key();
    crate::summary::check(&f.file, &key, &h.file_id, f.size())
        .unwrap()
        .state
}

/// A file of `BLOCKS` zero blocks, committed.
fn made(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("f");
    std::fs::File::create(&p).unwrap();
    let f = host(&p, false);
    f.write_at(0, &vec![0u8; (BLOCKS * BLOCK) as usize]).unwrap();
    f.commit_summary().unwrap();
    p
}

#[derive(Debug, Clone)]
enum Op {
    /// Host, first block, blocks, byte.
    Write(usize, u64, u64, u8),
    Commit(usize),
    /// The host closes the file and opens it again.
    Reopen(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let h = 0usize..2;
    prop_oneof![
        5 => (h.clone(), 0..BLOCKS, 1u64..20, any::<u8>()).prop_map(|(h, b, n, v)| Op::Write(h, b, n.min(BLOCKS - b), v)),
        2 => h.clone().prop_map(Op::Commit),
        1 => h.prop_map(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(warpfs_testkit::cases(24)))]

    #[test]
    fn two_hosts_writing_one_file_never_break_its_summary(ops in proptest::collection::vec(op(), 1..24)) {
        let dir = tempfile::tempdir().unwrap();
        let p = made(dir.path());
        let mut hosts = [Some(host(&p, true)), Some(host(&p, true))];
        let mut model = vec![0u8; (BLOCKS * BLOCK) as usize];
        for op in &ops {
            match *op {
                Op::Write(h, b, n, v) => {
                    let at = (b * BLOCK) as usize;
                    let data = vec![v; (n * BLOCK) as usize];
                    hosts[h].as_ref().unwrap().write_at(b * BLOCK, &data).unwrap();
                    model[at..at + data.len()].copy_from_slice(&data);
                }
                Op::Commit(h) => hosts[h].as_ref().unwrap().commit_summary().unwrap(),
                Op::Reopen(h) => {
                    hosts[h] = None;
                    hosts[h] = Some(host(&p, true));
                }
            }
            let st = look(&p);
            prop_assert!(st.poisoned.is_none(), "after {:?}: {:?}", op, st.poisoned);
        }
        // Both let go (the first may find the other still writing; the
        // second then commits for both).
        for h in &hosts {
            h.as_ref().unwrap().commit_summary().unwrap();
        }
        drop(hosts);
        let st = look(&p);
        prop_assert!(st.poisoned.is_none(), "{:?}", st.poisoned);
        prop_assert!(st.dirty.is_empty(), "left uncommitted: {:?}", st.dirty.keys().collect::<Vec<_>>());
        let mut got = vec![0u8; model.len()];
        prop_assert_eq!(reader(&p).read_at(0, &mut got).unwrap(), model.len());
        prop_assert!(got == model, "a third host reads what was written last");
    }
}

/// One host commits while the other still writes: the commit is left to
/// the last writer, whose commit covers the first one's blocks too, and a
/// block rolled back after it is found.
#[test]
fn the_last_writer_commits_for_both_and_a_rollback_is_then_found() {
    let dir = tempfile::tempdir().unwrap();
    let p = made(dir.path());
    let (a, b) = (host(&p, true), host(&p, true));
    a.write_at(0, &vec![1u8; BLOCK as usize]).unwrap();
    b.write_at(300 * BLOCK, &vec![2u8; BLOCK as usize]).unwrap();
    let seq = look(&p).rec.seq;
    a.commit_summary().unwrap();
    assert_eq!(look(&p).rec.seq, seq, "b still writes: a does not commit");
    assert!(!look(&p).dirty.is_empty());
    // The old version of block 300 (entry and data), kept by storage.
    let (ent, data) = (
        crate::layout::entry_offset(Mode::Gcm, 300),
        crate::layout::data_offset(Mode::Gcm, 300),
    );
    let raw = std::fs::read(&p).unwrap();
    let old = (
        raw[ent as usize..ent as usize + 32].to_vec(),
        raw[data as usize..(data + BLOCK) as usize].to_vec(),
    );
    b.write_at(300 * BLOCK, &vec![3u8; BLOCK as usize]).unwrap();
    b.commit_summary().unwrap();
    let st = look(&p);
    assert_eq!(st.rec.seq, seq + 1, "the last writer commits");
    assert!(st.dirty.is_empty() && st.poisoned.is_none(), "{:?}", st.poisoned);
    // A later write by a reads the new record back before it marks.
    a.write_at(BLOCK, &vec![4u8; BLOCK as usize]).unwrap();
    a.commit_summary().unwrap();
    let st = look(&p);
    assert_eq!(st.rec.seq, seq + 2);
    assert!(st.dirty.is_empty() && st.poisoned.is_none(), "{:?}", st.poisoned);
    // Block 300 rolled back to b's first write: found.
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &old.0, ent).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &old.1, data).unwrap();
    assert!(look(&p).poisoned.is_some(), "a rolled-back block is found");
}

/// Why the coordination exists: two writers each keeping their own sums
/// and markers leave a file that fails its check.
#[test]
fn uncoordinated_writers_break_each_others_summary() {
    let dir = tempfile::tempdir().unwrap();
    let p = made(dir.path());
    let (a, b) = (host(&p, false), host(&p, false));
    a.write_at(0, &vec![1u8; BLOCK as usize]).unwrap();
    b.write_at(300 * BLOCK, &vec![2u8; BLOCK as usize]).unwrap();
    a.commit_summary().unwrap();
    assert!(look(&p).poisoned.is_some(), "a's commit leaves b's block out");
}
