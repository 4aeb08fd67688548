//! Opening files of the backing store: never through a symlink, never
//! blocking, never anything but a regular file ([`open_file`]), and for
//! the reserved names (config, lock, directory IVs, sidecars, journals)
//! never a file with a second link, which could be a file outside
//! CIPHERDIR ([`Expect::Reserved`]).
//!
//! An existing file is looked at first (`fstatat(AT_SYMLINK_NOFOLLOW)`:
//! opening a device node or a FIFO already has effects), opened with
//! `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`, and looked at again (`fstat`:
//! same device and inode, still a regular file). A file that the storage
//! swaps for a FIFO or a device between the two looks is opened without
//! blocking and then refused.

use crate::dir::Loc;
use crate::errno::{Errno, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a backing file is expected to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A regular file that may have several links (a cipher file: the
    /// plaintext may hard-link it).
    File,
    /// A regular file with exactly one link: a reserved name.
    Reserved,
}

/// Refuse anything but what `expect` allows: a symlink is ELOOP, a
/// directory EISDIR, any other type EINVAL, a reserved file with more than
/// one link EMLINK.
pub fn check_type(st: &libc::stat, expect: Expect) -> Result<()> {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => {}
        libc::S_IFLNK => return Err(Errno::ELOOP),
        libc::S_IFDIR => return Err(Errno::EISDIR),
        _ => return Err(Errno::EINVAL),
    }
    if expect == Expect::Reserved && st.st_nlink > 1 {
        return Err(Errno::EMLINK);
    }
    Ok(())
}

/// Whether files are opened with `O_NOATIME` ([`set_noatime`]).
static NOATIME: AtomicBool = AtomicBool::new(false);

/// Open existing backing files with `O_NOATIME` from now on (or no
/// longer): a mount made with `-o noatime` shows the backing files'
/// access times, which the daemon's own reads would otherwise move. Per
/// process (a mount daemon serves one volume). Where the kernel refuses
/// the flag (`EPERM`: a file owned by another user, without
/// `CAP_FOWNER`), that file is opened without it.
pub fn set_noatime(on: bool) {
    NOATIME.store(on, Ordering::Relaxed);
}

fn openat(l: &Loc, flags: i32, mode: u32) -> Result<File> {
    let (fd, c) = l.at()?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let open = |flags: i32| {
        // SAFETY: valid C string.
        let f = unsafe { libc::openat(fd, c.as_ptr(), flags, mode as libc::c_uint) };
        crate::beneath::owned(f).map(File::from)
    };
    if NOATIME.load(Ordering::Relaxed) && flags & libc::O_CREAT == 0 {
        match open(flags | libc::O_NOATIME) {
            Err(Errno(libc::EPERM)) => {}
            r => return r,
        }
    }
    let f = open(flags)?;
    if NOATIME.load(Ordering::Relaxed) && flags & libc::O_CREAT != 0 {
        // Not asked for with O_CREAT above (a refusal, EPERM for a file of
        // another owner, could not be retried as a plain open safely): set
        // on the descriptor now, which is kept for the file's later reads
        // (a summary commit's too). Refused, it stays without.
        // SAFETY: fcntl on the descriptor just opened.
        unsafe {
            let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            if fl >= 0 {
                let _ = libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_NOATIME);
            }
        }
    }
    Ok(f)
}

/// Open the regular file `l` with open(2) `flags` (`mode` when creating).
/// With `O_CREAT | O_EXCL` only a new file is made; with `O_CREAT` alone an
/// existing file is opened as below when there is one. An existing file
/// must be what `expect` says ([`check_type`]), before and after opening.
pub fn open_file(l: &Loc, flags: i32, mode: u32, expect: Expect) -> Result<File> {
    if flags & libc::O_CREAT != 0 {
        match openat(l, flags | libc::O_EXCL, mode) {
            // O_EXCL with O_NOFOLLOW made a new regular file, or failed.
            Ok(f) => return Ok(f),
            Err(Errno(libc::EEXIST)) if flags & libc::O_EXCL == 0 => {}
            Err(e) => return Err(e),
        }
    }
    let before = crate::ops::lstat(l)?;
    check_type(&before, expect)?;
    let f = openat(l, flags & !(libc::O_CREAT | libc::O_EXCL), 0)?;
    let st = crate::dir::fstat(&f)?;
    if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino) {
        // Replaced between the two looks: what was checked is not what
        // was opened.
        return Err(Errno(libc::ESTALE));
    }
    check_type(&st, expect)?;
    Ok(f)
}

/// The whole content of a small file (a directory IV, a sidecar, a
/// config): at most `max` bytes are read, a longer file gives `max + 1`.
pub fn read_small(l: &Loc, max: usize, expect: Expect) -> Result<Vec<u8>> {
    let f = open_file(l, libc::O_RDONLY, 0, expect)?;
    let mut out = Vec::new();
    f.take(max as u64 + 1).read_to_end(&mut out)?;
    Ok(out)
}

/// Create a new file (never replacing one, never through a symlink)
/// holding `data`, with `mode`; fsynced when asked.
pub fn create_file(l: &Loc, mode: u32, data: &[u8], sync: bool) -> Result<()> {
    let mut f = openat(l, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)?;
    f.write_all(data)?;
    if sync {
        f.sync_all()?;
    }
    Ok(())
}
