//! Unit tests of SEEK_DATA / SEEK_HOLE (`seek`): against a model of which
//! blocks were written, in every content mode, with and without file
//! summaries, and over hostile entries.
use super::*;
use crate::layout::{entry_offset, BLOCK};
use proptest::prelude::*;
use std::os::unix::fs::FileExt;
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

fn cipher(mode: Mode) -> Arc<Cipher> {
    let key = ContentKey::new(&[1u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    if mode == Mode::Xts {
        let x = warpfs_crypto::XtsKey::new(warpfs_crypto::XtsCipher::Aes, &[2u8; 32]).unwrap();
        Arc::new(Cipher::new_xts(x, Arc::new(Direct::new(key)), tagger))
    } else {
        Arc::new(Cipher::new(mode, Arc::new(Direct::new(key)), tagger))
    }
}

fn cf(mode: Mode, summary: bool) -> CipherFile {
    let mut ring = Keyring::new(cipher(mode), None);
    if summary {
        let mk = warpfs_crypto::MasterKey::from_bytes(&[3; 32]).unwrap();
        ring = ring.with_summary(Some(Arc::new(warpfs_crypto::SummaryKey::derive(&mk))));
    }
    CipherFile::open(tempfile::tempfile().unwrap(), Arc::new(ring), "unit".into()).unwrap()
}

/// The plaintext size and which blocks hold data, as the format says a
/// sequence of operations leaves them.
#[derive(Debug, Default, Clone)]
struct Model {
    size: u64,
    data: Vec<bool>,
}

#[derive(Debug, Clone)]
enum Op {
    Write(u64, usize),
    SetLen(u64),
    Punch(u64, u64),
}

impl Model {
    fn blocks(&self) -> u64 {
        self.size.div_ceil(BLOCK)
    }

    fn set_len(&mut self, size: u64) {
        let old = self.size;
        self.size = size;
        self.data.resize(self.blocks() as usize, false);
        // Growing past a partial last block rewrites it at full length
        // (FORMAT.md 3.6), a hole too: it is data from then on. Shrinking
        // into a block keeps it as it was (a written one is rewritten).
        if size > old && !old.is_multiple_of(BLOCK) {
            self.data[(old / BLOCK) as usize] = true;
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Write(off, len) => {
                let end = off + len as u64;
                if end > self.size {
                    self.set_len(end);
                }
                for b in off / BLOCK..end.div_ceil(BLOCK) {
                    self.data[b as usize] = true;
                }
            }
            Op::SetLen(s) => self.set_len(s),
            Op::Punch(off, len) => {
                let end = (off + len).min(self.size);
                if off >= end {
                    return;
                }
                // Whole blocks inside the range become holes; a partly
                // covered written block is rewritten (data).
                for b in off / BLOCK..end.div_ceil(BLOCK) {
                    let (s, t) = (b * BLOCK, (b * BLOCK + BLOCK).min(self.size));
                    if off <= s && t <= end {
                        self.data[b as usize] = false;
                    }
                }
            }
        }
    }

    /// What lseek(2) answers from `off` (`None`: ENXIO).
    fn seek(&self, off: u64, what: Seek) -> Option<u64> {
        if off >= self.size {
            return None;
        }
        let want = what == Seek::Data;
        (off / BLOCK..self.blocks())
            .find(|&b| self.data[b as usize] == want)
            .map(|b| off.max(b * BLOCK))
            .or(if want { None } else { Some(self.size) })
    }
}

fn run(f: &CipherFile, ops: &[Op]) -> Model {
    let mut m = Model::default();
    for op in ops {
        match *op {
            Op::Write(off, len) => {
                f.write_at(off, &vec![0xa5; len]).unwrap();
            }
            Op::SetLen(s) => f.set_len(s).unwrap(),
            Op::Punch(off, len) => f.punch_hole(off, len).unwrap(),
        }
        m.apply(op);
    }
    assert_eq!(f.size(), m.size);
    m
}

/// Every offset that matters: block edges, their neighbours, the end.
fn probes(m: &Model) -> Vec<u64> {
    let mut v = vec![0, 1, m.size.saturating_sub(1), m.size, m.size + 1, u64::MAX];
    for b in 0..=m.blocks() {
        v.extend([
            b * BLOCK,
            (b * BLOCK).saturating_sub(1),
            b * BLOCK + 1,
            b * BLOCK + 2049,
        ]);
    }
    v
}

fn check(f: &CipherFile, m: &Model) {
    for off in probes(m) {
        for what in [Seek::Data, Seek::Hole] {
            let want = if f.mode() == Mode::Xts {
                // xts: the whole file is data.
                (off < m.size).then_some(if what == Seek::Data { off } else { m.size })
            } else {
                m.seek(off, what)
            };
            assert_eq!(f.seek(off, what).unwrap(), want, "{what:?} from {off} in {m:?}");
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    // Offsets up to a little past two segments (blocks 0..~600), so runs
    // cross the nnode and nonce pages.
    let off = prop_oneof![0u64..20 * BLOCK, 0u64..600 * BLOCK];
    prop_oneof![
        (off.clone(), 1usize..3 * BLOCK as usize).prop_map(|(o, l)| Op::Write(o, l)),
        off.clone().prop_map(Op::SetLen),
        (off, 1u64..300 * BLOCK).prop_map(|(o, l)| Op::Punch(o, l)),
    ]
}

fn mode() -> impl Strategy<Value = (Mode, bool)> {
    prop_oneof![
        Just((Mode::Ctr, false)),
        Just((Mode::Gcm, false)),
        Just((Mode::Gcm, true)),
        Just((Mode::Xts, false)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(warpfs_testkit::cases(64)))]

    #[test]
    fn seek_matches_the_model((mode, summary) in mode(), ops in proptest::collection::vec(op(), 1..12)) {
        let f = cf(mode, summary);
        let m = run(&f, &ops);
        check(&f, &m);
    }

    #[test]
    fn hostile_entries_never_panic(b in 0u64..300, bytes in proptest::collection::vec(any::<u8>(), 32), off in 0u64..400 * BLOCK) {
        for mode in [Mode::Ctr, Mode::Gcm] {
            let f = cf(mode, false);
            f.write_at(290 * BLOCK, b"x").unwrap();
            f.file.write_all_at(&bytes[..mode.entry_len()], entry_offset(mode, b)).unwrap();
            let _ = f.seek(off, Seek::Data);
            let _ = f.seek(off, Seek::Hole);
        }
    }
}

#[test]
fn worked_example() {
    for (mode, summary) in [(Mode::Ctr, false), (Mode::Gcm, false), (Mode::Gcm, true)] {
        let f = cf(mode, summary);
        assert_eq!(f.seek(0, Seek::Data).unwrap(), None, "empty file");
        assert_eq!(f.seek(0, Seek::Hole).unwrap(), None, "empty file");
        // A hole of 1 MiB, then 5 bytes of data in block 256 (segment 1).
        f.write_at(256 * BLOCK + 10, b"hello").unwrap();
        let size = 256 * BLOCK + 15;
        assert_eq!(f.seek(0, Seek::Data).unwrap(), Some(256 * BLOCK));
        assert_eq!(f.seek(7, Seek::Hole).unwrap(), Some(7));
        assert_eq!(f.seek(256 * BLOCK + 3, Seek::Data).unwrap(), Some(256 * BLOCK + 3));
        assert_eq!(f.seek(256 * BLOCK, Seek::Hole).unwrap(), Some(size));
        assert_eq!(f.seek(size, Seek::Data).unwrap(), None);
        assert_eq!(f.seek(size, Seek::Hole).unwrap(), None);
        // Growing adds a hole at the end: SEEK_DATA there is ENXIO.
        f.set_len(300 * BLOCK).unwrap();
        assert_eq!(f.seek(257 * BLOCK, Seek::Data).unwrap(), None);
        assert_eq!(f.seek(256 * BLOCK + 100, Seek::Hole).unwrap(), Some(257 * BLOCK));
        // Punching the data block leaves no data at all.
        f.punch_hole(256 * BLOCK, BLOCK).unwrap();
        assert_eq!(f.seek(0, Seek::Data).unwrap(), None);
        assert_eq!(f.seek(0, Seek::Hole).unwrap(), Some(0));
    }
}

#[test]
fn corrupt_entry_is_an_error() {
    for mode in [Mode::Ctr, Mode::Gcm] {
        let f = cf(mode, false);
        f.write_at(20 * BLOCK, b"data").unwrap();
        // Block 3's entry: a tag without a nonce (gcm) or a key
        // generation the format does not have.
        let mut ent = vec![0u8; mode.entry_len()];
        ent[12] = 7;
        f.file.write_all_at(&ent, entry_offset(mode, 3)).unwrap();
        assert!(
            f.seek(0, Seek::Data).is_err(),
            "{mode:?}: SEEK_DATA over a corrupt entry"
        );
        assert!(f.seek(0, Seek::Hole).is_ok(), "{mode:?}: block 0 is a hole before it");
        assert!(f.seek(3 * BLOCK, Seek::Hole).is_err(), "{mode:?}");
    }
}

#[test]
fn backing_holes_are_not_trusted() {
    // Data whose backing bytes were punched out is still data: the entry
    // says so (and reading it fails its tag in gcm, or gives garbage).
    let f = cf(Mode::Ctr, false);
    f.write_at(0, &vec![1u8; 8 * BLOCK as usize]).unwrap();
    let d = crate::layout::data_offset(Mode::Ctr, 0);
    sysio::punch_hole(&f.file, d, 8 * BLOCK).unwrap();
    assert_eq!(f.seek(0, Seek::Data).unwrap(), Some(0));
    assert_eq!(f.seek(0, Seek::Hole).unwrap(), Some(8 * BLOCK));
}

#[test]
fn writers_are_counted_across_shared_handles() {
    let f = cf(Mode::Gcm, false);
    assert!(!f.has_writers());
    let w = f.writer();
    let g = f.share(tempfile::tempfile().unwrap()).unwrap();
    assert!(g.has_writers(), "a handle sharing the state sees the writer");
    let w2 = g.writer();
    drop(w);
    assert!(f.has_writers());
    drop(w2);
    assert!(!f.has_writers() && !g.has_writers());
}
