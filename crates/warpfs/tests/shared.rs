//! Shared storage: two mounts of one CIPHERDIR at once, as two hosts on one
//! synced or network folder would have (SECURITY.md "Shared and synced storage").
//!
//! - `two_mounts_different_files`: each mount writes its own files (in
//!   parallel); each sees the other's files and contents; a scan of every
//!   nonce entry finds no nonce twice, and the two mounts' nonces come from
//!   different epochs (FORMAT.md 3.5).
//! - `two_mounts_same_file`: both write whole 4 KiB blocks of one file with
//!   O_DIRECT at the same time; afterwards every block holds exactly one
//!   writer's block or (gcm) reads as EIO -- a torn block, data of one mount
//!   under the entry of the other -- never a mix; in ctr (no integrity) a
//!   torn block reads as garbage. After the writers stop and
//!   caches are dropped, each mount sees the other's last writes.
//!
//! - `two_mounts_one_file_with_summaries`: on a volume with file summaries,
//!   both write their own blocks of one file (three segments) at the same
//!   time, with fsyncs, closes and reopens between; afterwards `warpfs
//!   fsck` finds the file's summary verifying and committed (the last
//!   mount to let go commits for both, FORMAT.md 12.7), and a fresh mount
//!   reads each block as its writer last wrote it.
//!
//! Both mounts use `--shared-storage` (the kernel caches off), as two
//! mounts of one CIPHERDIR must.

#[macro_use]
mod common;

use common::*;
use std::collections::{HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// Both are about nonce entries and tags (epochs, torn blocks): gcm and ctr.
mode_tests!(nonce: two_mounts_different_files, two_mounts_same_file);

/// A second mount of `v`'s cipher dir at `root/mnt2`, unmounted on drop.
struct Second {
    mnt: PathBuf,
    pids: Vec<i32>,
}

impl Second {
    fn mount(v: &Volume) -> Second {
        let mnt = v.root().join("mnt2");
        fs::create_dir_all(&mnt).unwrap();
        let log = v.root().join("warpfs2.log");
        warpfs(args![
            "mount",
            "--passfile",
            &v.passfile,
            "--log-file",
            &log,
            "--shared-storage",
            &v.cipher,
            &mnt
        ])
        .expect_ok("second mount of the same cipher dir");
        let pids = daemon_pids(&mnt);
        Second { mnt, pids }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }
}

impl Drop for Second {
    fn drop(&mut self) {
        if std::thread::panicking() {
            kill_daemons(&self.mnt);
        }
        let _ = unmount_path(&self.mnt);
        wait_pids_gone(&self.pids, Duration::from_secs(15));
    }
}

/// (nonce, backing file, block) of every written block in the cipher root.
fn scan(v: &Volume) -> Vec<([u8; 12], PathBuf, u64)> {
    let mode = v.mode;
    let mut out = Vec::new();
    for p in v.root_backing_entries() {
        if !fs::symlink_metadata(&p).unwrap().is_file() {
            continue;
        }
        let raw = fs::read(&p).unwrap();
        let size = mode.plain_size(raw.len() as u64).expect("valid length");
        for b in 0..size.div_ceil(BLOCK) {
            let eo = mode.block_entry_offset(b) as usize;
            let ent = &mode.entry_view(&raw[eo..eo + mode.entry_size() as usize]);
            if ent.iter().any(|&x| x != 0) {
                out.push((ent[..12].try_into().unwrap(), p.clone(), b));
            }
        }
    }
    out
}

/// Backing files by plaintext size (all sizes distinct in these tests).
fn backing_of_size(v: &Volume, size: u64) -> PathBuf {
    v.root_backing_entries()
        .into_iter()
        .find(|p| p.is_file() && fs::metadata(p).unwrap().len() == v.mode.backing_len(size))
        .unwrap_or_else(|| panic!("no backing file for size {size}"))
}

/// A volume mounted with `--shared-storage`.
fn shared_volume(mode: Mode) -> Volume {
    let mut v = Volume::init(mode);
    v.mount_with(&["--shared-storage"]);
    v
}

fn two_mounts_different_files(mode: Mode) {
    require_fuse!();
    let v = shared_volume(mode);
    let m2 = Second::mount(&v);
    let mut rng = Rng::for_test("shared-different");
    // Sizes: distinct, spanning the nnode and pages 0 and 1.
    let files: Vec<(String, Vec<u8>, bool)> = (0..12u64)
        .map(|i| {
            let size = [5_000u64, 70_000, 1_200_000][i as usize % 3] + i;
            (
                format!("{}{i}", if i % 2 == 0 { "a" } else { "b" }),
                rng.bytes(size as usize),
                i % 2 == 0,
            )
        })
        .collect();
    let threads: Vec<_> = files
        .iter()
        .map(|(name, data, on_a)| {
            let p = if *on_a { v.p(name) } else { m2.p(name) };
            let data = data.clone();
            std::thread::spawn(move || {
                write_file(&p, &data);
                // Rewrite a few blocks: more nonces per mount.
                let f = open_rw(&p);
                for b in [0u64, 1] {
                    let s = (b * BLOCK) as usize;
                    write_at(&f, b * BLOCK, &data[s..s + 100]).unwrap();
                }
                f.sync_all().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // No wait: neither mount has looked up a name the other made (and
    // --shared-storage caches no "no such name"), so each name below is a
    // fresh lookup its daemon answers from CIPHERDIR.
    for (name, data, _) in &files {
        for (which, p) in [("first", v.p(name)), ("second", m2.p(name))] {
            let got = fs::read(&p).unwrap_or_else(|e| panic!("{name} via the {which} mount: {e}"));
            assert_bytes_eq(&got, data, &format!("{name} via the {which} mount"));
        }
    }
    let mut listed: Vec<String> = fs::read_dir(&m2.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listed.sort();
    let mut want: Vec<String> = files.iter().map(|f| f.0.clone()).collect();
    want.sort();
    assert_eq!(listed, want, "the second mount's listing");
    // No nonce twice; the two mounts' nonces have disjoint epochs.
    let all = scan(&v);
    let mut seen: HashMap<[u8; 12], (PathBuf, u64)> = HashMap::new();
    for (n, p, b) in &all {
        if let Some(prev) = seen.insert(*n, (p.clone(), *b)) {
            panic!("nonce {n:02x?} used twice: {prev:?} and ({}, {b})", p.display());
        }
    }
    let epochs = |on_a: bool| -> HashSet<[u8; 8]> {
        let paths: HashSet<PathBuf> = files
            .iter()
            .filter(|f| f.2 == on_a)
            .map(|f| backing_of_size(&v, f.1.len() as u64))
            .collect();
        all.iter()
            .filter(|(_, p, _)| paths.contains(p))
            .map(|(n, _, _)| n[..8].try_into().unwrap())
            .collect()
    };
    let (ea, eb) = (epochs(true), epochs(false));
    assert!(!ea.is_empty() && !eb.is_empty());
    assert!(
        ea.is_disjoint(&eb),
        "the two mounts share a nonce epoch: {ea:02x?} {eb:02x?}"
    );
    eprintln!(
        "shared ({}): {} blocks scanned, no nonce repeated; epochs {} + {}",
        mode.name(),
        all.len(),
        ea.len(),
        eb.len()
    );
}

fn open_direct(p: &Path) -> fs::File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(p)
        .unwrap_or_else(|e| panic!("open O_DIRECT {}: {e}", p.display()))
}

fn two_mounts_same_file(mode: Mode) {
    require_fuse!();
    let v = shared_volume(mode);
    let m2 = Second::mount(&v);
    const NB: u64 = 32;
    // The second mount has not looked "shared" up yet: its first open
    // below is a fresh lookup, which finds the file at its full size.
    write_file(&v.p("shared"), &vec![0u8; (NB * BLOCK) as usize]);
    let stop = Arc::new(AtomicBool::new(false));
    // Writer w fills whole blocks with (w + 1) * 16 + (seq % 16): one byte
    // value per block write, so a mixed block is easy to see.
    let writers: Vec<_> = [v.p("shared"), m2.p("shared")]
        .into_iter()
        .enumerate()
        .map(|(w, p)| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let f = open_direct(&p);
                let mut rng = Rng::new(w as u64 + 1);
                let mut n = 0u64;
                let mut eio = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let b = rng.below(NB);
                    let val = ((w as u8 + 1) << 4) | (n % 16) as u8;
                    match write_at(&f, b * BLOCK, &[val; BLOCK as usize]) {
                        Ok(()) => {}
                        // A partial-block read-modify-write never happens
                        // here (whole blocks), so EIO is unexpected.
                        Err(e) => panic!("writer {w}: block {b}: {e}"),
                    }
                    n += 1;
                    if n.is_multiple_of(8) {
                        // Reads race with the other mount's writes.
                        match read_at(&f, b * BLOCK, BLOCK as usize) {
                            // gcm: never a mixed block. ctr (no integrity):
                            // a torn block decrypts to garbage.
                            Ok(got) if got.iter().all(|&x| x == got[0]) => {}
                            Ok(_) => {
                                assert_eq!(mode.base(), Mode::Ctr, "writer {w} read a mixed block {b}");
                                eio += 1;
                            }
                            Err(e) => {
                                assert_eq!(errno(&e), libc::EIO, "writer {w}: read block {b}: {e}");
                                eio += 1;
                            }
                        }
                    }
                }
                (n, eio)
            })
        })
        .collect();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut racing_eio = 0;
    for t in writers {
        let (n, e) = t.join().unwrap();
        total += n;
        racing_eio += e;
    }
    // Settled state, read through both mounts with O_DIRECT (no cache).
    let mut torn = 0;
    for (which, p) in [("first", v.p("shared")), ("second", m2.p("shared"))] {
        let f = open_direct(&p);
        for b in 0..NB {
            match read_at(&f, b * BLOCK, BLOCK as usize) {
                Ok(got) if mode.base() == Mode::Ctr && !got.iter().all(|&x| x == got[0]) => torn += 1,
                Ok(got) => {
                    assert_eq!(got.len(), BLOCK as usize);
                    assert!(
                        got.iter().all(|&x| x == got[0]),
                        "{which} mount: block {b} mixes two writes"
                    );
                    assert!(got[0] == 0 || got[0] >> 4 == 1 || got[0] >> 4 == 2);
                }
                Err(e) => {
                    assert_eq!(mode.base(), Mode::Gcm, "{which} mount: block {b}: {e} in ctr mode");
                    assert_eq!(errno(&e), libc::EIO, "{which} mount: block {b}: {e}");
                    torn += 1;
                }
            }
        }
    }
    // Both mounts see the same settled bytes.
    let a = fs::read(v.p("shared"));
    let b = fs::read(m2.p("shared"));
    if let (Ok(a), Ok(b)) = (&a, &b) {
        assert_eq!(a, b, "the two mounts disagree after the writers stopped");
    }
    eprintln!(
        "shared same file ({}): {total} O_DIRECT block writes from two mounts, {racing_eio} torn reads while racing (EIO in gcm, garbage in ctr), \
         {torn} torn block reads after (both mounts); gcm: no mixed block returned",
        mode.name()
    );
}

#[test]
fn two_mounts_one_file_with_summaries() {
    require_fuse!();
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "on"]);
    v.mount_with(&["--shared-storage"]);
    let m2 = Second::mount(&v);
    const NB: u64 = 600;
    write_file(&v.p("shared"), &vec![0u8; (NB * BLOCK) as usize]);
    let stop = Arc::new(AtomicBool::new(false));
    // Writer w owns the blocks b with b % 2 == w.
    let writers: Vec<_> = [v.p("shared"), m2.p("shared")]
        .into_iter()
        .enumerate()
        .map(|(w, p)| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut last: HashMap<u64, u8> = HashMap::new();
                let mut rng = Rng::new(w as u64 + 7);
                let mut n = 0u64;
                let mut f = open_direct(&p);
                while !stop.load(Ordering::Relaxed) || n < 64 {
                    let b = rng.below(NB / 2) * 2 + w as u64;
                    let val = ((w as u8 + 1) << 4) | (n % 16) as u8;
                    write_at(&f, b * BLOCK, &[val; BLOCK as usize])
                        .unwrap_or_else(|e| panic!("writer {w}: block {b}: {e}"));
                    last.insert(b, val);
                    n += 1;
                    match rng.below(16) {
                        0 => f.sync_all().unwrap_or_else(|e| panic!("writer {w}: fsync: {e}")),
                        1 => f = open_direct(&p),
                        _ => {}
                    }
                }
                last
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let mut want = vec![0u8; NB as usize];
    for t in writers {
        for (b, val) in t.join().unwrap() {
            want[b as usize] = val;
        }
    }
    drop(m2);
    v.unmount();
    let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
    o.expect_ok("fsck after two mounts wrote one file");
    assert!(o.stdout.contains("fsck: clean"), "{o}");
    assert!(
        !o.stdout.contains("changed since the file's last commit"),
        "the last mount to let go commits the file for both\n{o}"
    );
    v.mount();
    let got = fs::read(v.p("shared")).unwrap();
    for b in 0..NB as usize {
        let blk = &got[b * BLOCK as usize..(b + 1) * BLOCK as usize];
        assert!(
            blk.iter().all(|&x| x == want[b]),
            "block {b}: want {:#x}, got {:#x}",
            want[b],
            blk[0]
        );
    }
}
