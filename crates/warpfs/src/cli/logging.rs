//! Log output: stderr in the foreground, a file with --log-file, otherwise
//! syslog once daemonized (as gocryptfs does). Keys are never logged.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use tracing_subscriber::fmt::MakeWriter;

/// Where log lines go.
pub enum Target<'a> {
    /// Standard error.
    Stderr,
    /// Append to a file.
    File(&'a Path),
    /// The system log.
    Syslog,
}

struct Syslog;

impl Write for Syslog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        for line in text.lines().filter(|l| !l.is_empty()) {
            if let Ok(c) = std::ffi::CString::new(line.replace('\0', " ")) {
                // SAFETY: "%s" with one valid C string argument.
                unsafe { libc::syslog(libc::LOG_NOTICE, c"%s".as_ptr(), c.as_ptr()) };
            }
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct SyslogMaker;

impl<'a> MakeWriter<'a> for SyslogMaker {
    type Writer = Syslog;
    fn make_writer(&'a self) -> Syslog {
        Syslog
    }
}

/// Install the global subscriber. Level from `WARPFS_LOG` (default "info").
pub fn init(target: Target<'_>) -> Result<(), String> {
    // fuser's own chatter (e.g. its second unmount attempt after an outside
    // unmount) stays out of the log unless asked for.
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("WARPFS_LOG").unwrap_or_else(|_| "info,fuser=error".into());
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let res = match target {
        Target::Stderr => b.with_writer(std::io::stderr).try_init(),
        Target::File(p) => {
            use std::os::unix::fs::OpenOptionsExt;
            let f =
                warpfs_backing::host::open_with(p, std::fs::OpenOptions::new().mode(0o600).create(true).append(true))
                    .map_err(|e| format!("cannot open log file {}: {e}", p.display()))?;
            b.with_ansi(false).with_writer(Mutex::new(f)).try_init()
        }
        Target::Syslog => {
            // SAFETY: static identifier string.
            unsafe { libc::openlog(c"warpfs".as_ptr(), libc::LOG_PID, libc::LOG_USER) };
            b.with_ansi(false).without_time().with_writer(SyslogMaker).try_init()
        }
    };
    res.map_err(|e| e.to_string())
}
