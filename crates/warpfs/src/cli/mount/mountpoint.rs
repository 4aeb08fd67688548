//! The mountpoint check of `warpfs mount`: a directory, empty unless
//! `--nonempty`, and never a /dev/fd/N handed over by mount.fuse3.

use crate::cli::exit::{CliError, MOUNT_FAILED, USAGE};
use std::path::Path;

/// The mountpoint must be a directory, and empty unless `nonempty` (as
/// gocryptfs: never hide files, or another mount's files, by accident).
pub fn check(mountpoint: &Path, nonempty: bool) -> Result<(), CliError> {
    if mountpoint.as_os_str().as_encoded_bytes().starts_with(b"/dev/fd/") {
        return Err(CliError::new(
            USAGE,
            format!(
                "mountpoint {}: warpfs cannot take a /dev/fuse descriptor from mount.fuse3 (its drop_privileges); \
                 use file system type warpfs (mount.warpfs) with setuid=USER",
                mountpoint.display()
            ),
        ));
    }
    match warpfs_backing::host::metadata(mountpoint) {
        Ok(m) if m.is_dir() => {
            let has = warpfs_backing::host::read_dir(mountpoint)
                .map(|mut d| d.next().is_some())
                .unwrap_or(false);
            if has && !nonempty {
                return Err(CliError::new(
                    MOUNT_FAILED,
                    format!(
                        "mountpoint {} is not empty (-o nonempty mounts over it)",
                        mountpoint.display()
                    ),
                ));
            }
            Ok(())
        }
        Ok(_) => Err(CliError::new(
            MOUNT_FAILED,
            format!("{} is not a directory", mountpoint.display()),
        )),
        Err(e) => Err(CliError::new(
            MOUNT_FAILED,
            format!("mountpoint {}: {e}", mountpoint.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountpoint_must_be_an_empty_directory_unless_nonempty() {
        let d = tempfile::tempdir().unwrap();
        check(d.path(), false).unwrap();
        std::fs::write(d.path().join("f"), b"x").unwrap();
        assert_eq!(check(d.path(), false).unwrap_err().code, MOUNT_FAILED);
        check(d.path(), true).unwrap();
        assert!(check(&d.path().join("f"), true).is_err());
        assert!(check(&d.path().join("missing"), true).is_err());
        // mount.fuse3's drop_privileges hands over /dev/fd/N: a usage error.
        assert_eq!(check(Path::new("/dev/fd/3"), true).unwrap_err().code, USAGE);
    }
}
