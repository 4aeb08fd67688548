//! Becoming a daemon, for `warpfs mount` (and `--reverse`) and `warpfs
//! container open` without `-f`: fork while single-threaded; the parent
//! waits on a pipe and returns once the child says the mount is live
//! ("OK"), or fails with what the child wrote instead (exit 13), or with
//! "died" when the child closed the pipe without a word. The child
//! detaches from the terminal (setsid) and reports through [`Ready`].

use super::exit::{CliError, ERROR, MOUNT_FAILED};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

/// What the child writes once the mount is live; anything else is why not.
const LIVE: &[u8] = b"OK";

/// The child's end of the readiness pipe. Dropped without [`Ready::live`],
/// the parent reports that the `who` process died before the mount was
/// ready.
pub struct Ready(File);

impl Ready {
    /// Tell the waiting parent why the mount failed (it exits with
    /// MOUNT_FAILED and this message); the child goes on to clean up.
    pub fn tell(&mut self, why: &str) {
        let _ = self.0.write_all(why.as_bytes());
    }

    /// Tell the parent why the mount failed and end the child (exit 13).
    pub fn fail(mut self, why: &str) -> ! {
        self.tell(why);
        std::process::exit(MOUNT_FAILED);
    }

    /// The mount is live: stdin, stdout and stderr go to /dev/null, the
    /// working directory to `/`, and the parent hears "OK" and returns 0.
    pub fn live(mut self) {
        redirect_stdio();
        let _ = self.0.write_all(LIVE);
    }
}

/// Fork into a daemon (the caller has started no thread). In the parent it
/// returns `Ok(None)` once the child reported the mount live, or the error
/// the child reported (`who` names the process in the message for a child
/// that died silently: "mount", "container"). In the child, detached by
/// setsid, it returns the pipe to report through.
pub fn daemonize(who: &str) -> Result<Option<Ready>, CliError> {
    let mut fds = [0; 2];
    // SAFETY: fds is a 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(CliError::new(
            ERROR,
            format!("pipe: {}", std::io::Error::last_os_error()),
        ));
    }
    // SAFETY: both fds were just created and are owned here.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the caller started no thread (documented precondition).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(CliError::new(
            ERROR,
            format!("fork: {}", std::io::Error::last_os_error()),
        ));
    }
    if pid > 0 {
        drop(wr);
        return wait(File::from(rd), who).map(|()| None);
    }
    drop(rd);
    // SAFETY: in the child; setsid detaches from the terminal.
    unsafe { libc::setsid() };
    Ok(Some(Ready(File::from(wr))))
}

/// The parent's side: read the child's report to the end (its close).
fn wait(mut rd: impl Read, who: &str) -> Result<(), CliError> {
    let mut msg = Vec::new();
    let _ = rd.read_to_end(&mut msg);
    outcome(&msg, who)
}

/// What the child's report means: "OK" (exactly) is a live mount, nothing
/// at all a child that died, anything else the reason the mount failed.
/// A report that is not UTF-8 counts as none.
fn outcome(msg: &[u8], who: &str) -> Result<(), CliError> {
    match std::str::from_utf8(msg).unwrap_or("") {
        "OK" => Ok(()),
        "" => Err(CliError::new(
            MOUNT_FAILED,
            format!("the {who} process died before the mount was ready"),
        )),
        why => Err(CliError::new(MOUNT_FAILED, why)),
    }
}

/// Standard descriptors to /dev/null and the working directory to `/`, so
/// that the daemon holds no terminal and no directory busy.
fn redirect_stdio() {
    if let Ok(null) = warpfs_backing::host::open_with("/dev/null", std::fs::OpenOptions::new().read(true).write(true)) {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
    let _ = std::env::set_current_dir("/");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe as the daemon has it: the parent's reader, the child's Ready.
    fn pipe() -> (File, Ready) {
        let mut fds = [0; 2];
        // SAFETY: fds is a 2-element array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both fds were just created and are owned here.
        unsafe { (File::from_raw_fd(fds[0]), Ready(File::from_raw_fd(fds[1]))) }
    }

    #[test]
    fn only_an_exact_ok_is_a_live_mount() {
        outcome(b"OK", "mount").unwrap();
        for not_ok in [&b"OK\n"[..], b"ok", b"OKOK", b" OK", b"O"] {
            let e = outcome(not_ok, "mount").unwrap_err();
            assert_eq!(e.code, MOUNT_FAILED, "{not_ok:?}");
            assert_eq!(e.msg.as_bytes(), not_ok);
        }
    }

    #[test]
    fn a_silent_child_died_and_is_named() {
        let e = outcome(b"", "container").unwrap_err();
        assert_eq!(e.code, MOUNT_FAILED);
        assert_eq!(e.msg, "the container process died before the mount was ready");
        let e = outcome(b"", "mount").unwrap_err();
        assert_eq!(e.msg, "the mount process died before the mount was ready");
        // Bytes that are not UTF-8 are no message either.
        let e = outcome(b"\xff\xfe", "mount").unwrap_err();
        assert_eq!(e.msg, "the mount process died before the mount was ready");
    }

    #[test]
    fn the_parent_hears_the_reason_the_child_wrote() {
        let (rd, mut ready) = pipe();
        ready.tell("mountpoint /x: busy");
        drop(ready);
        let e = wait(rd, "mount").unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (MOUNT_FAILED, "mountpoint /x: busy"));
    }

    #[test]
    fn a_ready_dropped_without_a_word_is_a_dead_child() {
        let (rd, ready) = pipe();
        drop(ready);
        let e = wait(rd, "mount").unwrap_err();
        assert_eq!(e.msg, "the mount process died before the mount was ready");
    }

    #[test]
    fn the_live_report_is_what_the_parent_accepts() {
        let (rd, mut ready) = pipe();
        // What `live` writes after moving the standard descriptors (not
        // done here: it would take the test harness's output).
        ready.0.write_all(LIVE).unwrap();
        drop(ready);
        wait(rd, "mount").unwrap();
    }
}
