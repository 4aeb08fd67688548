//! Tests of fsck on volumes made here: findings by path and block, the
//! repairs, their undo, and files replaced between the scan and the repair.

use super::*;
use crate::{Caller, Options as VolOptions};
use std::ffi::OsStr;
use std::path::Path;
use warpfs_config::{Config, ContentMode, KdfParams};

fn volume(dir: &Path, mode: ContentMode) -> Volume {
    let (cfg, master) = Config::create(dir, b"pw", mode, 256, KdfParams::MIN).unwrap();
    Volume::init_root(&warpfs_backing::Root::open(dir).unwrap()).unwrap();
    Volume::open(dir, &cfg, &master, VolOptions::default()).unwrap()
}

fn write(v: &Volume, name: &str, blocks: usize) {
    let who = Caller { uid: 0, gid: 0 };
    let (_, _, f, _) = v
        .create(Path::new(""), OsStr::new(name), 0o644, libc::O_RDWR, who, name.into())
        .unwrap();
    f.write_at(0, &vec![0x5a; blocks * 4096]).unwrap();
}

#[test]
fn clean_then_flipped_block_named_by_path() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path(), ContentMode::Gcm);
    write(&v, "f", 4);
    let mut seen = (0, 0);
    let r = check(&v, Options::default(), &mut |d, t| seen = (d, t));
    assert!(r.clean(), "{:?}", r.findings);
    assert_eq!((r.files, r.blocks, r.written), (1, 4, 4));
    assert_eq!(seen, (4 * 4096, 4 * 4096));
    let back = crate::names::encode(
        &v.naming().names,
        &crate::diriv::read(&v.dir(std::path::Path::new("")).unwrap()).unwrap(),
        OsStr::new("f"),
    )
    .unwrap();
    let p = v.root().join(crate::names::file_of(&back));
    let mut raw = std::fs::read(&p).unwrap();
    let off = warpfs_content::layout::data_offset(v.mode, 2) as usize;
    raw[off] ^= 1;
    std::fs::write(&p, &raw).unwrap();
    let r = check(&v, Options::default(), &mut |_, _| {});
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].path, "/f");
    assert_eq!(r.findings[0].block(), Some(2));
    assert_eq!(r.findings[0].fix, Fix::NotAsked("--zero-bad-blocks"));
    assert!(!r.all_repaired());
}

#[test]
fn volume_nonce_cap_is_a_note() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path(), ContentMode::Ctr);
    write(&v, "a", 3);
    write(&v, "b", 3);
    let opts = Options {
        volume_nonce_cap: 4,
        ..Options::default()
    };
    let r = check(&v, opts, &mut |_, _| {});
    assert!(r.clean());
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(r.notes[0].contains("first 4 only"));
}

fn volume_with(dir: &Path, flags: &[warpfs_config::FeatureFlag]) -> Volume {
    let (cfg, master) = Config::create_with_features(dir, b"pw", ContentMode::Gcm, 256, KdfParams::MIN, flags).unwrap();
    Volume::init_root(&warpfs_backing::Root::open(dir).unwrap()).unwrap();
    Volume::open(dir, &cfg, &master, VolOptions::default()).unwrap()
}

/// The backing path of root entry `name`.
fn backing(v: &Volume, name: &str) -> std::path::PathBuf {
    let iv = crate::diriv::read(&v.dir(Path::new("")).unwrap()).unwrap();
    let b = crate::names::encode(&v.naming().names, &iv, OsStr::new(name)).unwrap();
    v.root().join(crate::names::file_of(&b))
}

fn flip(p: &Path, off: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(p).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], off).unwrap();
}

fn set_header_gen(p: &Path, g: u32, r: u32) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    f.write_all_at(&g.to_le_bytes(), 24).unwrap();
    f.write_all_at(&r.to_le_bytes(), 28).unwrap();
}

fn zeroing(to: UndoTo) -> Options {
    Options {
        repairs: Repairs {
            zero_bad_blocks: true,
            fix_torn_tails: true,
            ..Repairs::default()
        },
        undo_to: to,
        ..Options::default()
    }
}

#[test]
fn a_file_replaced_between_scan_and_repair_is_not_repaired() {
    use warpfs_content::layout::{backing_len, data_offset, page_len};
    for symlink in [true, false] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("cipher");
        std::fs::create_dir(&dir).unwrap();
        let v = volume(&dir, ContentMode::Gcm);
        write(&v, "f", 20);
        let p = backing(&v, "f");
        // A bad block, and a torn tail half-way into the first nonce page.
        flip(&p, data_offset(warpfs_content::Mode::Gcm, 2) + 9);
        let good = backing_len(warpfs_content::Mode::Gcm, 16 * 4096);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(good + page_len(warpfs_content::Mode::Gcm) / 2)
            .unwrap();
        let damaged = std::fs::read(&p).unwrap();
        // Outside CIPHERDIR: a copy, which a repair by path would write.
        let outside = t.path().join("outside");
        std::fs::write(&outside, &damaged).unwrap();
        let kept = t.path().join("kept");
        let mut swapped = 0;
        let r = check_with(&v, zeroing(UndoTo::Cipherdir), &mut |_, _| {}, &mut |rel| {
            assert_eq!(v.root().join(rel), p);
            std::fs::rename(&p, &kept).unwrap();
            if symlink {
                std::os::unix::fs::symlink(&outside, &p).unwrap();
            } else {
                std::fs::write(&p, &damaged).unwrap();
            }
            swapped += 1;
        });
        assert_eq!(swapped, 1);
        assert!(
            std::fs::read(&outside).unwrap() == damaged,
            "a file outside CIPHERDIR was written"
        );
        assert!(std::fs::read(&kept).unwrap() == damaged, "the scanned file was written");
        if !symlink {
            assert!(
                std::fs::read(&p).unwrap() == damaged,
                "the file put in its place was written"
            );
        }
        let why = if symlink { "symbolic link" } else { "another file" };
        assert_eq!(r.findings.len(), 2, "{:?}", r.findings);
        for f in &r.findings {
            assert!(
                matches!(&f.fix, Fix::Failed(m) if m.contains(why) && m.contains("not repaired")),
                "{f}"
            );
        }
        assert!(r.undo.is_none() && undo_files(&v).unwrap().is_empty());
    }
}

#[test]
fn zeroed_blocks_are_saved_and_fsck_undo_puts_them_back() {
    use warpfs_content::layout::data_offset;
    for summary in [false, true] {
        let t = tempfile::tempdir().unwrap();
        let flags: &[_] = if summary {
            &[warpfs_config::FeatureFlag::FileSummary]
        } else {
            &[]
        };
        let v = volume_with(t.path(), flags);
        write(&v, "f", 300);
        let p = backing(&v, "f");
        flip(&p, data_offset(v.mode, 3) + 1);
        flip(&p, data_offset(v.mode, 290) + 7);
        let damaged = std::fs::read(&p).unwrap();
        let r = check(&v, zeroing(UndoTo::Cipherdir), &mut |_, _| {});
        assert_eq!((r.findings.len(), r.repaired()), (2, 2), "{:?}", r.findings);
        let (undo, n) = r.undo.clone().unwrap();
        assert_eq!((undo.clone(), n), (v.root().join("warpfs.fsck.undo-1"), 2));
        assert!(
            check(&v, Options::default(), &mut |_, _| {}).clean(),
            "summary {summary}"
        );
        assert!(std::fs::read(&p).unwrap() != damaged);
        let rr = restore(&v, None).unwrap();
        assert_eq!(rr.files.len(), 1);
        assert_eq!(rr.files[0].1, Ok(2), "summary {summary}");
        assert!(rr.removed && !undo.exists());
        assert!(
            std::fs::read(&p).unwrap() == damaged,
            "not put back exactly (summary {summary})"
        );
        let r = check(&v, Options::default(), &mut |_, _| {});
        assert_eq!(r.findings.len(), 2, "the bad blocks are back: {:?}", r.findings);
        assert!(matches!(restore(&v, None), Err(UndoError::NotFound(_))));
    }
}

/// After the zeroing, the file's summary was sealed again (here by a
/// write to another block and its commit, as a mount or a rekey does):
/// `fsck --undo` still puts the zeroed block back and seals the summary
/// over it, if the summary verifies; one that does not verify keeps the
/// file as it is.
#[test]
fn fsck_undo_after_the_summary_was_sealed_again() {
    use std::os::unix::fs::FileExt;
    use warpfs_content::layout::{data_offset, entry_offset};
    for tamper in [false, true] {
        let t = tempfile::tempdir().unwrap();
        let v = volume_with(t.path(), &[warpfs_config::FeatureFlag::FileSummary]);
        write(&v, "f", 300);
        let p = backing(&v, "f");
        flip(&p, data_offset(v.mode, 3) + 1);
        let damaged = std::fs::read(&p).unwrap();
        let r = check(&v, zeroing(UndoTo::Cipherdir), &mut |_, _| {});
        assert_eq!(r.repaired(), 1, "{:?}", r.findings);
        // Block 280 (another segment) written and the file committed.
        let f = warpfs_content::CipherFile::open(
            std::fs::OpenOptions::new().read(true).write(true).open(&p).unwrap(),
            v.keys().clone(),
            "f".into(),
        )
        .unwrap();
        f.write_at(280 * 4096, &[0x66; 4096]).unwrap();
        f.commit_summary().unwrap();
        drop(f);
        if tamper {
            // Block 280's entry rolled back to what it was at the zeroing.
            let at = entry_offset(v.mode, 280);
            let old = &damaged[at as usize..at as usize + 32];
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .write_all_at(old, at)
                .unwrap();
        }
        let before = std::fs::read(&p).unwrap();
        let rr = restore(&v, None).unwrap();
        if tamper {
            assert!(
                matches!(&rr.files[0].1, Err(m) if m.contains("sealed again") && m.contains("does not verify")),
                "{rr:?}"
            );
            assert!(std::fs::read(&p).unwrap() == before, "a refused restore wrote");
            continue;
        }
        assert_eq!(rr.files[0].1, Ok(1), "{rr:?}");
        assert!(rr.removed);
        let now = std::fs::read(&p).unwrap();
        let blk = |b: &[u8]| b[data_offset(v.mode, 3) as usize..data_offset(v.mode, 4) as usize].to_vec();
        assert!(blk(&now) == blk(&damaged), "the damaged block is back");
        // The summary verifies; the one problem is the damaged block.
        let r = check(&v, Options::default(), &mut |_, _| {});
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        assert!(!format!("{:?}", r.findings).contains("summary"), "{:?}", r.findings);
    }
}

#[test]
fn fsck_undo_refuses_a_planted_undo_file_and_a_file_written_since() {
    use std::os::unix::fs::FileExt;
    use warpfs_content::layout::{data_offset, entry_offset};
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("cipher");
    std::fs::create_dir(&dir).unwrap();
    let v = volume(&dir, ContentMode::Gcm);
    write(&v, "f", 30);
    let p = backing(&v, "f");
    flip(&p, data_offset(v.mode, 3) + 1);
    flip(&p, data_offset(v.mode, 20) + 1);
    let damaged = std::fs::read(&p).unwrap();
    // Written to a path outside CIPHERDIR, as the user asked.
    let undo = t.path().join("undo");
    let r = check(&v, zeroing(UndoTo::Path(undo.clone())), &mut |_, _| {});
    assert_eq!(r.undo, Some((undo.clone(), 2)));
    assert!(undo_files(&v).unwrap().is_empty());
    let zeroed = std::fs::read(&p).unwrap();
    let good = std::fs::read(&undo).unwrap();
    // Altered: refused whole, nothing written.
    let mut bad = good.clone();
    let at = bad.len() - 100;
    bad[at] ^= 1;
    std::fs::write(&undo, &bad).unwrap();
    assert!(matches!(restore(&v, Some(&undo)), Err(UndoError::Refused(m)) if m.contains("MAC does not verify")));
    assert!(std::fs::read(&p).unwrap() == zeroed);
    // Planted: made with another volume's key.
    let other = tempfile::tempdir().unwrap();
    let w = volume(other.path(), ContentMode::Gcm);
    write(&w, "f", 30);
    flip(&backing(&w, "f"), data_offset(w.mode, 3) + 1);
    let planted = other.path().join("warpfs.fsck.undo-1");
    check(&w, zeroing(UndoTo::Cipherdir), &mut |_, _| {});
    assert!(matches!(restore(&v, Some(&planted)), Err(UndoError::Refused(_))));
    assert!(std::fs::read(&p).unwrap() == zeroed);
    // Genuine, but block 20 was written since: that file is not restored.
    std::fs::write(&undo, &good).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.write_all_at(&[0x77; 32], entry_offset(v.mode, 20)).unwrap();
    let now = std::fs::read(&p).unwrap();
    let rr = restore(&v, Some(&undo)).unwrap();
    assert!(
        matches!(&rr.files[0].1, Err(m) if m.contains("changed since")),
        "{rr:?}"
    );
    assert!(!rr.removed && undo.exists());
    assert!(std::fs::read(&p).unwrap() == now, "a refused restore wrote");
    // Put back as fsck left it: restored.
    f.write_all_at(&[0; 32], entry_offset(v.mode, 20)).unwrap();
    assert_eq!(restore(&v, Some(&undo)).unwrap().files[0].1, Ok(2));
    assert!(std::fs::read(&p).unwrap() == damaged);
}

#[test]
fn fsck_never_zeroes_a_block_the_other_key_generation_reads() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let (cfg, master) = Config::create(dir, b"pw", ContentMode::Gcm, 256, KdfParams::MIN).unwrap();
    Volume::init_root(&warpfs_backing::Root::open(dir).unwrap()).unwrap();
    let v = Volume::open(dir, &cfg, &master, VolOptions::default()).unwrap();
    write(&v, "f", 40);
    let p = backing(&v, "f");
    drop(v);
    // Mid-rekey to generation 1; the file's watermark moved to 1 (blocks
    // 0..16 claimed at generation 1).
    let cfg = cfg.set_generations(dir, b"pw", 0, Some(1)).unwrap();
    let v = Volume::open(dir, &cfg, &master, VolOptions::default()).unwrap();
    set_header_gen(&p, 0, 1);
    let before = std::fs::read(&p).unwrap();
    let r = check(&v, zeroing(UndoTo::Cipherdir), &mut |_, _| {});
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    assert_eq!(
        r.findings[0].kind,
        Kind::File(warpfs_content::scan::Problem::OtherGeneration {
            first: 0,
            last: 15,
            generation: 0
        })
    );
    assert_eq!(r.findings[0].fix, Fix::None);
    assert!(std::fs::read(&p).unwrap() == before && r.undo.is_none());
    // After the rekey (generation 1 only) the header says 1.
    let cfg = cfg.set_generations(dir, b"pw", 1, None).unwrap();
    let v = Volume::open(dir, &cfg, &master, VolOptions::default()).unwrap();
    set_header_gen(&p, 1, 0);
    let before = std::fs::read(&p).unwrap();
    let r = check(&v, zeroing(UndoTo::Cipherdir), &mut |_, _| {});
    assert!(
        matches!(
            &r.findings[..],
            [Finding {
                kind: Kind::File(warpfs_content::scan::Problem::OtherGeneration {
                    first: 0,
                    last: 39,
                    generation: 0
                }),
                fix: Fix::None,
                ..
            }]
        ),
        "{:?}",
        r.findings
    );
    assert!(std::fs::read(&p).unwrap() == before && r.undo.is_none());
}

#[test]
fn what_is_not_an_undo_file_at_its_name_is_a_problem_never_opened() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("cipher");
    std::fs::create_dir(&dir).unwrap();
    let v = volume(&dir, ContentMode::Gcm);
    write(&v, "f", 2);
    let outside = t.path().join("outside");
    std::fs::write(&outside, b"not an undo file").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("warpfs.fsck.undo-1")).unwrap();
    std::fs::hard_link(&outside, dir.join("warpfs.fsck.undo-2")).unwrap();
    std::fs::create_dir(dir.join("warpfs.fsck.undo-3")).unwrap();
    std::fs::write(dir.join("warpfs.fsck.undo-4"), b"a regular file").unwrap();
    let r = check(&v, Options::default(), &mut |_, _| {});
    let undo: Vec<String> = r
        .findings
        .iter()
        .filter(|f| matches!(f.kind, Kind::UndoFile(_)))
        .map(|f| f.to_string())
        .collect();
    assert_eq!(undo.len(), 3, "{:?}", r.findings);
    for (n, what) in [(1, "symbolic link"), (2, "2 links"), (3, "directory")] {
        assert!(
            undo.iter()
                .any(|f| f.contains(&format!("warpfs.fsck.undo-{n} is not an undo file")) && f.contains(what)),
            "{undo:?}"
        );
    }
    assert!(
        r.notes.iter().any(|n| n.contains("warpfs.fsck.undo-4")),
        "{:?}",
        r.notes
    );
    // --undo=FILE refuses each of them by what it is, nothing written.
    for n in 1..=3 {
        let p = dir.join(format!("warpfs.fsck.undo-{n}"));
        assert!(
            matches!(restore(&v, Some(&p)), Err(UndoError::Refused(m)) if m.contains("not an undo file")),
            "{n}"
        );
    }
    assert_eq!(std::fs::read(&outside).unwrap(), b"not an undo file");
}
