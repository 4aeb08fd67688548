//! Byte-range locks that hosts sharing one backing store take on a cipher
//! file to coordinate its summary (FORMAT.md 12.7): open-file-description
//! locks (`F_OFD_SETLK`), which network file systems that pass POSIX locks
//! between clients (GlusterFS, NFS) hold for every client alike, on two
//! reserved bytes far past any file's end.
//!
//! - [`WRITERS`]: held shared by every host writing the file under a
//!   whole-file marker, exclusive by the one that commits.
//! - [`ENTRY`]: held exclusive by a host while it reads the summary and
//!   puts the whole-file marker down, so two hosts starting at once do
//!   not both read the file clean.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// The byte whose lock says "writing under the whole-file marker".
pub const WRITERS: i64 = 1 << 62;
/// The byte whose lock serializes hosts putting the marker down.
pub const ENTRY: i64 = WRITERS + 1;

/// What a lock on a byte asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Others may hold it shared too.
    Shared,
    /// No one else holds it.
    Exclusive,
    /// Let it go.
    Unlock,
}

fn flock(byte: i64, kind: Kind) -> libc::flock {
    // SAFETY: flock is plain old data; all-zero is a valid value.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = match kind {
        Kind::Shared => libc::F_RDLCK,
        Kind::Exclusive => libc::F_WRLCK,
        Kind::Unlock => libc::F_UNLCK,
    } as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = byte as libc::off_t;
    l.l_len = 1;
    l
}

/// Take (`wait`: waiting for it) or change the lock on `byte` of `file`'s
/// open file description. `Ok(false)`: held by another description, and
/// not waited for.
pub fn set(file: &File, byte: i64, kind: Kind, wait: bool) -> io::Result<bool> {
    let l = flock(byte, kind);
    let cmd = if wait { libc::F_OFD_SETLKW } else { libc::F_OFD_SETLK };
    loop {
        // SAFETY: fcntl on an owned descriptor with a valid flock.
        if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &l) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) if !wait => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Whether an error from [`set`] says that the backing file system keeps no
/// such locks (then hosts cannot coordinate through it).
pub fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL) | Some(libc::ENOLCK) | Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> (tempfile::NamedTempFile, File, File) {
        let t = tempfile::NamedTempFile::new().unwrap();
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(t.path())
                .unwrap()
        };
        let (a, b) = (open(), open());
        (t, a, b)
    }

    #[test]
    fn shared_holders_keep_out_an_exclusive_one_until_both_let_go() {
        let (_t, a, b) = two();
        assert!(set(&a, WRITERS, Kind::Shared, false).unwrap());
        assert!(set(&b, WRITERS, Kind::Shared, false).unwrap());
        // Neither can make its shared lock exclusive while the other holds one.
        assert!(!set(&a, WRITERS, Kind::Exclusive, false).unwrap());
        assert!(!set(&b, WRITERS, Kind::Exclusive, false).unwrap());
        assert!(set(&b, WRITERS, Kind::Unlock, false).unwrap());
        assert!(set(&a, WRITERS, Kind::Exclusive, false).unwrap());
        // Now b cannot even share it, and the other byte is free.
        assert!(!set(&b, WRITERS, Kind::Shared, false).unwrap());
        assert!(set(&b, ENTRY, Kind::Exclusive, false).unwrap());
        assert!(!set(&a, ENTRY, Kind::Exclusive, false).unwrap());
        drop(a);
        // Closing a description lets its locks go.
        assert!(set(&b, WRITERS, Kind::Exclusive, false).unwrap());
    }
}
