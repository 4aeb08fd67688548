//! Transports and kernel caches, through real mounts:
//!
//! - `each_transport_serves_and_names_itself`: `--transport uring` serves
//!   every request through the ring (the daemon counts them at unmount) and
//!   `warpfs stats` and the mount log name it, with two threads on each
//!   CPU's queue by default; `--transport dev` likewise.
//! - `uring_with_the_parameter_off_fails_and_leaves_it_off`: with the
//!   module parameter off, `auto` serves through /dev/fuse and says how to
//!   turn it on; `--transport uring` fails, saying the same; neither
//!   changes it.
//! - `uring_enable_turns_it_on_for_the_mount_and_back_at_unmount`:
//!   `--uring-enable` (and `-o uring_enable`) turns it on, the mount is
//!   served through the ring, and once the daemon has ended (after
//!   `umount`, or after SIGTERM) it is off again.
//! - `a_setuid_mount_serves_on_the_ring_and_puts_the_parameter_back`: a
//!   daemon that became another user (`--setuid`) serves through the ring
//!   and still puts the parameter back.
//! - `unchanged_files_stay_cached_changed_ones_do_not`: a re-read of an
//!   unchanged file is served from the kernel's page cache (the daemon
//!   decrypts nothing), unless the backing file changed behind the mount's
//!   back (then the new contents are read) or the mount is
//!   `--shared-storage`.
//! - `shared_storage_sees_names_made_elsewhere_at_once`: a name created by
//!   a second mount is seen at once by a `--shared-storage` mount that had
//!   just looked it up in vain (no negative entry). That a caching mount
//!   does not see it cannot be asserted: the kernel may evict a negative
//!   dentry at any time (memory pressure, drop_caches).
//! - `container_open_serves_on_either_transport`: `container open
//!   --transport uring|dev` mounts, and the exposed volume reads back what
//!   was written, past the page cache.
//! - [`placement`]: where ring threads run.
//!
//! warpfs changes the module parameter only when a mount asks
//! (`--uring-enable`); the tests that need the ring turn it on themselves
//! ([`uring_on`]) and put it back.

#[macro_use]
mod common;
#[path = "transport/placement.rs"]
mod placement;

use common::*;
use std::fs;
use std::path::Path;
use std::sync::Mutex;
use warpfs_engine::StatsSnapshot;

const PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// Every test here takes this: some set the module parameter off for a
/// while, others need it on.
static PARAM_LOCK: Mutex<()> = Mutex::new(());

fn uring_unavailable() -> Option<String> {
    if !Path::new(PARAM).exists() {
        return Some(format!("{PARAM} is missing: no FUSE over io_uring in this kernel"));
    }
    None
}

fn stats_json(v: &Volume) -> serde_json::Value {
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("warpfs stats --json");
    serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

fn stats(v: &Volume) -> StatsSnapshot {
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("warpfs stats --json");
    StatsSnapshot::from_json(o.stdout.trim()).unwrap()
}

/// Masks applied plus blocks decrypted without one: what the daemon
/// decrypted so far.
fn decrypted(v: &Volume) -> u64 {
    let s = stats(v);
    s.applies + s.direct
}

/// Each `warpfs-ring-Q.T` thread of daemon `pid`: its name and its
/// /proc/PID/task/TID directory.
fn ring_threads(pid: i32) -> Vec<(String, std::path::PathBuf)> {
    let mut out = Vec::new();
    for t in fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = t.unwrap().path();
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.starts_with("warpfs-ring-") {
            out.push((comm.trim().to_string(), dir));
        }
    }
    out
}

/// The number in the log line "at unmount: N request(s) served through io_uring".
fn ring_requests(log: &str) -> Option<u64> {
    log.lines()
        .find_map(|l| {
            l.split("at unmount: ")
                .nth(1)?
                .strip_suffix(" request(s) served through io_uring")
        })
        .and_then(|n| n.trim().parse().ok())
}

#[test]
fn each_transport_serves_and_names_itself() {
    require_fuse!();
    if warpfs_testkit::skip_if(uring_unavailable()) {
        return;
    }
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _on = uring_on();
    for (t, name, line) in [
        ("uring", "uring", "transport: io_uring"),
        ("dev", "dev", "transport: /dev/fuse"),
    ] {
        let mut v = Volume::init(Mode::Gcm);
        v.mount_with(&["--transport", t]);
        let data = Rng::for_test("transport").bytes(300_000);
        fs::write(v.p("f"), &data).unwrap();
        fs::create_dir(v.p("d")).unwrap();
        fs::rename(v.p("f"), v.p("d/g")).unwrap();
        assert_bytes_eq(&fs::read(v.p("d/g")).unwrap(), &data, &format!("{t}: read back"));
        assert_eq!(stats_json(&v)["transport"], name, "{t}: stats --json");
        let why = format!("--transport {t}");
        assert_eq!(stats_json(&v)["transport_why"], why.as_str(), "{t}: stats --json");
        let human = warpfs(args!["stats", &v.mnt]);
        assert!(
            human.stdout.contains(&format!("transport: {name} ({why})")),
            "{t}: stats\n{human}"
        );
        if t == "uring" {
            // The default layout: two threads on each CPU's queue.
            let threads = ring_threads(v.daemon_pids()[0]);
            let on_queue_0 = threads
                .iter()
                .filter(|(name, _)| name.starts_with("warpfs-ring-0."))
                .count();
            assert_eq!(on_queue_0, 2, "ring threads on queue 0");
        }
        v.unmount();
        let log = v.log();
        assert!(log.contains(line), "{t}: mount log\n{log}");
        if t == "uring" {
            assert!(
                log.contains(" x 2 thread(s) x 2 entries"),
                "the default ring layout\n{log}"
            );
        }
        let served = ring_requests(&log);
        if t == "uring" {
            let n = served.unwrap_or_else(|| panic!("no ring request count in the log\n{log}"));
            assert!(n > 10, "only {n} request(s) went through the ring\n{log}");
        } else {
            assert_eq!(served, None, "/dev/fuse mount ran a ring\n{log}");
        }
        v.mount_with(&["--transport", t]);
        assert_bytes_eq(&fs::read(v.p("d/g")).unwrap(), &data, &format!("{t}: after remount"));
    }
}

/// Puts the module parameter back as it was.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = fs::write(PARAM, self.0.trim());
    }
}

/// Turn the module parameter on until the guard is dropped (the tests
/// that need the ring; warpfs itself changes it only when asked).
fn uring_on() -> Restore {
    let r = Restore(fs::read_to_string(PARAM).unwrap());
    fs::write(PARAM, "Y").unwrap();
    r
}

/// The module parameter now.
fn param() -> String {
    fs::read_to_string(PARAM).unwrap().trim().to_string()
}

#[test]
fn uring_with_the_parameter_off_fails_and_leaves_it_off() {
    require_fuse!();
    if warpfs_testkit::skip_if(uring_unavailable()) {
        return;
    }
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore(fs::read_to_string(PARAM).unwrap());
    fs::write(PARAM, "N").unwrap();
    let mut v = Volume::init(Mode::Ctr);
    v.mount_with(&["--transport", "auto"]);
    fs::write(v.p("a"), b"auto").unwrap();
    assert_eq!(stats_json(&v)["transport"], "dev");
    let why = stats_json(&v)["transport_why"].as_str().unwrap_or_default().to_string();
    assert!(
        why.starts_with("auto: FUSE over io_uring is off") && why.contains("-o uring_enable"),
        "stats do not say why auto chose /dev/fuse: {why:?}"
    );
    assert_eq!(param(), "N", "auto changed enable_uring");
    v.unmount();
    let log = v.log();
    assert!(
        log.contains("serving through /dev/fuse") && log.contains("-o uring_enable") && log.contains("echo Y >"),
        "auto with enable_uring off: no line saying why and how\n{log}"
    );
    let o = v.try_mount(&["--transport", "uring"]);
    let live = is_mounted(&v.mnt);
    let after = param();
    if live {
        v.unmount();
    }
    o.expect_code(13, "--transport uring with enable_uring off");
    assert!(!live, "--transport uring mounted with enable_uring off");
    assert_eq!(after, "N", "--transport uring changed enable_uring");
    assert!(
        o.stderr.contains("FUSE over io_uring is off")
            && o.stderr.contains("-o uring_enable")
            && o.stderr.contains("echo Y >"),
        "no word of why and how to turn it on\n{o}"
    );
    assert_eq!(o.stderr.trim().lines().count(), 1, "{o}");
}

#[test]
fn uring_enable_turns_it_on_for_the_mount_and_back_at_unmount() {
    require_fuse!();
    if warpfs_testkit::skip_if(uring_unavailable()) {
        return;
    }
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore(fs::read_to_string(PARAM).unwrap());
    fs::write(PARAM, "N").unwrap();
    let mut v = Volume::init(Mode::Gcm);
    v.mount_with(&["--transport", "uring", "--uring-enable"]);
    let during = param();
    fs::write(v.p("f"), b"through the ring").unwrap();
    let transport = stats_json(&v)["transport"].clone();
    v.unmount();
    assert_eq!(during, "Y", "--uring-enable did not turn enable_uring on");
    assert_eq!(transport, "uring");
    assert_eq!(param(), "N", "enable_uring not put back after umount\n{}", v.log());
    let log = v.log();
    assert!(
        log.contains("set /sys/module/fuse/parameters/enable_uring to Y (it was N)")
            && log.contains("put /sys/module/fuse/parameters/enable_uring back to N"),
        "{log}"
    );
    // The -o form, with auto, and the daemon stopped by SIGTERM.
    v.mount_with(&["--transport", "auto", "-o", "uring_enable"]);
    let during = param();
    let transport = stats_json(&v)["transport"].clone();
    assert_eq!(
        stats_json(&v)["transport_why"],
        "auto: the kernel offers FUSE over io_uring",
        "stats do not say why auto chose the ring"
    );
    let pids = v.daemon_pids().to_vec();
    for &p in &pids {
        // SAFETY: signalling the daemon this test started.
        unsafe { libc::kill(p, libc::SIGTERM) };
    }
    let alive = wait_pids_gone(&pids, std::time::Duration::from_secs(15));
    v.daemon_stopped();
    assert!(alive.is_empty(), "daemon {alive:?} still running after SIGTERM");
    assert_eq!(during, "Y", "-o uring_enable did not turn enable_uring on");
    assert_eq!(transport, "uring");
    assert_eq!(param(), "N", "enable_uring not put back after SIGTERM\n{}", v.log());
}

fn unchanged_files_stay_cached_changed_ones_do_not(mode: Mode) {
    require_fuse!();
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut v = Volume::init(mode);
    v.mount();
    let a = Rng::for_test("cache-a").bytes(200_000);
    let b = Rng::for_test("cache-b").bytes(200_000);
    fs::write(v.p("f"), &a).unwrap();
    let before: Vec<_> = v.backing_paths();
    fs::write(v.p("g"), &b).unwrap();
    let g_backing = v
        .backing_paths()
        .into_iter()
        .find(|p| !before.contains(p))
        .expect("g's backing file");
    let f_backing = before
        .into_iter()
        .find(|p| p.is_file() && fs::metadata(p).unwrap().len() == fs::metadata(&g_backing).unwrap().len())
        .expect("f's backing file");
    // Written through the mount: the first open starts over, later ones keep.
    assert_bytes_eq(&fs::read(v.p("f")).unwrap(), &a, "first read");
    assert_bytes_eq(&fs::read(v.p("f")).unwrap(), &a, "second read");
    let d0 = decrypted(&v);
    assert_bytes_eq(&fs::read(v.p("f")).unwrap(), &a, "re-read of an unchanged file");
    assert_eq!(decrypted(&v), d0, "an unchanged file was read from the daemon again");
    // Behind the mount's back: g's cipher file over f's (same inode).
    fs::write(&f_backing, fs::read(&g_backing).unwrap()).unwrap();
    assert_bytes_eq(
        &fs::read(v.p("f")).unwrap(),
        &b,
        "read after a change behind the mount's back",
    );
    v.unmount();
    // --shared-storage: every open reads from the daemon.
    v.mount_with(&["--shared-storage"]);
    assert_bytes_eq(&fs::read(v.p("g")).unwrap(), &b, "shared: first read");
    let d0 = decrypted(&v);
    assert_bytes_eq(&fs::read(v.p("g")).unwrap(), &b, "shared: re-read");
    assert!(decrypted(&v) > d0, "--shared-storage kept the page cache across opens");
}

mode_tests!(nonce: unchanged_files_stay_cached_changed_ones_do_not);

#[test]
fn shared_storage_sees_names_made_elsewhere_at_once() {
    require_fuse!();
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut v = Volume::init(Mode::Gcm);
    v.mount_with(&["--shared-storage"]);
    let mnt2 = v.root().join("mnt2");
    fs::create_dir_all(&mnt2).unwrap();
    assert!(fs::symlink_metadata(v.p("late")).is_err(), "not there yet");
    warpfs(args![
        "mount",
        "--passfile",
        &v.passfile,
        "--shared-storage",
        &v.cipher,
        &mnt2
    ])
    .expect_ok("second mount");
    fs::write(mnt2.join("late"), b"made by the other mount").unwrap();
    let seen = fs::symlink_metadata(v.p("late")).is_ok();
    unmount_path(&mnt2).unwrap();
    assert!(
        seen,
        "--shared-storage: a name the other mount made is not seen at once"
    );
}

#[test]
fn container_open_serves_on_either_transport() {
    require_fuse!();
    if warpfs_testkit::skip_if(uring_unavailable()) {
        return;
    }
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _on = uring_on();
    for t in ["uring", "dev"] {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        let (img, mnt, pass) = (root.join("img"), root.join("m"), root.join("pw"));
        fs::create_dir(&mnt).unwrap();
        fs::write(&pass, "container password\n").unwrap();
        warpfs(args![
            "container",
            "create",
            "--passfile",
            &pass,
            "--size",
            "8M",
            "--kdf-memory",
            "32768",
            "--kdf-iterations",
            "2",
            &img
        ])
        .expect_ok("container create");
        warpfs(args![
            "container",
            "open",
            "--passfile",
            &pass,
            "--transport",
            t,
            &img,
            &mnt
        ])
        .expect_ok("container open");
        let data = Rng::for_test("container-transport").bytes(1 << 20);
        let vol = mnt.join("volume");
        {
            let f = open_rw(&vol);
            write_at(&f, 4096, &data).unwrap();
            f.sync_all().unwrap();
            drop_cache(&f);
            assert_bytes_eq(&read_at(&f, 4096, data.len()).unwrap(), &data, &format!("{t}: volume"));
        }
        unmount_path(&mnt).unwrap();
    }
}

#[test]
fn a_setuid_mount_serves_on_the_ring_and_puts_the_parameter_back() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    require_fuse!();
    if warpfs_testkit::skip_if(uring_unavailable()) {
        return;
    }
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore(fs::read_to_string(PARAM).unwrap());
    fs::write(PARAM, "N").unwrap();
    const NOBODY: u32 = 65534;
    let mut v = Volume::init(Mode::Gcm);
    fs::set_permissions(v.root(), fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = std::process::Command::new("chown");
    c.arg("-R").arg(format!("{NOBODY}:{NOBODY}")).arg(&v.cipher);
    run_cmd(c, std::time::Duration::from_secs(30)).expect_ok("chown the cipher dir");
    v.mount_with(&["--setuid", "nobody", "--transport", "uring", "--uring-enable"]);
    let during = param();
    let data = Rng::for_test("setuid-ring").bytes(200_000);
    let path = v.p("f");
    fs::write(v.root().join("data"), &data).unwrap();
    let copied = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cp {} {1} && cmp {0} {1}",
            v.root().join("data").display(),
            path.display()
        ))
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    v.unmount();
    let log = v.log();
    assert_eq!(during, "Y");
    assert!(
        copied.status.success(),
        "nobody cannot use its mount: {}\n{log}",
        String::from_utf8_lossy(&copied.stderr)
    );
    assert!(
        log.contains("running as nobody") && log.contains("transport: io_uring"),
        "{log}"
    );
    let n = ring_requests(&log).unwrap_or_else(|| panic!("no ring request count\n{log}"));
    assert!(n > 5, "only {n} request(s) through the ring\n{log}");
    assert_eq!(
        param(),
        "N",
        "a daemon run as nobody did not put enable_uring back\n{log}"
    );
}
