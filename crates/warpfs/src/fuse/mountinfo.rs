//! Reading /proc/self/mountinfo: which device is mounted at a path. The
//! daemon asks this file, never the mountpoint (a stat there would be a FUSE
//! request to itself, which nobody may be serving).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The mountinfo text of this process's mount namespace.
pub(crate) fn read() -> Option<String> {
    warpfs_backing::host::read_to_string("/proc/self/mountinfo").ok()
}

/// The "major:minor" device of the topmost mount at `mountpoint`.
pub(crate) fn device_at(mountinfo: &str, mountpoint: &Path) -> Option<String> {
    entries(mountinfo)
        .filter(|(_, at)| at.as_slice() == mountpoint.as_os_str().as_bytes())
        .map(|(dev, _)| dev.to_string())
        .next_back()
}

/// Whether device `dev` is mounted at `mountpoint` (at any depth of the
/// stack there).
pub(crate) fn is_mounted(mountinfo: &str, mountpoint: &Path, dev: &str) -> bool {
    entries(mountinfo).any(|(d, at)| d == dev && at.as_slice() == mountpoint.as_os_str().as_bytes())
}

/// (device, mount point) of each well-formed line; others are skipped.
fn entries(mountinfo: &str) -> impl DoubleEndedIterator<Item = (&str, Vec<u8>)> {
    mountinfo.lines().filter_map(|l| {
        let mut f = l.split(' ');
        let dev = f.nth(2)?;
        let at = f.nth(1)?;
        (dev.contains(':') && at.starts_with('/')).then(|| (dev, unescape(at)))
    })
}

/// Undo the kernel's octal escapes (`\040` for a space, `\011`, `\012`,
/// `\134`) in a mountinfo path.
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
    fn unescapes_octal_and_keeps_what_is_not_an_escape() {
        assert_eq!(unescape("/x\\040y\\011z\\012w\\134v"), b"/x y\tz\nw\\v");
        assert_eq!(unescape("/x\\04"), b"/x\\04");
        assert_eq!(unescape("/x\\9999"), b"/x\\9999");
        assert_eq!(unescape("/x\\400"), b"/x\\400");
        assert_eq!(unescape("\\"), b"\\");
    }
}
