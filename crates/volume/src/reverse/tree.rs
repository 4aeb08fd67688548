//! The plaintext tree of a reverse view, read beneath PLAINDIR only,
//! through the backing-store door: every path is relative to PLAINDIR's
//! descriptor and no symbolic link is followed on the way, so a symlink
//! swapped into the tree cannot make the daemon read or list anything
//! outside it.

use crate::error::Result;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use warpfs_backing::{Dir, Expect, Root};

/// PLAINDIR, held open.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    root: Root,
}

fn rel_path(rel: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(rel))
}

/// `parent/name` of a relative path.
pub(crate) fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&[], rel),
    }
}

/// The path of `name` in the directory `dir` (empty: the root).
pub(crate) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        name.to_vec()
    } else {
        let mut v = Vec::with_capacity(dir.len() + 1 + name.len());
        v.extend_from_slice(dir);
        v.push(b'/');
        v.extend_from_slice(name);
        v
    }
}

impl Tree {
    /// PLAINDIR at `plaindir` (the user's own path).
    pub(crate) fn new(plaindir: &Path) -> Result<Self> {
        Ok(Self {
            root: Root::open(plaindir)?,
        })
    }

    /// PLAINDIR's path.
    pub(crate) fn root(&self) -> &Path {
        self.root.path()
    }

    /// lstat of `rel` (empty: PLAINDIR itself).
    pub(crate) fn lstat(&self, rel: &[u8]) -> Result<libc::stat> {
        self.root.lstat(rel_path(rel))
    }

    fn dir(&self, rel: &[u8]) -> Result<Dir> {
        self.root.dir(rel_path(rel))
    }

    /// Open the regular file `rel` for reading (never a FIFO or device,
    /// never through a symlink: the door checks its type before and after).
    pub(crate) fn open_file(&self, rel: &[u8]) -> Result<(File, libc::stat)> {
        let open = |flags| self.root.open_file(rel_path(rel), flags, 0, Expect::File);
        // O_NOATIME needs ownership (or CAP_FOWNER).
        let f = open(libc::O_RDONLY | libc::O_NOATIME).or_else(|e| {
            if e.0 == libc::EPERM {
                open(libc::O_RDONLY)
            } else {
                Err(e)
            }
        })?;
        let st = warpfs_backing::fstat(&f)?;
        Ok((f, st))
    }

    /// The target of the symlink `rel`.
    pub(crate) fn readlink(&self, rel: &[u8]) -> Result<Vec<u8>> {
        let (dir, name) = split(rel);
        let d = self.dir(dir)?;
        warpfs_backing::readlink(&d.entry(OsStr::from_bytes(name)))
    }

    /// The names in directory `rel` with their `DT_*` types and inode
    /// numbers, without `.` and `..`.
    pub(crate) fn list(&self, rel: &[u8]) -> Result<Vec<(OsString, u8, u64)>> {
        Ok(self
            .dir(rel)?
            .list()?
            .into_iter()
            .map(|e| (e.name, e.d_type, e.ino))
            .collect())
    }

    /// The entries of directory `rel` with their lstat (an entry that
    /// vanished meanwhile is left out).
    pub(crate) fn list_stat(&self, rel: &[u8]) -> Result<Vec<(OsString, libc::stat)>> {
        let d = self.dir(rel)?;
        let mut out = Vec::new();
        for e in d.list()? {
            if let Ok(st) = warpfs_backing::lstat(&d.entry(&e.name)) {
                out.push((e.name, st));
            }
        }
        Ok(out)
    }

    /// statvfs of PLAINDIR.
    pub(crate) fn statvfs(&self) -> Result<libc::statvfs> {
        self.root.top().statvfs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn never_leaves_the_root() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/f"), b"hello").unwrap();
        let t = Tree::new(d.path()).unwrap();
        assert!(t.open_file(b"link/secret").is_err());
        assert!(t.list(b"link").is_err());
        assert!(t.lstat(b"link/secret").is_err());
        assert_eq!(t.lstat(b"link").unwrap().st_mode & libc::S_IFMT, libc::S_IFLNK);
        assert_eq!(t.readlink(b"link").unwrap(), outside.path().as_os_str().as_bytes());
        let (_, st) = t.open_file(b"sub/f").unwrap();
        assert_eq!(st.st_size, 5);
        let mut names: Vec<_> = t.list(b"").unwrap().into_iter().map(|e| e.0).collect();
        names.sort();
        assert_eq!(names, ["link", "sub"]);
        assert!(t.open_file(b"sub").is_err());
        assert!(t.open_file(b"../x").is_err());
        assert_eq!(split(b"a/b/c"), (&b"a/b"[..], &b"c"[..]));
        assert_eq!(split(b"c"), (&b""[..], &b"c"[..]));
        assert_eq!(join(b"", b"c"), b"c");
        assert_eq!(join(b"a", b"c"), b"a/c");
    }
}
