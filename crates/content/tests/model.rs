//! Random write/truncate/punch/read sequences against a reference Vec<u8>,
//! both modes, with offsets around the nnode and nonce-page boundaries.

mod common;

use common::*;
use proptest::prelude::*;
use warpfs_content::{layout, Mode};

#[derive(Debug, Clone)]
enum Op {
    Write(u64, usize, u64),
    Truncate(u64),
    Punch(u64, u64),
    Read(u64, usize),
    Reopen,
}

const KB64: u64 = 65536;
const MB: u64 = 1 << 20;

fn offset() -> impl Strategy<Value = u64> {
    let anchors = prop_oneof![
        Just(0u64),
        Just(4096),
        Just(KB64),
        Just(KB64 + MB),
        Just(KB64 + 2 * MB),
        Just(2 * MB + 12345),
    ];
    prop_oneof![
        (anchors, -9000i64..9000).prop_map(|(a, d)| (a as i64 + d).max(0) as u64),
        0u64..3 * MB,
    ]
}

fn len() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..64, 1usize..9000, 4096usize..(MB as usize + 8192)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (offset(), len(), any::<u64>()).prop_map(|(o, l, s)| Op::Write(o, l, s)),
        2 => offset().prop_map(Op::Truncate),
        2 => (offset(), len()).prop_map(|(o, l)| Op::Punch(o, l as u64)),
        3 => (offset(), len()).prop_map(|(o, l)| Op::Read(o, l)),
        1 => Just(Op::Reopen),
    ]
}

fn run(mode: Mode, ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let c = cipher(mode);
    let mut f = open(&path, &c);
    let mut model: Vec<u8> = Vec::new();
    for op in ops {
        match *op {
            Op::Write(o, l, s) => {
                let d = pattern(s, l);
                f.write_at(o, &d).unwrap();
                let end = o as usize + l;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[o as usize..end].copy_from_slice(&d);
            }
            Op::Truncate(n) => {
                f.set_len(n).unwrap();
                model.resize(n as usize, 0);
            }
            Op::Punch(o, l) => {
                f.punch_hole(o, l).unwrap();
                let s = (o as usize).min(model.len());
                let e = (o as usize + l as usize).min(model.len());
                model[s..e].fill(0);
            }
            Op::Read(o, l) => {
                let mut b = vec![0xAAu8; l];
                let n = f.read_at(o, &mut b).unwrap();
                let s = (o as usize).min(model.len());
                let e = (o as usize + l).min(model.len());
                prop_assert_eq!(n, e - s);
                prop_assert!(b[..n] == model[s..e], "read mismatch at {} len {}", o, l);
            }
            Op::Reopen => {
                drop(f);
                f = open(&path, &c);
            }
        }
        prop_assert_eq!(f.size(), model.len() as u64);
        let blen = std::fs::metadata(&path).unwrap().len();
        prop_assert_eq!(blen, layout::backing_len(mode, model.len() as u64));
    }
    prop_assert!(read_all(&f) == model, "final content mismatch");
    drop(f);
    let f = open(&path, &c);
    prop_assert!(read_all(&f) == model, "content mismatch after reopen");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: warpfs_testkit::cases(96), ..ProptestConfig::default() })]

    #[test]
    fn gcm_matches_model(ops in proptest::collection::vec(op(), 1..14)) {
        run(Mode::Gcm, &ops)?;
    }

    #[test]
    fn ctr_matches_model(ops in proptest::collection::vec(op(), 1..14)) {
        run(Mode::Ctr, &ops)?;
    }

    #[test]
    fn xts_matches_model(ops in proptest::collection::vec(op(), 1..14)) {
        run(Mode::Xts, &ops)?;
    }
}

#[test]
fn fixed_boundary_sequence() {
    for mode in [Mode::Ctr, Mode::Gcm, Mode::Xts] {
        let ops = vec![
            Op::Write(KB64 - 10, 20, 1),
            Op::Write(KB64 + MB - 5, MB as usize + 10, 2),
            Op::Read(KB64 - 4096, 2 * MB as usize),
            Op::Truncate(KB64 + MB + 1),
            Op::Write(3 * MB, 100, 3),
            Op::Punch(KB64 - 3, MB + 7),
            Op::Reopen,
            Op::Truncate(KB64 + MB),
            Op::Truncate(2 * MB + 100),
            Op::Truncate(100),
            Op::Write(5000, 1, 4),
            Op::Truncate(0),
            Op::Write(1, 1, 5),
        ];
        run(mode, &ops).unwrap();
    }
}
