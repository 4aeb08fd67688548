//! Mount options → fuser configuration, and the mount's read-ahead.

use fuser::{Config, SessionACL};

/// A mount's configuration (fuser's, which the mount lifecycle hands to
/// its session) and its options.
pub use fuser::{Config as MountConfig, MountOption};
use std::path::Path;

/// What `mount -o` and the thread count ask for.
#[derive(Debug, Clone, Default)]
pub struct MountOptions {
    /// Read-only mount.
    pub read_only: bool,
    /// Let other users in (`allow_other`).
    pub allow_other: bool,
    /// Have the kernel check permissions (`default_permissions`); always on
    /// with `allow_other`.
    pub default_permissions: bool,
    /// Options passed to the kernel as they are (e.g. `noatime`, `nosuid`).
    pub other: Vec<String>,
    /// FUSE worker threads.
    pub threads: usize,
    /// The mount's source in the mount table (`fsname=`; default: CIPHERDIR).
    pub fsname: Option<String>,
}

impl MountOptions {
    /// Parse a comma-separated `-o` list into `self`.
    pub fn parse_o(&mut self, list: &str) -> Result<(), String> {
        for o in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match o {
                "ro" => self.read_only = true,
                "rw" => self.read_only = false,
                "allow_other" => self.allow_other = true,
                "default_permissions" => self.default_permissions = true,
                "nosuid" | "suid" | "nodev" | "dev" | "noexec" | "exec" | "noatime" | "atime" | "sync" | "async"
                | "dirsync" => self.other.push(o.to_string()),
                _ => return Err(format!("unknown mount option '{o}'")),
            }
        }
        Ok(())
    }
}

/// The fuser configuration for a volume at `cipherdir`.
pub fn mount_config(o: &MountOptions, cipherdir: &Path) -> Config {
    let mut opts = vec![
        MountOption::FSName(
            o.fsname
                .clone()
                .unwrap_or_else(|| cipherdir.to_string_lossy().into_owned())
                .replace(',', "_"),
        ),
        MountOption::Subtype("warpfs".into()),
    ];
    if o.allow_other || o.default_permissions {
        // Other users get in: the kernel checks their permissions against
        // the attributes we report, as for any local file system.
        opts.push(MountOption::DefaultPermissions);
    }
    // Without `allow_other` only the user the daemon runs as gets in (the
    // kernel refuses everyone else, root included), and the backing file
    // system checks each call as that user against the same mode bits, so
    // the kernel's own check would only repeat it, at a price: it refreshes
    // a directory's attributes (a GETATTR round trip) before every create,
    // unlink or rename in a directory just changed. `access` answers
    // access(2) and chdir from the backing entry (docs/decisions/
    // 0008-default-permissions-only-with-allow-other.md).
    opts.push(if o.read_only { MountOption::RO } else { MountOption::RW });
    for x in &o.other {
        opts.push(match x.as_str() {
            "nosuid" => MountOption::NoSuid,
            "suid" => MountOption::Suid,
            "nodev" => MountOption::NoDev,
            "dev" => MountOption::Dev,
            "noexec" => MountOption::NoExec,
            "exec" => MountOption::Exec,
            "noatime" => MountOption::NoAtime,
            "atime" => MountOption::Atime,
            "sync" => MountOption::Sync,
            "async" => MountOption::Async,
            _ => MountOption::DirSync,
        });
    }
    let mut c = Config::default();
    c.mount_options = opts;
    c.acl = if o.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    c.n_threads = Some(o.threads.max(1));
    c.clone_fd = dev_clone_supported();
    c
}

/// `FUSE_DEV_IOC_CLONE`: `_IOR(229, 0, uint32_t)`, the same number on
/// every Linux architecture.
const FUSE_DEV_IOC_CLONE: u32 = 0x8004_e500;

/// Whether /dev/fuse takes `FUSE_DEV_IOC_CLONE` (each FUSE thread reads
/// its own descriptor): asked of two fresh descriptors, a kernel that has
/// it refuses the clone of one not mounted yet (EINVAL, EPERM); where the
/// ioctl itself is missing (ENOTTY: a kernel before 4.5; ENOSYS: qemu-user,
/// which passes no ioctl it does not know, docs/decisions/0086) the
/// threads share the one descriptor, as a mount dropping to a user does.
/// Without /dev/fuse here, nothing is known: clone, as before.
pub fn dev_clone_supported() -> bool {
    let mut rw = std::fs::OpenOptions::new();
    rw.read(true).write(true);
    let (Ok(a), Ok(b)) = (
        warpfs_backing::host::open_with("/dev/fuse", &rw),
        warpfs_backing::host::open_with("/dev/fuse", &rw),
    ) else {
        return true;
    };
    let mut src = std::os::fd::AsRawFd::as_raw_fd(&a) as u32;
    // SAFETY: an ioctl on our own descriptor with a pointer to a u32 that
    // outlives the call, as FUSE_DEV_IOC_CLONE reads it.
    let r = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&b), FUSE_DEV_IOC_CLONE as _, &mut src) };
    let missing = r != 0
        && matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOTTY | libc::ENOSYS)
        );
    if missing {
        tracing::info!("/dev/fuse does not take FUSE_DEV_IOC_CLONE here: the FUSE threads share one descriptor");
    }
    !missing
}

/// Most dirty page cache the mount may hold, in bytes, before the kernel
/// throttles writers: 128 MiB, but no more than 1/64 of RAM. The kernel's
/// own limit for a FUSE mount is 1% of its dirty threshold (about 40 MiB
/// with 23 GiB), and writers then sleep in `balance_dirty_pages` while the
/// daemon has CPU to spare (docs/decisions/0004).
const MAX_DIRTY: u64 = 128 << 20;

/// Tune the mount's bdi: read-ahead to 1 MiB so the kernel sends 1 MiB
/// reads (the default 128 KiB caps FUSE reads), and the dirty limit up to
/// [`MAX_DIRTY`] (never down). Best effort: needs root (and Linux 6.2 for
/// `max_bytes`); failure only costs speed. The device number comes from
/// /proc/self/mountinfo: a stat of the mountpoint would be a FUSE request
/// that nobody serves yet.
pub fn tune_bdi(mountpoint: &Path) {
    let Ok(mp) = warpfs_backing::host::canonicalize(mountpoint) else {
        return;
    };
    let Some(dev) = super::mountinfo::read().and_then(|info| super::mountinfo::device_at(&info, &mp)) else {
        return;
    };
    let set = |name: &str, value: String| {
        let p = format!("/sys/class/bdi/{dev}/{name}");
        if let Err(e) = warpfs_backing::host::write(&p, value) {
            tracing::debug!("could not set {p}: {e}");
        }
    };
    set("read_ahead_kb", "1024".into());
    let ram = warpfs_backing::host::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| mem_total(&m));
    let now = warpfs_backing::host::read_to_string(format!("/sys/class/bdi/{dev}/max_bytes"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    if let (Some(ram), Some(now)) = (ram, now) {
        let want = MAX_DIRTY.min(ram / 64);
        if want > now {
            set("max_bytes", want.to_string());
        }
    }
}

/// MemTotal of a /proc/meminfo text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let kb = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    kb.trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?
        .checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_options_and_refuses_unknown() {
        let mut o = MountOptions::default();
        o.parse_o("ro,allow_other,noatime").unwrap();
        assert!(o.read_only && o.allow_other);
        assert_eq!(o.other, vec!["noatime"]);
        assert!(o.parse_o("bogus").is_err());
    }

    #[test]
    fn kernel_permission_checks_only_when_others_get_in_or_asked() {
        let dp = |list: &str| {
            let mut o = MountOptions::default();
            o.parse_o(list).unwrap();
            mount_config(&o, Path::new("/c"))
                .mount_options
                .contains(&MountOption::DefaultPermissions)
        };
        assert!(!dp(""));
        assert!(!dp("ro,noatime"));
        assert!(dp("allow_other"));
        assert!(dp("default_permissions"));
    }

    #[test]
    fn reads_mem_total() {
        let m = "MemTotal:       24297116 kB\nMemFree:        21000000 kB\n";
        assert_eq!(mem_total(m), Some(24297116 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: lots kB\n"), None);
        assert_eq!(mem_total("MemTotal: 99999999999999999999 kB\n"), None);
    }
}
