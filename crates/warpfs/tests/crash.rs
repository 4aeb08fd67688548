//! Crash consistency through real mounts (FORMAT.md 3.5, 3.6): SIGKILL the
//! daemon while four threads write concurrently, detach the dead mount
//! (`umount -l`), remount, and check what a crash may and may not leave:
//!
//! - files written and fsynced before the crash (and not touched since) read
//!   back byte-identical;
//! - every block of every other file either reads or fails with EIO; EIO only
//!   in `gcm` (a torn block: new data under its old entry), never another
//!   error; a block that reads holds only data some writer wrote at that very
//!   file, block and offset, or zeros (holes) -- in `gcm`, where torn data can
//!   not be returned; each EIO block is named in the log, and a read of one
//!   block fails only for blocks that are torn (the log names no others);
//! - a scan of every cipher file's nonce entries (FORMAT.md 3.3) finds no
//!   nonce twice, and a nonce seen before the crash reappears only for the
//!   same file and block; where its ciphertext changed (a torn write), the
//!   block reads as EIO in `gcm`.
//!
//! The kill comes at six different points (one volume, six crashes: after
//! the writers together finished 8 to 600 operations, each at least one);
//! all assertions hold whatever the kill interrupted. Each writer stops at
//! the first error, which must be the dead connection's (ENOTCONN, or
//! ECONNABORTED or, over io_uring, ECANCELED for a request in flight when
//! the daemon died); in `gcm` an
//! EIO on a file an earlier crash tore a block of is counted and passed.
//!
//! Every case runs with speculation on (the write pool's masks made ahead
//! by worker threads) and off, each checked in `warpfs stats` (the Twofish
//! cases with it off in scripts/twofish-matrix.sh).

#[macro_use]
mod common;

use common::*;
use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// Over Twofish CI runs it with speculation on (Twofish's default);
// scripts/twofish-matrix.sh with it off too.
speculation_tests!(twofish_on: sigkill_during_concurrent_writes);

const WRITERS: usize = 4;
const FILES_PER_WRITER: usize = 2;
/// Writers stay below this block (crosses the nnode/page 0 and page 0/page 1
/// boundaries at blocks 16 and 272).
const MAX_BLOCK: u64 = 300;
/// Written data is made of self-describing 64-byte chunks.
const CHUNK: u64 = 64;
/// Kill points: operations the writers together finished (each at least
/// one) before the kill; different tear points.
const KILL_AFTER_OPS: [u64; 6] = [8, 40, 100, 200, 350, 600];

// ---------------------------------------------------------------------------
// Self-describing data: chunk `c` of block `b` of writer file `f`, version
// `seq` = "CRSH" f:u32 b:u64 c:u16 seq:u32, then 42 bytes derived from those.

fn chunk_fill(f: u32, b: u64, c: u16, seq: u32) -> Vec<u8> {
    let seed = (f as u64) << 48 ^ b << 32 ^ (c as u64) << 24 ^ seq as u64 ^ 0x5eed;
    Rng::new(seed).bytes(42)
}

fn chunk(f: u32, b: u64, c: u16, seq: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(CHUNK as usize);
    v.extend_from_slice(b"CRSH");
    v.extend_from_slice(&f.to_be_bytes());
    v.extend_from_slice(&b.to_be_bytes());
    v.extend_from_slice(&c.to_be_bytes());
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend_from_slice(&chunk_fill(f, b, c, seq));
    v
}

/// Data for plaintext range `[off, off + len)` (both multiples of CHUNK).
fn pattern(f: u32, off: u64, len: u64, seq: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(len as usize);
    let mut o = off;
    while o < off + len {
        v.extend_from_slice(&chunk(f, o / BLOCK, ((o % BLOCK) / CHUNK) as u16, seq));
        o += CHUNK;
    }
    v
}

/// Why block `b` of file `f` (as read) is not made of zero chunks and chunks
/// that some writer wrote there; `None` when it is.
fn bad_block(f: u32, b: u64, data: &[u8]) -> Option<String> {
    for (i, c) in data.chunks(CHUNK as usize).enumerate() {
        if c.iter().all(|&x| x == 0) {
            continue;
        }
        if c.len() != CHUNK as usize {
            return Some(format!(
                "chunk {i}: a partial chunk of {} bytes that is not zero",
                c.len()
            ));
        }
        let seq = u32::from_be_bytes(c[18..22].try_into().unwrap());
        if c != chunk(f, b, i as u16, seq).as_slice() {
            return Some(format!(
                "chunk {i} is not chunk {i} of block {b} of file {f} (header {:02x?})",
                &c[..22]
            ));
        }
    }
    None
}

// ---------------------------------------------------------------------------
// Nonce scan (as in nonces.rs)

/// Every written block's (nonce, backing file, block, ciphertext).
fn scan(v: &Volume) -> Vec<([u8; 12], PathBuf, u64, Vec<u8>)> {
    let mode = v.mode;
    let mut out = Vec::new();
    for p in v.root_backing_entries() {
        if !fs::symlink_metadata(&p).unwrap().is_file() {
            continue;
        }
        let raw = fs::read(&p).unwrap();
        if raw.is_empty() {
            continue;
        }
        assert_eq!(&raw[..4], b"WRPF", "{}: not a cipher file", p.display());
        let size = mode
            .plain_size(raw.len() as u64)
            .unwrap_or_else(|| panic!("{}: corrupt length {}", p.display(), raw.len()));
        for b in 0..size.div_ceil(BLOCK) {
            let eo = mode.block_entry_offset(b) as usize;
            let ent = &mode.entry_view(&raw[eo..eo + mode.entry_size() as usize]);
            if ent.iter().all(|&x| x == 0) {
                continue; // a hole
            }
            let mut nonce = [0u8; 12];
            nonce.copy_from_slice(&ent[..12]);
            assert_ne!(
                nonce,
                [0u8; 12],
                "{} block {b}: zero nonce in a written entry",
                p.display()
            );
            let d = mode.block_data_offset(b) as usize;
            let len = (size - b * BLOCK).min(BLOCK) as usize;
            out.push((nonce, p.clone(), b, raw[d..d + len].to_vec()));
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Does `line` contain "block N" with N not followed by another digit?
fn names_block(line: &str, n: u64) -> Option<()> {
    let pat = format!("block {n}");
    line.match_indices(&pat)
        .any(|(i, _)| !line[i + pat.len()..].starts_with(|c: char| c.is_ascii_digit()))
        .then_some(())
}

/// Blocks named by "GCM authentication failed" (or, XChaCha20, "Poly1305
/// authentication failed") lines of `log` for `/name`.
fn logged_bad_blocks(log: &str, name: &str, nblocks: u64) -> BTreeSet<u64> {
    let label = format!("/{name}: ");
    log.lines()
        .filter(|l| {
            (l.contains("GCM authentication failed") || l.contains("Poly1305 authentication failed"))
                && l.contains(&label)
        })
        .flat_map(|l| (0..nblocks).filter(move |&b| names_block(l, b).is_some()))
        .collect()
}

// ---------------------------------------------------------------------------
// The writers

/// Why a writer stopped.
enum Stopped {
    /// The flag, set after the kill (the writer made no call in between).
    Flag,
    /// The error of its first failed call, and what the call did.
    Error(std::io::Error, String),
}

/// Random overwrites, extends, partial-block writes, truncations and fsyncs
/// on this writer's files until told to stop or a call fails; `done`
/// counts the operations that succeeded. `torn` are the files an earlier
/// crash tore a block of (gcm): a call that makes the daemon read such a
/// block back fails with EIO (a partial write or a cut inside it, a write
/// extending the file past it as its last block; with the kernel's
/// writeback cache a buffered write's read-back can come with any later
/// call on the file: its writeback, a truncation, an fsync). On those
/// files the writer counts an EIO in `refused` and goes on; any other
/// error, or an EIO on a file without torn blocks, stops it.
fn writer(
    files: Vec<(u32, File)>,
    seed: u64,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    torn: BTreeSet<u32>,
    refused: Arc<AtomicU64>,
) -> Stopped {
    let mut rng = Rng::new(seed);
    let mut seq = (seed as u32) & 0xfff0_0000;
    let mut sizes: Vec<u64> = files
        .iter()
        .map(|(_, f)| f.metadata().map(|m| m.len()).unwrap_or(0))
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let i = rng.below(files.len() as u64) as usize;
        let (fi, f) = &files[i];
        seq = seq.wrapping_add(1);
        let old = sizes[i];
        // The call, and the blocks it writes.
        let (r, touched) = match rng.below(100) {
            // Whole blocks (overwrite or extend, maybe leaving a hole).
            0..=49 => {
                let b = rng.below(MAX_BLOCK);
                let n = rng.range(1, 8).min(MAX_BLOCK - b);
                let (off, len) = (b * BLOCK, n * BLOCK);
                sizes[i] = sizes[i].max(off + len);
                (
                    write_at(f, off, &pattern(*fi, off, len, seq)),
                    off / BLOCK..(off + len).div_ceil(BLOCK),
                )
            }
            // Unaligned (chunk-aligned) ranges: partial blocks, RMW.
            50..=79 => {
                let off = rng.below(MAX_BLOCK * BLOCK / CHUNK) * CHUNK;
                let len = (rng.range(1, 160) * CHUNK).min(MAX_BLOCK * BLOCK - off);
                sizes[i] = sizes[i].max(off + len);
                (
                    write_at(f, off, &pattern(*fi, off, len, seq)),
                    off / BLOCK..(off + len).div_ceil(BLOCK),
                )
            }
            // Append a partial block at the end (the old last block is redone).
            80..=87 => {
                let off = sizes[i].div_ceil(CHUNK) * CHUNK;
                let len = rng.range(1, 100) * CHUNK;
                if off + len > MAX_BLOCK * BLOCK {
                    continue;
                }
                sizes[i] = off + len;
                (
                    write_at(f, off, &pattern(*fi, off, len, seq)),
                    off / BLOCK..(off + len).div_ceil(BLOCK),
                )
            }
            // Shrink into a block (never to zero: the header stays).
            88..=91 => {
                let cut = rng.range(1, sizes[i].max(CHUNK) / CHUNK) * CHUNK;
                sizes[i] = cut;
                (f.set_len(cut), cut / BLOCK..cut / BLOCK + 1)
            }
            // Write back: keeps the daemon busy writing blocks and entries.
            _ => (f.sync_all(), 0..u64::MAX),
        };
        match r {
            Ok(()) => {
                done.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) if errno(&e) == libc::EIO && torn.contains(fi) => {
                refused.fetch_add(1, Ordering::SeqCst);
                // The size did not change as planned (or only partly).
                sizes[i] = f.metadata().map_or(old, |m| m.len());
            }
            Err(e) => {
                let what = format!("w{fi}, blocks {touched:?}, size {}", sizes[i]);
                return Stopped::Error(e, what);
            }
        }
    }
    Stopped::Flag
}

fn writer_name(f: u32) -> String {
    format!("w{f}")
}

// ---------------------------------------------------------------------------
// The test

fn sigkill_during_concurrent_writes(mode: Mode) {
    require_fuse!();
    let start = Instant::now();
    let mut v = Volume::new(mode);
    let mut rng = Rng::for_test(&format!("crash-{}", mode.name()));

    // Files written and fsynced before any crash; nobody touches them again.
    let keep: Vec<(String, Vec<u8>)> = [(3 << 20) + 5000, 10 * 1024 + 3, 70_000, 4096]
        .iter()
        .enumerate()
        .map(|(i, &n)| (format!("keep{i}"), rng.bytes(n)))
        .collect();
    for (name, data) in &keep {
        let f = open_rw(&v.p(name));
        write_at(&f, 0, data).unwrap();
        f.sync_all().unwrap();
    }

    // Writer files, created one at a time to learn their backing files.
    let nfiles = (WRITERS * FILES_PER_WRITER) as u32;
    let mut backing_name: HashMap<PathBuf, String> = HashMap::new();
    for f in 0..nfiles {
        let before: BTreeSet<PathBuf> = v.root_backing_entries().into_iter().collect();
        let file = open_rw(&v.p(writer_name(f)));
        let len = rng.range(1, 40) * BLOCK + rng.below(BLOCK / CHUNK) * CHUNK;
        write_at(&file, 0, &pattern(f, 0, len, 0)).unwrap();
        file.sync_all().unwrap();
        let new: Vec<PathBuf> = v
            .root_backing_entries()
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        assert_eq!(new.len(), 1, "creating {} made backing entries {new:?}", writer_name(f));
        backing_name.insert(new[0].clone(), writer_name(f));
    }

    // Nonces seen so far: nonce -> (backing file, block, ciphertext).
    let mut seen: HashMap<[u8; 12], (PathBuf, u64, Vec<u8>)> = HashMap::new();
    for (nonce, p, b, ct) in scan(&v) {
        assert!(
            seen.insert(nonce, (p.clone(), b, ct)).is_none(),
            "nonce {} twice",
            hex(&nonce)
        );
    }

    let mut summary = Vec::new();
    let mut prev_eio: BTreeSet<(String, u64)> = BTreeSet::new();
    for (round, &kill_ops) in KILL_AFTER_OPS.iter().enumerate() {
        // 1. Writers.
        let stop = Arc::new(AtomicBool::new(false));
        let done: Vec<Arc<AtomicU64>> = (0..WRITERS).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let refused: Vec<Arc<AtomicU64>> = (0..WRITERS).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let handles: Vec<_> = (0..WRITERS)
            .map(|t| {
                let files: Vec<(u32, File)> = (0..FILES_PER_WRITER)
                    .map(|j| {
                        let f = (t * FILES_PER_WRITER + j) as u32;
                        (f, open_rw(&v.p(writer_name(f))))
                    })
                    .collect();
                // This writer's files with a torn block (gcm reads it as EIO).
                let torn: BTreeSet<u32> = files
                    .iter()
                    .map(|(f, _)| *f)
                    .filter(|f| prev_eio.iter().any(|(n, _)| *n == writer_name(*f)))
                    .collect();
                let (stop, seed, done, refused) = (stop.clone(), rng.next_u64(), done[t].clone(), refused[t].clone());
                std::thread::spawn(move || writer(files, seed, stop, done, torn, refused))
            })
            .collect();

        // 2. Once every writer has done some work and together they did
        // `kill_ops` operations, kill the daemon mid-write (the writers go
        // on) and detach the dead mount.
        let t0 = Instant::now();
        loop {
            let counts: Vec<u64> = done.iter().map(|d| d.load(Ordering::SeqCst)).collect();
            if counts.iter().all(|&n| n > 0) && counts.iter().sum::<u64>() >= kill_ops {
                break;
            }
            if let Some(t) = handles.iter().position(|h| h.is_finished()) {
                let why = match handles.into_iter().nth(t).map(|h| h.join()) {
                    Some(Ok(Stopped::Error(e, what))) => format!("{e} ({what})"),
                    Some(Ok(Stopped::Flag)) => "the flag".into(),
                    _ => "a panic".into(),
                };
                panic!("round {round}: writer {t} ended before the kill, by {why} (operations done: {counts:?})");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "round {round}: the writers are stuck (operations done: {counts:?})"
            );
            std::thread::yield_now();
        }
        if round + 1 == KILL_AFTER_OPS.len() {
            // The round with the most writes: the engine path asked for ran.
            assert_speculation_ran(&v.mnt, mode, &format!("round {round}, before the kill"));
        }
        let pids = kill_daemons(&v.mnt);
        assert!(
            !pids.is_empty(),
            "round {round}: no warpfs daemon serving {}",
            v.mnt.display()
        );
        let c = cstr(&v.mnt);
        let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        assert_eq!(
            r,
            0,
            "umount -l {}: {}",
            v.mnt.display(),
            std::io::Error::last_os_error()
        );
        stop.store(true, Ordering::Relaxed);
        let mut ops = 0;
        for (t, h) in handles.into_iter().enumerate() {
            let stopped = h.join().expect("writer thread panicked");
            let n = done[t].load(Ordering::SeqCst);
            assert!(n > 0, "round {round}: writer {t} did no work");
            let refusals = refused[t].load(Ordering::SeqCst);
            if refusals > 0 {
                eprintln!("round {round}: writer {t}: {refusals} call(s) refused with EIO on torn blocks");
            }
            match stopped {
                Stopped::Flag => eprintln!("round {round}: writer {t}: stopped by the flag after {n} ops"),
                Stopped::Error(e, what) => {
                    assert!(
                        // FUSE over io_uring cancels a dead daemon's pending
                        // requests: ECANCELED (/dev/fuse: ENOTCONN, ECONNABORTED).
                        matches!(errno(&e), libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED),
                        "round {round}: writer {t} failed with {e} ({what}) after {n} ops, not the dead connection's error"
                    );
                    eprintln!("round {round}: writer {t}: stopped by {e} after {n} ops");
                }
            }
            ops += n;
        }
        let alive = wait_pids_gone(&pids, Duration::from_secs(10));
        assert!(
            alive.is_empty(),
            "round {round}: killed daemon(s) {alive:?} still alive"
        );
        assert!(!is_mounted(&v.mnt), "round {round}: still mounted after umount -l");

        // 3. Remount (the harness's unmount finds nothing mounted) and check.
        let log_from = v.log().len();
        v.remount();
        for (name, data) in &keep {
            let got = fs::read(v.p(name)).unwrap_or_else(|e| panic!("round {round}: read fsynced {name}: {e}"));
            assert_bytes_eq(&got, data, &format!("round {round}: fsynced {name} after the crash"));
        }
        let mut eio: BTreeSet<(String, u64)> = BTreeSet::new();
        let mut sizes = Vec::new();
        for f in 0..nfiles {
            let name = writer_name(f);
            let file = File::open(v.p(&name)).unwrap();
            // No read-ahead: each read asks the daemon for exactly one block.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
            let size = file.metadata().unwrap().len();
            sizes.push(size);
            for b in 0..size.div_ceil(BLOCK) {
                let want = (size - b * BLOCK).min(BLOCK) as usize;
                match read_at(&file, b * BLOCK, BLOCK as usize) {
                    Ok(data) => {
                        assert_eq!(
                            data.len(),
                            want,
                            "round {round}: {name} block {b}: short read (size {size})"
                        );
                        if mode.base() == Mode::Gcm {
                            if let Some(why) = bad_block(f, b, &data) {
                                panic!("round {round}: {name} block {b} read wrong data: {why}");
                            }
                        }
                    }
                    Err(e) if errno(&e) == libc::EIO && mode.base() == Mode::Gcm => {
                        eio.insert((name.clone(), b));
                    }
                    Err(e) => panic!("round {round}: {name} block {b} (size {size}): {e}"),
                }
            }
            // A torn block stays torn; the others keep reading.
            for &(_, b) in eio.iter().filter(|(n, _)| *n == name) {
                let e = read_at(&file, b * BLOCK, BLOCK as usize).expect_err("a torn block read on a second try");
                assert_eq!(errno(&e), libc::EIO, "round {round}: {name} block {b} second read");
            }
        }
        eprintln!(
            "round {round} (kill after {kill_ops} ops, {ops} ops): sizes {sizes:?}; {} EIO block(s): {eio:?}",
            eio.len()
        );

        // The log names each EIO block, and no block that read fine.
        let log = v.log();
        let log = &log[log_from.min(log.len())..];
        for f in 0..nfiles {
            let name = writer_name(f);
            let mine: BTreeSet<u64> = eio.iter().filter(|(n, _)| *n == name).map(|(_, b)| *b).collect();
            let logged = logged_bad_blocks(log, &name, MAX_BLOCK + 1);
            assert_eq!(
                logged, mine,
                "round {round}: {name}: blocks the log names vs blocks that gave EIO\nlog:\n{log}"
            );
        }
        for (name, _) in &keep {
            assert!(
                logged_bad_blocks(log, name, 1 << 10).is_empty(),
                "round {round}: {name} in the log:\n{log}"
            );
        }

        // 4. Nonces: unique; an old one only for the same block; changed
        // ciphertext under an old nonce is a torn block (EIO in gcm).
        let now = scan(&v);
        let mut here: HashMap<[u8; 12], (PathBuf, u64)> = HashMap::new();
        let mut torn_by_scan = BTreeSet::new();
        for (nonce, p, b, ct) in &now {
            if let Some((p0, b0)) = here.insert(*nonce, (p.clone(), *b)) {
                panic!(
                    "round {round}: nonce {} used by {} block {b0} and {} block {b}",
                    hex(nonce),
                    p0.display(),
                    p.display()
                );
            }
            if let Some((p0, b0, ct0)) = seen.get(nonce) {
                assert!(
                    p0 == p && b0 == b,
                    "round {round}: nonce {} of {} block {b} was already used for {} block {b0}",
                    hex(nonce),
                    p.display(),
                    p0.display()
                );
                if ct0 != ct {
                    let name = backing_name
                        .get(p)
                        .unwrap_or_else(|| panic!("round {round}: fsynced file {} changed", p.display()));
                    torn_by_scan.insert((name.clone(), *b));
                }
            }
        }
        if mode.base() == Mode::Gcm {
            let missed: Vec<_> = torn_by_scan.difference(&eio).collect();
            assert!(
                missed.is_empty(),
                "round {round}: blocks with new data under an old nonce that read without EIO: {missed:?}"
            );
        }
        // Where the torn blocks' entries come from (diagnostics only).
        let mut kinds = Vec::new();
        for (name, b) in &eio {
            let ent = now
                .iter()
                .find(|(_, p, b1, _)| b1 == b && backing_name.get(p) == Some(name));
            kinds.push(match ent {
                None => format!("{name}/{b}: no entry"),
                Some((nonce, _, _, ct)) => match seen.get(nonce) {
                    None => format!("{name}/{b}: entry from this round"),
                    Some((_, _, ct0)) if ct0 == ct => format!("{name}/{b}: unchanged since an earlier round"),
                    Some(_) => format!("{name}/{b}: earlier entry, new data"),
                },
            });
        }
        let new_eio = eio.difference(&prev_eio).count();
        prev_eio = eio.clone();
        for (nonce, p, b, ct) in now {
            seen.insert(nonce, (p, b, ct));
        }
        summary.push(format!(
            "round {round}: kill@{kill_ops}ops ops={ops} eio={} (new {new_eio}: {kinds:?}) torn_by_scan={} nonces={} seen={}",
            eio.len(),
            torn_by_scan.len(),
            here.len(),
            seen.len()
        ));
    }
    v.unmount();
    eprintln!(
        "SUMMARY {} ({:?}):\n  {}",
        mode.name(),
        start.elapsed(),
        summary.join("\n  ")
    );
}
