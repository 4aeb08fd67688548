//! Tests of the rekey's undo records: what round-trips, and that nothing
//! forged, stale, damaged or aimed outside CIPHERDIR is accepted.

use super::*;
use proptest::prelude::*;
use warpfs_crypto::MasterKey;

fn key(b: u8) -> JournalKey {
    JournalKey::derive(&MasterKey::from_bytes(&[b; 32]).unwrap())
}

fn rec() -> Record {
    Record {
        generation: 3,
        rekey: Some(Rekey { id: [0xa5; 16], seq: 2 }),
        file_id: [7; 16],
        ino: 42,
        path: b"dir/file".to_vec(),
        ranges: vec![(0, vec![1; 32]), (32, vec![2; 512]), (544, vec![3; 4096])],
    }
}

fn refused(b: &[u8], k: &JournalKey, why: &str) {
    match Record::decode(b, k) {
        Err(Refused(m)) => assert!(m.contains(why), "{m:?} does not say {why:?}"),
        other => panic!("accepted ({other:?}), want refused: {why}"),
    }
}

#[test]
fn round_trip_empty_and_torn() {
    let k = key(1);
    let r = rec();
    let b = r.encode(&k);
    assert_eq!(Record::decode(&b, &k).unwrap(), Content::Record(r));
    assert_eq!(Record::decode(&[], &k).unwrap(), Content::Empty);
    // Any prefix is torn (shorter than the length it says it has).
    for cut in [1, 10, 12, 19, 20, 39, b.len() / 2, b.len() - 1] {
        assert_eq!(Record::decode(&b[..cut], &k).unwrap(), Content::Torn, "cut {cut}");
    }
}

#[test]
fn a_record_without_the_volume_key_is_refused() {
    let r = rec();
    let b = r.encode(&key(1));
    refused(&b, &key(2), "MAC does not verify");
    for at in [9, 16, 20, 40, 60, b.len() - 1] {
        let mut flipped = b.clone();
        flipped[at] ^= 1;
        let m = Record::decode(&flipped, &key(1));
        assert!(m.is_err(), "byte {at} flipped: {m:?}");
    }
    // A forger who recomputes a SHA-256 (what version 1 checked) over a
    // version 2 record gets nowhere either.
    let mut forged = b[..b.len() - 32].to_vec();
    let sum = Sha256::digest(&forged);
    forged.extend_from_slice(&sum);
    refused(&forged, &key(1), "MAC does not verify");
    // Trailing bytes after a whole record, and a wrong length.
    let mut long = b.clone();
    long.push(0);
    refused(&long, &key(1), "bytes follow");
    let mut tiny = b.clone();
    tiny[12..16].copy_from_slice(&8u32.to_le_bytes());
    refused(&tiny, &key(1), "record length");
}

#[test]
fn paths_that_could_leave_cipherdir_are_refused_even_when_authenticated() {
    let k = key(1);
    for (p, why) in [
        (&b"/etc/passwd"[..], "absolute"),
        (b"../outside", "\"..\""),
        (b"a/../../outside", "\"..\""),
        (b"a/..", "\"..\""),
        (b"./a", "\".\""),
        (b"a//b", "empty component"),
        (b"a/", "empty component"),
        (b"a\0b", "NUL"),
    ] {
        let r = Record {
            path: p.to_vec(),
            ..rec()
        };
        refused(&r.encode(&k), &k, why);
        refused(&r.encode_unauthenticated(), &k, why);
        refused(
            &Record {
                rekey: None,
                ..r.clone()
            }
            .encode(&k),
            &k,
            why,
        );
    }
    for p in [&b""[..], b"f", b"a/b/c", b"warpfs.long.x", b"..a/b..", b"a.b/.c"] {
        check_path(p).unwrap();
    }
}

#[test]
fn a_version_1_record_is_unauthenticated() {
    let k = key(1);
    let r = Record {
        generation: 0,
        rekey: None,
        ..rec()
    };
    let b = r.encode_unauthenticated();
    assert_eq!(&b[8..10], &1u16.to_le_bytes());
    // Whatever the key: it has no MAC.
    assert_eq!(Record::decode(&b, &k).unwrap(), Content::Unauthenticated(r.clone()));
    assert_eq!(Record::decode(&b, &key(9)).unwrap(), Content::Unauthenticated(r));
    // Cut or changed, its checksum fails: torn, as earlier builds read it.
    assert_eq!(Record::decode(&b[..b.len() - 1], &k).unwrap(), Content::Torn);
    let mut flipped = b.clone();
    flipped[60] ^= 1;
    assert_eq!(Record::decode(&flipped, &k).unwrap(), Content::Torn);
}

fn resum(mut body: Vec<u8>) -> Vec<u8> {
    let sum = Sha256::digest(&body);
    body.extend_from_slice(&sum);
    body
}

fn retag(mut b: Vec<u8>, k: &JournalKey) -> Vec<u8> {
    b.truncate(b.len() - 32);
    let n = b.len() + 32;
    b[12..16].copy_from_slice(&(n as u32).to_le_bytes());
    let t = k.tag(&b);
    b.extend_from_slice(&t);
    b
}

#[test]
fn well_tagged_nonsense_is_refused() {
    let k = key(1);
    let b = rec().encode(&k);
    let mut v = b.clone();
    v[8] = 9; // version
    refused(&retag(v, &k), &k, "version 9");
    let mut v = b.clone();
    v[0] = b'X';
    refused(&retag(v, &k), &k, "bad magic");
    let mut v = b.clone();
    v[10] = 1;
    refused(&retag(v, &k), &k, "reserved");
    let mut v = b[..b.len() - 32].to_vec();
    v.extend_from_slice(&[0; 33]); // a trailing byte inside the record
    refused(&retag(v, &k), &k, "trailing");
    let huge = Record {
        ranges: vec![(0, vec![0; MAX_RESTORE + 1])],
        ..rec()
    };
    refused(&huge.encode(&k), &k, "range too large");
    let wrap = Record {
        ranges: vec![(u64::MAX, vec![0; 2])],
        ..rec()
    };
    refused(&wrap.encode(&k), &k, "range too large");
    // The same checks for version 1.
    let b1 = rec().encode_unauthenticated();
    let mut v = b1[..b1.len() - 32].to_vec();
    v.push(0);
    refused(&resum(v), &k, "trailing");
}

#[test]
fn journal_saves_clears_and_applies() {
    let k = key(4);
    let j = Journal::new(tempfile::tempfile().unwrap());
    assert_eq!(j.load(&k).unwrap(), Content::Empty);
    let r = rec();
    j.save(&r, &k).unwrap();
    assert_eq!(j.load(&k).unwrap(), Content::Record(r.clone()));
    assert!(matches!(j.load(&key(5)), Err(JournalError::Refused(_))));
    let target = tempfile::tempfile().unwrap();
    target.write_all_at(&[9; 5000], 0).unwrap();
    r.apply(&target).unwrap();
    let mut b = vec![0u8; 5000];
    target.read_exact_at(&mut b, 0).unwrap();
    assert!(b[..32].iter().all(|&x| x == 1));
    assert!(b[32..544].iter().all(|&x| x == 2));
    assert!(b[544..4640].iter().all(|&x| x == 3));
    assert!(b[4640..].iter().all(|&x| x == 9));
    j.clear().unwrap();
    assert_eq!(j.load(&k).unwrap(), Content::Empty);
}

#[test]
fn a_record_without_its_magic_is_uncommitted() {
    // What a power loss may leave of save_encoded: the body (or only
    // its length, the pages in between zeros) without the magic.
    let k = key(4);
    let b = rec().encode(&k);
    let mut body = b.clone();
    body[..8].fill(0);
    assert_eq!(Record::decode(&body, &k).unwrap(), Content::Torn);
    assert_eq!(Record::decode(&vec![0; b.len()], &k).unwrap(), Content::Torn);
    // With its magic the record is whole; a zero page in it is damage.
    let mut holed = b.clone();
    holed[40..80].fill(0);
    assert!(Record::decode(&holed, &k).is_err());
}

proptest! {
    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Record::decode(&b, &key(1));
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&b);
        let _ = Record::decode(&v, &key(1));
    }

    #[test]
    fn random_records_round_trip(
        generation in any::<u32>(),
        id in any::<[u8; 16]>(),
        ino in any::<u64>(),
        path in proptest::collection::vec(b'a'..=b'z', 0..40),
        ranges in proptest::collection::vec((0u64..1 << 40, proptest::collection::vec(any::<u8>(), 0..100)), 0..4),
    ) {
        let r = Record { generation, rekey: None, file_id: id, ino, path, ranges };
        prop_assert_eq!(Record::decode(&r.encode(&key(2)), &key(2)).unwrap(), Content::Record(r.clone()));
        let r = Record { rekey: Some(Rekey { id, seq: ino ^ 5 }), ..r };
        prop_assert_eq!(Record::decode(&r.encode(&key(2)), &key(2)).unwrap(), Content::Record(r));
    }
}

#[test]
fn the_rekey_id_and_sequence_are_authenticated() {
    let k = key(1);
    let r = rec();
    let b = r.encode(&k);
    assert_eq!(&b[8..10], &3u16.to_le_bytes());
    assert_eq!(&b[20..36], &[0xa5; 16]);
    assert_eq!(&b[36..44], &2u64.to_le_bytes());
    // Another ID or sequence number breaks the tag.
    for at in [20, 35, 36, 43] {
        let mut v = b.clone();
        v[at] ^= 1;
        refused(&v, &k, "MAC does not verify");
    }
    // A record without them is version 2, and still read.
    let plain = Record {
        rekey: None,
        ..r.clone()
    };
    let b2 = plain.encode(&k);
    assert_eq!(&b2[8..10], &2u16.to_le_bytes());
    assert_eq!(b2.len() + 24, b.len());
    assert_eq!(Record::decode(&b2, &k).unwrap(), Content::Record(plain));
    // The version is under the tag: a version 3 record relabelled 2 (or
    // the reverse) does not verify.
    let mut v = b.clone();
    v[8] = 2;
    assert!(Record::decode(&v, &k).is_err());
    let mut v = b2.clone();
    v[8] = 3;
    assert!(Record::decode(&v, &k).is_err());
    // Its old header says which segment it protects.
    let mut h = crate::header::Header::new_random(crate::Mode::Gcm);
    h.rekeyed = 7;
    let with = Record {
        ranges: vec![(0, h.to_bytes().to_vec()), (32, vec![1; 8])],
        ..rec()
    };
    assert_eq!(with.old_header().map(|h| h.rekeyed), Some(7));
    assert_eq!(rec().old_header(), None);
}
