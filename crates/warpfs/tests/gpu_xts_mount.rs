//! `--engine opencl` on XTS through real mounts (pocl in CI): an `xts` and
//! an `xts-twofish` volume and a `warpfs container` run their long
//! requests through the fused XTS kernels, `warpfs stats` shows the device
//! bytes, and what one engine wrote the other reads (the same format both
//! ways). Without OpenCL the tests skip, unless `WARPFS_REQUIRE_OPENCL=1`
//! makes that a failure.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use warpfs_engine::StatsSnapshot;

fn stats_at(mnt: &Path) -> StatsSnapshot {
    let o = warpfs(args!["stats", "--json", mnt]);
    o.expect_ok("warpfs stats --json");
    StatsSnapshot::from_json(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

/// Whether the mount at `mnt` runs XTS on OpenCL; a fall-back to the cpu
/// skips the test, or fails it under `WARPFS_REQUIRE_OPENCL=1`.
fn xts_on_opencl(mnt: &Path, log: &dyn Fn() -> String) -> bool {
    let s = stats_at(mnt);
    if s.xts_device.starts_with("opencl") {
        return true;
    }
    assert!(
        !std::env::var("WARPFS_REQUIRE_OPENCL").is_ok_and(|v| v == "1"),
        "WARPFS_REQUIRE_OPENCL=1 but XTS runs on the cpu (xts_device {:?})\nlog:\n{}",
        s.xts_device,
        log()
    );
    warpfs_testkit::skip(format!("no OpenCL XTS here (xts_device {:?})", s.xts_device));
    false
}

/// 3 MiB and a short last block: long requests both ways, the tail on the cpu.
const LEN: usize = (3 << 20) + 1234;

fn read_back(p: &Path) -> Vec<u8> {
    let mut f = File::open(p).unwrap();
    drop_cache(&f);
    let mut got = Vec::new();
    f.read_to_end(&mut got).unwrap();
    got
}

/// Write `tag`'s data (with a hole of two blocks) to `p`, synced.
fn write_file(p: &Path, tag: &str) -> Vec<u8> {
    let mut data = Rng::for_test(tag).bytes(LEN);
    data[(1 << 20)..(1 << 20) + 8192].fill(0);
    let f = File::create(p).unwrap();
    f.write_all_at(&data[..1 << 20], 0).unwrap();
    f.write_all_at(&data[(1 << 20) + 8192..], (1 << 20) + 8192).unwrap();
    f.sync_all().unwrap();
    data
}

#[test]
fn xts_volumes_run_long_requests_on_the_opencl_xts_kernels() {
    require_fuse!();
    for mode in [Mode::Xts, Mode::XtsTwofish] {
        let mut v = Volume::init(mode);
        // Written on the cpu, read back on the device below.
        v.mount_with(&["--engine", "cpu"]);
        let cpu_data = write_file(&v.p("by-cpu"), "by-cpu");
        assert_eq!(stats_at(&v.mnt).xts_device, "", "the cpu engine has no XTS device");
        v.unmount();

        v.mount_with(&["--engine", "opencl"]);
        let log = || v.log();
        if !xts_on_opencl(&v.mnt, &log) {
            return;
        }
        let data = write_file(&v.p("by-gpu"), "by-gpu");
        let w = stats_at(&v.mnt);
        assert!(
            w.xts_device_requests > 0 && w.xts_device_bytes >= 1 << 20,
            "{mode:?}: writes did not run on the device: {w:?}"
        );
        assert_eq!(w.xts_device_fallbacks, 0, "{mode:?}: {w:?}");
        assert_bytes_eq(&read_back(&v.p("by-gpu")), &data, "by-gpu on the device");
        assert_bytes_eq(&read_back(&v.p("by-cpu")), &cpu_data, "by-cpu on the device");
        let r = stats_at(&v.mnt);
        assert!(
            r.xts_device_bytes >= w.xts_device_bytes + (2 << 20),
            "{mode:?}: reads did not run on the device: {r:?}"
        );
        let o = warpfs(args!["stats", &v.mnt]);
        assert!(
            o.stdout.contains("xts device opencl ("),
            "warpfs stats names the XTS device:\n{o}"
        );
        v.unmount();

        // The cpu reads what the device wrote: the same format.
        v.mount_with(&["--engine", "cpu"]);
        assert_bytes_eq(&read_back(&v.p("by-gpu")), &data, "by-gpu on the cpu");
        v.unmount();
    }
}

struct Ct {
    _tmp: tempfile::TempDir,
    img: PathBuf,
    mnt: PathBuf,
    pass: PathBuf,
}

impl Ct {
    fn create() -> Ct {
        let tmp = tempfile::Builder::new().prefix("warpfs-ctx-").tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let (img, mnt, pass) = (root.join("img"), root.join("mnt"), root.join("pw"));
        fs::create_dir(&mnt).unwrap();
        fs::write(&pass, format!("{PASSWORD}\n")).unwrap();
        warpfs(args![
            "container",
            "create",
            "--passfile",
            &pass,
            "--kdf-memory",
            "32768",
            "--kdf-iterations",
            "2",
            "--size",
            "8M",
            &img
        ])
        .expect_ok("container create");
        Ct {
            _tmp: tmp,
            img,
            mnt,
            pass,
        }
    }
    fn open(&self, engine: &str) {
        warpfs(args![
            "container",
            "open",
            "--passfile",
            &self.pass,
            "--engine",
            engine,
            &self.img,
            &self.mnt
        ])
        .expect_ok("container open");
        assert!(is_mounted(&self.mnt));
    }
    fn close(&self) {
        unmount_path(&self.mnt).unwrap();
    }
    fn read(&self, off: u64, n: usize) -> Vec<u8> {
        let f = File::open(self.mnt.join("volume")).unwrap();
        drop_cache(&f);
        let mut b = vec![0u8; n];
        f.read_exact_at(&mut b, off).unwrap();
        b
    }
}

impl Drop for Ct {
    fn drop(&mut self) {
        if is_mounted(&self.mnt) {
            let _ = unmount_path(&self.mnt);
        }
    }
}

#[test]
fn a_container_opened_with_engine_opencl_runs_xts_on_the_device() {
    require_fuse!();
    let ct = Ct::create();
    ct.open("opencl");
    if !xts_on_opencl(&ct.mnt, &String::new) {
        return;
    }
    // 3 MiB from sector 5 on, plus an odd tail: whole requests of 1 MiB.
    let data = Rng::for_test("ct-gpu").bytes((3 << 20) + 777);
    let off = 5 * 4096 + 100;
    let f = OpenOptions::new().write(true).open(ct.mnt.join("volume")).unwrap();
    f.write_all_at(&data, off).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let w = stats_at(&ct.mnt);
    assert!(
        w.xts_device_requests > 0 && w.xts_device_bytes >= 1 << 20,
        "writes did not run on the device: {w:?}"
    );
    assert_bytes_eq(&ct.read(off, data.len()), &data, "container on the device");
    // Unwritten sectors (all zero in the image) still read as zeros.
    assert!(
        ct.read(4 << 20, 1 << 20).iter().all(|&b| b == 0),
        "a sparse sector read as non-zero"
    );
    let r = stats_at(&ct.mnt);
    assert!(
        r.xts_device_bytes >= w.xts_device_bytes + (2 << 20),
        "reads did not run on the device: {r:?}"
    );
    assert_eq!(r.xts_device_fallbacks, 0, "{r:?}");
    ct.close();
    // The cpu reads what the device wrote.
    ct.open("cpu");
    assert_eq!(stats_at(&ct.mnt).xts_device, "", "the cpu engine has no XTS device");
    assert_bytes_eq(&ct.read(off, data.len()), &data, "container on the cpu");
    ct.close();
}
