//! Files of the host that are not in the backing store: those the user
//! names (a passfile, a keyfile, a log file, a container image, a config
//! kept elsewhere by `--config` is *not* one: it goes through [`crate::Root`])
//! and those the system offers (/proc, /sys, /dev/fuse). Ordinary opens
//! that follow symlinks as the user or the system wrote them. Nothing
//! beneath CIPHERDIR is ever reached through this module: that is what
//! [`crate::Root`] is for.

use std::fs::{File, Metadata, OpenOptions, ReadDir};
use std::io;
use std::path::{Path, PathBuf};

/// Create a directory of the host and its missing parents, the new ones
/// with mode 0700 (less the umask): a place for the user's own state.
pub fn create_private_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path)
}

/// Open a file of the host for reading.
pub fn open(path: impl AsRef<Path>) -> io::Result<File> {
    File::open(path)
}

/// Open a file of the host with `opts`.
pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> io::Result<File> {
    opts.open(path)
}

/// Create (or truncate) a file of the host for writing.
pub fn create(path: impl AsRef<Path>) -> io::Result<File> {
    File::create(path)
}

/// The whole content of a file of the host.
pub fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// The whole content of a text file of the host (/proc, /sys, a config).
pub fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    std::fs::read_to_string(path)
}

/// Write a file of the host (a sysfs parameter, a generated page).
pub fn write(path: impl AsRef<Path>, data: impl AsRef<[u8]>) -> io::Result<()> {
    std::fs::write(path, data)
}

/// The entries of a directory of the host.
pub fn read_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    std::fs::read_dir(path)
}

/// stat(2) of a path of the host (following symlinks).
pub fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    std::fs::metadata(path)
}

/// lstat(2) of a path of the host.
pub fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    std::fs::symlink_metadata(path)
}

/// The canonical form of a path of the host.
pub fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    std::fs::canonicalize(path)
}

/// Make a directory of the host and those above it.
pub fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    std::fs::create_dir_all(path)
}

/// Remove a file of the host.
pub fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    std::fs::remove_file(path)
}

/// Rename a file of the host.
pub fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    std::fs::rename(from, to)
}

/// The target of a symlink of the host (/proc/PID/cwd).
pub fn read_link(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    std::fs::read_link(path)
}
