//! A foreground (`-f`) mount as our own child process, and waiting for
//! mounts, unmounts and conditions with a deadline.

use super::{is_mounted, unmount_path, with_test_speculation, Volume, BIN, MOUNT_TIMEOUT};
use std::ffi::OsString;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Foreground {
    pub child: Child,
    pub stderr_path: PathBuf,
    pub mnt: PathBuf,
}

impl Foreground {
    /// Spawn `warpfs mount -f ...` and wait until the mount is live.
    pub fn start(v: &Volume, extra: &[&str]) -> Foreground {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stderr_path = v.root().join(format!("fg-stderr-{n}"));
        let err = File::create(&stderr_path).unwrap();
        let mut cmd = Command::new(BIN);
        let mut a: Vec<OsString> = args!["mount", "-f", "--passfile", &v.passfile];
        a.extend(extra.iter().map(OsString::from));
        cmd.args(with_test_speculation(a));
        cmd.arg(&v.cipher).arg(&v.mnt);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::from(err));
        let mut child = cmd.spawn().unwrap();
        let start = Instant::now();
        while !is_mounted(&v.mnt) {
            if let Some(st) = child.try_wait().unwrap() {
                panic!(
                    "warpfs mount -f exited ({st}) before mounting; stderr:\n{}",
                    fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            assert!(start.elapsed() < MOUNT_TIMEOUT, "warpfs mount -f did not mount in time");
            std::thread::sleep(Duration::from_millis(10));
        }
        Foreground {
            child,
            stderr_path,
            mnt: v.mnt.clone(),
        }
    }

    pub fn stderr(&self) -> String {
        fs::read(&self.stderr_path)
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }

    pub fn signal(&self, sig: i32) {
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Wait for the process to exit; `None` on timeout.
    pub fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            if start.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Foreground {
    /// The exit status within `timeout`, else a panic that says `what` and
    /// shows the daemon's log and where each of its threads waits.
    pub fn exited(&mut self, timeout: Duration, what: &str) -> std::process::ExitStatus {
        if let Some(st) = self.wait(timeout) {
            return st;
        }
        panic!(
            "{what}: `warpfs mount -f` still running after {timeout:?} (mounted: {}); its threads:\n{}\nits log:\n{}",
            is_mounted(&self.mnt),
            thread_states(self.child.id() as i32),
            self.stderr()
        );
    }
}

/// Poll `cond` until it holds; `false` after `timeout` (a hand-off with a
/// deadline, never a timing assertion).
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Wait until nothing is mounted at `p`; `false` after `timeout`.
pub fn wait_unmounted(p: &Path, timeout: Duration) -> bool {
    let start = Instant::now();
    while is_mounted(p) {
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// One line per thread of `pid`: name, state and kernel wait channel.
pub fn thread_states(pid: i32) -> String {
    let Ok(rd) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("(no /proc/{pid}/task)");
    };
    let mut out = Vec::new();
    for t in rd.flatten() {
        let read = |f: &str| fs::read_to_string(t.path().join(f)).unwrap_or_default();
        let state = read("stat")
            .rsplit_once(')')
            .map(|(_, r)| r.trim_start().chars().take(1).collect::<String>());
        out.push(format!(
            "  {} {} {}",
            read("comm").trim(),
            state.unwrap_or_default(),
            read("wchan").trim()
        ));
    }
    out.sort();
    out.join("\n")
}

impl Drop for Foreground {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.child.kill();
        }
        if is_mounted(&self.mnt) {
            let _ = unmount_path(&self.mnt);
        }
        if self.wait(Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
