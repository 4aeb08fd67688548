//! Reverse mode when files change (FORMAT.md 14, SECURITY.md): two backups
//! of an edited file never use one nonce for two different blocks, and a
//! file rewritten while it is copied through the view reads back, per
//! block, as one version of the block or as EIO, never as a mixture.

#[macro_use]
mod common;
mod revkit;

use common::*;
use revkit::*;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Every written block of every cipher file below `root`: (nonce, tag,
/// ciphertext), parsed with the layout of FORMAT.md 3.3 (`gcm`).
fn blocks(root: &Path, out: &mut Vec<([u8; 12], [u8; 16], Vec<u8>)>) {
    for e in fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let m = fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            blocks(&p, out);
            continue;
        }
        if !m.is_file() || (name.starts_with("warpfs.") && !name.starts_with("warpfs.long.")) || name.ends_with(".name")
        {
            continue;
        }
        let data = fs::read(&p).unwrap();
        let size = Mode::Gcm.plain_size(data.len() as u64).unwrap();
        for b in 0..size.div_ceil(BLOCK) {
            let eo = Mode::Gcm.block_entry_offset(b) as usize;
            let d = Mode::Gcm.block_data_offset(b) as usize;
            let len = (size - b * BLOCK).min(BLOCK) as usize;
            let nonce: [u8; 12] = data[eo..eo + 12].try_into().unwrap();
            let tag: [u8; 16] = data[eo + 16..eo + 32].try_into().unwrap();
            out.push((nonce, tag, data[d..d + len].to_vec()));
        }
    }
}

#[test]
fn two_backups_of_an_edited_file_use_no_nonce_for_two_different_blocks() {
    require_fuse!();
    if warpfs_testkit::skip_if(rsync_missing()) {
        return;
    }
    let mut r = Rev::new();
    let mut rng = Rng::for_test("reverse-nonces");
    let f = r.plain.join("edited");
    fs::write(&f, rng.bytes(2 * 1024 * 1024)).unwrap();
    // Equal blocks at other positions and in another file.
    fs::write(r.plain.join("zeros"), vec![0u8; 300 * 4096]).unwrap();
    r.init();
    r.mount_view(&[]);
    let (b1, b2) = (r.p("backup1"), r.p("backup2"));
    rsync(&[], &r.view, &b1);
    // Edit: overwrite blocks 3 and 400 with new bytes, block 9 with block
    // 10's bytes, and append.
    let file = fs::OpenOptions::new().read(true).write(true).open(&f).unwrap();
    file.write_at(&rng.bytes(4096), 3 * 4096).unwrap();
    file.write_at(&rng.bytes(4096), 400 * 4096).unwrap();
    let mut ten = vec![0u8; 4096];
    file.read_exact_at(&mut ten, 10 * 4096).unwrap();
    file.write_at(&ten, 9 * 4096).unwrap();
    file.write_at(&rng.bytes(5000), 2 * 1024 * 1024).unwrap();
    drop(file);
    rsync(&[], &r.view, &b2);

    let mut all = Vec::new();
    blocks(&b1, &mut all);
    let n1 = all.len();
    blocks(&b2, &mut all);
    assert_eq!(n1, 512 + 300);
    let mut seen: HashMap<[u8; 12], ([u8; 16], &[u8])> = HashMap::new();
    let mut repeats = 0;
    for (nonce, tag, ct) in &all {
        match seen.get(nonce) {
            // Same nonce and key: the same keystream, so the ciphertexts
            // must be equal (the same plaintext), and so must the tags.
            Some((t, c)) => {
                assert!(*c == &ct[..] && t == tag, "a nonce encrypts two different blocks");
                repeats += 1;
            }
            None => {
                seen.insert(*nonce, (*tag, ct));
            }
        }
    }
    // The blocks that did not change repeat (deterministic); the edited
    // ones do not: 512 + 300 blocks, 3 edited (block 9 holds new bytes at
    // its position, so it is new too), 2 appended.
    assert_eq!(repeats, 512 + 300 - 3, "{repeats}");
    // Equal plaintext blocks at different positions have different nonces.
    assert_eq!(seen.len(), all.len() - repeats);
}

/// Block `i` of version `v`: its number and version, then a byte pattern
/// of both, so any mixture of two versions is seen.
fn version(i: u64, v: u64) -> Vec<u8> {
    let mut b = vec![(i as u8).wrapping_mul(17) ^ (v as u8).wrapping_mul(101); 4096];
    b[..8].copy_from_slice(&i.to_le_bytes());
    b[8..16].copy_from_slice(&v.to_le_bytes());
    b
}

#[test]
fn a_file_rewritten_while_it_is_copied_reads_back_as_whole_blocks_or_eio() {
    require_fuse!();
    let mut r = Rev::new();
    const BLOCKS: u64 = 600;
    let f = r.plain.join("changing");
    let mut init = Vec::new();
    for i in 0..BLOCKS {
        init.extend_from_slice(&version(i, 0));
    }
    fs::write(&f, &init).unwrap();
    r.init();
    r.mount_view(&[]);
    let view_file = fs::read_dir(&r.view)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with("warpfs."))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, writes, f) = (stop.clone(), writes.clone(), f.clone());
        std::thread::spawn(move || {
            let file = fs::OpenOptions::new().write(true).open(&f).unwrap();
            let mut rng = Rng::for_test("reverse-writer");
            let mut v = 1;
            while !stop.load(Ordering::Relaxed) {
                // Half the writes go to a few hot blocks, which then
                // change while the view reads them.
                let i = if rng.chance(50) {
                    rng.below(8)
                } else {
                    rng.below(BLOCKS)
                };
                file.write_all_at(&version(i, v), i * 4096).unwrap();
                v += 1;
                writes.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // The writer is under way before the first copy.
    eventually("the writer started", || writes.load(Ordering::Relaxed) >= 100);
    // Copy the view's file several times while it changes (a cold page
    // cache each time), each copy into a volume of its own.
    let mut copies = Vec::new();
    for k in 0..8 {
        let dir = r.p(&format!("copy{k}"));
        fs::create_dir(&dir).unwrap();
        for name in ["warpfs.conf", "warpfs.diriv"] {
            fs::copy(r.view.join(name), dir.join(name)).unwrap();
        }
        let o = Command::new("dd")
            .arg(format!("if={}", view_file.display()))
            .arg(format!("of={}", dir.join(view_file.file_name().unwrap()).display()))
            .args(["bs=1M", "iflag=direct", "status=none"])
            .output()
            .unwrap();
        let _ = o; // a read error (EIO from the view) leaves a short copy
        copies.push(dir);
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let (mut whole, mut eio, mut changed, mut short) = (0, 0, 0, 0);
    for dir in copies {
        let fwd = r.forward(&dir);
        let name = fs::read_dir(&fwd).unwrap().next().unwrap().unwrap().path();
        let file = fs::File::open(&name).unwrap();
        short += usize::from(file.metadata().unwrap().len() < BLOCKS * 4096);
        for i in 0..BLOCKS {
            let mut b = vec![0u8; 4096];
            match file.read_at(&mut b, i * 4096) {
                Ok(4096) => {
                    let v = u64::from_le_bytes(b[8..16].try_into().unwrap());
                    assert_eq!(b, version(i, v), "block {i} of {} is a mixture", dir.display());
                    whole += 1;
                    changed += usize::from(v > 0);
                }
                Ok(0) => break, // a short copy ends here
                Ok(n) => panic!("short read of {n} bytes in block {i}"),
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::EIO), "block {i}: {e}");
                    eio += 1;
                }
            }
        }
        drop(file);
        r.unmount(&fwd);
    }
    eprintln!(
        "{} plaintext writes during 8 copies: {whole} whole blocks ({changed} of a later version), \
         {eio} EIO, {short} copies cut short by a read error",
        writes.load(Ordering::Relaxed)
    );
    assert!(changed > 0, "no copy saw a rewritten block");
}
