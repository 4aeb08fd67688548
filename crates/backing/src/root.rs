//! CIPHERDIR itself ([`Root`]): opened once from the path the user gave,
//! then every backing directory is reached beneath its descriptor by a
//! plain relative path with no symlink followed.

use crate::beneath::{open_dir_beneath, open_user_dir};
use crate::dir::Dir;
use crate::errno::{Errno, Result};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// CIPHERDIR (or another directory warpfs keeps files in: a reverse
/// volume's PLAINDIR, the directory of a config given with `--config`),
/// held open.
#[derive(Debug, Clone)]
pub struct Root {
    top: Dir,
}

impl Root {
    /// Open the directory at `path`, the user's own path (any length):
    /// symlinks on it are followed as the user wrote them; nothing beneath
    /// it is ever reached through one.
    pub fn open(path: &Path) -> Result<Root> {
        let fd = open_user_dir(path.as_os_str().as_bytes())?;
        let shown = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Root {
            top: Dir::new(fd, shown),
        })
    }

    /// The directory's canonical path, for messages and for comparing
    /// with the mount table (never used to reach a file beneath it).
    pub fn path(&self) -> &Path {
        self.top.path()
    }

    /// The root directory itself.
    pub fn top(&self) -> &Dir {
        &self.top
    }

    /// The backing directory at `rel`, a plain relative path (empty: the
    /// root), reached beneath the root with no symlink followed: a symlink
    /// anywhere on the way is ELOOP, a path that is not plain EINVAL.
    pub fn dir(&self, rel: &Path) -> Result<Dir> {
        let b = rel.as_os_str().as_bytes();
        if b.is_empty() {
            return Ok(self.top.share());
        }
        let fd = open_dir_beneath(self.top.fd(), b)?;
        Ok(Dir::new(fd, self.top.path().join(rel)))
    }

    /// The entry at `rel` as its directory and its name (use
    /// `dir.entry(&name)`); the root itself is the entry `.` of itself.
    pub fn entry(&self, rel: &Path) -> Result<(Dir, OsString)> {
        if rel.as_os_str().is_empty() {
            return Ok((self.top.share(), OsString::from(".")));
        }
        if !crate::beneath::is_plain(rel.as_os_str().as_bytes()) {
            return Err(Errno::EINVAL);
        }
        match (rel.parent(), rel.file_name()) {
            (Some(p), Some(n)) => Ok((self.dir(p)?, n.to_owned())),
            _ => Err(Errno::EINVAL),
        }
    }

    /// [`crate::open_file`] of the file at `rel`.
    pub fn open_file(&self, rel: &Path, flags: i32, mode: u32, expect: crate::Expect) -> Result<std::fs::File> {
        let (d, n) = self.entry(rel)?;
        crate::open::open_file(&d.entry(&n), flags, mode, expect)
    }

    /// lstat of the entry at `rel` (following no symlink on the way; the
    /// entry itself may be one).
    pub fn lstat(&self, rel: &Path) -> Result<libc::stat> {
        let (d, n) = self.entry(rel)?;
        crate::ops::lstat(&d.entry(&n))
    }

    /// The entry at `rel` as a path for messages.
    pub fn shown(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.path().to_path_buf()
        } else {
            self.path().join(rel)
        }
    }
}

/// The directory and file name of a path the user gave for one file (a
/// config given with `--config`, a keyfile): the directory is opened as a
/// [`Root`] (its path followed as written), the file itself is then
/// opened without following a symlink at its name.
pub fn split_user_path(path: &Path) -> Result<(Root, OsString)> {
    let name = path.file_name().ok_or(Errno::EINVAL)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((Root::open(dir)?, name.to_owned()))
}

/// Whether `name` is one plain file name (no `/`, not `.` or `..`).
pub fn is_plain_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    b != b"." && crate::beneath::is_entry_name(b)
}
