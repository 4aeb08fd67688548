//! A backing directory held open as an `O_PATH` descriptor reached beneath
//! CIPHERDIR ([`Dir`]), and an entry of one ([`Loc`]): every call on an
//! entry names it by one name relative to its directory's descriptor, so
//! the kernel never walks a path the storage could have changed.

use crate::beneath::{cstring, is_entry_name, open_subdir, owned};
use crate::errno::{check, Errno, Result};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// fstat(2) of an open descriptor.
pub fn fstat(fd: &impl std::os::fd::AsRawFd) -> Result<libc::stat> {
    // SAFETY: `stat` is plain old data; all zeros is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// A backing directory beneath CIPHERDIR: an `O_PATH` descriptor (it reads
/// nothing and never blocks) and its path for messages.
#[derive(Debug)]
pub struct Dir {
    fd: Arc<OwnedFd>,
    /// The directory's path (for messages only: never given to the kernel).
    shown: PathBuf,
}

impl Dir {
    pub(crate) fn new(fd: OwnedFd, shown: PathBuf) -> Dir {
        Dir {
            fd: Arc::new(fd),
            shown,
        }
    }

    /// Another handle on the same directory (sharing its descriptor; the
    /// same as `clone`).
    pub fn share(&self) -> Dir {
        Dir {
            fd: self.fd.clone(),
            shown: self.shown.clone(),
        }
    }

    /// The subdirectory `name` (one name; a symlink there is ELOOP, a file
    /// ENOTDIR).
    pub fn child(&self, name: &OsStr) -> Result<Dir> {
        if name.as_bytes() == b"." || !is_entry_name(name.as_bytes()) {
            return Err(Errno::EINVAL);
        }
        let fd = open_subdir(self.fd.as_raw_fd(), name.as_bytes())?;
        Ok(Dir::new(fd, self.shown.join(name)))
    }

    /// The entry `name` of this directory (`.` is the directory itself).
    pub fn entry<'a>(&'a self, name: &'a OsStr) -> Loc<'a> {
        Loc { dir: self, name }
    }

    /// The directory's descriptor (`O_PATH`).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The directory's path, for messages (may be longer than PATH_MAX).
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// fstat of the directory itself.
    pub fn stat(&self) -> Result<libc::stat> {
        fstat(&*self.fd)
    }

    /// Open the directory itself for reading (listing, fsync).
    pub fn reopen(&self) -> Result<std::fs::File> {
        let c = cstring(b".")?;
        // SAFETY: valid C string; a directory open never blocks.
        let fd = unsafe {
            libc::openat(
                self.fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        owned(fd).map(std::fs::File::from)
    }

    /// fsync the directory (after entries were made, renamed or removed in
    /// it); backing file systems that cannot fsync a directory (some FUSE
    /// and network ones say EINVAL or EOPNOTSUPP) are fine.
    pub fn sync(&self) -> Result<()> {
        match self.reopen()?.sync_all() {
            Err(e) if !matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)) => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// statvfs of the file system holding the directory.
    pub fn statvfs(&self) -> Result<libc::statvfs> {
        // SAFETY: `statvfs` is plain data; all zeros is a valid value.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and out-pointer.
        check(unsafe { libc::fstatvfs(self.fd(), &mut st) })?;
        Ok(st)
    }

    /// The directory's entries (without `.` and `..`), in the order the
    /// backing file system gives them.
    pub fn list(&self) -> Result<Vec<RawEntry>> {
        let fd = self.reopen()?.into_raw_fd();
        // SAFETY: `fd` is an open directory; fdopendir takes it over (closed by closedir).
        let d = unsafe { libc::fdopendir(fd) };
        if d.is_null() {
            let e = Errno::last();
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
                break if n == 0 { Ok(()) } else { Err(Errno(n)) };
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

impl Clone for Dir {
    fn clone(&self) -> Dir {
        self.share()
    }
}

/// One entry of [`Dir::list`].
#[derive(Debug, Clone)]
pub struct RawEntry {
    /// Backing file name.
    pub name: OsString,
    /// Backing inode number.
    pub ino: u64,
    /// `DT_*` type (`DT_UNKNOWN` when the file system does not say).
    pub d_type: u8,
}

/// An entry of a backing [`Dir`]: its directory's descriptor and one name.
#[derive(Debug, Clone, Copy)]
pub struct Loc<'a> {
    dir: &'a Dir,
    name: &'a OsStr,
}

impl Loc<'_> {
    /// Directory descriptor and name for an `*at` call; a name that is not
    /// one plain name (`..`, a `/` in it, empty) is refused.
    pub fn at(&self) -> Result<(RawFd, CString)> {
        if !is_entry_name(self.name.as_bytes()) {
            return Err(Errno::EINVAL);
        }
        Ok((self.dir.fd(), cstring(self.name.as_bytes())?))
    }

    /// The entry's name in its directory.
    pub fn name_bytes(&self) -> &[u8] {
        self.name.as_bytes()
    }

    /// The entry's name.
    pub fn name(&self) -> &OsStr {
        self.name
    }

    /// The entry's path, for messages (may be longer than PATH_MAX).
    pub fn shown(&self) -> PathBuf {
        self.dir.shown.join(self.name)
    }

    /// The entry as a directory.
    pub fn as_dir(&self) -> Result<Dir> {
        self.dir.child(self.name)
    }

    /// The directory holding the entry.
    pub fn parent(&self) -> &Dir {
        self.dir
    }
}
