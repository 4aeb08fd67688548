//! Unit tests of the committer of closed files: what it commits verifies
//! as an inline commit would, in one batch for many files, a file changed
//! since its count was read is left alone, and after `finish` the drops
//! commit inline.
use super::*;
use warpfs_content::summary;
use warpfs_content::{Cipher, Keyring, Mode};
use warpfs_crypto::{ContentKey, GcmTagger, MasterKey, SummaryKey};
use warpfs_keystream::Direct;

fn keys() -> (Arc<Keyring>, Arc<SummaryKey>) {
    let key = ContentKey::new(&[1u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    let cipher = Arc::new(Cipher::new(Mode::Gcm, Arc::new(Direct::new(key)), tagger));
    let sk = Arc::new(SummaryKey::derive(&MasterKey::from_bytes(&[3; 32]).unwrap()));
    (Arc::new(Keyring::new(cipher, None).with_summary(Some(sk.clone()))), sk)
}

fn file(dir: &std::path::Path, name: &str, keys: &Arc<Keyring>) -> (Arc<CipherFile>, std::fs::File) {
    let p = dir.join(name);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&p)
        .unwrap();
    let disk = f.try_clone().unwrap();
    (Arc::new(CipherFile::open(f, keys.clone(), name.into()).unwrap()), disk)
}

/// The record's sequence and the dirty segments of the file on disk.
fn on_disk(disk: &std::fs::File, sk: &SummaryKey) -> (u64, Vec<u64>, bool) {
    let (id, _) = summary::peek(disk).unwrap();
    let size = warpfs_content::plain_size_of(Mode::Gcm, disk.metadata().unwrap().len());
    let c = summary::check(disk, sk, &id, size).unwrap();
    (c.state.rec.seq, c.unverified, c.state.poisoned.is_none())
}

#[test]
fn closed_files_are_committed_in_one_batch_and_verify() {
    let d = tempfile::tempdir().unwrap();
    let (keys, sk) = keys();
    let c = Committer::new();
    let mut disks = Vec::new();
    for i in 0..5 {
        let (f, disk) = file(d.path(), &format!("f{i}"), &keys);
        f.write_at(0, &vec![i as u8; 9000]).unwrap();
        assert_eq!(on_disk(&disk, &sk).1, vec![0], "dirty before the commit");
        assert!(c.defer(&f));
        drop(f);
        disks.push(disk);
    }
    c.finish();
    for disk in &disks {
        assert_eq!(
            on_disk(disk, &sk),
            (1, vec![], true),
            "committed once, clean, verifying"
        );
    }
}

#[test]
fn a_file_changed_after_its_count_is_left_to_its_handles() {
    let d = tempfile::tempdir().unwrap();
    let (keys, sk) = keys();
    let (f, disk) = file(d.path(), "f", &keys);
    f.write_at(0, b"one").unwrap();
    let count = f.commit_pending().unwrap();
    f.write_at(0, b"two").unwrap();
    assert!(f.seal_if_unchanged(count).unwrap().is_none());
    let count = f.commit_pending().unwrap();
    let old = f.seal_if_unchanged(count).unwrap().unwrap();
    f.erase_sealed(&old).unwrap();
    assert!(f.commit_pending().is_none(), "nothing left to commit");
    assert_eq!(on_disk(&disk, &sk), (1, vec![], true));
}

#[test]
fn after_finish_files_are_refused_and_commit_as_they_drop() {
    let d = tempfile::tempdir().unwrap();
    let (keys, sk) = keys();
    let c = Committer::new();
    c.finish();
    let (f, disk) = file(d.path(), "f", &keys);
    f.write_at(0, b"late").unwrap();
    assert!(!c.defer(&f));
    drop(f);
    assert_eq!(on_disk(&disk, &sk), (1, vec![], true), "committed inline by the drop");
}
