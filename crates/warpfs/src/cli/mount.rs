//! `warpfs mount`: unlock, mount, and serve. Without `-f` the process forks
//! before any thread exists; the parent returns once the mount is live (or
//! prints why it failed). In the foreground SIGINT/SIGTERM unmount cleanly.

use super::exit::{CliError, ERROR, MOUNT_FAILED};
use super::logging;
use super::PassArgs;
use crate::fuse::{mount_config, raise_read_ahead, MountOptions, WarpFs};
use clap::Args;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use warpfs_config::Config;
use warpfs_volume::{Options, Volume};

/// Arguments of `warpfs mount`.
#[derive(Args, Debug)]
pub struct MountArgs {
    #[command(flatten)]
    pass: PassArgs,
    /// Stay in the foreground (log to stderr; Ctrl-C unmounts).
    #[arg(short = 'f', long)]
    foreground: bool,
    /// Mount options, comma-separated: ro, allow_other, noatime, nosuid, nodev, noexec, ...
    #[arg(short = 'o', value_name = "OPTS")]
    options: Vec<String>,
    /// FUSE worker threads (default: max(4, cores)).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Append log lines to this file (default: stderr with -f, else syslog).
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
    /// Where the plaintext view appears.
    mountpoint: PathBuf,
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
}

pub fn run(a: MountArgs) -> Result<(), CliError> {
    let mut mo = MountOptions {
        threads: a.threads.unwrap_or_else(|| cores().max(4)),
        ..Default::default()
    };
    for o in &a.options {
        mo.parse_o(o).map_err(|e| CliError::new(super::exit::USAGE, e))?;
    }
    match std::fs::metadata(&a.mountpoint) {
        Ok(m) if m.is_dir() => {
            // As gocryptfs: refuse to hide files (or another mount's files) under the mount.
            let nonempty = std::fs::read_dir(&a.mountpoint)
                .map(|mut d| d.next().is_some())
                .unwrap_or(false);
            if nonempty {
                return Err(CliError::new(
                    MOUNT_FAILED,
                    format!("mountpoint {} is not empty", a.mountpoint.display()),
                ));
            }
        }
        Ok(_) => {
            return Err(CliError::new(
                MOUNT_FAILED,
                format!("{} is not a directory", a.mountpoint.display()),
            ))
        }
        Err(e) => {
            return Err(CliError::new(
                MOUNT_FAILED,
                format!("mountpoint {}: {e}", a.mountpoint.display()),
            ))
        }
    }
    let cfg = Config::load(&a.cipherdir)?;
    let pw = a.pass.source().read("Password: ", false)?;
    let master = cfg.unlock(pw.bytes())?;
    drop(pw);
    let vol = Volume::open(
        &a.cipherdir,
        &cfg,
        &master,
        Options {
            read_only: mo.read_only,
        },
    )
    .map_err(|e| CliError::new(super::exit::BAD_CONFIG, e))?;
    drop(master);
    let fs = WarpFs::new(vol).map_err(|e| CliError::new(ERROR, e.to_string()))?;
    let cipherdir = std::fs::canonicalize(&a.cipherdir).unwrap_or(a.cipherdir.clone());
    let config = mount_config(&mo, &cipherdir);
    // SAFETY: umask has no preconditions. Modes are applied exactly as the
    // kernel sends them (it already applied the caller's umask).
    unsafe { libc::umask(0) };

    if a.foreground {
        let target = match &a.log_file {
            Some(p) => logging::Target::File(p),
            None => logging::Target::Stderr,
        };
        logging::init(target).map_err(|e| CliError::new(ERROR, e))?;
        let mut session = fuser::Session::new(fs, &a.mountpoint, &config)
            .map_err(|e| CliError::new(MOUNT_FAILED, format!("mount failed: {e}")))?;
        raise_read_ahead(&a.mountpoint);
        let mut unmounter = session.unmount_callable();
        let mut signals =
            signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
                .map_err(|e| CliError::new(ERROR, e.to_string()))?;
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                tracing::info!("signal received, unmounting");
                if let Err(e) = unmounter.unmount() {
                    tracing::error!("unmount failed: {e}");
                }
            }
        });
        tracing::info!("mounted {} on {}", cipherdir.display(), a.mountpoint.display());
        session
            .run()
            .map_err(|e| CliError::new(ERROR, format!("session ended with an error: {e}")))?;
        tracing::info!("unmounted {}", a.mountpoint.display());
        return Ok(());
    }

    // Daemon: fork while single-threaded; the child reports through a pipe.
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
    // SAFETY: no other threads exist yet (nothing above spawns one).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(CliError::new(
            ERROR,
            format!("fork: {}", std::io::Error::last_os_error()),
        ));
    }
    if pid > 0 {
        drop(wr);
        let mut msg = String::new();
        let _ = std::fs::File::from(rd).read_to_string(&mut msg);
        return if msg == "OK" {
            Ok(())
        } else if msg.is_empty() {
            Err(CliError::new(
                MOUNT_FAILED,
                "the mount process died before the mount was ready",
            ))
        } else {
            Err(CliError::new(MOUNT_FAILED, msg))
        };
    }
    drop(rd);
    let mut wr = std::fs::File::from(wr);
    // SAFETY: in the child; setsid detaches from the terminal.
    unsafe { libc::setsid() };
    let target = match &a.log_file {
        Some(p) => logging::Target::File(p),
        None => logging::Target::Syslog,
    };
    if let Err(e) = logging::init(target) {
        let _ = wr.write_all(e.as_bytes());
        std::process::exit(MOUNT_FAILED);
    }
    let session = match fuser::Session::new(fs, &a.mountpoint, &config) {
        Ok(s) => s,
        Err(e) => {
            let _ = wr.write_all(format!("mount failed: {e}").as_bytes());
            std::process::exit(MOUNT_FAILED);
        }
    };
    raise_read_ahead(&a.mountpoint);
    tracing::info!("mounted {} on {}", cipherdir.display(), a.mountpoint.display());
    redirect_stdio();
    let _ = wr.write_all(b"OK");
    drop(wr);
    let code = match session.run() {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("session ended with an error: {e}");
            1
        }
    };
    tracing::info!("unmounted {}", a.mountpoint.display());
    std::process::exit(code);
}

fn redirect_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
    let _ = std::env::set_current_dir("/");
}
