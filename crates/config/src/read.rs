//! Reading a config file through the backing-store door: the directory is
//! opened as given, the file itself never through a symlink, never a
//! FIFO, device or directory, never a file with a second link (which could
//! be a file outside CIPHERDIR), and never more than [`MAX_CONFIG_SIZE`]
//! bytes plus one.

use crate::error::{ConfigError, Result};
use crate::MAX_CONFIG_SIZE;
use std::ffi::OsStr;
use std::path::Path;
use warpfs_backing::{Errno, Expect, Root};

/// The error for a config at `path` the door refused or could not read.
pub(crate) fn refused(path: &Path, e: Errno) -> ConfigError {
    let why = match e.0 {
        libc::ELOOP => "it is a symbolic link",
        libc::EISDIR => "it is a directory",
        libc::EINVAL => "it is not a regular file",
        libc::EMLINK => "it has a second hard link (it may be a file outside this directory)",
        libc::ESTALE => "it was replaced while it was being opened",
        _ => return ConfigError::io(path, e.into()),
    };
    ConfigError::Refused {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// The bytes of the config `name` in the open directory `root`.
pub(crate) fn read_in(root: &Root, name: &OsStr) -> Result<Vec<u8>> {
    let l = root.top().entry(name);
    warpfs_backing::read_small(&l, MAX_CONFIG_SIZE, Expect::Reserved).map_err(|e| refused(&l.shown(), e))
}

/// The bytes of the config file at `path` (the user's path: its
/// directory is followed as written, its last name is not).
pub(crate) fn read_path(path: &Path) -> Result<Vec<u8>> {
    let (root, name) = warpfs_backing::split_user_path(path).map_err(|e| ConfigError::io(path, e.into()))?;
    read_in(&root, &name)
}

/// Whether there is an entry (of any type) at `path`, looked up without
/// following a symlink at its last name.
pub(crate) fn exists(path: &Path) -> bool {
    warpfs_backing::split_user_path(path)
        .and_then(|(root, name)| warpfs_backing::lstat(&root.top().entry(&name)))
        .is_ok()
}
