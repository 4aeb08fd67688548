//! The volume's attribute operations ([`crate::Attr`] is the type):
//! getattr with plaintext sizes, chmod, chown, utimens,
//! truncate, statfs.

use crate::attr::{Attr, Kind};
use crate::error::{Error, Result};
use crate::volume::Volume;
use std::path::Path;
use warpfs_backing::Loc;
use warpfs_content::{plain_size_of, CipherFile};

pub use warpfs_backing::TimeSpec;

/// File-system statistics (statvfs of the backing directory).
#[derive(Debug, Clone, Copy)]
pub struct StatFs {
    /// Total blocks.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Blocks available to unprivileged users.
    pub bavail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Block size.
    pub bsize: u32,
    /// Longest plaintext name.
    pub namelen: u32,
    /// Fragment size.
    pub frsize: u32,
}

impl Volume {
    /// Attributes of a backing entry.
    pub(crate) fn stat_at(&self, p: &Loc) -> Result<Attr> {
        let st = warpfs_backing::lstat(p)?;
        self.attr_of(&st, Some(p))
    }

    fn attr_of(&self, st: &libc::stat, p: Option<&Loc>) -> Result<Attr> {
        let mut a = Attr::from_stat(st).ok_or(Error::EIO)?;
        match a.kind {
            Kind::File => {
                a.size = match self.files.get(a.dev, a.ino) {
                    Some(f) => f.size(),
                    None => plain_size_of(self.mode, st.st_size as u64),
                };
            }
            Kind::Symlink => {
                if let Some(p) = p {
                    a.size = self.readlink_at(p).map(|t| t.len() as u64).unwrap_or(0);
                }
            }
            _ => {}
        }
        Ok(a)
    }

    /// Attributes of the entry at `path`.
    pub fn getattr(&self, path: &Path) -> Result<Attr> {
        let (d, n) = self.at(path)?;
        self.stat_at(&d.entry(&n))
    }

    /// Attributes of the entries `cnames` (backing names) of directory
    /// `dir`, the directory resolved once (a listing with attributes); an
    /// entry gone since it was listed (or in a directory gone) gives its
    /// error.
    pub fn getattrs_in<'a>(
        &'a self,
        dir: &Path,
        cnames: impl Iterator<Item = &'a str> + 'a,
    ) -> impl Iterator<Item = Result<Attr>> + 'a {
        let d = self.dir(dir);
        cnames.map(move |c| match &d {
            Ok(d) => self.stat_at(&d.entry(c.as_ref())),
            Err(e) => Err(*e),
        })
    }

    /// Attributes through an open file (works after unlink).
    pub fn getattr_open(&self, f: &CipherFile) -> Result<Attr> {
        let st = warpfs_backing::fstat(f.backing())?;
        let mut a = Attr::from_stat(&st).ok_or(Error::EIO)?;
        a.size = f.size();
        Ok(a)
    }

    /// The backing directory `path`, held open: a directory handle keeps
    /// it, so that its attributes still answer ([`getattr_dir`](Self::getattr_dir))
    /// once it was removed or renamed over.
    pub fn open_dir(&self, path: &Path) -> Result<warpfs_backing::Dir> {
        self.dir(path)
    }

    /// Attributes of a directory held open (no links left once removed).
    pub fn getattr_dir(&self, d: &warpfs_backing::Dir) -> Result<Attr> {
        let st = d.stat()?;
        self.attr_of(&st, None)
    }

    /// access(2) for the user the daemon runs as, answered by the backing
    /// entry (whose mode bits and owner are the file's); `W_OK` on a
    /// read-only volume is EROFS.
    pub fn access(&self, path: &Path, mask: i32) -> Result<()> {
        if mask & libc::W_OK != 0 {
            self.writable()?;
        }
        let (d, n) = self.at(path)?;
        warpfs_backing::access(&d.entry(&n), mask)
    }

    /// chmod.
    pub fn chmod(&self, path: &Path, mode: u32) -> Result<()> {
        self.writable()?;
        let (d, n) = self.at(path)?;
        warpfs_backing::chmod(&d.entry(&n), mode & 0o7777)
    }

    /// Clear set-user-ID, and set-group-ID when the group may execute, of
    /// the file at `path`, as the kernel does to a file written or
    /// truncated by a caller without CAP_FSETID; under
    /// FUSE_HANDLE_KILLPRIV_V2 that is the daemon's job. Whether the mode
    /// changed.
    pub fn kill_suidgid(&self, path: &Path) -> Result<bool> {
        let a = self.getattr(path)?;
        match killed_mode(a.kind, a.perm.into()) {
            Some(m) => self.chmod(path, m).map(|()| true),
            None => Ok(false),
        }
    }

    /// [`kill_suidgid`](Self::kill_suidgid) through an open file.
    pub fn kill_suidgid_open(&self, f: &CipherFile) -> Result<bool> {
        let a = self.getattr_open(f)?;
        match killed_mode(a.kind, a.perm.into()) {
            Some(m) => self.chmod_open(f, m).map(|()| true),
            None => Ok(false),
        }
    }

    /// fchmod through an open file.
    pub fn chmod_open(&self, f: &CipherFile, mode: u32) -> Result<()> {
        self.writable()?;
        use std::os::unix::fs::PermissionsExt;
        f.backing()
            .set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
        Ok(())
    }

    /// chown (None leaves an id unchanged).
    pub fn chown(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.writable()?;
        let (d, n) = self.at(path)?;
        warpfs_backing::lchown(&d.entry(&n), uid, gid)
    }

    /// fchown through an open file.
    pub fn chown_open(&self, f: &CipherFile, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.writable()?;
        std::os::unix::fs::fchown(f.backing(), uid, gid)?;
        Ok(())
    }

    /// utimensat (None leaves a time, Some(None) sets it to now).
    pub fn utimens(&self, path: &Path, atime: TimeSpec, mtime: TimeSpec) -> Result<()> {
        self.writable()?;
        let (d, n) = self.at(path)?;
        warpfs_backing::utimens(&d.entry(&n), atime, mtime)
    }

    /// futimens through an open file.
    pub fn utimens_open(&self, f: &CipherFile, atime: TimeSpec, mtime: TimeSpec) -> Result<()> {
        self.writable()?;
        warpfs_backing::futimens(f.backing(), atime, mtime)
    }

    /// Truncate the file at `path` to `size` plaintext bytes.
    pub fn truncate(&self, path: &Path, size: u64, label: String) -> Result<()> {
        self.writable()?;
        let f = self.open_file(path, libc::O_WRONLY, label)?;
        f.set_len(size)?;
        Ok(())
    }

    /// fsync of the backing directory at `path`.
    pub fn fsyncdir(&self, path: &Path) -> Result<()> {
        self.dir(path)?.reopen()?.sync_all()?;
        Ok(())
    }

    /// statfs of the backing file system, its blocks counted as the
    /// plaintext they hold: a large file takes `backing_len(mode, n) / n`
    /// backing bytes per plaintext byte (its nonce entries and pages), so
    /// a file of the size shown free fits (less its few header bytes).
    pub fn statfs(&self) -> Result<StatFs> {
        let s = self.root.top().statvfs()?;
        const N: u64 = 1 << 30;
        let backing = warpfs_content::layout::backing_len(self.mode(), N).max(N);
        let plain = |b: u64| (u128::from(b) * u128::from(N) / u128::from(backing)) as u64;
        Ok(StatFs {
            blocks: plain(s.f_blocks),
            bfree: plain(s.f_bfree),
            bavail: plain(s.f_bavail),
            files: s.f_files,
            ffree: s.f_ffree,
            bsize: s.f_bsize as u32,
            namelen: crate::names::NAME_MAX as u32,
            frsize: s.f_frsize as u32,
        })
    }
}

/// The permission bits of a regular file with `perm` once its
/// set-user-ID bit, and its set-group-ID bit if the group may execute,
/// are cleared (the VFS rule: a set-group-ID file the group may not
/// execute is a mandatory-locking candidate and keeps it); `None` when
/// nothing changes.
fn killed_mode(kind: Kind, perm: u32) -> Option<u32> {
    if kind != Kind::File {
        return None;
    }
    let mut m = perm & !libc::S_ISUID;
    if perm & libc::S_IXGRP != 0 {
        m &= !libc::S_ISGID;
    }
    (m != perm).then_some(m)
}

#[cfg(test)]
mod kill_tests {
    use super::killed_mode;
    use crate::attr::Kind;

    #[test]
    fn set_id_bits_are_killed_as_the_vfs_does() {
        assert_eq!(killed_mode(Kind::File, 0o4755), Some(0o755));
        assert_eq!(killed_mode(Kind::File, 0o6755), Some(0o755));
        assert_eq!(killed_mode(Kind::File, 0o2775), Some(0o775));
        // Set-group-ID without group execute stays (as on ext4).
        assert_eq!(killed_mode(Kind::File, 0o2745), None);
        assert_eq!(killed_mode(Kind::File, 0o6745), Some(0o2745));
        assert_eq!(killed_mode(Kind::File, 0o755), None);
        assert_eq!(killed_mode(Kind::File, 0o1777), None, "sticky is not a privilege");
        assert_eq!(killed_mode(Kind::Dir, 0o6775), None, "only regular files");
    }
}
