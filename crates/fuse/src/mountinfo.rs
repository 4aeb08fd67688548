//! Reading /proc/self/mountinfo, the one parser of the mount table: which
//! device is mounted at a path (the daemon asks this file, never the
//! mountpoint: a stat there would be a FUSE request to itself, which nobody
//! may be serving), and each mount's type, source and options (the CLI's
//! "is this volume mounted, and where").

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The mountinfo text of this process's mount namespace.
pub fn read() -> Option<String> {
    warpfs_backing::host::read_to_string("/proc/self/mountinfo").ok()
}

/// The "major:minor" device of the topmost mount at `mountpoint`.
pub fn device_at(mountinfo: &str, mountpoint: &Path) -> Option<String> {
    entries(mountinfo)
        .filter(|e| e.mount_point == mountpoint.as_os_str().as_bytes())
        .map(|e| e.dev.to_string())
        .next_back()
}

/// Whether device `dev` is mounted at `mountpoint` (at any depth of the
/// stack there).
pub fn is_mounted(mountinfo: &str, mountpoint: &Path, dev: &str) -> bool {
    entries(mountinfo).any(|e| e.dev == dev && e.mount_point == mountpoint.as_os_str().as_bytes())
}

/// One mount of the table, its paths unescaped.
pub struct Entry<'a> {
    /// The device, "major:minor".
    pub dev: &'a str,
    /// Where it is mounted.
    pub mount_point: Vec<u8>,
    /// The mount's own options (`rw,nosuid,...`).
    pub mount_opts: &'a str,
    /// The file system type (`fuse.warpfs`, `fuse`, `ext4`, ...).
    pub fstype: &'a str,
    /// The mount source (a FUSE mount's fsname).
    pub source: Vec<u8>,
    /// The file system's (superblock's) options.
    pub super_opts: &'a str,
}

impl Entry<'_> {
    /// Read-only, by the mount's options or the file system's (as
    /// /proc/mounts shows `ro` for either).
    pub fn read_only(&self) -> bool {
        [self.mount_opts, self.super_opts]
            .iter()
            .any(|o| o.split(',').any(|x| x == "ro"))
    }
}

/// Each well-formed line of `mountinfo` (`ID PARENT MAJ:MIN ROOT MOUNTPOINT
/// OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTIONS`); others are skipped.
pub fn entries(mountinfo: &str) -> impl DoubleEndedIterator<Item = Entry<'_>> {
    mountinfo.lines().filter_map(|l| {
        let mut f = l.split(' ');
        let dev = f.nth(2)?;
        let at = f.nth(1)?;
        let mount_opts = f.next()?;
        f.find(|x| *x == "-")?;
        let (fstype, source, super_opts) = (f.next()?, f.next()?, f.next()?);
        (dev.contains(':') && at.starts_with('/')).then(|| Entry {
            dev,
            mount_point: unescape(at),
            mount_opts,
            fstype,
            source: unescape(source),
            super_opts,
        })
    })
}

/// Undo the kernel's octal escapes (`\040` for a space, `\011`, `\012`,
/// `\134`) in a mountinfo path or source.
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| (b'0'..=b'3').contains(&d[0]) && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "36 35 98:0 / /mnt rw - ext3 /dev/root rw\n\
        40 36 0:61 / /mnt rw - fuse.warpfs c rw\n\
        41 36 0:62 / /a\\040b\\134c rw - fuse.warpfs d rw\n\
        broken line\n\
        42 36\n";

    #[test]
    fn finds_the_topmost_mount_at_a_path() {
        assert_eq!(device_at(INFO, Path::new("/mnt")).as_deref(), Some("0:61"));
        assert_eq!(device_at(INFO, Path::new("/other")), None);
        assert_eq!(device_at(INFO, Path::new("/a b\\c")).as_deref(), Some("0:62"));
        assert_eq!(device_at("", Path::new("/mnt")), None);
    }

    #[test]
    fn a_device_is_mounted_only_where_its_entry_says() {
        assert!(is_mounted(INFO, Path::new("/mnt"), "0:61"));
        assert!(is_mounted(INFO, Path::new("/mnt"), "98:0"));
        assert!(!is_mounted(INFO, Path::new("/mnt"), "0:62"));
        assert!(!is_mounted(INFO, Path::new("/mn"), "0:61"));
        assert!(is_mounted(INFO, Path::new("/a b\\c"), "0:62"));
    }

    #[test]
    fn unescapes_each_octal_escape_the_kernel_writes() {
        assert_eq!(unescape("/a\\040b"), b"/a b");
        assert_eq!(unescape("/a\\011b"), b"/a\tb");
        assert_eq!(unescape("/a\\012b"), b"/a\nb");
        assert_eq!(unescape("/a\\134b"), b"/a\\b");
        assert_eq!(unescape("\\040\\040"), b"  ");
    }

    #[test]
    fn unescapes_octal_and_keeps_what_is_not_an_escape() {
        assert_eq!(unescape("/x\\040y\\011z\\012w\\134v"), b"/x y\tz\nw\\v");
        assert_eq!(unescape("/x\\04"), b"/x\\04");
        assert_eq!(unescape("/x\\9999"), b"/x\\9999");
        assert_eq!(unescape("/x\\400"), b"/x\\400");
        assert_eq!(unescape("\\"), b"\\");
        assert_eq!(unescape("/x\\777"), b"/x\\777");
    }

    #[test]
    fn an_entry_has_its_type_source_and_options_after_the_separator() {
        // Optional fields (shared:N, master:N) come before the " - ".
        let info = "50 36 0:70 / /m\\040n ro,nosuid shared:7 master:2 - fuse.warpfs /c\\040d rw,user_id=0\n\
            51 36 0:71 / /p rw - fuse /q ro,user_id=0\n\
            52 36 0:72 / /r rw - fuse.warpfs /s rw\n\
            53 36 0:73 / /t rw no separator here\n";
        let e: Vec<Entry> = entries(info).collect();
        assert_eq!(e.len(), 3);
        assert_eq!((e[0].dev, e[0].mount_point.as_slice()), ("0:70", &b"/m n"[..]));
        assert_eq!((e[0].fstype, e[0].source.as_slice()), ("fuse.warpfs", &b"/c d"[..]));
        assert_eq!((e[0].mount_opts, e[0].super_opts), ("ro,nosuid", "rw,user_id=0"));
        assert!(e[0].read_only(), "ro by the mount's options");
        assert!(e[1].read_only(), "ro by the file system's options");
        assert!(!e[2].read_only());
        assert_eq!(e[1].fstype, "fuse");
    }
}
