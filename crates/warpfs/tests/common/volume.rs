//! The `Volume` fixture: a temporary cipher dir, mountpoint, passfile and
//! log file, initialised from a per-mode template, unmounted on drop.

use super::{
    daemon_pids, is_mounted, kill_daemons, pid_gone, run_cmd, unmount_path, wait_pids_gone, warpfs,
    with_test_speculation, Mode, Out, Watchdog, BIN, CMD_TIMEOUT, DAEMON_EXIT_TIMEOUT, MOUNT_TIMEOUT, PASSWORD,
};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// An initialised cipher dir per mode, made once per test binary and copied
/// into each `Volume` (saves one KDF run per test).
fn template(mode: Mode) -> &'static Path {
    template_with(mode, &[])
}

/// [`template`] made with `extra` arguments of `warpfs init` (e.g.
/// `--file-summary off`): one per (mode, arguments) and test binary.
fn template_with(mode: Mode, extra: &[&str]) -> &'static Path {
    static T: std::sync::Mutex<BTreeMap<String, &'static OnceLock<PathBuf>>> = std::sync::Mutex::new(BTreeMap::new());
    let tag = format!("{}{}", mode.name(), extra.join("").replace(['-', ' '], ""));
    let slot: &'static OnceLock<PathBuf> = T
        .lock()
        .unwrap()
        .entry(tag.clone())
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    slot.get_or_init(|| {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("warpfs-templates");
        fs::create_dir_all(&base).unwrap();
        // Remove templates of test processes that are gone.
        if let Ok(rd) = fs::read_dir(&base) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) {
                    if pid_gone(pid) {
                        let _ = fs::remove_dir_all(e.path());
                    }
                }
            }
        }
        let dir = base.join(format!("{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let pass = dir.join("pass");
        fs::write(&pass, format!("{PASSWORD}\n")).unwrap();
        let cipher = dir.join("cipher");
        fs::create_dir(&cipher).unwrap();
        let mut a = args!["init", "--passfile", &pass];
        a.extend(mode.init_args().into_iter().map(OsString::from));
        a.extend(extra.iter().map(OsString::from));
        a.extend(test_init_args(mode, extra));
        a.push(cipher.clone().into_os_string());
        warpfs(a).expect_ok("warpfs init (template volume)");
        cipher
    })
}

/// Extra `warpfs init` arguments for the tests' volumes, from
/// `WARPFS_TEST_INIT_ARGS` (whitespace-separated `--option value` pairs;
/// e.g. `--file-summary on`, which the synced-storage step runs its
/// two-host tests with): an option the test sets itself is not added, nor
/// one the mode cannot take (`--file-summary` outside gcm and
/// xchacha20-poly1305).
fn test_init_args(mode: Mode, extra: &[&str]) -> Vec<OsString> {
    let v = std::env::var("WARPFS_TEST_INIT_ARGS").unwrap_or_default();
    let words: Vec<&str> = v.split_whitespace().collect();
    let mut out = Vec::new();
    for pair in words.chunks(2) {
        let opt = pair[0];
        if extra.contains(&opt) {
            continue;
        }
        if opt == "--file-summary" && !matches!(mode, Mode::Gcm | Mode::XChaCha20Poly1305) {
            continue;
        }
        out.extend(pair.iter().map(OsString::from));
    }
    out
}

pub fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        let to = dst.join(e.file_name());
        if ft.is_dir() {
            copy_tree(&e.path(), &to);
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(e.path()).unwrap(), &to).unwrap();
        } else {
            fs::copy(e.path(), &to).unwrap();
        }
    }
}

pub struct Volume {
    tmp: tempfile::TempDir,
    pub mode: Mode,
    pub cipher: PathBuf,
    pub mnt: PathBuf,
    pub passfile: PathBuf,
    pub logfile: PathBuf,
    /// Extra arguments for every `mount` (e.g. `-o ro`).
    pub mount_args: Vec<OsString>,
    /// The (uid, gid) `mount` runs as; `None`: the test's own (root).
    pub mount_as: Option<(u32, u32)>,
    /// How long `warpfs mount` may run before it is killed (default 90 s).
    pub mount_timeout: Duration,
    mounted: bool,
    daemon: Vec<i32>,
    _watchdog: Watchdog,
}

impl Volume {
    /// Directories and passfile only; the cipher dir is empty (not initialised).
    pub fn blank(mode: Mode) -> Volume {
        let tmp = tempfile::Builder::new().prefix("warpfs-test-").tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let cipher = root.join("cipher");
        let mnt = root.join("mnt");
        fs::create_dir(&cipher).unwrap();
        fs::create_dir(&mnt).unwrap();
        let passfile = root.join("password.txt");
        fs::write(&passfile, format!("{PASSWORD}\n")).unwrap();
        let _watchdog = Watchdog::start(&mnt);
        Volume {
            tmp,
            mode,
            cipher,
            mnt,
            passfile,
            logfile: root.join("warpfs.log"),
            mount_args: Vec::new(),
            mount_as: None,
            mount_timeout: CMD_TIMEOUT,
            mounted: false,
            daemon: Vec::new(),
            _watchdog,
        }
    }

    /// An initialised, unmounted volume (copied from a per-mode template).
    pub fn init(mode: Mode) -> Volume {
        let v = Volume::blank(mode);
        copy_tree(template(mode), &v.cipher);
        v
    }

    /// An initialised, unmounted volume made with `extra` arguments of
    /// `warpfs init` (e.g. `["--file-summary", "off"]`).
    pub fn init_with(mode: Mode, extra: &[&str]) -> Volume {
        let v = Volume::blank(mode);
        copy_tree(template_with(mode, extra), &v.cipher);
        v
    }

    /// Run `warpfs init` for real on a blank volume.
    pub fn init_fresh(mode: Mode) -> (Volume, Out) {
        let v = Volume::blank(mode);
        let mut a = args!["init", "--passfile", &v.passfile];
        a.extend(mode.init_args().into_iter().map(OsString::from));
        a.push(v.cipher.clone().into());
        let o = warpfs(a);
        (v, o)
    }

    /// An initialised and mounted volume.
    pub fn new(mode: Mode) -> Volume {
        let mut v = Volume::init(mode);
        v.mount();
        v
    }

    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    /// Hand the volume's directory (cipher dir, mountpoint, passfile) to
    /// `uid`:`gid` and mount as that user from now on (through
    /// fusermount3, as any user's mount).
    pub fn give_to(&mut self, uid: u32, gid: u32) {
        let mut c = Command::new("chown");
        c.arg("-R").arg(format!("{uid}:{gid}")).arg(self.root());
        run_cmd(c, CMD_TIMEOUT).expect_ok("chown the volume");
        self.mount_as = Some((uid, gid));
    }

    /// Path inside the mount.
    pub fn p(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.mnt.join(rel)
    }

    /// Run `warpfs mount` with this volume's passfile, log file and
    /// `mount_args` plus `extra`; returns the command output. On success the
    /// volume is recorded as mounted.
    pub fn try_mount(&mut self, extra: &[&str]) -> Out {
        self.try_mount_env(extra, &[])
    }

    /// [`Volume::try_mount`] with extra environment for the daemon.
    pub fn try_mount_env(&mut self, extra: &[&str], env: &[(&str, &str)]) -> Out {
        assert!(!self.mounted, "already mounted");
        let mut a: Vec<OsString> = args!["mount", "--passfile", &self.passfile, "--log-file", &self.logfile];
        a.extend(self.mount_args.iter().cloned());
        a.extend(extra.iter().map(OsString::from));
        a.push(self.cipher.clone().into());
        a.push(self.mnt.clone().into());
        let a = with_test_speculation(a);
        let device = required_device(&a);
        let mut cmd = Command::new(BIN);
        cmd.args(&a);
        if let Some((uid, gid)) = self.mount_as {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let o = run_cmd(cmd, self.mount_timeout);
        if o.ok() {
            // The contract: mount returns once the mount is live. Be tolerant
            // here (other tests), strict in cli::mount_returns_when_live.
            let start = Instant::now();
            while !is_mounted(&self.mnt) && start.elapsed() < MOUNT_TIMEOUT {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(
                is_mounted(&self.mnt),
                "warpfs mount exited 0 but {} is not mounted\n{o}\nlog:\n{}",
                self.mnt.display(),
                self.log()
            );
            if start.elapsed() > Duration::from_millis(50) {
                eprintln!(
                    "CONTRACT: `warpfs mount` returned {:?} before the mount was live",
                    start.elapsed()
                );
            }
            self.mounted = true;
            self.daemon = daemon_pids(&self.mnt);
            if let Some(engine) = device {
                self.assert_backend(engine);
            }
        }
        o
    }

    /// The mount's keystream backend is `engine` (a device the test run
    /// requires), not a fall-back to the cpu.
    fn assert_backend(&self, engine: &str) {
        let o = warpfs(args!["stats", "--json", &self.mnt]);
        o.expect_ok("warpfs stats --json (the backend a required device runs)");
        let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("{e}\n{o}"));
        let backend = v["backend"].as_str().unwrap_or_default();
        assert!(
            backend.starts_with(engine),
            "the run requires --engine {engine}, but the mount runs on {backend:?}\nlog:\n{}",
            self.log()
        );
    }

    pub fn mount(&mut self) {
        let o = self.try_mount(&[]);
        assert!(o.ok(), "mount failed\n{o}\nlog:\n{}", self.log());
    }

    pub fn mount_with(&mut self, extra: &[&str]) {
        let o = self.try_mount(extra);
        assert!(o.ok(), "mount {extra:?} failed\n{o}\nlog:\n{}", self.log());
    }

    pub fn is_mounted(&self) -> bool {
        self.mounted
    }

    /// Unmount and wait for the daemon to exit.
    pub fn unmount(&mut self) {
        if let Err(e) = self.try_unmount() {
            panic!("{e}");
        }
    }

    fn try_unmount(&mut self) -> Result<(), String> {
        if !self.mounted {
            if !is_mounted(&self.mnt) {
                return Ok(());
            }
            // Mounted although `mount` did not succeed (e.g. it hung): the
            // daemon is in an unknown state, so kill it first.
            kill_daemons(&self.mnt);
        }
        let r = unmount_path(&self.mnt);
        self.mounted = false;
        r?;
        let alive = wait_pids_gone(&self.daemon, DAEMON_EXIT_TIMEOUT);
        if !alive.is_empty() {
            for pid in &alive {
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            return Err(format!(
                "warpfs daemon(s) {alive:?} still running {DAEMON_EXIT_TIMEOUT:?} after unmounting {} (killed)",
                self.mnt.display()
            ));
        }
        Ok(())
    }

    /// The daemon's pids, as found when it mounted.
    pub fn daemon_pids(&self) -> &[i32] {
        &self.daemon
    }

    /// The test stopped the daemon and saw the mount go: count the volume
    /// unmounted.
    pub fn daemon_stopped(&mut self) {
        assert!(!is_mounted(&self.mnt), "{} is still mounted", self.mnt.display());
        self.mounted = false;
    }

    pub fn remount(&mut self) {
        self.unmount();
        self.mount();
    }

    /// Contents of the daemon's log file (empty if none).
    pub fn log(&self) -> String {
        fs::read(&self.logfile)
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }

    /// Every path under the cipher dir (files, dirs, links), recursively.
    pub fn backing_paths(&self) -> Vec<PathBuf> {
        let mut v = Vec::new();
        walk(&self.cipher, &mut v);
        v.sort();
        v
    }

    /// Backing entries of the cipher root other than `warpfs.conf` and
    /// `warpfs.diriv`.
    pub fn root_backing_entries(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(&self.cipher)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap();
                n != "warpfs.conf" && n != "warpfs.diriv"
            })
            .collect();
        v.sort();
        v
    }

    /// The backing file of the only plaintext entry in the root.
    pub fn single_backing_file(&self) -> PathBuf {
        let v = self.root_backing_entries();
        assert_eq!(
            v.len(),
            1,
            "expected exactly one backing entry in the cipher root, found {v:?}"
        );
        v.into_iter().next().unwrap()
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if panicking && (self.mounted || is_mounted(&self.mnt)) {
            let log = self.log();
            if !log.is_empty() {
                let tail: String = log
                    .chars()
                    .rev()
                    .take(4000)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                eprintln!("--- warpfs log ({}) tail ---\n{tail}\n---", self.logfile.display());
            }
            // The test failed: the daemon may be hung; don't wait for it.
            kill_daemons(&self.mnt);
        }
        let r = self.try_unmount();
        let left = kill_daemons(&self.mnt);
        if !left.is_empty() {
            eprintln!(
                "Volume drop: killed leftover warpfs processes {left:?} of {}",
                self.mnt.display()
            );
        }
        if let Err(e) = r {
            eprintln!("Volume drop: {e}");
            if !panicking {
                panic!("{e}");
            }
        }
    }
}

pub(super) fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        out.push(p.clone());
        if e.file_type().unwrap().is_dir() {
            walk(&p, out);
        }
    }
}

/// The device engine (`opencl`, `cuda`) a forward mount with arguments `a`
/// must run on: the one `WARPFS_TEST_ENGINE` puts on every mount, when the
/// run requires it (`WARPFS_REQUIRE_OPENCL=1`, as CI's opencl step sets)
/// and the mount did not name another; else `None`.
fn required_device(a: &[OsString]) -> Option<&'static str> {
    if !std::env::var("WARPFS_REQUIRE_OPENCL").is_ok_and(|v| v == "1") || a.iter().any(|x| x == "--reverse") {
        return None;
    }
    let want = match std::env::var("WARPFS_TEST_ENGINE").ok()?.trim() {
        "opencl" => "opencl",
        "cuda" => "cuda",
        _ => return None,
    };
    let at = a.iter().position(|x| x == "--engine")?;
    (a.get(at + 1)? == want).then_some(want)
}
