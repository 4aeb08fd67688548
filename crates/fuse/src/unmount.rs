//! Unmounting a mountpoint by its path, never through a symlink put in its
//! place: `umount2(UMOUNT_NOFOLLOW)` where allowed (root), else
//! `fusermount3 -u` (or `fusermount -u`), which does the same as the
//! mount's own user. Used by the idle watcher and the signal handler.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// `umount2(path, flags | UMOUNT_NOFOLLOW)`: a symlink at `path` (the
/// mountpoint, or a path someone swapped in for it) is not followed, and
/// the call fails on it (EINVAL: the link itself is no mountpoint).
fn umount2_nofollow(path: &Path, flags: libc::c_int) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags | libc::UMOUNT_NOFOLLOW) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Unmount `mp`; `lazy` detaches a busy mount (as `umount -l`) instead of
/// failing. As root the system call; where that is not allowed (EPERM) the
/// set-user-ID `fusermount3`, which unmounts only a FUSE mount of the
/// calling user.
pub fn unmount(mp: &Path, lazy: bool) -> io::Result<()> {
    let e = match umount2_nofollow(mp, if lazy { libc::MNT_DETACH } else { 0 }) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if e.raw_os_error() != Some(libc::EPERM) {
        return Err(e);
    }
    let mut last = e;
    for bin in ["fusermount3", "fusermount"] {
        let mut c = Command::new(bin);
        c.arg("-u");
        if lazy {
            c.arg("-z");
        }
        match c.arg("--").arg(mp).stdin(Stdio::null()).output() {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => {
                let msg = String::from_utf8_lossy(&o.stderr).trim().to_string();
                return Err(io::Error::other(format!(
                    "{bin} -u{}: {msg}",
                    if lazy { " -z" } else { "" }
                )));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounted_at(p: &Path) -> bool {
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        super::super::mountinfo::device_at(&info, p).is_some()
    }

    #[test]
    fn a_symlink_in_place_of_the_mountpoint_is_not_followed() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            warpfs_testkit::skip("not root: cannot mount a tmpfs");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        let target = root.join("other-mount");
        std::fs::create_dir(&target).unwrap();
        let c = CString::new(target.as_os_str().as_bytes()).unwrap();
        let fstype = CString::new("tmpfs").unwrap();
        // SAFETY: valid NUL-terminated strings; no data argument.
        let r = unsafe { libc::mount(fstype.as_ptr(), c.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
        if r != 0 {
            warpfs_testkit::skip(format!("cannot mount a tmpfs: {}", io::Error::last_os_error()));
            return;
        }
        // The mountpoint's path now names a symlink to another mount.
        let link = root.join("mnt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let plain = unmount(&link, false);
        let lazy = unmount(&link, true);
        let still = mounted_at(&target);
        let cleanup = umount2_nofollow(&target, libc::MNT_DETACH);
        assert!(
            plain.is_err() && lazy.is_err(),
            "unmount through a symlink: {plain:?}, {lazy:?}"
        );
        assert!(still, "the mount the symlink points at was unmounted");
        cleanup.unwrap();
        assert!(!mounted_at(&target));
    }
}
