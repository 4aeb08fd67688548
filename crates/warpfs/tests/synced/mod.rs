//! Real sync and distributed-storage engines for the tests, started and
//! stopped by the tests themselves: two Syncthing instances on 127.0.0.1
//! ([`syncthing`]) and a GlusterFS replica-2 volume with two client mounts
//! ([`gluster`]). Each is torn down on drop, also when the test fails; no
//! daemon or mount is left behind.
#![allow(dead_code)]

pub mod gluster;
pub mod syncthing;

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Why `prog` cannot be run here (not installed), if so.
pub fn missing(prog: &str, package: &str) -> Option<String> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false);
    (!found).then(|| format!("{prog} is not installed (Debian package {package}; scripts/test.sh installs it as root)"))
}

/// Run `cmd` to completion with a deadline: (success, stdout + stderr).
pub fn run(mut cmd: Command, timeout: Duration) -> (bool, String) {
    let desc = format!("{cmd:?}");
    cmd.stdin(std::process::Stdio::null());
    let out = crate::common::run_cmd(cmd, timeout);
    let text = format!("$ {desc}\n{}{}", out.stdout, out.stderr);
    (out.ok(), text)
}

/// Poll `cond` every 100 ms until it gives `Some`; `Err` naming `what`
/// after `timeout` (a hand-off with a deadline, never a timing assertion).
pub fn poll<T>(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> Result<Option<T>, String>,
) -> Result<T, String> {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        match cond() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = e,
        }
        if start.elapsed() > timeout {
            return Err(format!("{what}: not after {timeout:?} (last: {last})"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child process killed (SIGTERM, then SIGKILL) and reaped on drop.
pub struct Daemon {
    pub child: Child,
    pub name: String,
}

impl Daemon {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, wait up to 10 s, then SIGKILL.
    pub fn stop(&mut self) {
        if !self.alive() {
            return;
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let start = Instant::now();
        while self.alive() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A port free on 127.0.0.1 that no earlier call in this process gave
/// out: the kernel may hand the same ephemeral port to two binds in a row
/// once the first listener is closed, and two daemons (or one daemon's GUI
/// and sync listener) on one port fail to start.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port on 127.0.0.1");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Last `n` characters of a log file, for failure messages.
pub fn tail(p: &Path, n: usize) -> String {
    let s = std::fs::read(p)
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .unwrap_or_default();
    let start = s.len().saturating_sub(n);
    let start = (start..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(s.len());
    format!("--- {} (tail) ---\n{}", p.display(), &s[start..])
}
