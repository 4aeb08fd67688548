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

/// An fsync that leaves the commit to the committer syncs without one:
/// the file on disk verifies as it is (its changed segment covered by its
/// marker, as after a crash), and a batch then commits it while it is
/// still open; a batch at unmount commits what is pending.
#[test]
fn an_fsynced_open_file_verifies_uncommitted_and_a_batch_commits_it() {
    let d = tempfile::tempdir().unwrap();
    let (keys, sk) = keys();
    let (f, disk) = file(d.path(), "f", &keys);
    f.write_at(0, &[5u8; 70_000]).unwrap();
    assert!(f.sync_uncommitted(true).unwrap(), "a commit is pending");
    assert_eq!(
        on_disk(&disk, &sk),
        (0, vec![0], true),
        "synced, not committed, verifying"
    );
    assert!(f.uncommitted_for().is_some());
    assert!(commit_batch(std::slice::from_ref(&f), false).is_empty(), "sealed");
    assert_eq!(on_disk(&disk, &sk), (1, vec![], true), "committed while open");
    assert!(f.uncommitted_for().is_none());
    f.write_at(300 * 4096, b"x").unwrap();
    assert!(f.sync_uncommitted(false).unwrap());
    assert_eq!(on_disk(&disk, &sk).1, vec![1], "a new cycle's marker, synced");
    assert!(commit_batch(std::slice::from_ref(&f), true).is_empty());
    assert_eq!(on_disk(&disk, &sk), (2, vec![], true));
}

/// A handle's fsync with a committer that has stopped (an unmount under
/// way) commits inline; without a committer it commits as before.
#[test]
fn a_handle_fsync_commits_inline_once_the_committer_stopped() {
    let d = tempfile::tempdir().unwrap();
    let (keys, sk) = keys();
    let c = Committer::new();
    c.finish();
    let (f, disk) = file(d.path(), "f", &keys);
    let h = crate::OpenFile::new(f.clone(), None, Some(&c));
    h.write_at(0, b"late").unwrap();
    h.sync(true).unwrap();
    assert_eq!(on_disk(&disk, &sk), (1, vec![], true));
    let bare = crate::OpenFile::new(f.clone(), None, None);
    bare.write_at(0, b"again").unwrap();
    bare.sync(true).unwrap();
    assert_eq!(on_disk(&disk, &sk), (2, vec![], true));
}

/// A file removed while the committer holds it is not committed (it can
/// never be opened again).
#[test]
fn a_removed_file_is_not_committed() {
    let d = tempfile::tempdir().unwrap();
    let (keys, sk) = keys();
    let (f, disk) = file(d.path(), "f", &keys);
    f.write_at(0, b"gone").unwrap();
    std::fs::remove_file(d.path().join("f")).unwrap();
    assert!(commit_batch(std::slice::from_ref(&f), true).is_empty());
    drop(f);
    assert_eq!(on_disk(&disk, &sk).0, 0, "no commit written");
}

/// The last handle's close leaves the file to the committer *parked* (a
/// reopen then checks it against the disk), while a handle still open
/// keeps it unparked; the committer unparks what it lets go.
#[test]
fn a_closed_file_the_committer_holds_is_parked_until_it_lets_go() {
    let d = tempfile::tempdir().unwrap();
    let (keys, _) = keys();
    let c = Committer::new();
    let (f, _disk) = file(d.path(), "f", &keys);
    let (a, b) = (
        crate::OpenFile::new(f.clone(), None, Some(&c)),
        crate::OpenFile::new(f.clone(), None, Some(&c)),
    );
    a.write_at(0, b"two handles").unwrap();
    drop(a);
    assert!(!f.parked(), "a handle is still open");
    let b2 = b.clone();
    drop(b);
    assert!(!f.parked(), "a clone of a handle counts as one");
    drop(b2);
    assert!(f.parked(), "the last handle closed with a commit pending");
    c.finish();
    assert!(!f.parked(), "committed and let go");
}
