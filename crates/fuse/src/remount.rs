//! `mount -o remount,...` of a live mount (mount(8) hands a remount to the
//! helper too): the kernel's flags changed in place, nothing else. Flags
//! the options do not name keep their current value, so `remount,ro`
//! leaves `nosuid` and `nodev` on.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `f_type` of a FUSE super block.
const FUSE_SUPER_MAGIC: libc::__fsword_t = 0x6573_5546;

/// The per-mount and super block flags a remount may change (`statvfs`'s
/// `ST_*` bits are the `MS_*` ones).
const CHANGEABLE: libc::c_ulong = libc::MS_RDONLY
    | libc::MS_NOSUID
    | libc::MS_NODEV
    | libc::MS_NOEXEC
    | libc::MS_SYNCHRONOUS
    | libc::MS_NOATIME
    | libc::MS_NODIRATIME
    | libc::MS_RELATIME;

/// The flags `opts` (the kernel's options of an `-o` list) make of `now`.
/// Options that cannot change on a live mount (`allow_other`,
/// `default_permissions`) are left as they are.
pub(crate) fn flags_for(now: libc::c_ulong, opts: &str) -> libc::c_ulong {
    let mut f = now & CHANGEABLE;
    for o in opts.split(',').map(str::trim) {
        let (set, bit) = match o {
            "ro" => (true, libc::MS_RDONLY),
            "rw" => (false, libc::MS_RDONLY),
            "nosuid" => (true, libc::MS_NOSUID),
            "suid" => (false, libc::MS_NOSUID),
            "nodev" => (true, libc::MS_NODEV),
            "dev" => (false, libc::MS_NODEV),
            "noexec" => (true, libc::MS_NOEXEC),
            "exec" => (false, libc::MS_NOEXEC),
            "noatime" => (true, libc::MS_NOATIME),
            "atime" => (false, libc::MS_NOATIME),
            "sync" => (true, libc::MS_SYNCHRONOUS),
            "async" => (false, libc::MS_SYNCHRONOUS),
            "dirsync" => (true, libc::MS_DIRSYNC),
            _ => continue,
        };
        if set {
            f |= bit;
        } else {
            f &= !bit;
        }
    }
    f
}

/// Remount the FUSE mount at `mp` with the kernel options `opts`.
pub fn remount(mp: &Path, opts: &str) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let c = CString::new(mp.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // The mount's root, for its file system type and flags.
    let root = warpfs_backing::host::open_with(
        mp,
        std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY),
    )?;
    // SAFETY: `root` is an open descriptor; `st` and `vfs` are written by the calls.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(root.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if st.f_type != FUSE_SUPER_MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a FUSE mount", mp.display()),
        ));
    }
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatvfs(root.as_raw_fd(), &mut vfs) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = libc::MS_REMOUNT | flags_for(vfs.f_flag as libc::c_ulong, opts);
    // SAFETY: `c` is a valid path; no source, type or data for a remount.
    let r = unsafe { libc::mount(std::ptr::null(), c.as_ptr(), std::ptr::null(), flags, std::ptr::null()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_flags_change_and_the_rest_stay() {
        let now = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RELATIME | 0x20; // 0x20: ST_VALID
        let ro = flags_for(now, "ro");
        assert_eq!(
            ro,
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RELATIME
        );
        assert_eq!(flags_for(ro, "rw,allow_other"), now & !0x20);
        assert_eq!(flags_for(now, "dev,noexec,noatime") & libc::MS_NODEV, 0);
        assert_ne!(flags_for(now, "dev,noexec,noatime") & libc::MS_NOEXEC, 0);
        assert_ne!(flags_for(now, "sync,dirsync") & libc::MS_DIRSYNC, 0);
    }
}
