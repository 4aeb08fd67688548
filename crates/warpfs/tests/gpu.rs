//! `--engine cpu|opencl|cuda|auto` through real mounts: masks made on an
//! OpenCL device (pocl in CI) give the same files, AES and Twofish
//! volumes alike (FORMAT.md 11), an unavailable engine
//! falls back to the cpu with one warning line, loading the OpenCL platform
//! keeps the mount's signal handling, and `warpfs stats` names the backend.
//! With `WARPFS_REQUIRE_OPENCL=1` a mount that could not use OpenCL fails
//! the test instead of skipping it.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File};
use std::io::Read;
use std::time::Duration;
use warpfs_engine::StatsSnapshot;

fn stats_at(mnt: &std::path::Path) -> StatsSnapshot {
    let o = warpfs(args!["stats", "--json", mnt]);
    o.expect_ok("warpfs stats --json");
    StatsSnapshot::from_json(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

fn require_opencl() -> bool {
    std::env::var("WARPFS_REQUIRE_OPENCL").is_ok_and(|v| v == "1")
}

/// Whether the mount at `mnt` makes its masks with OpenCL; counts the test
/// as skipped (false) or fails it (WARPFS_REQUIRE_OPENCL=1) when it fell
/// back to the cpu.
fn on_opencl(mnt: &std::path::Path) -> bool {
    let s = stats_at(mnt);
    if s.backend.starts_with("opencl") {
        return true;
    }
    assert!(
        !require_opencl(),
        "WARPFS_REQUIRE_OPENCL=1 but the mount runs on {}",
        s.backend
    );
    warpfs_testkit::skip(format!("no OpenCL platform here (the mount runs on {})", s.backend));
    false
}

fn round_trip(dir: &std::path::Path, tag: &str, mib: usize) {
    let mut rng = Rng::for_test(tag);
    let data = rng.bytes((mib << 20) + 1234);
    fs::write(dir.join(tag), &data).unwrap();
    let mut f = File::open(dir.join(tag)).unwrap();
    drop_cache(&f);
    let mut got = Vec::new();
    f.read_to_end(&mut got).unwrap();
    assert_bytes_eq(&got, &data, tag);
}

#[test]
fn opencl_mount_round_trips_and_reports_its_backend() {
    require_fuse!();
    for mode in [Mode::Gcm, Mode::Ctr] {
        let mut v = Volume::init(mode);
        v.mount_with(&["--engine", "opencl"]);
        if !on_opencl(&v.mnt) {
            return;
        }
        round_trip(&v.mnt, "gpu-seq", 3);
        let s = stats_at(&v.mnt);
        assert!(s.speculation, "a device backend turns speculation on by default");
        assert!(s.made_by_workers > 0, "the device made masks: {s:?}");
        let o = warpfs(args!["stats", &v.mnt]);
        o.expect_ok("warpfs stats");
        assert!(o.stdout.contains("opencl ("), "warpfs stats names the backend:\n{o}");
        v.unmount();
        // The cpu reads what the device wrote.
        v.mount_with(&["--engine", "cpu"]);
        let mut rng = Rng::for_test("gpu-seq");
        let want = rng.bytes((3 << 20) + 1234);
        assert_bytes_eq(&fs::read(v.p("gpu-seq")).unwrap(), &want, "gpu-seq on cpu");
        v.unmount();
    }
}

/// Twofish volumes (gcm 256-bit, ctr 128-bit keys): the device makes every
/// mask (none left to the cpu), and a cpu mount reads the files back.
#[test]
fn opencl_mount_makes_twofish_masks_on_the_device() {
    require_fuse!();
    for (mode, bits) in [(Mode::GcmTwofish, "256"), (Mode::CtrTwofish, "128")] {
        let mut v = Volume::init_with(mode, &["--key-bits", bits]);
        v.mount_with(&["--engine", "opencl"]);
        if !on_opencl(&v.mnt) {
            return;
        }
        round_trip(&v.mnt, "tf-seq", 2);
        let s = stats_at(&v.mnt);
        assert!(s.twofish_keys >= 1, "{s}");
        assert!(s.device_masks > 0, "{} {bits}: the device made masks: {s}", mode.name());
        assert_eq!(
            s.device_cpu_masks,
            0,
            "{} {bits}: none left to the cpu: {s}",
            mode.name()
        );
        let o = warpfs(args!["stats", &v.mnt]);
        o.expect_ok("warpfs stats");
        assert!(
            o.stdout.contains("made on the device"),
            "warpfs stats shows device work:\n{o}"
        );
        v.unmount();
        v.mount_with(&["--engine", "cpu"]);
        let mut rng = Rng::for_test("tf-seq");
        let want = rng.bytes((2 << 20) + 1234);
        assert_bytes_eq(&fs::read(v.p("tf-seq")).unwrap(), &want, "tf-seq on cpu");
        v.unmount();
    }
}

#[test]
fn opencl_foreground_mount_still_unmounts_on_sigint_and_sigterm() {
    require_fuse!();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let v = Volume::init(Mode::Gcm);
        let mut fg = Foreground::start(&v, &["--engine", "opencl"]);
        let opencl = on_opencl(&fg.mnt);
        write_file(&v.p("fg.txt"), b"made on the device");
        fg.signal(sig);
        let st = fg.exited(Duration::from_secs(20), &format!("--engine opencl, signal {sig}"));
        assert_eq!(st.code(), Some(0), "exit after signal {sig}; stderr:\n{}", fg.stderr());
        assert!(!is_mounted(&v.mnt), "still mounted after signal {sig}");
        if !opencl {
            return;
        }
    }
}

#[test]
fn unavailable_engine_falls_back_to_cpu_with_one_warning() {
    require_fuse!();
    let v = Volume::init(Mode::Ctr);
    let mut fg = Foreground::start(&v, &["--engine", "cuda"]);
    let s = stats_at(&fg.mnt);
    if s.backend.starts_with("cuda") {
        warpfs_testkit::skip(format!("a CUDA device is present ({}): no fallback to test", s.backend));
        fg.signal(libc::SIGTERM);
        fg.wait(Duration::from_secs(20));
        return;
    }
    assert!(s.backend.starts_with("cpu"), "{}", s.backend);
    round_trip(&fg.mnt, "fallback", 1);
    fg.signal(libc::SIGTERM);
    assert_eq!(fg.wait(Duration::from_secs(20)).and_then(|s| s.code()), Some(0));
    let err = fg.stderr();
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("--engine cuda unavailable"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning line:\n{err}");
    assert!(warnings[0].contains("WARN"), "{}", warnings[0]);
    assert!(warnings[0].contains("using the cpu backend"), "{}", warnings[0]);
}

#[test]
fn auto_names_its_choice_and_never_takes_pocl() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    let mut fg = Foreground::start(&v, &["--engine", "auto"]);
    let s = stats_at(&fg.mnt);
    round_trip(&fg.mnt, "auto", 1);
    fg.signal(libc::SIGTERM);
    assert_eq!(fg.wait(Duration::from_secs(20)).and_then(|s| s.code()), Some(0));
    let err = fg.stderr();
    assert_eq!(
        err.lines().filter(|l| l.contains("engine auto:")).count(),
        1,
        "one line says why:\n{err}"
    );
    assert!(
        !s.backend.contains("Portable Computing Language"),
        "auto took pocl: {}",
        s.backend
    );
    assert!(!err.contains("WARN"), "auto warns about nothing:\n{err}");
}

#[test]
fn bad_engine_names_are_usage_errors() {
    let v = Volume::init(Mode::Gcm);
    let o = warpfs(args![
        "mount",
        "--engine",
        "fpga",
        "--passfile",
        &v.passfile,
        &v.cipher,
        &v.mnt
    ]);
    assert_eq!(o.code, Some(2), "{o}");
    assert!(o.stderr.contains("fpga"), "{o}");
}
