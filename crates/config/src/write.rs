//! Crash-safe replacement of `warpfs.conf`: temp file in the same directory,
//! fsync, rename (or link, to never overwrite on create), fsync directory.

use crate::error::{ConfigError, Result};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

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
    let target = dir.join(name);
    if mode == Mode::CreateNew {
        match std::fs::symlink_metadata(&target) {
            Ok(_) => return Err(ConfigError::AlreadyExists { path: target }),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(ConfigError::io(target, e)),
        }
    }
    let suffix: [u8; 8] = warpfs_crypto::rand::array();
    let hex: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    // A `warpfs.` name: reserved, so a leftover after a crash is never
    // mistaken for an encrypted entry.
    let tmp = dir.join(format!("{name}.tmp-{hex}"));
    let result = write_tmp(&tmp, data).and_then(|()| commit(&tmp, &target, mode));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    sync_dir(dir)
}

fn write_tmp(tmp: &PathBuf, data: &[u8]) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(tmp)
        .map_err(|e| ConfigError::io(tmp, e))?;
    f.write_all(data).map_err(|e| ConfigError::io(tmp, e))?;
    f.sync_all().map_err(|e| ConfigError::io(tmp, e))
}

fn commit(tmp: &Path, target: &Path, mode: Mode) -> Result<()> {
    if mode == Mode::CreateNew {
        // link(2) never replaces an existing file, so two racing inits
        // cannot overwrite each other's config.
        match std::fs::hard_link(tmp, target) {
            Ok(()) => {
                let _ = std::fs::remove_file(tmp);
                return Ok(());
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(ConfigError::AlreadyExists {
                    path: target.to_owned(),
                })
            }
            // File systems without hard links: fall back to rename below
            // (the existence check above already ran).
            Err(_) => {}
        }
    }
    std::fs::rename(tmp, target).map_err(|e| ConfigError::io(target, e))
}

fn sync_dir(dir: &Path) -> Result<()> {
    let r = File::open(dir).and_then(|d| d.sync_all());
    match r {
        Ok(()) => Ok(()),
        // Some file systems (FUSE, network) cannot fsync a directory.
        Err(e) if matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Unsupported) => Ok(()),
        Err(e) => Err(ConfigError::io(dir, e)),
    }
}
