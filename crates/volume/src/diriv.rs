//! Per-directory name IVs: `warpfs.diriv` (16 random bytes) in every backing
//! directory (cached with the directory's other state in `dirview`).

use crate::error::{Error, Result};
use std::ffi::OsStr;
use warpfs_backing::Dir;

/// File name of the directory IV inside each backing directory.
pub const DIRIV_NAME: &str = warpfs_crypto::names::DIRIV_FILE;
/// Length of a directory IV.
pub const DIRIV_LEN: usize = warpfs_crypto::names::DIRIV_LEN;

/// Whether the door's answer `e` says the IV file is missing or is not a
/// regular file with one link.
fn refused(e: Error) -> bool {
    matches!(
        e.0,
        libc::ENOENT | libc::ELOOP | libc::EISDIR | libc::EINVAL | libc::EMLINK | libc::ESTALE
    )
}

/// Read and check a directory's IV file.
pub(crate) fn read(dir: &Dir) -> Result<[u8; DIRIV_LEN]> {
    let data = match warpfs_backing::read_small(
        &dir.entry(OsStr::new(DIRIV_NAME)),
        DIRIV_LEN,
        warpfs_backing::Expect::Reserved,
    ) {
        Ok(d) => d,
        // A fault of the backing FS (permission denied, I/O error) keeps
        // its errno; a missing IV file, or something else in its place (a
        // symlink, FIFO, device, directory or a file with a second link,
        // which the door refuses), is a corrupt directory.
        Err(e) if !refused(e) => return Err(e),
        Err(e) => {
            tracing::error!(
                "cannot read directory IV {}: {e}",
                dir.path().join(DIRIV_NAME).display()
            );
            return Err(Error::EIO);
        }
    };
    data.as_slice().try_into().map_err(|_| {
        tracing::error!(
            "corrupt directory IV {}: {} bytes, expected {DIRIV_LEN}",
            dir.path().join(DIRIV_NAME).display(),
            data.len()
        );
        Error::EIO
    })
}

/// Read a copy of the IV file a sync tool made (`name` in `dir`), for
/// trying its IV too: the IV, or why it cannot be used.
pub(crate) fn read_named(dir: &Dir, name: &OsStr) -> std::result::Result<[u8; DIRIV_LEN], String> {
    let data = warpfs_backing::read_small(&dir.entry(name), DIRIV_LEN + 1, warpfs_backing::Expect::Reserved)
        .map_err(|e| e.to_string())?;
    data.as_slice()
        .try_into()
        .map_err(|_| format!("{} bytes, expected {DIRIV_LEN}", data.len()))
}

/// Write a fresh random IV into a new backing directory (read-only file,
/// fsynced), then fsync the directory: once the caller's mkdir returns,
/// an fsync of the parent (what makes a new directory durable under
/// POSIX) must not leave a directory without its IV after a power loss.
pub(crate) fn create(dir: &Dir) -> Result<[u8; DIRIV_LEN]> {
    let iv: [u8; DIRIV_LEN] = warpfs_crypto::rand::array();
    warpfs_backing::create_file(&dir.entry(OsStr::new(DIRIV_NAME)), 0o444, &iv, true)?;
    match dir.reopen()?.sync_all() {
        // Backing file systems that cannot fsync a directory (some FUSE
        // and network ones) say so with EINVAL.
        Err(e) if !matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)) => Err(e.into()),
        _ => Ok(iv),
    }
}

/// Write a known IV (used to restore one after a failed rmdir).
pub(crate) fn restore(dir: &Dir, iv: &[u8; DIRIV_LEN]) -> Result<()> {
    warpfs_backing::create_file(&dir.entry(OsStr::new(DIRIV_NAME)), 0o444, iv, false)
}
