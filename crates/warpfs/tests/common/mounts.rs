//! The mount table and daemon processes: mount lookup, pids, unmounting,
//! killing, a watchdog, and running code as another user.

use super::{check, cstr, run_cmd};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn unescape_mountinfo(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The file-system type of the mount at exactly `p`, if `p` is a mount point.
pub fn mount_fstype(p: &Path) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = p.as_os_str().as_bytes();
    let mut found = None;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() < 5 || unescape_mountinfo(fields[4]) != want {
            continue;
        }
        // Optional fields end at "-"; the fs type follows it.
        if let Some(dash) = fields.iter().position(|f| *f == "-") {
            found = fields.get(dash + 1).map(|s| s.to_string());
        }
    }
    found
}

pub fn is_mounted(p: &Path) -> bool {
    mount_fstype(p).is_some()
}

/// The mount options (per-mount field) of the mount at `p`.
pub fn mount_options(p: &Path) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = p.as_os_str().as_bytes();
    let mut found = None;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() >= 6 && unescape_mountinfo(fields[4]) == want {
            found = Some(fields[5].to_string());
        }
    }
    found
}

/// Pids of `warpfs ... mount ... MNT` processes (other than us).
pub fn daemon_pids(mnt: &Path) -> Vec<i32> {
    warpfs_pids(b"mount", mnt)
}

/// Pids of `warpfs ... WORD ... MNT` processes (other than us).
pub fn warpfs_pids(word: &[u8], mnt: &Path) -> Vec<i32> {
    let me = std::process::id() as i32;
    let want = mnt.as_os_str().as_bytes();
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
        let is_warpfs = argv.first().map(|a0| a0.ends_with(b"warpfs")).unwrap_or(false);
        if is_warpfs && argv.contains(&word) && argv.contains(&want) {
            pids.push(pid);
        }
    }
    pids
}

/// Whether a process is gone (or a zombie with no thread left running).
pub fn pid_gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
                .unwrap_or(false)
                // A leader that exited first is a zombie while its other
                // threads still run and hold the process's files (and
                // flocks): gone when it is the last task left.
                && fs::read_dir(format!("/proc/{pid}/task")).map_or(true, |d| d.count() <= 1)
        }
    }
}

/// Wait until all `pids` are gone; returns those still alive after `timeout`.
pub fn wait_pids_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let alive: Vec<i32> = pids.iter().copied().filter(|p| !pid_gone(*p)).collect();
        if alive.is_empty() || start.elapsed() > timeout {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run `f` in a forked child that has become user `uid` (group `gid`, no
/// supplementary groups); its result (0–255) is the child's exit status,
/// returned here (a child killed by a signal gives -1). `f` runs after
/// `fork` in a multithreaded process: it must only make system calls on
/// data prepared before (no allocation, no locks, no panics).
pub fn in_child_as(uid: u32, gid: u32, f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only makes system calls (setgroups, setresgid,
    // setresuid, what `f` makes) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: plain system calls; _exit never returns.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(gid, gid, gid) != 0
                || libc::setresuid(uid, uid, uid) != 0
            {
                libc::_exit(255);
            }
            libc::_exit(f());
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid, "waitpid: {}", io::Error::last_os_error());
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    }
}

/// Why a user other than root cannot mount here (fusermount3 missing or
/// not set-user-ID, /dev/fuse not open to everyone), or `None`.
pub fn user_mounts_unavailable() -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let fm = ["/usr/bin/fusermount3", "/bin/fusermount3"]
        .iter()
        .find_map(|p| fs::metadata(p).ok());
    match fm {
        Some(m) if m.permissions().mode() & 0o4000 != 0 => {}
        Some(_) => return Some("fusermount3 is not set-user-ID".into()),
        None => return Some("no fusermount3".into()),
    }
    match fs::metadata("/dev/fuse") {
        Ok(m) if m.permissions().mode() & 0o006 == 0o006 => None,
        Ok(m) => Some(format!(
            "/dev/fuse is mode {:o}, not open to other users (Debian's udev makes it 0666; scripts/test.sh does too)",
            m.permissions().mode() & 0o777
        )),
        Err(e) => Some(format!("/dev/fuse: {e}")),
    }
}

fn have_fusermount3() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    *HAVE.get_or_init(|| {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join("fusermount3").is_file()))
            .unwrap_or(false)
    })
}

fn umount2(mnt: &Path, flags: libc::c_int) -> io::Result<()> {
    let c = cstr(mnt);
    check(unsafe { libc::umount2(c.as_ptr(), flags) })
}

/// Unmount `mnt`: `fusermount3 -u` when installed, else the umount2 syscall
/// (what `umount` does, without its path canonicalisation, which would stat a
/// possibly hung mount); retried briefly on EBUSY, then a lazy unmount
/// (`umount -l`). Returns an error text if it is still mounted.
pub fn unmount_path(mnt: &Path) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..20 {
        if have_fusermount3() {
            let mut c = Command::new("fusermount3");
            c.arg("-u").arg(mnt);
            let o = run_cmd(c, Duration::from_secs(20));
            if !o.ok() {
                last = o.to_string();
            }
            if o.code.is_none() {
                break; // hung: go straight to the lazy unmount
            }
        } else if let Err(e) = umount2(mnt, 0) {
            last = format!("umount2({}): {e}", mnt.display());
        }
        if !is_mounted(mnt) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let lazy = umount2(mnt, libc::MNT_DETACH);
    if is_mounted(mnt) {
        Err(format!("cannot unmount {}:\n{last}\nlazy: {lazy:?}", mnt.display()))
    } else {
        eprintln!("note: {} needed a lazy unmount; last attempt:\n{last}", mnt.display());
        Ok(())
    }
}

/// Kill (SIGKILL) every warpfs process serving `mnt`; returns their pids.
/// Killing the daemon aborts its FUSE connection, which unblocks any system
/// call stuck on the mount with ENOTCONN.
pub fn kill_daemons(mnt: &Path) -> Vec<i32> {
    let pids = daemon_pids(mnt);
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    pids
}

/// Kills the daemons of a mount if the test is still running after a
/// deadline, so a hung daemon fails the test instead of hanging CI.
/// `WARPFS_TEST_WATCHDOG_SECS` sets the deadline (default 300).
pub struct Watchdog {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    pub fn start(mnt: &Path) -> Watchdog {
        let secs = std::env::var("WARPFS_TEST_WATCHDOG_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(300u64);
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = done.clone();
        let mnt = mnt.to_path_buf();
        let name = std::thread::current().name().unwrap_or("?").to_string();
        std::thread::spawn(move || {
            let start = Instant::now();
            while !d.load(std::sync::atomic::Ordering::Relaxed) {
                if start.elapsed() > Duration::from_secs(secs) {
                    let pids = kill_daemons(&mnt);
                    eprintln!(
                        "WATCHDOG: test {name} still running after {secs} s; killed warpfs {pids:?} serving {}",
                        mnt.display()
                    );
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Watchdog { done }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
