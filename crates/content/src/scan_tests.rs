//! Tests of fsck's per-file scan and its block-level repairs.

use super::*;
use crate::CipherFile;
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

fn cipher(mode: Mode) -> Arc<Cipher> {
    let key = ContentKey::new(&[9u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    Arc::new(Cipher::new(mode, Arc::new(Direct::new(key)), tagger))
}

fn file_with(mode: Mode, data: &[u8]) -> (tempfile::NamedTempFile, Arc<Cipher>) {
    let c = cipher(mode);
    let t = tempfile::NamedTempFile::new().unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(t.path())
        .unwrap();
    let cf = CipherFile::open(f, c.clone(), "t".into()).unwrap();
    cf.write_at(0, data).unwrap();
    (t, c)
}

fn run(t: &tempfile::NamedTempFile, c: &Arc<Cipher>) -> (Scan, Vec<u64>, u64) {
    let f = File::open(t.path()).unwrap();
    let mut blocks = Vec::new();
    let mut bytes = 0;
    let k = Keyring::new(c.clone(), None);
    let s = scan(&f, &k, 1 << 20, &mut |b, _| blocks.push(b), &mut |n| bytes += n).unwrap();
    (s, blocks, bytes)
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 4096) as u8).collect()
}

#[test]
fn clean_files_have_no_problems() {
    for mode in [Mode::Ctr, Mode::Gcm] {
        let n = 300 * 4096 + 77; // nnode, one full page, part of the next
        let (t, c) = file_with(mode, &data(n));
        let (s, blocks, bytes) = run(&t, &c);
        assert!(s.problems.is_empty(), "{mode:?}: {:?}", s.problems);
        assert_eq!(s.size, n as u64);
        assert_eq!(s.blocks, 301);
        assert_eq!(s.written, 301);
        assert_eq!(blocks, (0..301).collect::<Vec<_>>());
        assert_eq!(bytes, n as u64);
    }
}

#[test]
fn flipped_data_bit_is_a_bad_tag_at_its_block_and_zeroing_makes_a_hole() {
    let (t, c) = file_with(Mode::Gcm, &data(40 * 4096));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(t.path())
        .unwrap();
    let off = data_offset(Mode::Gcm, 20) + 5;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], off).unwrap();
    let (s, _, _) = run(&t, &c);
    assert_eq!(s.problems, vec![Problem::BadTag { block: 20 }]);
    assert!(s.problems[0].zeroable());
    zero_block(&f, Mode::Gcm, 20).unwrap();
    let (s, _, _) = run(&t, &c);
    assert!(s.problems.is_empty());
    assert_eq!(s.written, 39);
    let cf = CipherFile::open(f, c, "t".into()).unwrap();
    let mut buf = vec![1u8; 4096 * 3];
    cf.read_at(19 * 4096, &mut buf).unwrap();
    let want = data(40 * 4096);
    assert_eq!(&buf[..4096], &want[19 * 4096..20 * 4096]);
    assert!(buf[4096..8192].iter().all(|&x| x == 0));
    assert_eq!(&buf[8192..], &want[21 * 4096..22 * 4096]);
}

#[test]
fn ctr_cannot_see_flipped_data_but_sees_bad_entries_and_repeats() {
    let (t, c) = file_with(Mode::Ctr, &data(5 * 4096));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(t.path())
        .unwrap();
    f.write_all_at(&[0xff], data_offset(Mode::Ctr, 1)).unwrap();
    assert!(run(&t, &c).0.problems.is_empty());
    // Block 3 gets block 1's entry; block 2 gets a key generation.
    let mut e1 = [0u8; 16];
    f.read_exact_at(&mut e1, entry_offset(Mode::Ctr, 1)).unwrap();
    f.write_all_at(&e1, entry_offset(Mode::Ctr, 3)).unwrap();
    f.write_all_at(&[7], entry_offset(Mode::Ctr, 2) + 12).unwrap();
    let (s, _, _) = run(&t, &c);
    assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
    assert!(matches!(&s.problems[0], Problem::Entry { block: 2, what } if what.contains("key generation")));
    assert_eq!(s.problems[1], Problem::RepeatedNonce { block: 3, first: 1 });
    assert!(!s.problems[1].zeroable());
}

#[test]
fn torn_tail_is_found_and_cut_without_losing_data() {
    for mode in [Mode::Ctr, Mode::Gcm] {
        let n = 16 * 4096 + 3 * 4096;
        let (t, c) = file_with(mode, &data(n));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap();
        // Shrink to exactly the end of the nnode's data plus half a page.
        let good = layout::backing_len(mode, 16 * 4096);
        let torn = good + layout::page_len(mode) / 2;
        f.set_len(torn).unwrap();
        let (s, _, _) = run(&t, &c);
        assert_eq!(
            s.problems,
            vec![Problem::TornTail {
                backing_len: torn,
                fixed_len: good
            }]
        );
        fix_torn_tail(&f, mode, good).unwrap();
        let (s, _, _) = run(&t, &c);
        assert!(s.problems.is_empty());
        assert_eq!(s.size, 16 * 4096);
        let cf = CipherFile::open(f, c, "t".into()).unwrap();
        let mut buf = vec![0u8; 16 * 4096];
        cf.read_at(0, &mut buf).unwrap();
        assert_eq!(buf, data(n)[..16 * 4096]);
    }
}

#[test]
fn bad_header_and_length_stop_the_scan() {
    let (t, c) = file_with(Mode::Gcm, &data(5000));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(t.path())
        .unwrap();
    f.write_all_at(b"X", 0).unwrap();
    let (s, _, _) = run(&t, &c);
    assert!(matches!(&s.problems[..], [Problem::Header(w)] if w.contains("magic")));
    // A ctr cipher sees the gcm header's mode.
    f.write_all_at(b"W", 0).unwrap();
    let (s, _, _) = run(&t, &cipher(Mode::Ctr));
    assert!(matches!(&s.problems[..], [Problem::Header(w)] if w.contains("differs")));
    f.set_len(100).unwrap();
    let (s, _, _) = run(&t, &c);
    assert!(matches!(&s.problems[..], [Problem::Length(_)]));
}

fn cipher_gen(g: u32, byte: u8) -> Arc<Cipher> {
    let key = ContentKey::new(&[byte; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    Arc::new(Cipher::new(Mode::Gcm, Arc::new(Direct::new(key)), tagger).with_generation(g))
}

/// Set a cipher file's header generation and rekey watermark (bytes
/// 24..32, not authenticated).
fn set_gen(t: &tempfile::NamedTempFile, g: u32, r: u32) {
    let f = std::fs::OpenOptions::new().write(true).open(t.path()).unwrap();
    f.write_all_at(&g.to_le_bytes(), 24).unwrap();
    f.write_all_at(&r.to_le_bytes(), 28).unwrap();
}

#[test]
fn a_changed_generation_or_watermark_never_makes_a_readable_block_bad() {
    // A volume mid-rekey from generation 0 to 1; a file wholly at 0.
    let (old, new) = (cipher_gen(0, 1), cipher_gen(1, 2));
    let keys = Keyring::new(new.clone(), Some(old.clone()));
    let (t, _) = file_with(Mode::Gcm, &data(40 * 4096));
    let f = File::open(t.path()).unwrap();
    let run = |keys: &Keyring| scan(&f, keys, 1 << 20, &mut |_, _| {}, &mut |_| {}).unwrap();
    // Written under the test cipher: rewrite it under generation 0.
    let cf = CipherFile::open(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap(),
        old.clone(),
        "t".into(),
    )
    .unwrap();
    cf.set_len(0).unwrap();
    cf.write_at(0, &data(40 * 4096)).unwrap();
    drop(cf);
    assert!(run(&keys).problems.is_empty());
    // The watermark moved to 1: blocks 0..16 are read with generation 1.
    set_gen(&t, 0, 1);
    let s = run(&keys);
    assert_eq!(
        s.problems,
        vec![Problem::OtherGeneration {
            first: 0,
            last: 15,
            generation: 0
        }]
    );
    assert!(!s.problems[0].zeroable());
    // The generation changed to 1: every block.
    set_gen(&t, 1, 0);
    let s = run(&keys);
    assert_eq!(
        s.problems,
        vec![Problem::OtherGeneration {
            first: 0,
            last: 39,
            generation: 0
        }]
    );
    // A block damaged too fails under both: that one alone is bad.
    let w = std::fs::OpenOptions::new().write(true).open(t.path()).unwrap();
    let off = data_offset(Mode::Gcm, 20);
    w.write_all_at(&[0xff, 0xfe], off).unwrap();
    let s = run(&keys);
    assert_eq!(
        s.problems,
        vec![
            Problem::OtherGeneration {
                first: 0,
                last: 19,
                generation: 0
            },
            Problem::BadTag { block: 20 },
            Problem::OtherGeneration {
                first: 21,
                last: 39,
                generation: 0
            },
        ]
    );
    // After the rekey the volume has generation 1 only; fsck tries the
    // one before it too.
    let after = Keyring::new(new, None);
    let s = scan_with(&f, &after, &[old], 1 << 20, &mut |_, _| {}, &mut |_| {}).unwrap();
    assert_eq!(s.problems.len(), 3, "{:?}", s.problems);
    assert_eq!(s.problems[1], Problem::BadTag { block: 20 });
    // A header naming a generation the volume lacks is a header problem.
    set_gen(&t, 0, 0);
    let s = run(&after);
    assert!(matches!(&s.problems[..], [Problem::Header(w)] if w.contains("key generation 0")));
}

#[test]
fn nonce_cap_is_reported() {
    let (t, c) = file_with(Mode::Gcm, &data(10 * 4096));
    let f = File::open(t.path()).unwrap();
    let s = scan(&f, &Keyring::new(c, None), 4, &mut |_, _| {}, &mut |_| {}).unwrap();
    assert!(s.nonce_cap_hit);
    assert!(s.problems.is_empty());
}
