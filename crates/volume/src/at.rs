//! Backing locations for the `*at` system calls, so that backing paths
//! longer than PATH_MAX work. Encrypted names are longer than plaintext
//! ones, so a legal plaintext path can map to a backing path the kernel
//! refuses (ENAMETOOLONG). A backing directory whose path leaves no room for
//! one more name is opened (`O_PATH`, walked in pieces shorter than
//! PATH_MAX) and its entries are addressed relative to that descriptor;
//! shorter paths keep their absolute path with `AT_FDCWD` (the same calls,
//! no extra open).

use crate::error::{Error, Result};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Longest backing path given to the kernel whole (PATH_MAX counts the NUL).
const PATH_MAX: usize = libc::PATH_MAX as usize - 1;
/// Longest backing file name (as on ext4/tmpfs).
const NAME_MAX: usize = 255;
/// Length of the pieces a long directory path is opened in.
const PIECE: usize = 2048;

/// The errno of the last failed libc call.
pub(crate) fn errno() -> Error {
    Error(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

fn cstring(b: &[u8]) -> Result<CString> {
    CString::new(b).map_err(|_| Error::EINVAL)
}

/// `openat(dirfd, name, O_PATH | O_DIRECTORY | extra)`.
fn open_path(dirfd: RawFd, name: &[u8], extra: libc::c_int) -> Result<OwnedFd> {
    let c = cstring(name)?;
    // SAFETY: valid C string; the flags open no file contents.
    let fd = unsafe {
        libc::openat(
            dirfd,
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | extra,
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open the directory at absolute path `abs` of any length: one piece of
/// fewer than PATH_MAX bytes at a time, each relative to the last.
fn open_long(abs: &[u8]) -> Result<OwnedFd> {
    let mut fd: Option<OwnedFd> = None;
    let mut rest = abs;
    loop {
        let (piece, tail) = if rest.len() < PIECE {
            (rest, &rest[rest.len()..])
        } else {
            // Cut at the last '/' inside the piece (names are at most
            // NAME_MAX bytes, so there is one).
            let cut = rest[..PIECE]
                .iter()
                .rposition(|&b| b == b'/')
                .filter(|&i| i > 0)
                .ok_or(Error::ENAMETOOLONG)?;
            (&rest[..cut], &rest[cut + 1..])
        };
        let dirfd = fd.as_ref().map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
        fd = Some(open_path(dirfd, piece, 0)?);
        if tail.is_empty() {
            return fd.ok_or(Error::EINVAL);
        }
        rest = tail;
    }
}

/// Whether an entry of a directory at a path of `len` bytes might not be
/// reachable by its absolute path.
fn needs_fd(len: usize) -> bool {
    len + 1 + NAME_MAX > PATH_MAX
}

/// A backing directory: its absolute path, and a descriptor when that path
/// is too long to name its entries by absolute path or when the directory
/// was opened ahead ([`Dir::opened`], the volume's `DirFds`).
#[derive(Debug)]
pub(crate) struct Dir {
    abs: PathBuf,
    fd: Option<Arc<OwnedFd>>,
}

impl Dir {
    /// The directory at absolute path `abs` (opened only when long; a short
    /// one is not checked for existence here).
    pub(crate) fn open(abs: PathBuf) -> Result<Dir> {
        let fd = if needs_fd(abs.as_os_str().len()) {
            Some(Arc::new(open_long(abs.as_os_str().as_bytes())?))
        } else {
            None
        };
        Ok(Dir { abs, fd })
    }

    /// The directory at absolute path `abs` (any length) opened now
    /// (`O_PATH`, not following a symlink at its last name), so that its
    /// entries are named relative to it: one name looked up per call
    /// instead of the whole path.
    pub(crate) fn opened(abs: PathBuf) -> Result<Dir> {
        let fd = if needs_fd(abs.as_os_str().len()) {
            open_long(abs.as_os_str().as_bytes())?
        } else {
            open_path(libc::AT_FDCWD, abs.as_os_str().as_bytes(), libc::O_NOFOLLOW)?
        };
        Ok(Dir {
            abs,
            fd: Some(Arc::new(fd)),
        })
    }

    /// Another handle on the same directory (sharing its descriptor).
    pub(crate) fn share(&self) -> Dir {
        Dir {
            abs: self.abs.clone(),
            fd: self.fd.clone(),
        }
    }

    /// Whether the directory is reached through a descriptor.
    #[cfg(test)]
    pub(crate) fn has_fd(&self) -> bool {
        self.fd.is_some()
    }

    /// The subdirectory `name` (not following a symlink there).
    pub(crate) fn child(&self, name: &OsStr) -> Result<Dir> {
        let abs = self.abs.join(name);
        let fd = match &self.fd {
            Some(fd) => Some(Arc::new(open_path(fd.as_raw_fd(), name.as_bytes(), libc::O_NOFOLLOW)?)),
            None if needs_fd(abs.as_os_str().len()) => Some(Arc::new(open_long(abs.as_os_str().as_bytes())?)),
            None => None,
        };
        Ok(Dir { abs, fd })
    }

    /// The entry `name` of this directory.
    pub(crate) fn entry<'a>(&'a self, name: &'a OsStr) -> Loc<'a> {
        Loc { dir: self, name }
    }

    /// The directory's descriptor, where its path is too long to use.
    pub(crate) fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// The absolute path (for messages; may be longer than PATH_MAX).
    pub(crate) fn path(&self) -> &Path {
        &self.abs
    }

    /// lstat of the directory itself.
    pub(crate) fn stat(&self) -> Result<libc::stat> {
        match &self.fd {
            Some(fd) => crate::sys::fstat(&**fd),
            None => crate::sys::lstat_path(&self.abs),
        }
    }

    /// Open the directory itself for reading (listing, fsync).
    pub(crate) fn reopen(&self) -> Result<std::fs::File> {
        let (dirfd, c) = match &self.fd {
            Some(fd) => (fd.as_raw_fd(), cstring(b".")?),
            None => (libc::AT_FDCWD, cstring(self.abs.as_os_str().as_bytes())?),
        };
        // SAFETY: valid C string.
        let fd = unsafe { libc::openat(dirfd, c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: a new descriptor owned by nobody else.
        Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The directory's entries (without `.` and `..`), in the order the
    /// backing file system gives them.
    pub(crate) fn list(&self) -> Result<Vec<RawEntry>> {
        let f = self.reopen()?;
        let fd = std::os::fd::IntoRawFd::into_raw_fd(f);
        // SAFETY: `fd` is an open directory; fdopendir takes it over (closed by closedir).
        let d = unsafe { libc::fdopendir(fd) };
        if d.is_null() {
            let e = errno();
            // SAFETY: fdopendir failed, so `fd` is still ours to close.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let mut out = Vec::new();
        let res = loop {
            // SAFETY: errno is thread-local; readdir tells end from error by it.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: `d` is an open directory stream used by this thread only.
            let e = unsafe { libc::readdir64(d) };
            if e.is_null() {
                let n = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                break if n == 0 { Ok(()) } else { Err(Error(n)) };
            }
            // SAFETY: readdir returned a valid entry with a NUL-terminated name.
            let (name, ino, kind) = unsafe {
                let e = &*e;
                (
                    std::ffi::CStr::from_ptr(e.d_name.as_ptr()).to_bytes(),
                    e.d_ino,
                    e.d_type,
                )
            };
            if name != b"." && name != b".." {
                out.push(RawEntry {
                    name: OsString::from_vec(name.to_vec()),
                    ino,
                    d_type: kind,
                });
            }
        };
        // SAFETY: `d` is open and not used after this.
        unsafe { libc::closedir(d) };
        res.map(|()| out)
    }
}

/// One entry of [`Dir::list`].
#[derive(Debug, Clone)]
pub(crate) struct RawEntry {
    /// Backing file name.
    pub name: OsString,
    /// Backing inode number.
    pub ino: u64,
    /// `DT_*` type (`DT_UNKNOWN` when the file system does not say).
    pub d_type: u8,
}

/// An entry of a backing [`Dir`], for the `*at` calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loc<'a> {
    dir: &'a Dir,
    name: &'a OsStr,
}

impl Loc<'_> {
    /// Directory descriptor and name for an `*at` call.
    pub(crate) fn at(&self) -> Result<(RawFd, CString)> {
        match &self.dir.fd {
            Some(fd) => Ok((fd.as_raw_fd(), cstring(self.name.as_bytes())?)),
            None => Ok((libc::AT_FDCWD, cstring(self.shown().as_os_str().as_bytes())?)),
        }
    }

    /// The entry's name in its directory.
    pub(crate) fn name_bytes(&self) -> &[u8] {
        self.name.as_bytes()
    }

    /// A path for calls without an `*at` form (the xattr calls before
    /// Linux 6.13): the absolute path, or the entry under the directory's
    /// descriptor in /proc/self/fd when that path is too long.
    pub(crate) fn call_path(&self) -> PathBuf {
        match &self.dir.fd {
            Some(_) if !needs_fd(self.dir.abs.as_os_str().len()) => self.shown(),
            Some(fd) => Path::new("/proc/self/fd")
                .join(fd.as_raw_fd().to_string())
                .join(self.name),
            None => self.shown(),
        }
    }

    /// The absolute path (for messages; may be longer than PATH_MAX).
    pub(crate) fn shown(&self) -> PathBuf {
        self.dir.abs.join(self.name)
    }

    /// The entry as a directory.
    pub(crate) fn as_dir(&self) -> Result<Dir> {
        self.dir.child(self.name)
    }

    /// The directory holding the entry.
    pub(crate) fn parent(&self) -> &Dir {
        self.dir
    }
}

/// Open the directory at path `p` (any length) as an `O_PATH` descriptor.
pub(crate) fn open_dir_path(p: &[u8]) -> Result<OwnedFd> {
    open_long(p)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tree deeper than PATH_MAX under a new temporary directory:
    /// (its root, the absolute path of its deepest directory).
    pub(crate) fn deep_tree() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let name = "d".repeat(200);
        let mut d = Dir::open(t.path().to_path_buf()).unwrap();
        while d.path().as_os_str().len() < 2 * PATH_MAX {
            crate::sys::mkdir(&d.entry(OsStr::new(&name)), 0o755).unwrap();
            d = d.child(OsStr::new(&name)).unwrap();
        }
        let p = d.path().to_path_buf();
        (t, p)
    }

    #[test]
    fn entries_past_path_max_are_reached_through_a_descriptor() {
        let (_t, deep) = deep_tree();
        assert!(deep.as_os_str().len() > PATH_MAX);
        // The plain path is refused by the kernel ...
        assert_eq!(
            std::fs::create_dir(deep.join("x")).unwrap_err().raw_os_error(),
            Some(libc::ENAMETOOLONG)
        );
        // ... the same directory opened in pieces is not.
        let d = Dir::open(deep.clone()).unwrap();
        assert!(d.fd.is_some());
        let f = d.entry(OsStr::new("f"));
        let file = crate::sys::open(&f, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o600).unwrap();
        drop(file);
        assert_eq!(crate::sys::lstat(&f).unwrap().st_mode & libc::S_IFMT, libc::S_IFREG);
        crate::sys::mkdir(&d.entry(OsStr::new("sub")), 0o700).unwrap();
        let sub = d.child(OsStr::new("sub")).unwrap();
        assert_eq!(sub.stat().unwrap().st_mode & libc::S_IFMT, libc::S_IFDIR);
        let mut names: Vec<_> = d.list().unwrap().into_iter().map(|e| e.name).collect();
        names.sort();
        assert_eq!(names, [OsString::from("f"), OsString::from("sub")]);
        crate::sys::unlink(&f).unwrap();
        crate::sys::rmdir(&d.entry(OsStr::new("sub"))).unwrap();
        assert!(d.list().unwrap().is_empty());
    }

    #[test]
    fn short_paths_are_used_whole() {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open(t.path().to_path_buf()).unwrap();
        assert!(d.fd.is_none());
        let (fd, c) = d.entry(OsStr::new("x")).at().unwrap();
        assert_eq!(fd, libc::AT_FDCWD);
        assert_eq!(c.as_bytes(), t.path().join("x").as_os_str().as_bytes());
    }

    #[test]
    fn a_missing_long_directory_is_an_error() {
        let (_t, deep) = deep_tree();
        assert_eq!(
            Dir::open(deep.join("missing").join("x".repeat(100))).unwrap_err(),
            Error(libc::ENOENT)
        );
        let d = Dir::open(deep).unwrap();
        assert_eq!(d.child(OsStr::new("missing")).unwrap_err(), Error(libc::ENOENT));
    }
}
