//! Unit tests of what an open cipher file tells the witness of versions
//! seen (FORMAT.md 16): the version each commit replaced, the version a
//! truncation to 0 or a removal ended, and a refusal at open poisoning
//! the file.
use super::*;
use crate::summary::Record;
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

#[derive(Default)]
struct Rec {
    refuse: Mutex<Option<Record>>,
    ended: Mutex<Vec<(Record, Option<Record>)>>,
}

impl crate::Witness for Rec {
    fn opened(&self, _id: &[u8; 16], rec: &Record) -> Result<(), String> {
        match *self.refuse.lock().unwrap() {
            Some(r) if r == *rec => Err("refused".into()),
            _ => Ok(()),
        }
    }
    fn replaced(&self, _id: &[u8; 16], old: &Record, new: Option<&Record>) {
        self.ended.lock().unwrap().push((*old, new.copied()));
    }
}

fn ring(w: &Arc<Rec>) -> Arc<Keyring> {
    let key = ContentKey::new(&[1u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    let cipher = Arc::new(Cipher::new(Mode::Gcm, Arc::new(Direct::new(key)), tagger));
    let mk = warpfs_crypto::MasterKey::from_bytes(&[3; 32]).unwrap();
    let ring = Keyring::new(cipher, None).with_summary(Some(Arc::new(warpfs_crypto::SummaryKey::derive(&mk))));
    ring.set_witness(Some(w.clone() as Arc<dyn crate::Witness>));
    Arc::new(ring)
}

fn reopen(f: &std::fs::File, keys: &Arc<Keyring>) -> CipherFile {
    CipherFile::open(f.try_clone().unwrap(), keys.clone(), "unit".into()).unwrap()
}

#[test]
fn commits_and_truncations_tell_the_version_they_end() {
    let w = Arc::new(Rec::default());
    let keys = ring(&w);
    let disk = tempfile::tempfile().unwrap();
    let f = reopen(&disk, &keys);
    f.write_at(0, b"one").unwrap();
    f.commit_summary().unwrap();
    f.write_at(0, b"two").unwrap();
    f.commit_summary().unwrap();
    let v = w.ended.lock().unwrap().clone();
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!((v[0].0.seq, v[0].1.map(|r| r.seq)), (0, Some(1)));
    assert_eq!((v[1].0, v[1].1.map(|r| r.seq)), (v[0].1.unwrap(), Some(2)));
    let latest = v[1].1.unwrap();
    // A truncation to 0 ends the latest commit (a removal reaches the
    // witness through the volume, which reads the record from disk).
    f.set_len(0).unwrap();
    assert_eq!(w.ended.lock().unwrap()[2], (latest, None));
    assert_eq!(w.ended.lock().unwrap().len(), 3);
}

#[test]
fn a_version_the_witness_refuses_is_poisoned_at_open() {
    let w = Arc::new(Rec::default());
    let keys = ring(&w);
    let disk = tempfile::tempfile().unwrap();
    let f = reopen(&disk, &keys);
    f.write_at(0, b"data").unwrap();
    f.commit_summary().unwrap();
    drop(f);
    let rec = w.ended.lock().unwrap().last().unwrap().1.unwrap();
    let mut buf = [0u8; 4];
    assert!(reopen(&disk, &keys).read_at(0, &mut buf).is_ok());
    *w.refuse.lock().unwrap() = Some(rec);
    let f = reopen(&disk, &keys);
    assert_eq!(f.summary_failure().as_deref(), Some("refused"));
    assert!(f.read_at(0, &mut buf).is_err());
}
