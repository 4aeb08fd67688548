//! Crash-safe replacement of `warpfs.conf` through the backing-store door:
//! temp file in the same directory (a new file, never through a symlink),
//! fsync, rename (or link, to never overwrite on create), fsync directory.

use crate::error::{ConfigError, Result};
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::Path;
use warpfs_backing::{Errno, Root};

/// How the final name is taken.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Fail with `AlreadyExists` if the file is there (init).
    CreateNew,
    /// Atomically replace the file (password change).
    Replace,
}

/// Write `data` to `dir/name` atomically, file mode 0400.
pub(crate) fn write_atomic(dir: &Path, name: &str, data: &[u8], mode: Mode) -> Result<()> {
    let root = Root::open(dir).map_err(|e| ConfigError::io(dir, e.into()))?;
    write_atomic_in(&root, OsStr::new(name), data, mode)
}

/// [`write_atomic`] in the open directory `root`.
pub(crate) fn write_atomic_in(root: &Root, name: &OsStr, data: &[u8], mode: Mode) -> Result<()> {
    let top = root.top();
    let target = top.entry(name);
    if mode == Mode::CreateNew {
        match warpfs_backing::lstat(&target) {
            Ok(_) => return Err(ConfigError::AlreadyExists { path: target.shown() }),
            Err(Errno(libc::ENOENT)) => {}
            Err(e) => return Err(ConfigError::io(target.shown(), e.into())),
        }
    }
    let suffix: [u8; 8] = warpfs_crypto::rand::array();
    let hex: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    // A `warpfs.` name: reserved, so a leftover after a crash is never
    // mistaken for an encrypted entry.
    let mut tmp_name = OsString::from(name);
    tmp_name.push(format!(".tmp-{hex}"));
    let tmp = top.entry(&tmp_name);
    let result = write_tmp(root, &tmp_name, data).and_then(|()| commit(root, &tmp_name, name, mode));
    if result.is_err() {
        let _ = warpfs_backing::unlink(&tmp);
        return result;
    }
    top.sync().map_err(|e| ConfigError::io(root.path(), e.into()))
}

fn write_tmp(root: &Root, tmp: &OsStr, data: &[u8]) -> Result<()> {
    let l = root.top().entry(tmp);
    let io = |e: std::io::Error| ConfigError::io(l.shown(), e);
    let mut f = warpfs_backing::open_file(
        &l,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        0o400,
        warpfs_backing::Expect::Reserved,
    )
    .map_err(|e| io(e.into()))?;
    f.write_all(data).map_err(io)?;
    f.sync_all().map_err(io)
}

fn commit(root: &Root, tmp: &OsStr, name: &OsStr, mode: Mode) -> Result<()> {
    let top = root.top();
    let (from, to) = (top.entry(tmp), top.entry(name));
    if mode == Mode::CreateNew {
        // link(2) never replaces an existing file, so two racing inits
        // cannot overwrite each other's config.
        match warpfs_backing::link(&from, &to) {
            Ok(()) => {
                let _ = warpfs_backing::unlink(&from);
                return Ok(());
            }
            Err(Errno(libc::EEXIST)) => return Err(ConfigError::AlreadyExists { path: to.shown() }),
            // File systems without hard links: fall back to rename below
            // (the existence check above already ran), never replacing.
            Err(_) => {
                return warpfs_backing::rename(&from, &to, libc::RENAME_NOREPLACE).map_err(|e| match e {
                    Errno(libc::EEXIST) => ConfigError::AlreadyExists { path: to.shown() },
                    e => ConfigError::io(to.shown(), e.into()),
                })
            }
        }
    }
    warpfs_backing::rename(&from, &to, 0).map_err(|e| ConfigError::io(to.shown(), e.into()))
}
