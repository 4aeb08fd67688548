//! `--idle DURATION`: unmount a mount nobody uses. The mount is idle when
//! no request has come for DURATION, no file or directory is open on it
//! ([`Activity`], counted by [`super::Served`]) and no process has
//! its working directory inside; then a plain (never lazy) unmount is
//! tried (never through a symlink put in the mountpoint's place: see
//! [`super::unmount`]), which the kernel refuses while anything still
//! holds the mount, and the daemon ends as after `umount`. A refused
//! unmount is tried again after another DURATION.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the mount is doing: requests in flight, open handles, and when the
/// last request ended.
pub struct Activity {
    base: Instant,
    in_flight: AtomicU64,
    open: AtomicU64,
    /// Milliseconds after `base` at which the last request ended.
    last_ms: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

/// One request being served (ends when dropped).
pub struct Request<'a>(&'a Activity);

impl Drop for Request<'_> {
    fn drop(&mut self) {
        // The time first, so that a watcher that sees nothing in flight
        // sees this request's end.
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Activity {
    /// No request yet; the quiet time counts from now.
    pub fn new() -> Self {
        Self {
            base: Instant::now(),
            in_flight: AtomicU64::new(0),
            open: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
        }
    }

    /// A request begins.
    pub fn request(&self) -> Request<'_> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Request(self)
    }

    /// A file or directory was opened.
    pub fn opened(&self) {
        self.open.fetch_add(1, Ordering::SeqCst);
    }

    /// One was released (never below zero).
    pub fn closed(&self) {
        let _ = self
            .open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| Some(n.saturating_sub(1)));
    }

    /// Open files and directories.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::SeqCst)
    }

    /// Requests being served.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Count now as the end of a request.
    pub fn touch(&self) {
        let now = self.base.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(now, Ordering::SeqCst);
    }

    /// How long no request has been in flight (zero while one is).
    pub fn quiet(&self) -> Duration {
        if self.in_flight() > 0 {
            return Duration::ZERO;
        }
        let now = self.base.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::SeqCst)))
    }
}

/// Why an idle mount stays, if it does.
fn busy(act: &Activity, mp: &Path) -> Option<String> {
    match act.open() {
        0 => cwd_inside(mp).map(|(pid, comm)| format!("process {pid} ({comm}) has its working directory inside")),
        n => Some(format!("{n} file(s) or directories are open on it")),
    }
}

/// A process whose working directory is `mp` or beneath it (the first
/// found; processes of other users are invisible to a daemon that is not
/// root, and the kernel's refusal to unmount covers them).
fn cwd_inside(mp: &Path) -> Option<(u32, String)> {
    let me = std::process::id();
    let mpb = mp.as_os_str().as_bytes();
    for e in warpfs_backing::host::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cwd) = warpfs_backing::host::read_link(e.path().join("cwd")) else {
            continue;
        };
        let c = cwd.as_os_str().as_bytes();
        if c == mpb || (c.starts_with(mpb) && c.get(mpb.len()) == Some(&b'/')) {
            let comm = warpfs_backing::host::read_to_string(e.path().join("comm")).unwrap_or_default();
            return Some((pid, comm.trim().to_string()));
        }
    }
    None
}

/// How often the watcher looks: a tenth of the idle time, between 10 ms
/// and 5 s, so the unmount comes at most 10% late.
fn tick(idle: Duration) -> Duration {
    (idle / 10).clamp(Duration::from_millis(10), Duration::from_secs(5))
}

/// Watch the mount at `mountpoint` (call once it is live) and unmount it
/// after `idle` without use. Ends when the mount is gone, however it went.
pub fn watch(mountpoint: &Path, idle: Duration, act: Arc<Activity>) -> io::Result<()> {
    let mp: PathBuf = warpfs_backing::host::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    let dev = super::mountinfo::read().and_then(|info| super::mountinfo::device_at(&info, &mp));
    act.touch();
    std::thread::Builder::new().name("warpfs-idle".into()).spawn(move || {
        let mut said: Option<String> = None;
        loop {
            std::thread::sleep(tick(idle));
            if !super::stop::still_mounted(&mp, dev.as_deref()) {
                return;
            }
            if act.quiet() < idle {
                said = None;
                continue;
            }
            if let Some(why) = busy(&act, &mp) {
                if said.as_deref() != Some(why.as_str()) {
                    tracing::info!("idle: no request for {idle:?}, but {why}: staying mounted");
                    said = Some(why);
                }
                continue;
            }
            tracing::info!("idle: no request for {idle:?}: unmounting {}", mp.display());
            match super::unmount::unmount(&mp, false) {
                Ok(()) => return,
                Err(e) => {
                    tracing::info!(
                        "idle: the kernel refused the unmount ({e}): staying mounted, trying again in {idle:?}"
                    );
                    act.touch();
                }
            }
        }
    })?;
    Ok(())
}

/// Parse a duration: a number and a unit (`ms`, `s`, `m`/`min`, `h`,
/// `d`), several added (`1h30m`), or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("'{s}' is not a duration (e.g. 30s, 10m, 1h30m, 500ms)");
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let n_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let u_end = rest[n_end..]
            .find(|c: char| c.is_ascii_digit())
            .map_or(rest.len(), |i| n_end + i);
        let n: u64 = rest[..n_end].parse().map_err(|_| bad())?;
        let unit_ms: u64 = match &rest[n_end..u_end] {
            "ms" => 1,
            "s" | "sec" => 1000,
            "m" | "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        let ms = n.checked_mul(unit_ms).ok_or_else(bad)?;
        total = total.checked_add(Duration::from_millis(ms)).ok_or_else(bad)?;
        rest = &rest[u_end..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("15min").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        for bad in ["", "s", "1x", "-1s", "1.5h", "99999999999999999999d", "h1"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quiet_time_is_zero_while_a_request_runs() {
        let a = Activity::new();
        let g = a.request();
        assert_eq!(a.quiet(), Duration::ZERO);
        assert_eq!(a.in_flight(), 1);
        drop(g);
        assert_eq!(a.in_flight(), 0);
        a.closed();
        assert_eq!(a.open(), 0, "never below zero");
    }

    #[test]
    fn finds_a_working_directory_inside() {
        let d = tempfile::tempdir().unwrap();
        let inner = d.path().join("sub");
        std::fs::create_dir(&inner).unwrap();
        let mut child = Command::new("sleep").arg("30").current_dir(&inner).spawn().unwrap();
        // Under an emulator (qemu-user runs the arm64 suite) the child may
        // show in /proc a moment after spawn returns: look until it does.
        let root = d.path().canonicalize().unwrap();
        let mut found = cwd_inside(&root);
        for _ in 0..250 {
            if found.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            found = cwd_inside(&root);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found.map(|f| f.0), Some(child.id()));
        assert!(cwd_inside(Path::new("/nonexistent-warpfs-dir")).is_none());
    }

    #[test]
    fn tick_is_a_tenth_within_bounds() {
        assert_eq!(tick(Duration::from_secs(1)), Duration::from_millis(100));
        assert_eq!(tick(Duration::from_millis(20)), Duration::from_millis(10));
        assert_eq!(tick(Duration::from_secs(3600)), Duration::from_secs(5));
    }
}
