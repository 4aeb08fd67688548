//! In-place rekey of a cipher file (FORMAT.md 10), segment by segment:
//! contents survive, the file ends up readable with the new key alone,
//! reads and writes of other segments go on during the rekey, unreadable
//! blocks stay as they were, and the undo record taken at any point of a
//! segment's move restores a readable file.

mod common;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use warpfs_content::header::Header;
use warpfs_content::rekeystep::{RekeyIo, Stage, Step};
use warpfs_content::undo::Record;
use warpfs_content::{Cipher, CipherFile, Keyring, Mode};
use warpfs_crypto::{ContentKey, GcmTagger, XtsCipher, XtsKey};
use warpfs_keystream::Direct;

const MODES: [Mode; 3] = [Mode::Ctr, Mode::Gcm, Mode::Xts];

/// The cipher of key generation `g` (each generation its own key).
fn gen_cipher(mode: Mode, g: u32) -> Arc<Cipher> {
    let key = ContentKey::new(&[0x10 + g as u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    let c = if mode == Mode::Xts {
        let x = XtsKey::new(XtsCipher::Aes, &[0x60 + g as u8; 64]).unwrap();
        Cipher::new_xts(x, Arc::new(Direct::new(key)), tagger)
    } else {
        Cipher::new(mode, Arc::new(Direct::new(key)), tagger)
    };
    Arc::new(c.with_generation(g))
}

/// A keyring of generation 0 whose rekey to generation 1 has begun.
fn rekeying(mode: Mode) -> Arc<Keyring> {
    let k = Arc::new(Keyring::new(gen_cipher(mode, 0), None));
    k.begin_rekey(gen_cipher(mode, 1)).unwrap();
    k
}

/// Keeps the undo record in memory; optionally snapshots the backing file
/// (what a crash would leave) at a stage.
struct MemIo {
    rec: Option<Record>,
    snap_at: Option<(Stage, usize)>,
    seen: usize,
    path: PathBuf,
    snapshot: Option<(Vec<u8>, Record)>,
}

impl MemIo {
    fn new(path: &Path) -> Self {
        Self {
            rec: None,
            snap_at: None,
            seen: 0,
            path: path.to_path_buf(),
            snapshot: None,
        }
    }
}

impl RekeyIo for MemIo {
    fn save(&mut self, file_id: &[u8; 16], ranges: &[(u64, &[u8])]) -> std::io::Result<()> {
        let ranges = ranges.iter().map(|(o, b)| (*o, b.to_vec())).collect();
        assert!(self.rec.is_none(), "a record is saved while another is pending");
        self.rec = Some(Record {
            generation: 0,
            rekey: None,
            file_id: *file_id,
            ino: 0,
            path: Vec::new(),
            ranges,
        });
        Ok(())
    }
    fn done(&mut self) -> std::io::Result<()> {
        assert!(self.rec.take().is_some(), "done without a record");
        Ok(())
    }
    fn reached(&mut self, stage: Stage) {
        if let Some((s, n)) = self.snap_at {
            if s == stage {
                if self.seen == n && self.snapshot.is_none() {
                    let bytes = std::fs::read(&self.path).unwrap();
                    self.snapshot = Some((bytes, self.rec.clone().unwrap()));
                }
                self.seen += 1;
            }
        }
    }
}

fn header_of(path: &Path) -> Header {
    let mut h = [0u8; 32];
    File::open(path).unwrap().read_exact_at(&mut h, 0).unwrap();
    Header::parse(&h).unwrap()
}

/// 16 blocks of nnode, 2 full pages, part of a third, with holes.
fn content(mode: Mode) -> (Vec<u8>, usize) {
    let n = (16 + 2 * 256 + 40) * 4096 + 123;
    let mut v = common::pattern(7 + mode.to_byte() as u64, n);
    for hole in [3usize, 100, 300, 301, 560] {
        v[hole * 4096..(hole + 1) * 4096].fill(0);
    }
    (v, n)
}

fn write_holes(f: &CipherFile, data: &[u8]) {
    // Write block by block, skipping the all-zero blocks (holes).
    for (i, b) in data.chunks(4096).enumerate() {
        if b.iter().any(|&x| x != 0) {
            f.write_at(i as u64 * 4096, b).unwrap();
        }
    }
    f.set_len(data.len() as u64).unwrap();
}

fn rekey_all(f: &CipherFile, io: &mut MemIo) -> (u64, u64, u64) {
    let (mut steps, mut bytes, mut bad) = (0, 0, 0);
    loop {
        match f.rekey_step(io).unwrap() {
            Step::Moved { bytes: b, unreadable } => {
                steps += 1;
                bytes += b;
                bad += unreadable;
            }
            Step::Done => return (steps, bytes, bad),
        }
    }
}

#[test]
fn rekeyed_file_reads_the_same_under_the_new_key_alone() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let (data, n) = content(mode);
        let k0 = Arc::new(Keyring::new(gen_cipher(mode, 0), None));
        write_holes(&CipherFile::open(common::rw(&path), k0, "f".into()).unwrap(), &data);
        let before = std::fs::read(&path).unwrap();
        let keys = rekeying(mode);
        let f = CipherFile::open(common::rw(&path), keys.clone(), "f".into()).unwrap();
        assert_eq!(f.generation(), 0);
        let mut io = MemIo::new(&path);
        let (steps, bytes, bad) = rekey_all(&f, &mut io);
        assert_eq!(steps, 4, "{mode:?}: nnode + 3 pages");
        assert_eq!(bytes, n as u64);
        assert_eq!(bad, 0);
        assert_eq!(f.generation(), 1);
        assert_eq!(common::read_all(&f), data, "{mode:?}");
        let h = header_of(&path);
        assert_eq!((h.generation, h.rekeyed), (1, 0));
        // Same length, same holes, different bytes elsewhere.
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after.len(), before.len());
        assert_ne!(after[32..], before[32..]);
        assert_eq!(&after[8..24], &before[8..24], "file ID kept");
        // Readable with generation 1 alone; generation 0 alone refuses it.
        let k1 = Arc::new(Keyring::new(gen_cipher(mode, 1), None));
        let g1 = CipherFile::open(common::rw(&path), k1, "f".into()).unwrap();
        assert_eq!(common::read_all(&g1), data);
        let k0 = Arc::new(Keyring::new(gen_cipher(mode, 0), None));
        assert!(CipherFile::open(common::rw(&path), k0, "f".into()).is_err());
        // A further step changes nothing.
        assert_eq!(f.rekey_step(&mut io).unwrap(), Step::Done);
    }
}

#[test]
fn half_rekeyed_file_serves_reads_and_writes_everywhere() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let (mut model, _) = content(mode);
        let k0 = Arc::new(Keyring::new(gen_cipher(mode, 0), None));
        write_holes(&CipherFile::open(common::rw(&path), k0, "f".into()).unwrap(), &model);
        let keys = rekeying(mode);
        let f = CipherFile::open(common::rw(&path), keys.clone(), "f".into()).unwrap();
        let mut io = MemIo::new(&path);
        // Two segments moved: blocks 0..272 use generation 1.
        for _ in 0..2 {
            assert!(matches!(f.rekey_step(&mut io).unwrap(), Step::Moved { .. }));
        }
        assert_eq!(header_of(&path).rekeyed, 2);
        // Writes that straddle the watermark, in holes, at the end.
        for (off, len, seed) in [
            (270 * 4096 + 5, 3 * 4096, 1u64),
            (3 * 4096, 100, 2),
            (299 * 4096, 9000, 3),
        ] {
            let p = common::pattern(seed, len);
            f.write_at(off, &p).unwrap();
            model[off as usize..off as usize + len].copy_from_slice(&p);
        }
        let end = model.len() as u64;
        let p = common::pattern(4, 5000);
        f.write_at(end, &p).unwrap();
        model.extend_from_slice(&p);
        assert_eq!(common::read_all(&f), model, "{mode:?} mid-rekey");
        // A fresh open of the half-moved file reads it too.
        let g = CipherFile::open(common::rw(&path), keys.clone(), "g".into()).unwrap();
        assert_eq!(common::read_all(&g), model, "{mode:?} reopened mid-rekey");
        drop(g);
        // Shrink below the watermark, grow again, finish.
        f.set_len(200 * 4096 + 7).unwrap();
        model.truncate(200 * 4096 + 7);
        f.set_len(400 * 4096).unwrap();
        model.resize(400 * 4096, 0);
        rekey_all(&f, &mut io);
        assert_eq!(common::read_all(&f), model, "{mode:?} after the rekey");
        let k1 = Arc::new(Keyring::new(gen_cipher(mode, 1), None));
        let g1 = CipherFile::open(common::rw(&path), k1, "f".into()).unwrap();
        assert_eq!(common::read_all(&g1), model);
    }
}

#[test]
fn concurrent_writers_during_the_rekey_lose_nothing() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let blocks = 16 + 3 * 256;
        let k0 = Arc::new(Keyring::new(gen_cipher(mode, 0), None));
        let init = common::pattern(99, blocks * 4096);
        CipherFile::open(common::rw(&path), k0, "f".into())
            .unwrap()
            .write_at(0, &init)
            .unwrap();
        let keys = rekeying(mode);
        let f = Arc::new(CipherFile::open(common::rw(&path), keys, "f".into()).unwrap());
        let model = Arc::new(Mutex::new(init));
        let writers: Vec<_> = (0..3u64)
            .map(|w| {
                let (f, model) = (f.clone(), model.clone());
                std::thread::spawn(move || {
                    for i in 0..150u64 {
                        let blk = (w * 7919 + i * 104_729) % blocks as u64;
                        let off = blk * 4096 + (i % 3) * 1000;
                        let p = common::pattern(w * 1000 + i, 6000);
                        // Hold the model lock across the write so the model
                        // and the file see writes in the same order.
                        let mut m = model.lock().unwrap();
                        f.write_at(off, &p).unwrap();
                        let end = (off as usize + p.len()).min(m.len());
                        let take = end - off as usize;
                        m[off as usize..end].copy_from_slice(&p[..take]);
                        if take < p.len() {
                            m.extend_from_slice(&p[take..]);
                        }
                    }
                })
            })
            .collect();
        let mut io = MemIo::new(&path);
        rekey_all(&f, &mut io);
        for w in writers {
            w.join().unwrap();
        }
        rekey_all(&f, &mut io);
        let m = model.lock().unwrap().clone();
        assert_eq!(common::read_all(&f), m, "{mode:?}");
        let k1 = Arc::new(Keyring::new(gen_cipher(mode, 1), None));
        let g1 = CipherFile::open(common::rw(&path), k1, "f".into()).unwrap();
        assert_eq!(common::read_all(&g1), m, "{mode:?} with generation 1 alone");
    }
}

#[test]
fn the_undo_record_of_any_stage_restores_a_readable_file() {
    for mode in MODES {
        for stage in [Stage::Saved, Stage::DataWritten] {
            for seg in 0..3 {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("f");
                let (data, _) = content(mode);
                let k0 = Arc::new(Keyring::new(gen_cipher(mode, 0), None));
                write_holes(&CipherFile::open(common::rw(&path), k0, "f".into()).unwrap(), &data);
                let keys = rekeying(mode);
                let f = CipherFile::open(common::rw(&path), keys.clone(), "f".into()).unwrap();
                let mut io = MemIo::new(&path);
                io.snap_at = Some((stage, seg));
                rekey_all(&f, &mut io);
                // The crash image: the file as it was at that point.
                let (bytes, rec) = io.snapshot.take().unwrap();
                let crashed = dir.path().join("crashed");
                std::fs::write(&crashed, &bytes).unwrap();
                assert_eq!(rec.file_id, header_of(&crashed).file_id);
                rec.apply(&common::rw(&crashed)).unwrap();
                let h = header_of(&crashed);
                assert_eq!((h.generation, h.rekeyed), (0, seg as u32), "{mode:?} {stage:?} {seg}");
                let g = CipherFile::open(common::rw(&crashed), keys.clone(), "g".into()).unwrap();
                assert_eq!(common::read_all(&g), data, "{mode:?} {stage:?} segment {seg}");
                // And the rekey finishes from there.
                rekey_all(&g, &mut MemIo::new(&crashed));
                assert_eq!(common::read_all(&g), data);
                assert_eq!(header_of(&crashed).generation, 1);
            }
        }
    }
}

#[test]
fn unreadable_blocks_are_left_as_they_were() {
    let mode = Mode::Gcm;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let data = common::pattern(5, 40 * 4096);
    let k0 = Arc::new(Keyring::new(gen_cipher(mode, 0), None));
    CipherFile::open(common::rw(&path), k0, "f".into())
        .unwrap()
        .write_at(0, &data)
        .unwrap();
    // Flip a byte of block 20's data (offset: 544 + 16 * 4096 + page 8192 + 4 * 4096).
    let off = 544 + 16 * 4096 + 8192 + 4 * 4096 + 9;
    let raw = common::rw(&path);
    let mut b = [0u8; 1];
    raw.read_exact_at(&mut b, off).unwrap();
    raw.write_all_at(&[b[0] ^ 1], off).unwrap();
    let keys = rekeying(mode);
    let f = CipherFile::open(common::rw(&path), keys, "f".into()).unwrap();
    let (_, _, bad) = rekey_all(&f, &mut MemIo::new(&path));
    assert_eq!(bad, 1);
    let mut blk = vec![0u8; 4096];
    assert!(f.read_at(20 * 4096, &mut blk).is_err(), "block 20 stays unreadable");
    for x in (0..40).filter(|&x| x != 20) {
        f.read_at(x * 4096, &mut blk).unwrap();
        assert_eq!(blk, data[x as usize * 4096..][..4096]);
    }
}

#[test]
fn a_file_two_generations_behind_is_refused_by_the_rekey() {
    let mode = Mode::Ctr;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    // Written at generation 1, keyring moving 1 -> 2: fine; a file still at
    // generation 0 cannot even be opened by a 1 -> 2 keyring.
    let k = Arc::new(Keyring::new(gen_cipher(mode, 1), Some(gen_cipher(mode, 0))));
    CipherFile::open(common::rw(&path), k.clone(), "f".into())
        .unwrap()
        .write_at(0, b"x")
        .unwrap();
    let mut raw = std::fs::read(&path).unwrap();
    raw[24..28].copy_from_slice(&0u32.to_le_bytes());
    std::fs::write(&path, &raw).unwrap();
    let k2 = Arc::new(Keyring::new(gen_cipher(mode, 2), Some(gen_cipher(mode, 1))));
    assert!(CipherFile::open(common::rw(&path), k2, "f".into()).is_err());
    // Opened by the 0/1 keyring, then the keyring moves on to 2: the step refuses.
    let f = CipherFile::open(common::rw(&path), k.clone(), "f".into()).unwrap();
    k.end_rekey();
    k.begin_rekey(gen_cipher(mode, 2)).unwrap();
    assert!(f.rekey_step(&mut MemIo::new(&path)).is_err());
}
