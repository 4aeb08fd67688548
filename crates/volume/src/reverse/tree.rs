//! The plaintext tree of a reverse view, read beneath PLAINDIR only: every
//! path is relative to it and no symbolic link is followed on the way
//! (`beneath`), so a symlink swapped into the tree cannot make the daemon
//! read or list anything outside it.

use crate::beneath::{lstat_beneath, open_beneath};
use crate::error::{Error, Result};
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// PLAINDIR.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    root: PathBuf,
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
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// PLAINDIR's path.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// lstat of `rel` (empty: PLAINDIR itself).
    pub(crate) fn lstat(&self, rel: &[u8]) -> Result<libc::stat> {
        if rel.is_empty() {
            return crate::sys::lstat_path(&self.root);
        }
        Ok(lstat_beneath(&self.root, rel_path(rel))?)
    }

    fn open(&self, rel: &[u8], flags: i32) -> Result<File> {
        if rel.is_empty() {
            let c = CString::new(self.root.as_os_str().as_bytes()).map_err(|_| Error::EINVAL)?;
            // SAFETY: valid C string.
            let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(crate::at::errno());
            }
            // SAFETY: a new descriptor owned by nobody else.
            return Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        }
        Ok(open_beneath(&self.root, rel_path(rel), flags, 0)?)
    }

    /// Open the regular file `rel` for reading (never a FIFO or device:
    /// `O_NONBLOCK`, and the type is checked on the open descriptor).
    pub(crate) fn open_file(&self, rel: &[u8]) -> Result<(File, libc::stat)> {
        let f = self
            .open(rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOATIME)
            .or_else(|e| {
                // O_NOATIME needs ownership (or CAP_FOWNER).
                if e.0 == libc::EPERM {
                    self.open(rel, libc::O_RDONLY | libc::O_NONBLOCK)
                } else {
                    Err(e)
                }
            })?;
        let st = crate::sys::fstat(&f)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Error(libc::EINVAL));
        }
        Ok((f, st))
    }

    /// The target of the symlink `rel`.
    pub(crate) fn readlink(&self, rel: &[u8]) -> Result<Vec<u8>> {
        let (dir, name) = split(rel);
        let d = self.open(dir, libc::O_PATH | libc::O_DIRECTORY)?;
        let c = CString::new(name).map_err(|_| Error::EINVAL)?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
        // SAFETY: valid C string and a buffer of the length passed.
        let n = unsafe { libc::readlinkat(d.as_raw_fd(), c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        let n = crate::sys::check_len(n)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// The names in directory `rel` with their `DT_*` types, without `.`
    /// and `..`.
    pub(crate) fn list(&self, rel: &[u8]) -> Result<Vec<(OsString, u8, u64)>> {
        let f = self.open(rel, libc::O_RDONLY | libc::O_DIRECTORY)?;
        let fd = f.into_raw_fd();
        // SAFETY: `fd` is an open directory; fdopendir takes it over.
        let d = unsafe { libc::fdopendir(fd) };
        if d.is_null() {
            let e = crate::at::errno();
            // SAFETY: fdopendir failed, `fd` is still ours.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let mut out = Vec::new();
        let res = loop {
            // SAFETY: errno is thread-local; readdir tells end from error by it.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: `d` is an open stream used by this thread only.
            let e = unsafe { libc::readdir64(d) };
            if e.is_null() {
                let n = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                break if n == 0 { Ok(()) } else { Err(Error(n)) };
            }
            // SAFETY: a valid entry with a NUL-terminated name.
            let (name, kind, ino) = unsafe {
                let e = &*e;
                (CStr::from_ptr(e.d_name.as_ptr()).to_bytes(), e.d_type, e.d_ino)
            };
            if name != b"." && name != b".." {
                out.push((OsString::from_vec(name.to_vec()), kind, ino));
            }
        };
        // SAFETY: open, not used after this.
        unsafe { libc::closedir(d) };
        res.map(|()| out)
    }

    /// The entries of directory `rel` with their lstat (an entry that
    /// vanished meanwhile is left out).
    pub(crate) fn list_stat(&self, rel: &[u8]) -> Result<Vec<(OsString, libc::stat)>> {
        let d = self.open(rel, libc::O_PATH | libc::O_DIRECTORY)?;
        let names = self.list(rel)?;
        let mut out = Vec::with_capacity(names.len());
        for (name, _, _) in names {
            let c = CString::new(name.as_bytes()).map_err(|_| Error::EINVAL)?;
            // SAFETY: valid C string and out-pointer.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstatat(d.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0 {
                out.push((name, st));
            }
        }
        Ok(out)
    }

    /// statvfs of PLAINDIR.
    pub(crate) fn statvfs(&self) -> Result<libc::statvfs> {
        crate::sys::statvfs(&self.root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_leaves_the_root() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/f"), b"hello").unwrap();
        let t = Tree::new(d.path().to_owned());
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
