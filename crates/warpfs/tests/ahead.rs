//! Decrypt-ahead through a real mount (speculation on): a sequential reader
//! gets the right bytes whether they were read and decrypted ahead on the
//! engine's CPUs, taken over from a stalled thread or read inline, and
//! every block is counted once; a result read before a write that has
//! since finished is never served; a block that fails its tag fails the
//! read it belongs to, as inline. Which path a block takes depends on
//! timing, so no assertion here depends on it: the unit tests of the
//! engine's `ahead_stream` (and of a volume's `OpenFile`) drive each path
//! deterministically, and bench/spec-fio.sh measures how many blocks are
//! served ahead (and taken over) per job.
//!
//! Reads use O_DIRECT so every `pread` is one FUSE read of exactly its size
//! at its offset (no page cache, no kernel read-ahead): the requests the
//! decrypt-ahead plans are then the ones that arrive.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use warpfs_engine::StatsSnapshot;

/// Request size of the reads (the decrypt-ahead's chunk is 128 KiB: two
/// chunks per request).
const REQ: usize = 256 << 10;

fn stats(v: &Volume) -> StatsSnapshot {
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("warpfs stats --json");
    StatsSnapshot::from_json(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

const AHEAD_ARGS: [&str; 6] = ["--speculation", "on", "--engine-threads", "1", "--read-ahead", "2"];

fn mount_ahead(mode: Mode) -> Volume {
    let mut v = Volume::init(mode);
    v.mount_with(&AHEAD_ARGS);
    v
}

/// As [`mount_ahead`], but a read takes over every chunk a decrypt-ahead
/// thread is still reading at once (instead of after ~100 µs).
fn mount_ahead_taking_over(mode: Mode) -> Volume {
    let mut v = Volume::init(mode);
    let o = v.try_mount_env(&AHEAD_ARGS, &[("WARPFS_AHEAD_STEAL_US", "0")]);
    assert!(o.ok(), "mount failed\n{o}\nlog:\n{}", v.log());
    v
}

fn open_direct(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(p)
        .unwrap_or_else(|e| panic!("open {} O_DIRECT: {e}", p.display()))
}

/// Read request `i` (REQ bytes at i * REQ) through `f`.
fn request(f: &File, i: usize) -> std::io::Result<Vec<u8>> {
    let mut b = vec![0u8; REQ];
    let n = f.read_at(&mut b, (i * REQ) as u64)?;
    b.truncate(n);
    Ok(b)
}

/// Give the decrypt-ahead threads time to finish the requests planned so
/// far, so that the served-ahead path is the one usually taken (no
/// assertion depends on it: a block read inline is as right).
fn settle() {
    std::thread::sleep(Duration::from_millis(30));
}

mode_tests!(
    serves_a_sequential_reader,
    never_serves_bytes_older_than_a_finished_write,
    takes_over_chunks_from_a_stalled_thread,
    never_serves_bytes_older_than_a_finished_write_taking_over
);

fn serves_a_sequential_reader(mode: Mode) {
    require_fuse!();
    let v = mount_ahead(mode);
    let data = Rng::for_test("ahead-seq").bytes(24 * REQ + 1234);
    fs::write(v.p("f"), &data).unwrap();
    let s0 = stats(&v);
    let f = open_direct(&v.p("f"));
    let mut got = Vec::new();
    for i in 0.. {
        let b = request(&f, i).unwrap();
        if b.is_empty() {
            break;
        }
        got.extend_from_slice(&b);
        settle();
    }
    assert_bytes_eq(&got, &data, "sequential O_DIRECT read with decrypt-ahead");
    let s = stats(&v);
    let served = s.ahead_served - s0.ahead_served;
    let by_reader = s.ahead_inline - s0.ahead_inline;
    eprintln!("served ahead {served}, read by the reader {by_reader}");
    // Every block of the run was either served ahead or decrypted by the
    // reading thread (a miss in the hit rate), and none twice.
    assert_eq!(
        served + by_reader,
        (data.len() as u64).div_ceil(4096),
        "served ahead {served} + read by the reader {by_reader}:\n{s}"
    );
    // A random read afterwards is served inline and is right too.
    let off = 5 * REQ + 777;
    let mut b = vec![0u8; 10_000];
    File::open(v.p("f")).unwrap().read_exact_at(&mut b, off as u64).unwrap();
    assert_bytes_eq(&b, &data[off..off + b.len()], "random read after the sequential run");
    let o = warpfs(args!["stats", &v.mnt]);
    o.expect_ok("warpfs stats");
    assert!(o.stdout.contains("decrypt-ahead: served"), "{o}");
}

/// Reads that do not leave the threads time: chunks are often still being
/// read when their request arrives, and (with the threshold at 0) taken
/// over by the read, into another buffer, while the thread finishes. The
/// bytes are right whichever happens; how many chunks were taken over is
/// reported, not asserted (a timing: `ahead_stream`'s unit test takes one
/// over deterministically).
fn takes_over_chunks_from_a_stalled_thread(mode: Mode) {
    require_fuse!();
    let v = mount_ahead_taking_over(mode);
    let data = Rng::for_test("ahead-steal").bytes(24 * REQ + 5000);
    fs::write(v.p("f"), &data).unwrap();
    for passes in 0..8 {
        let f = open_direct(&v.p("f"));
        let mut got = Vec::new();
        for i in 0.. {
            let b = request(&f, i).unwrap();
            if b.is_empty() {
                break;
            }
            got.extend_from_slice(&b);
        }
        assert_bytes_eq(
            &got,
            &data,
            &format!("pass {passes}: sequential read, chunks taken over"),
        );
    }
    let s = stats(&v);
    let blocks = 8 * (data.len() as u64).div_ceil(4096);
    assert_eq!(
        s.ahead_served + s.ahead_inline,
        blocks,
        "blocks counted once each:\n{s}"
    );
    eprintln!("{} chunk(s) taken over in 8 passes", s.ahead_stolen);
}

fn never_serves_bytes_older_than_a_finished_write_taking_over(mode: Mode) {
    require_fuse!();
    serves_no_stale_bytes(mount_ahead_taking_over(mode));
}

fn never_serves_bytes_older_than_a_finished_write(mode: Mode) {
    require_fuse!();
    serves_no_stale_bytes(mount_ahead(mode));
}

fn serves_no_stale_bytes(v: Volume) {
    let mut rng = Rng::for_test("ahead-write");
    let mut data = rng.bytes(16 * REQ);
    fs::write(v.p("f"), &data).unwrap();
    let r = open_direct(&v.p("f"));
    let w = OpenOptions::new().write(true).open(v.p("f")).unwrap();
    // Rounds: read a few requests (the next two are decrypted ahead), then
    // another handle overwrites, truncates or extends what was read ahead,
    // then the reader goes on where it was.
    let mut i = 0;
    for round in 0..4 {
        for _ in 0..2 {
            let b = request(&r, i).unwrap();
            assert_bytes_eq(
                &b,
                &data[(i * REQ).min(data.len())..((i + 1) * REQ).min(data.len())],
                "before",
            );
            i += 1;
        }
        settle();
        match round {
            // Overwrite part of both requests read ahead.
            0 | 2 => {
                let new = rng.bytes(REQ);
                let at = i * REQ + REQ / 2;
                w.write_all_at(&new, at as u64).unwrap();
                data[at..at + REQ].copy_from_slice(&new);
            }
            // Cut the file inside the next request, then extend it again
            // (the cut part reads as zeros).
            1 => {
                let cut = i * REQ + 1000;
                w.set_len(cut as u64).unwrap();
                w.set_len(data.len() as u64).unwrap();
                data[cut..].fill(0);
            }
            // Rewrite one block in the middle of the next request.
            _ => {
                let new = rng.bytes(4096);
                let at = i * REQ + 8192;
                w.write_all_at(&new, at as u64).unwrap();
                data[at..at + 4096].copy_from_slice(&new);
            }
        }
        w.sync_all().unwrap();
        for _ in 0..2 {
            let b = request(&r, i).unwrap();
            assert_bytes_eq(
                &b,
                &data[i * REQ..(i + 1) * REQ],
                &format!("round {round}: request {i} after a finished write"),
            );
            i += 1;
        }
    }
    let s = stats(&v);
    eprintln!(
        "decrypt-ahead after the rounds: served {}, wasted {}",
        s.ahead_served, s.ahead_wasted
    );
}

mode_tests!(nonce: a_corrupt_block_read_ahead_fails_its_read);

fn backing_of(v: &Volume, len: u64) -> PathBuf {
    let found: Vec<PathBuf> = v
        .backing_paths()
        .into_iter()
        .filter(|p| {
            let md = fs::symlink_metadata(p).unwrap();
            md.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with("warpfs.") && md.len() == len
        })
        .collect();
    assert_eq!(found.len(), 1, "one backing file of length {len}: {found:?}");
    found.into_iter().next().unwrap()
}

fn a_corrupt_block_read_ahead_fails_its_read(mode: Mode) {
    require_fuse!();
    let v = mount_ahead(mode);
    let data = Rng::for_test("ahead-corrupt").bytes(8 * REQ);
    fs::write(v.p("f"), &data).unwrap();
    // Flip a ciphertext bit of a block of request 2.
    let bad_block = (2 * REQ / 4096 + 5) as u64;
    let p = backing_of(&v, mode.backing_len(data.len() as u64));
    let off = mode.block_data_offset(bad_block);
    let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    b[0] ^= 0x10;
    f.write_all_at(&b, off).unwrap();
    drop(f);
    let r = open_direct(&v.p("f"));
    for i in 0..2 {
        assert_bytes_eq(
            &request(&r, i).unwrap(),
            &data[i * REQ..(i + 1) * REQ],
            "before the bad block",
        );
        settle();
    }
    match (mode.base(), request(&r, 2)) {
        // gcm: the tag fails: EIO, never bytes.
        (Mode::Gcm, Err(e)) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}"),
        (Mode::Gcm, Ok(_)) => panic!("a read over a block with a bad tag returned data"),
        // ctr has no tag: the flipped bit reads back flipped, nothing else.
        (_, Ok(got)) => {
            let mut want = data[2 * REQ..3 * REQ].to_vec();
            want[(bad_block as usize * 4096) - 2 * REQ] ^= 0x10;
            assert_bytes_eq(&got, &want, "ctr: one bit flipped");
        }
        (_, Err(e)) => panic!("ctr read failed: {e}"),
    }
    // The reader goes on past it.
    for i in 3..8 {
        assert_bytes_eq(
            &request(&r, i).unwrap(),
            &data[i * REQ..(i + 1) * REQ],
            "after the bad block",
        );
    }
    if mode.base() == Mode::Gcm {
        let log = v.log();
        let lines = log.lines().filter(|l| l.contains("ERROR") && l.contains("/f")).count();
        assert!(lines >= 1, "no error line for the bad block:\n{log}");
    }
}
