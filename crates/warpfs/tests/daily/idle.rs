//! `--idle DURATION` (`-o idle=`): a mount with no request, no open file
//! and no process with its working directory inside is unmounted after
//! DURATION and its daemon exits cleanly; a mount in use stays. The timer
//! is short (1 s) and each test waits for the event itself (the daemon's
//! exit, or its log line saying why it stays), with generous deadlines.
//! Where the test itself may have been held up past the idle time (a
//! loaded machine), it compares only spans it measured around the daemon's
//! quiet time, which bound it from above: a test held up excuses the
//! watcher and says so in a `note:`, it never fails for it.

use crate::common::*;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for an event before failing.
const DEADLINE: Duration = Duration::from_secs(60);

fn stays_because(fg: &Foreground, why: &str) {
    assert!(
        wait_for(DEADLINE, || fg.stderr().contains(why)),
        "the idle watcher never said it stays because {why:?}; log:\n{}",
        fg.stderr()
    );
}

fn exits_cleanly_when_idle(fg: &mut Foreground, since: Instant, what: &str) {
    let st = fg.exited(DEADLINE, what);
    eprintln!(
        "{what}: daemon gone {:?} after the mount was last used",
        since.elapsed()
    );
    assert!(st.success(), "{what}: exit status {st}; log:\n{}", fg.stderr());
    assert!(!is_mounted(&fg.mnt), "{what}: still mounted");
    let log = fg.stderr();
    assert!(log.contains("idle: no request for 1s: unmounting"), "{log}");
    assert!(log.contains("unmounted"), "{log}");
}

#[test]
fn an_unused_mount_is_unmounted_and_its_daemon_exits() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    let mut fg = Foreground::start(&v, &["--idle", "1s"]);
    let t0 = Instant::now();
    exits_cleanly_when_idle(&mut fg, t0, "foreground mount, idle 1s");
}

#[test]
fn an_idle_daemon_unmounts_and_exits() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    v.mount_with(&["-o", "idle=1s"]);
    let t0 = Instant::now();
    let pids = v.daemon_pids().to_vec();
    assert!(!pids.is_empty());
    let alive = wait_pids_gone(&pids, DEADLINE);
    eprintln!("daemon mount, idle 1s: daemon gone {:?} after mounting", t0.elapsed());
    assert!(alive.is_empty(), "daemon still running; log:\n{}", v.log());
    assert!(!is_mounted(&v.mnt));
    assert!(v.log().contains("idle: no request for 1s: unmounting"), "{}", v.log());
    v.daemon_stopped();
}

/// Whether `p` (a path, or /proc/PID/cwd) is on a FUSE file system.
fn on_fuse(p: &std::path::Path) -> bool {
    const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str())).unwrap();
    // SAFETY: a NUL-terminated path and a zeroed statfs to fill.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    assert_eq!(r, 0, "statfs {}: {}", p.display(), std::io::Error::last_os_error());
    st.f_type as i64 == FUSE_SUPER_MAGIC
}

/// Mount `v` in the foreground with `--idle 1s` and let `hold` take hold
/// of the mount (open a file, start a process inside); `on_mount` says
/// whether what it holds is on the mount. It is not only when the mount
/// went idle before `hold` reached it, which is right only when more than
/// the idle time passed since the test started the mount (an upper bound
/// of the quiet time the daemon saw): shorter is a failure; longer (the
/// test was held up) is noted, `undo` removes what `hold` made beside the
/// mount, and a fresh mount is tried, three times at most. `None`: the
/// test was held up each time, and checks nothing.
fn mount_and_hold<T>(
    v: &Volume,
    hold: impl Fn() -> T,
    on_mount: impl Fn(&T) -> bool,
    undo: impl Fn(T),
) -> Option<(Foreground, T)> {
    const IDLE: Duration = Duration::from_secs(1);
    for _ in 0..3 {
        let t0 = Instant::now();
        let mut fg = Foreground::start(v, &["--idle", "1s"]);
        let held = hold();
        if on_mount(&held) {
            return Some((fg, held));
        }
        let took = t0.elapsed();
        assert!(
            took >= IDLE,
            "the mount went away {took:?} after it was started, before the idle time; log:\n{}",
            fg.stderr()
        );
        eprintln!("note: the test was held up {took:?} (not less than the idle time): the idle mount went first");
        fg.exited(DEADLINE, "a mount that went idle before the test used it");
        undo(held);
    }
    eprintln!("note: held up three times: nothing about holding a mount is checked");
    None
}

#[test]
fn an_open_file_keeps_the_mount() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    let open = || {
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(v.p("held"))
            .unwrap()
    };
    let Some((mut fg, mut f)) = mount_and_hold(
        &v,
        open,
        |_| on_fuse(&v.p("held")),
        |f| {
            drop(f);
            fs::remove_file(v.p("held")).unwrap();
        },
    ) else {
        return;
    };
    stays_because(&fg, "1 file(s) or directories are open on it: staying mounted");
    assert!(is_mounted(&v.mnt));
    // The file is still served after the idle time went by.
    f.write_all(b"still here").unwrap();
    f.sync_all().unwrap();
    drop(f);
    let t0 = Instant::now();
    exits_cleanly_when_idle(&mut fg, t0, "open file closed");
}

#[test]
fn a_working_directory_inside_keeps_the_mount() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    // A shell that enters d, says so, and waits for its stdin to close.
    // (d is made again beside the mount where the mount went first: the
    // shell is then found outside it.)
    let enter = || {
        let _ = fs::create_dir(v.p("d"));
        let mut sh = Command::new("sh")
            .arg("-c")
            .arg("cd \"$1\" 2>/dev/null || { mkdir -p \"$1\" && cd \"$1\"; } || exit 3; echo in; read line; exit 0")
            .arg("sh")
            .arg(v.p("d"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = [0u8; 3];
        sh.stdout
            .take()
            .unwrap()
            .read_exact(&mut line)
            .expect("the shell could not cd into d");
        sh
    };
    let Some((mut fg, mut sh)) = mount_and_hold(
        &v,
        enter,
        |sh| on_fuse(std::path::Path::new(&format!("/proc/{}/cwd", sh.id()))),
        |mut sh| {
            drop(sh.stdin.take());
            sh.wait().unwrap();
            fs::remove_dir(v.p("d")).unwrap();
        },
    ) else {
        return;
    };
    stays_because(&fg, "(sh) has its working directory inside: staying mounted");
    assert!(is_mounted(&v.mnt));
    drop(sh.stdin.take());
    assert!(sh.wait().unwrap().success(), "the shell could not cd into the mount");
    let t0 = Instant::now();
    exits_cleanly_when_idle(&mut fg, t0, "working directory left");
}

/// A reader that opens the file for each 4 KiB read and pauses 100 ms
/// between reads (never a second without a request, mostly no file open)
/// keeps the mount for 3 s (three idle times).
///
/// How the reader is scheduled never decides the verdict: the daemon may
/// unmount (or log that it found no request for the idle time) only after
/// a second with no request in flight, and every such quiet stretch lies
/// between the start of one read and the end of the next (or the start of
/// the last and the final look). The test measures the longest of those
/// spans, an upper bound of any quiet time the daemon saw: under the idle
/// time (less the daemon's millisecond rounding) the mount must be there
/// and the log must say nothing about idleness; a reader held up longer
/// than that is noted and excuses whatever the watcher then did.
#[test]
fn a_slow_reader_keeps_the_mount() {
    require_fuse!();
    const IDLE: Duration = Duration::from_secs(1);
    // The watcher counts whole milliseconds (each end of a span rounded).
    const ROUNDING: Duration = Duration::from_millis(2);
    let v = Volume::init(Mode::Gcm);
    // The quiet time counts from when the watcher starts, after this.
    let mut prev_start = Instant::now();
    let mut fg = Foreground::start(&v, &["--idle", "1s"]);
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
    write_file(&v.p("slow"), &data);
    let read = |n: usize| -> std::io::Result<Vec<u8>> {
        let mut f = File::open(v.p("slow"))?;
        let off = (n * 4096) % data.len();
        let mut buf = vec![0; 4096];
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(off as u64))?;
        f.read_exact(&mut buf)?;
        Ok(buf)
    };
    let start = Instant::now();
    let mut longest = Duration::ZERO;
    let mut n = 0;
    let mut failed = None;
    while start.elapsed() < Duration::from_secs(3) {
        let began = Instant::now();
        let got = read(n);
        longest = longest.max(prev_start.elapsed());
        prev_start = began;
        match got {
            Ok(buf) => {
                let off = (n * 4096) % data.len();
                assert_eq!(buf, data[off..off + 4096], "read {n}");
            }
            Err(e) => {
                failed = Some(format!("read {n}: {e}"));
                break;
            }
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let mounted = is_mounted(&v.mnt);
    let log = fg.stderr();
    longest = longest.max(prev_start.elapsed());
    if longest + ROUNDING >= IDLE {
        eprintln!(
            "note: the reader was held up {longest:?} (not less than the idle time): the idle watcher may \
             have acted, and nothing about the slow reader is checked (mounted: {mounted}, {failed:?})"
        );
    } else {
        assert!(
            mounted,
            "unmounted under a slow reader (never {longest:?} without a request; {failed:?}); log:\n{log}"
        );
        assert!(failed.is_none(), "{failed:?} with the mount there; log:\n{log}");
        assert!(
            !log.contains("idle: no request"),
            "the watcher found no request for {IDLE:?}, but the longest quiet span was {longest:?}; log:\n{log}"
        );
        eprintln!(
            "slow reader: {n} reads over {:?} (longest span {longest:?}), mount kept",
            start.elapsed()
        );
    }
    let t0 = Instant::now();
    exits_cleanly_when_idle(&mut fg, t0, "slow reader done");
}

/// A user's mount (through fusermount3) goes the same way.
#[test]
fn a_users_idle_mount_is_unmounted_through_fusermount3() {
    require_fuse!();
    if warpfs_testkit::skip_if(user_mounts_unavailable()) {
        return;
    }
    const NOBODY: u32 = 65534;
    let mut v = Volume::init(Mode::Gcm);
    v.give_to(NOBODY, NOBODY);
    v.mount_with(&["--idle", "1s"]);
    let t0 = Instant::now();
    let pids = v.daemon_pids().to_vec();
    assert!(!pids.is_empty());
    let alive = wait_pids_gone(&pids, DEADLINE);
    eprintln!("user's mount, idle 1s: daemon gone {:?} after mounting", t0.elapsed());
    assert!(alive.is_empty(), "daemon still running; log:\n{}", v.log());
    assert!(!is_mounted(&v.mnt));
    assert!(v.log().contains("idle: no request for 1s: unmounting"), "{}", v.log());
    v.daemon_stopped();
}
