//! Positioned I/O on the backing file: exact pread/pwrite, vectored pread
//! straight into caller buffers, hole punching.

use crate::ContentError;
use std::fs::File;
use std::io::{self, IoSliceMut};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;

fn short() -> ContentError {
    ContentError::corrupt("backing file is shorter than its plaintext size implies")
}

fn off_t(off: u64) -> Result<libc::off_t, ContentError> {
    libc::off_t::try_from(off).map_err(|_| ContentError::errno_err(libc::EFBIG))
}

/// Fill `buf` from `off`; running into EOF is a corrupt file.
pub(crate) fn read_exact_at(f: &File, buf: &mut [u8], off: u64) -> Result<(), ContentError> {
    f.read_exact_at(buf, off).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            short()
        } else {
            ContentError::Io(e)
        }
    })
}

/// Write all of `buf` at `off`.
pub(crate) fn write_all_at(f: &File, buf: &[u8], off: u64) -> Result<(), ContentError> {
    off_t(off.saturating_add(buf.len() as u64))?;
    f.write_all_at(buf, off).map_err(ContentError::Io)
}

/// Write all of `buf` at `off`; on failure also how many bytes of `buf`
/// were written before it (a full disk fails part-way).
pub(crate) fn write_all_at_progress(f: &File, buf: &[u8], off: u64) -> Result<(), (usize, ContentError)> {
    off_t(off.saturating_add(buf.len() as u64)).map_err(|e| (0, e))?;
    let mut done = 0;
    while done < buf.len() {
        match f.write_at(&buf[done..], off + done as u64) {
            Ok(0) => return Err((done, ContentError::Io(io::ErrorKind::WriteZero.into()))),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, ContentError::Io(e))),
        }
    }
    Ok(())
}

/// Allocate `[from, to)` without changing the size, so writes there cannot
/// fail for lack of space part-way; file systems without `fallocate` are
/// fine (the write then takes its chance).
pub(crate) fn reserve(f: &File, from: u64, to: u64) -> Result<(), ContentError> {
    if to <= from {
        return Ok(());
    }
    // SAFETY: plain syscall on an owned fd.
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            off_t(from)?,
            off_t(to - from)?,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => Ok(()),
        _ => Err(ContentError::Io(e)),
    }
}

/// One `preadv` (looping only on short reads) filling every slice in turn.
pub(crate) fn preadv_exact(f: &File, mut iovs: &mut [IoSliceMut<'_>], mut off: u64) -> Result<(), ContentError> {
    IoSliceMut::advance_slices(&mut iovs, 0);
    while !iovs.is_empty() {
        let n = iovs.len().min(1024) as libc::c_int;
        // SAFETY: IoSliceMut is ABI-compatible with iovec on Unix; the
        // slices are valid for writes for their lengths.
        let r = unsafe { libc::preadv(f.as_raw_fd(), iovs.as_ptr() as *const libc::iovec, n, off_t(off)?) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(ContentError::Io(e));
        }
        if r == 0 {
            return Err(short());
        }
        off += r as u64;
        IoSliceMut::advance_slices(&mut iovs, r as usize);
    }
    Ok(())
}

/// Deallocate `[off, off+len)` keeping the size; unsupported file systems
/// are fine (the caller has already zeroed the entries).
pub(crate) fn punch_hole(f: &File, off: u64, len: u64) -> Result<(), ContentError> {
    if len == 0 {
        return Ok(());
    }
    // SAFETY: plain syscall on an owned fd.
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off_t(off)?,
            off_t(len)?,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => Ok(()),
        _ => Err(ContentError::Io(e)),
    }
}

/// Whether `f` was opened read-only.
pub(crate) fn is_read_only(f: &File) -> Result<bool, ContentError> {
    // SAFETY: plain syscall on an owned fd.
    let fl = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    if fl < 0 {
        return Err(ContentError::Io(io::Error::last_os_error()));
    }
    Ok(fl & libc::O_ACCMODE == libc::O_RDONLY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preadv_fills_slices_and_reports_short_files() {
        let mut t = tempfile::tempfile().unwrap();
        use std::io::Write;
        t.write_all(&(0..100u8).collect::<Vec<_>>()).unwrap();
        let (mut a, mut b) = ([0u8; 10], [0u8; 20]);
        {
            let mut iovs = [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)];
            preadv_exact(&t, &mut iovs, 5).unwrap();
        }
        assert_eq!(a[0], 5);
        assert_eq!(b[19], 34);
        let mut c = [0u8; 50];
        let mut iovs = [IoSliceMut::new(&mut c)];
        assert!(matches!(
            preadv_exact(&t, &mut iovs, 60),
            Err(ContentError::Corrupt { .. })
        ));
        assert!(read_exact_at(&t, &mut [0u8; 8], 99).is_err());
        assert!(!is_read_only(&t).unwrap());
        punch_hole(&t, 10, 20).unwrap();
        let mut d = [1u8; 20];
        read_exact_at(&t, &mut d, 10).unwrap();
        assert_eq!(d, [0u8; 20]);
    }
}
