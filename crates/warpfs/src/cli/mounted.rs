//! Whether a volume is mounted, and where: a FUSE entry of this process's
//! mount table (`fuse::mountinfo`) whose source is the canonical cipher
//! directory, which `warpfs mount` gives as the fsname. Asked by fsck,
//! rekey, info and name before they touch a volume.

use crate::fuse::mountinfo;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A mount of a volume.
#[derive(Debug, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub at: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// The mount point of a warpfs mount of `cipherdir`, if any.
pub fn mounted_at(cipherdir: &Path) -> Option<String> {
    mount_of(cipherdir).map(|m| m.at)
}

/// The first mount of `cipherdir` in the mount table, if any.
pub fn mount_of(cipherdir: &Path) -> Option<Mount> {
    let canon = warpfs_backing::host::canonicalize(cipherdir).ok()?;
    find(&mountinfo::read()?, canon.as_os_str().as_bytes())
}

/// The first FUSE mount in `table` (mountinfo text) whose source is
/// `want`, or `want` with its commas made `_` (as `warpfs mount` gives the
/// fsname). A root mount made by fuser shows type `fuse` (no subtype); any
/// FUSE mount whose source is this cipher dir counts.
fn find(table: &str, want: &[u8]) -> Option<Mount> {
    let want_alt: Vec<u8> = want.iter().map(|&c| if c == b',' { b'_' } else { c }).collect();
    mountinfo::entries(table)
        .filter(|e| e.fstype == "fuse" || e.fstype.starts_with("fuse.") || e.fstype.starts_with("fuseblk"))
        .find(|e| e.source == want || e.source == want_alt)
        .map(|e| Mount {
            at: String::from_utf8_lossy(&e.mount_point).into_owned(),
            read_only: e.read_only(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "36 35 98:0 / /srv rw - ext4 /srv/vol rw\n\
        40 36 0:61 / /mnt/a\\040b rw,nosuid shared:3 - fuse.warpfs /srv/my\\040vol rw,user_id=0\n\
        41 36 0:62 / /mnt/c ro - fuse /srv/x_y rw,user_id=0\n\
        42 36 0:63 / /mnt/d rw - fuseblk /srv/blk ro\n\
        43 36 0:64 / /mnt/e rw - fuse.warpfs /srv/my\\040vol rw\n";

    fn at(p: &str, ro: bool) -> Option<Mount> {
        Some(Mount {
            at: p.into(),
            read_only: ro,
        })
    }

    #[test]
    fn a_fuse_mount_whose_source_is_the_cipher_dir() {
        // The source unescaped; the first of two mounts of one volume.
        assert_eq!(find(TABLE, b"/srv/my vol"), at("/mnt/a b", false));
        // fuser's type without subtype, and `warpfs mount`'s comma-less fsname.
        assert_eq!(find(TABLE, b"/srv/x,y"), at("/mnt/c", true));
        assert_eq!(find(TABLE, b"/srv/blk"), at("/mnt/d", true));
    }

    #[test]
    fn no_other_file_system_and_no_other_source() {
        // An ext4 mount of that source is not a warpfs mount.
        assert_eq!(find(TABLE, b"/srv/vol"), None);
        assert_eq!(find(TABLE, b"/srv/my"), None);
        assert_eq!(find(TABLE, b"/srv/my\\040vol"), None);
        assert_eq!(find("", b"/srv/my vol"), None);
    }
}
