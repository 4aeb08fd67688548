//! Tests of fsck's undo file: what is written, what is refused, and that a
//! restore puts a file back byte for byte or writes nothing.

use super::*;
use crate::cipher::Cipher;
use crate::CipherFile;
use std::sync::Arc;
use warpfs_crypto::{ContentKey, GcmTagger, MasterKey};
use warpfs_keystream::Direct;

fn key(b: u8) -> UndoKey {
    UndoKey::derive(&MasterKey::from_bytes(&[b; 32]).unwrap())
}

/// A `gcm` cipher file of `blocks` full blocks in a temp file, opened
/// read-write, and its target (device, inode, file ID).
fn cipher_file(blocks: usize) -> (tempfile::NamedTempFile, File, Target) {
    let k = ContentKey::new(&[9u8; 32]).unwrap();
    let tagger = GcmTagger::new(&k);
    let c = Arc::new(Cipher::new(Mode::Gcm, Arc::new(Direct::new(k)), tagger));
    let t = tempfile::NamedTempFile::new().unwrap();
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap()
    };
    let cf = CipherFile::open(open(), c, "t".into()).unwrap();
    cf.write_at(0, &vec![0x5a; blocks * 4096]).unwrap();
    drop(cf);
    let f = open();
    let md = f.metadata().unwrap();
    let mut h = [0u8; header::LEN];
    f.read_exact_at(&mut h, 0).unwrap();
    let target = Target {
        dev: md.dev(),
        ino: md.ino(),
        file_id: Header::parse(&h).unwrap().file_id,
        path: b"d/f".to_vec(),
    };
    (t, f, target)
}

/// Zero `blocks` of `f` as fsck does, through a writer into `out`: the
/// undo file's bytes.
fn zero_with_undo(f: &File, target: &Target, blocks: &[u64], k: UndoKey) -> Vec<u8> {
    let size = 20 * 4096;
    let out = tempfile::tempfile().unwrap();
    let mut w = Writer::new(out.try_clone().unwrap(), k).unwrap();
    let step = capture_zero(f, Mode::Gcm, size, false, blocks, target.clone()).unwrap();
    let seq = w.step(&step).unwrap();
    crate::scan::zero_blocks(f, Mode::Gcm, false, blocks).unwrap();
    w.done(seq, &[]).unwrap();
    let mut b = Vec::new();
    std::io::Read::read_to_end(&mut &out, &mut b).unwrap();
    b
}

fn restore_all(f: &File, loaded: &[Loaded]) -> Result<u64, String> {
    restore(f, &loaded.iter().collect::<Vec<_>>())
}

#[test]
fn zeroed_blocks_are_put_back_exactly() {
    let (t, f, target) = cipher_file(20);
    let before = std::fs::read(t.path()).unwrap();
    let undo = zero_with_undo(&f, &target, &[3, 17], key(1));
    let zeroed = std::fs::read(t.path()).unwrap();
    assert_ne!(zeroed, before);
    let e = entry_offset(Mode::Gcm, 3) as usize;
    assert!(zeroed[e..e + 32].iter().all(|&x| x == 0), "block 3's entry is a hole");
    let loaded = decode(&undo, &key(1)).unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].step.blocks, [3, 17]);
    assert_eq!(restore_all(&f, &loaded), Ok(2));
    assert!(std::fs::read(t.path()).unwrap() == before, "not put back exactly");
    // Restoring again changes nothing (the bytes are as before).
    assert_eq!(restore_all(&f, &loaded), Ok(0));
    assert!(std::fs::read(t.path()).unwrap() == before);
}

#[test]
fn a_file_written_since_is_not_restored() {
    let (t, f, target) = cipher_file(20);
    let undo = zero_with_undo(&f, &target, &[3, 5], key(1));
    let loaded = decode(&undo, &key(1)).unwrap();
    // Block 5 was written since (a new entry where fsck left zeros).
    f.write_all_at(&[7u8; 32], entry_offset(Mode::Gcm, 5)).unwrap();
    let now = std::fs::read(t.path()).unwrap();
    let e = restore_all(&f, &loaded).unwrap_err();
    assert!(e.contains("changed since fsck wrote them"), "{e}");
    assert!(std::fs::read(t.path()).unwrap() == now, "a refused restore wrote");
    // Its data changed (the entry still a hole): refused as well.
    f.write_all_at(&[0u8; 32], entry_offset(Mode::Gcm, 5)).unwrap();
    f.write_all_at(&[1u8; 8], data_offset(Mode::Gcm, 3)).unwrap();
    let now = std::fs::read(t.path()).unwrap();
    assert!(restore_all(&f, &loaded).is_err());
    assert!(std::fs::read(t.path()).unwrap() == now);
}

#[test]
fn another_file_is_not_restored() {
    let (_t, f, target) = cipher_file(20);
    let undo = zero_with_undo(&f, &target, &[3], key(1));
    let loaded = decode(&undo, &key(1)).unwrap();
    // Another inode with the same bytes (a copy).
    let (t2, f2, _) = cipher_file(20);
    let bytes = std::fs::read(_t.path()).unwrap();
    std::fs::write(t2.path(), &bytes).unwrap();
    let e = restore_all(&f2, &loaded).unwrap_err();
    assert!(e.contains("another device or inode"), "{e}");
    assert!(std::fs::read(t2.path()).unwrap() == bytes);
    // The same inode with another file ID in its header.
    let mut other = bytes.clone();
    other[8] ^= 1;
    f.write_all_at(&other[..32], 0).unwrap();
    let e = restore_all(&f, &loaded).unwrap_err();
    assert!(e.contains("file ID"), "{e}");
}

#[test]
fn a_planted_or_altered_undo_file_is_refused() {
    let (_t, f, target) = cipher_file(20);
    let undo = zero_with_undo(&f, &target, &[3, 4], key(1));
    let refused = |b: &[u8], k: &UndoKey, why: &str| match decode(b, k) {
        Err(Refused(m)) => assert!(m.contains(why), "{m:?} does not say {why:?}"),
        Ok(v) => panic!("accepted {} steps; want refused: {why}", v.len()),
    };
    refused(&undo, &key(2), "MAC does not verify");
    for at in [
        HEADER_LEN + 1,
        HEADER_LEN + 9,
        HEADER_LEN + 20,
        HEADER_LEN + 60,
        undo.len() - 40,
        undo.len() - 1,
    ] {
        let mut v = undo.clone();
        v[at] ^= 1;
        assert!(decode(&v, &key(1)).is_err(), "byte {at} flipped");
    }
    // A length made larger than what follows reads as a record cut short
    // (as truncating the file would): it and what follows are not restored.
    let mut v = undo.clone();
    v[HEADER_LEN + 6] ^= 1;
    assert!(decode(&v, &key(1)).unwrap().is_empty());
    // The header's ID is covered by every record's tag.
    let mut v = undo.clone();
    v[20] ^= 1;
    refused(&v, &key(1), "MAC does not verify");
    let mut v = undo.clone();
    v[0] = b'X';
    refused(&v, &key(1), "bad magic");
    refused(&undo[..10], &key(1), "not an undo file");
    // Records of another undo file of the same volume do not fit this one.
    let (_t2, f2, target2) = cipher_file(20);
    let other = zero_with_undo(&f2, &target2, &[6], key(1));
    let mut spliced = undo[..HEADER_LEN].to_vec();
    spliced.extend_from_slice(&other[HEADER_LEN..]);
    refused(&spliced, &key(1), "MAC does not verify");
}

#[test]
fn records_out_of_order_are_refused_and_a_cut_tail_is_ignored() {
    let k = key(1);
    let head = file_header(&[4; 16]);
    let step = |b: u64| Step {
        target: Target::default(),
        blocks: vec![b],
        ranges: vec![Range {
            offset: 100 * b,
            before: vec![b as u8; 8],
            after: After::Zeros,
        }],
    };
    let r0 = encode_step(&k, &head, 0, &step(1));
    let r1 = encode_step(&k, &head, 1, &step(2));
    let mut good = head.to_vec();
    good.extend_from_slice(&r0);
    good.extend_from_slice(&r1);
    assert_eq!(decode(&good, &k).unwrap().len(), 2);
    // Swapped, or the first repeated: out of place.
    let mut v = head.to_vec();
    v.extend_from_slice(&r1);
    v.extend_from_slice(&r0);
    assert!(matches!(decode(&v, &k), Err(Refused(m)) if m.contains("out of order")));
    let mut v = head.to_vec();
    v.extend_from_slice(&r0);
    v.extend_from_slice(&r0);
    assert!(matches!(decode(&v, &k), Err(Refused(m)) if m.contains("out of order")));
    // A done record for a step that is not there.
    let mut v = head.to_vec();
    v.extend_from_slice(&r0);
    v.extend_from_slice(&encode_done(&k, &head, 1, 7, &[]));
    assert!(matches!(decode(&v, &k), Err(Refused(m)) if m.contains("completes no step")));
    // Cut anywhere in the last record, or its magic not written yet: the
    // records before it stand.
    for cut in [1, 10, r1.len() - 1] {
        assert_eq!(decode(&good[..good.len() - cut], &k).unwrap().len(), 1, "cut {cut}");
    }
    let mut v = good.clone();
    let at = HEADER_LEN + r0.len();
    v[at..at + 4].fill(0);
    assert_eq!(decode(&v, &k).unwrap().len(), 1);
}

#[test]
fn a_step_fsck_did_not_finish_is_restored_only_where_it_got() {
    let (t, f, target) = cipher_file(20);
    let before = std::fs::read(t.path()).unwrap();
    // The step is saved, then fsck stops after zeroing only block 3.
    let out = tempfile::tempfile().unwrap();
    let mut w = Writer::new(out.try_clone().unwrap(), key(1)).unwrap();
    let step = capture_zero(&f, Mode::Gcm, 20 * 4096, false, &[3, 9], target).unwrap();
    w.step(&step).unwrap();
    crate::scan::zero_blocks(&f, Mode::Gcm, false, &[3]).unwrap();
    let mut b = Vec::new();
    std::io::Read::read_to_end(&mut &out, &mut b).unwrap();
    let loaded = decode(&b, &key(1)).unwrap();
    assert!(loaded[0].recorded.is_none());
    assert_eq!(restore_all(&f, &loaded), Ok(2));
    assert!(std::fs::read(t.path()).unwrap() == before);
}

#[test]
fn recorded_ranges_must_hold_what_the_step_left() {
    let (t, f, target) = cipher_file(300);
    let size = 300 * 4096;
    let step = capture_reseal(&f, size, target).unwrap();
    // The nnode's 16 slots and the first 8 of each of the two nonce pages
    // (blocks 16..272 and 272..300).
    assert_eq!(step.ranges.len(), 32);
    assert!(step
        .ranges
        .iter()
        .all(|r| r.before.len() == 4 && r.after == After::Recorded));
    let orig = std::fs::read(t.path()).unwrap();
    // What a seal would write: new slot bytes.
    for r in &step.ranges {
        f.write_all_at(&[0xc3; 4], r.offset).unwrap();
    }
    let recorded = recorded_now(&f, &step).unwrap();
    let mut l = Loaded {
        seq: 0,
        step,
        recorded: Some(recorded),
    };
    // Something else wrote a slot since: refused, nothing written.
    f.write_all_at(&[0x11; 4], l.step.ranges[3].offset).unwrap();
    let now = std::fs::read(t.path()).unwrap();
    assert!(restore(&f, &[&l]).is_err());
    assert!(std::fs::read(t.path()).unwrap() == now);
    f.write_all_at(&[0xc3; 4], l.step.ranges[3].offset).unwrap();
    assert_eq!(restore(&f, &[&l]), Ok(0));
    assert!(std::fs::read(t.path()).unwrap() == orig);
    // Without a done record the recorded ranges must still be as before.
    for r in &l.step.ranges {
        f.write_all_at(&[0xc3; 4], r.offset).unwrap();
    }
    l.recorded = None;
    assert!(restore(&f, &[&l]).is_err());
}

proptest::proptest! {
    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
        let _ = decode(&b, &key(1));
        let mut v = file_header(&[1; 16]).to_vec();
        v.extend_from_slice(&REC_MAGIC);
        v.extend_from_slice(&b);
        let _ = decode(&v, &key(1));
    }
}

/// Counts the bytes read through it.
struct Counted<R>(R, u64);

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(b)?;
        self.1 += n as u64;
        Ok(n)
    }
}

#[test]
fn an_endless_undo_file_is_refused_after_one_record_at_most() {
    use std::io::Read;
    let head = file_header(&[7; 16]);
    let rec_head = |total: u32| {
        let mut h = REC_MAGIC.to_vec();
        h.extend_from_slice(&total.to_le_bytes());
        h.extend_from_slice(&[0; 8]);
        h
    };
    // After a good header, endless bytes: garbage; a record head claiming
    // an impossible length; one claiming the largest length, whose tag
    // cannot verify. Each is refused having read at most what it names.
    let cases = [
        ("garbage", vec![0xab_u8; 16], HEADER_LEN + REC_HEAD),
        ("an impossible length", rec_head(u32::MAX), HEADER_LEN + REC_HEAD),
        ("a largest record", rec_head(MAX_RECORD as u32), HEADER_LEN + MAX_RECORD),
    ];
    for (what, rest, most) in cases {
        let endless = head.as_slice().chain(rest.as_slice()).chain(std::io::repeat(0x5c));
        let mut r = Counted(endless, 0);
        let e = decode_from(&mut r, &key(1)).unwrap_err();
        assert!(r.1 <= most as u64, "{what}: read {} bytes before refusing ({e:?})", r.1);
    }
}
