//! Bounded execution: every command and every file operation on a mount
//! runs on a thread of its own under a deadline ([`limit`]) and a memory
//! ceiling. On a hang the guard says where each of the scenario's warpfs
//! processes waits, opens the FIFOs they may wait for (`O_RDWR |
//! O_NONBLOCK`, counted as the test's own opens), kills them, aborts the
//! FUSE connection and detaches the mount, so that the blocked call comes
//! back and the test fails with a message saying what hung, instead of
//! hanging the test binary.

use crate::common::{is_mounted, run_cmd, thread_states, Out};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Resident memory above which a warpfs process counts as reading a
/// planted object without bound (a symlink to /dev/zero, say).
pub const MEM_LIMIT_KIB: u64 = 1 << 20;

/// How long one command or one file operation may take:
/// `WARPFS_HOSTILE_LIMIT_SECS`, default 30.
pub fn limit() -> Duration {
    let secs = std::env::var("WARPFS_HOSTILE_LIMIT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30u64);
    Duration::from_secs(secs)
}

/// What a guarded step belongs to: the processes to watch and stop, the
/// mount to abort, the FIFOs to open.
#[derive(Clone, Default)]
pub struct Scope {
    /// Every warpfs process with an argument under this directory is the
    /// scenario's (each scenario has a temporary directory of its own).
    pub root: PathBuf,
    /// The mount point, where a mount is involved.
    pub mnt: Option<PathBuf>,
    /// FIFOs a hung process may be opening, each with the counter of the
    /// test's own opens of it.
    pub fifos: Vec<(PathBuf, Arc<AtomicUsize>)>,
}

/// Pids of the warpfs processes with an argument under `root`.
pub fn scenario_pids(root: &Path) -> Vec<i32> {
    let me = std::process::id() as i32;
    let want = root.as_os_str().as_bytes();
    let mut pids = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_warpfs = argv
            .first()
            .and_then(|a| a.rsplit(|b| *b == b'/').next())
            .is_some_and(|a0| a0.windows(6).any(|w| w == b"warpfs"));
        if is_warpfs && argv.iter().any(|a| a.starts_with(want)) {
            pids.push(pid);
        }
    }
    pids
}

fn rss_kib(pid: i32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Where each process waits: its command, and per thread its state, wait
/// channel and, when the kernel stack shows one, the FIFO or FUSE wait.
pub fn diagnose(pids: &[i32]) -> String {
    let mut out = String::new();
    for &pid in pids {
        let cmd = fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                c.split(|b| *b == 0)
                    .take(3)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        out.push_str(&format!(" process {pid} ({cmd}):\n{}\n", thread_states(pid)));
        if let Ok(rd) = fs::read_dir(format!("/proc/{pid}/task")) {
            for t in rd.flatten() {
                let stack = fs::read_to_string(t.path().join("stack")).unwrap_or_default();
                for hint in ["fifo_open", "pipe_read", "pipe_write", "request_wait_answer", "fuse_"] {
                    if stack.contains(hint) {
                        out.push_str(&format!(
                            "  thread {} kernel stack shows {hint}\n",
                            t.file_name().to_string_lossy()
                        ));
                        break;
                    }
                }
            }
        }
    }
    if out.is_empty() {
        out.push_str(" (no warpfs process of this scenario left)\n");
    }
    out
}

/// Abort the FUSE connection of the mount at `mnt` through fusectl, when
/// /sys/fs/fuse/connections is mounted (the connection number is the minor
/// device number of the mount, read from the mount table, not by stat).
pub fn fuse_abort(mnt: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let want = mnt.as_os_str().as_bytes();
    for line in info.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() > 4 && f[4].as_bytes() == want {
            if let Some(minor) = f[2].split(':').nth(1) {
                let _ = fs::write(format!("/sys/fs/fuse/connections/{minor}/abort"), "1");
            }
        }
    }
}

/// umount2(MNT_DETACH), without touching the (maybe dead) mount otherwise.
pub fn lazy_unmount(mnt: &Path) {
    let c = crate::common::cstr(mnt);
    // SAFETY: valid C string.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
}

impl Scope {
    /// Open each FIFO of the scope for reading and writing without
    /// blocking (a process blocked opening it goes on), hold it a moment.
    fn unblock(&self) {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let mut held = Vec::new();
        for (p, own) in &self.fifos {
            if fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo()) {
                if let Ok(f) = fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(p)
                {
                    own.fetch_add(1, Ordering::SeqCst);
                    held.push(f);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        drop(held);
    }

    /// Kill every process of the scenario, abort and detach its mount.
    pub fn stop(&self) {
        for pid in scenario_pids(&self.root) {
            // SAFETY: plain system call.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if let Some(m) = &self.mnt {
            fuse_abort(m);
            if is_mounted(m) {
                lazy_unmount(m);
            }
        }
    }

    /// Run `f` under the deadline and the memory ceiling. `Err` says what
    /// hung or grew, where the processes waited, and that they were
    /// stopped; `f`'s own result is then dropped.
    pub fn run<T: Send>(&self, what: &str, f: impl FnOnce() -> T + Send) -> Result<T, String> {
        let lim = limit();
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let h = s.spawn(move || {
                let r = f();
                let _ = tx.send(());
                r
            });
            let start = Instant::now();
            let mut failure: Option<String> = None;
            let mut last_look = Instant::now();
            let mut last_stop = Instant::now();
            // Woken as soon as `f` is done; every half second, a look at
            // the processes (memory) and the clock.
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_millis(100)) {
                if failure.is_some() {
                    if last_stop.elapsed() > Duration::from_secs(5) {
                        // Still blocked: stop again (a daemon started meanwhile).
                        self.stop();
                        last_stop = Instant::now();
                    }
                    continue;
                }
                if last_look.elapsed() < Duration::from_millis(500) && start.elapsed() <= lim {
                    continue;
                }
                last_look = Instant::now();
                let pids = scenario_pids(&self.root);
                let fat = pids
                    .iter()
                    .filter_map(|&p| rss_kib(p).map(|k| (p, k)))
                    .find(|&(_, k)| k > MEM_LIMIT_KIB);
                if let Some((pid, kib)) = fat {
                    failure = Some(format!(
                        "MEMORY: {what}: warpfs process {pid} grew to {} MiB (ceiling {} MiB): it reads a planted object without bound; stopped it.\n{}",
                        kib / 1024,
                        MEM_LIMIT_KIB / 1024,
                        diagnose(&pids)
                    ));
                    self.stop();
                    last_stop = Instant::now();
                } else if start.elapsed() > lim {
                    failure = Some(format!(
                        "HANG: {what} did not finish within {lim:?}; where the scenario's warpfs processes waited:\n{}",
                        diagnose(&pids)
                    ));
                    self.unblock();
                    self.stop();
                    last_stop = Instant::now();
                }
            }
            match (h.join(), failure) {
                (Ok(v), None) => Ok(v),
                (Ok(_), Some(f)) => Err(f),
                (Err(p), _) => std::panic::resume_unwind(p),
            }
        })
    }

    /// Run a command under the guard (its own kill timer is a backstop).
    pub fn cmd(&self, what: &str, cmd: Command) -> Result<Out, String> {
        let backstop = limit() + Duration::from_secs(30);
        self.run(what, move || run_cmd(cmd, backstop))
    }
}
