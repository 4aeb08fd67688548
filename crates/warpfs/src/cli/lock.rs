//! The lock on CIPHERDIR (FORMAT.md 4.4, 10): flock on the directory and
//! on `warpfs.lock`, both reached through the backing-store door. An
//! offline rekey or fsck holds it exclusively (and creates the lock file);
//! a mount holds the directory's shared and checks the file. A lock file
//! that is not a regular file with one link (a planted symlink, FIFO,
//! device, directory or hard link) is refused, never followed or opened.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;
use warpfs_backing::{Errno, Expect, Root};

/// Name of the lock file in CIPHERDIR (FORMAT.md 4.4). A network file
/// system passes a lock on a regular file between its clients (GlusterFS
/// does), not one on a directory; the directory is locked too, for
/// warpfs builds that only check it.
pub const LOCK_FILE: &str = "warpfs.lock";

/// How long an offline command waits for a just-unmounted daemon to exit
/// and release its lock on CIPHERDIR (`umount && warpfs fsck` must work).
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// The lock an offline rekey holds on CIPHERDIR; the rekey's lock file is
/// removed when it is dropped.
pub struct CipherdirLock {
    _dir: std::fs::File,
    file: Option<std::fs::File>,
    root: Root,
    exclusive: bool,
}

impl Drop for CipherdirLock {
    fn drop(&mut self) {
        if self.exclusive && self.file.is_some() {
            // Still locked while it goes: whoever opened it meanwhile finds
            // it held, then gone (and checks that below).
            let _ = warpfs_backing::unlink(&self.root.top().entry(OsStr::new(LOCK_FILE)));
        }
    }
}

/// Whether `f` is still the lock file of `root` (not removed by a rekey
/// that finished between our open and our lock).
fn still_there(f: &std::fs::File, root: &Root) -> bool {
    match (
        warpfs_backing::fstat(f),
        warpfs_backing::lstat(&root.top().entry(OsStr::new(LOCK_FILE))),
    ) {
        (Ok(a), Ok(b)) => (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino),
        _ => false,
    }
}

/// `flock` `f` without waiting: `Ok(false)` when someone else holds it.
fn try_flock(f: &std::fs::File, exclusive: bool) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let op = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH } | libc::LOCK_NB;
    // SAFETY: flock on a descriptor the caller owns.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// The error for a lock file the door refused.
fn refused(root: &Root, e: Errno) -> std::io::Error {
    let why = match e.0 {
        libc::ELOOP => "it is a symbolic link",
        libc::EISDIR => "it is a directory",
        libc::EINVAL => "it is not a regular file",
        libc::EMLINK => "it has a second hard link (it may be a file outside CIPHERDIR)",
        _ => return e.into(),
    };
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "{}: refused: {why}; remove it if no warpfs rekey or fsck is running",
            root.shown(Path::new(LOCK_FILE)).display()
        ),
    )
}

/// Lock CIPHERDIR for an offline rekey or fsck (`exclusive`: it creates
/// the lock file) or check it for a mount (shared, on the directory; the
/// lock file is only checked): `warpfs mount` and a second offline
/// command refuse while it is held, on this host and on other clients of a
/// shared file system. `Ok(None)`: someone else holds the lock.
pub fn lock_cipherdir(dir: &Path, exclusive: bool) -> std::io::Result<Option<CipherdirLock>> {
    let root = Root::open(dir)?;
    let d = root.top().reopen()?;
    if !try_flock(&d, exclusive)? {
        return Ok(None);
    }
    let entry = || root.top().entry(OsStr::new(LOCK_FILE));
    for _ in 0..3 {
        let file = if exclusive {
            let f = warpfs_backing::open_file(&entry(), libc::O_RDWR | libc::O_CREAT, 0o600, Expect::Reserved)
                .map_err(|e| refused(&root, e))?;
            Some(f)
        } else {
            match warpfs_backing::open_file(&entry(), libc::O_RDONLY, 0, Expect::Reserved) {
                Ok(f) => Some(f),
                // No rekey running (or unreadable media): nothing to check.
                Err(Errno(libc::ENOENT | libc::EACCES | libc::EPERM)) => None,
                Err(e) => return Err(refused(&root, e)),
            }
        };
        if let Some(f) = &file {
            match try_flock(f, exclusive) {
                Ok(true) if exclusive && !still_there(f, &root) => continue,
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) if exclusive => return Err(e),
                Err(_) => {}
            }
        }
        return Ok(Some(CipherdirLock {
            _dir: d,
            file,
            root,
            exclusive,
        }));
    }
    Ok(None)
}

/// The exclusive lock on CIPHERDIR ([`lock_cipherdir`]), waiting up to
/// [`LOCK_WAIT`] while a mount or rekey holds it. `Ok(None)`: still held.
pub fn lock_exclusive(dir: &Path) -> std::io::Result<Option<CipherdirLock>> {
    let start = std::time::Instant::now();
    loop {
        match lock_cipherdir(dir, true)? {
            Some(f) => return Ok(Some(f)),
            None if start.elapsed() >= LOCK_WAIT => return Ok(None),
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// [`lock_exclusive`] for an offline rekey: an error naming CIPHERDIR
/// when the lock cannot be taken or another process still holds it.
pub fn lock_for_rekey(dir: &Path) -> Result<CipherdirLock, super::exit::CliError> {
    use super::exit::{CliError, ERROR};
    lock_exclusive(dir)
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", dir.display())))?
        .ok_or_else(|| {
            CliError::new(
                ERROR,
                format!(
                    "{}: another warpfs rekey is running, or the volume is mounted",
                    dir.display()
                ),
            )
        })
}
