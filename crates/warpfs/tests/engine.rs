//! The keystream engine through a real mount: `warpfs stats` on a live
//! (daemonized) mount, the `trusted.warpfs.stats` attribute behind it, the
//! `--speculation` switch and the summary line logged at unmount.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File};
use std::io::Read;
use warpfs_engine::StatsSnapshot;

fn stats(v: &Volume) -> StatsSnapshot {
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("warpfs stats --json");
    StatsSnapshot::from_json(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

/// Write `mib` MiB, drop the cache, read it back sequentially in 1 MiB reads.
fn write_then_read(v: &Volume, mib: usize) {
    let mut rng = Rng::for_test("engine-seq");
    let data = rng.bytes(mib << 20);
    fs::write(v.p("seq"), &data).unwrap();
    let mut f = File::open(v.p("seq")).unwrap();
    drop_cache(&f);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert_bytes_eq(&got, &data, "sequential read back");
}

mode_tests!(
    nonce:
    stats_show_ready_hits_after_a_sequential_read,
    speculation_off_makes_every_mask_inline,
    engine_cpus_place_the_workers
);

/// Write-pool size of the ready-hits test: the workers fill it at mount.
const POOL: u64 = 64;

/// Ready-hits without timing: the workers fill the write pool right after
/// the mount (nothing else asks them for masks), so once they have made
/// its `POOL` masks the next block written finds its mask ready. How many
/// of a run's masks are ready in time is a measurement: bench/spec-fio.sh
/// reports the hit rate per job.
fn stats_show_ready_hits_after_a_sequential_read(mode: Mode) {
    require_fuse!();
    let mut v = Volume::init(mode);
    // The read window alone (decrypt-ahead, tested in ahead.rs, would
    // serve most of the sequential read without it).
    v.mount_with(&[
        "--speculation",
        "on",
        "--engine-threads",
        "2",
        "--pool-size",
        &POOL.to_string(),
        "--window-max",
        "32",
        "--read-ahead",
        "0",
    ]);
    let t0 = std::time::Instant::now();
    loop {
        let s = stats(&v);
        assert_eq!(s.applies, 0, "nothing was written or read yet: {s}");
        if s.made_by_workers >= POOL {
            break;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "the workers never filled the write pool:\n{s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    write_then_read(&v, 8);
    let s = stats(&v);
    assert!(s.speculation, "{s}");
    assert_eq!(s.threads, 2, "{s}");
    assert!(s.ready_hits > 0, "the first block written found no ready mask:\n{s}");
    assert!(
        s.window_defined > 0,
        "the sequential read defined no window masks:\n{s}"
    );
    // Every apply took its mask one way.
    assert_eq!(s.applies, s.ready_hits + s.waits + s.inline, "{s}");
    // Every block was sealed through the pool and read through a window
    // (or, had the window lost its mask, computed directly).
    assert!(s.applies + s.direct >= 2 * 8 * 256, "{s}");
    // The text form names the counters.
    let o = warpfs(args!["stats", &v.mnt]);
    o.expect_ok("warpfs stats");
    for w in ["ready", "waited", "inline", "wasted", "batches"] {
        assert!(o.stdout.contains(w), "`warpfs stats` lacks {w:?}:\n{o}");
    }
    // The attribute is virtual: not listed, not writable, only on the root.
    if mounts_serve_xattrs() {
        assert!(!listxattr(&v.mnt).unwrap().iter().any(|n| n.starts_with("trusted.")));
    }
    assert!(setxattr(&v.mnt, "trusted.warpfs.stats", b"x", 0).is_err());
    assert!(getxattr(&v.p("seq"), "trusted.warpfs.stats").is_err());
    v.unmount();
    let log = v.log();
    assert!(
        log.lines()
            .any(|l| l.contains("at unmount: engine") && l.contains("ready-hits")),
        "no engine summary line at unmount in the log:\n{log}"
    );
}

fn speculation_off_makes_every_mask_inline(mode: Mode) {
    require_fuse!();
    let mut v = Volume::init(mode);
    v.mount_with(&["--speculation", "off"]);
    write_then_read(&v, 2);
    let s = stats(&v);
    assert!(!s.speculation, "{s}");
    assert_eq!((s.threads, s.ready_hits, s.made_by_workers), (0, 0, 0), "{s}");
    assert!(s.inline + s.direct >= 2 * 2 * 256, "{s}");
}

/// `--engine-cpus 0`: one worker (none was asked for), running on CPU 0
/// only, as the stats and the mount's log line say; data still round-trips.
fn engine_cpus_place_the_workers(mode: Mode) {
    require_fuse!();
    let mut v = Volume::init(mode);
    v.mount_with(&["--speculation", "on", "--engine-cpus", "0"]);
    write_then_read(&v, 2);
    let s = stats(&v);
    assert_eq!(s.threads, 1, "{s}");
    assert_eq!(s.worker_cpus, vec![0], "{s}");
    assert!(s.to_string().contains("workers on CPUs 0"), "{s}");
    v.unmount();
    let log = v.log();
    assert!(
        log.lines().any(|l| l.contains("1 worker(s) on CPUs 0")),
        "no placement in the mount log:\n{log}"
    );
}

#[test]
fn stats_refuses_what_is_not_a_warpfs_mount() {
    require_fuse!();
    let dir = tempfile::tempdir().unwrap();
    let o = warpfs(args!["stats", dir.path()]);
    assert_ne!(o.code, Some(0), "{o}");
    assert!(o.stderr.contains("not a warpfs mount"), "{o}");
}

#[test]
fn engine_switches_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        &["--speculation", "maybe"][..],
        &["--pool-size", "0"],
        &["--window-max", "0"],
        &["--engine-threads", "0"],
        &["--engine-cpus", ""],
        &["--engine-cpus", "x"],
        &["--engine-cpus", "1-0"],
        &["--engine-cpus", "0,"],
        &["--engine-cpus", "1023"],
        &["--read-ahead", "65"],
        &["--read-ahead", "-1"],
    ] {
        let mut a = args!["mount"];
        a.extend(bad.iter().map(std::ffi::OsString::from));
        a.extend(args![dir.path(), dir.path()]);
        warpfs(&a).expect_code(2, &format!("mount {bad:?}"));
    }
}
