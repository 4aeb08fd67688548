//! File helpers: dropping the page cache, positioned reads and writes,
//! byte comparisons with a readable difference.

use super::BLOCK;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Write back and drop the kernel's cached pages of `f`, so the next read
/// goes to the daemon (and through decryption).
pub fn drop_cache(f: &File) {
    try_drop_cache(f).expect("fsync");
}

/// `drop_cache` that reports a failed fsync (the pages are dropped anyway
/// where they are clean).
pub fn try_drop_cache(f: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let r = f.sync_all();
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    r
}

/// Read exactly `len` bytes at `off` (fewer only at EOF).
pub fn read_at(f: &File, off: u64, len: usize) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = f.read_at(&mut buf[done..], off + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(buf)
}

pub fn write_at(f: &File, off: u64, data: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(data, off)
}

pub fn open_rw(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(p)
        .unwrap_or_else(|e| panic!("open {}: {e}", p.display()))
}

/// Compare two byte slices, reporting the first difference and its block.
#[track_caller]
pub fn assert_bytes_eq(got: &[u8], want: &[u8], ctx: &str) {
    if got == want {
        return;
    }
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    match first {
        Some(i) => {
            let last = got.iter().zip(want).rposition(|(a, b)| a != b).unwrap();
            panic!(
                "{ctx}: contents differ (len got {} want {}); first diff at byte {i} (block {}), \
                 last diff at byte {last} (block {}); got {:02x?} want {:02x?}",
                got.len(),
                want.len(),
                i / BLOCK as usize,
                last / BLOCK as usize,
                &got[i..(i + 16).min(got.len())],
                &want[i..(i + 16).min(want.len())]
            )
        }
        None => panic!(
            "{ctx}: length differs: got {} want {} (common prefix equal)",
            got.len(),
            want.len()
        ),
    }
}

/// Does `hay` contain `needle`?
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Write `data` to `p` (create/truncate), fsync.
pub fn write_file(p: &Path, data: &[u8]) {
    let mut f = File::create(p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
    f.write_all(data)
        .unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    f.sync_all().unwrap_or_else(|e| panic!("fsync {}: {e}", p.display()));
}
