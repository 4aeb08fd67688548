//! SEEK_DATA / SEEK_HOLE through a mount (FUSE_LSEEK): exact answers from
//! the nonce entries for a file no writer holds open, refusals while one
//! does, and `cp` keeping holes out of a copy.

use super::*;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

mode_tests!(seek_data_and_holes, cp_copies_sparse);
mode_tests!(nonce: open_writer_is_refused);

const K: u64 = 4096;
const MIB: u64 = 1 << 20;

/// lseek(2) on `f`: the offset, or the errno.
fn seek(f: &File, off: u64, whence: i32) -> Result<u64, i32> {
    // SAFETY: a plain system call on an open descriptor.
    let r = unsafe { libc::lseek(f.as_raw_fd(), off as libc::off_t, whence) };
    if r < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(-1))
    } else {
        Ok(r as u64)
    }
}

fn punch(f: &File, off: u64, len: u64) {
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: a plain system call on an open descriptor.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) };
    assert_eq!(r, 0, "punch {off}+{len}: {}", io::Error::last_os_error());
}

/// A 3 MiB file written, grown and punched through the mount, closed, and
/// its model: data in blocks 0, 17 and 512, holes everywhere else.
fn sparse_file(v: &Volume, name: &str) -> (PathBuf, Vec<u8>) {
    let p = v.p(name);
    let mut m = Vec::new();
    let f = open_rw(&p);
    write_at(&f, 70_000, b"0123456789").unwrap();
    model_write(&mut m, 70_000, b"0123456789");
    // Growing past the partial block 17 writes it whole: data.
    f.set_len(3 * MIB).unwrap();
    m.resize(3 * MIB as usize, 0);
    write_at(&f, 2 * MIB, &[0x5a; 4096]).unwrap();
    model_write(&mut m, 2 * MIB, &[0x5a; 4096]);
    write_at(&f, 0, &[0x33; 8192]).unwrap();
    model_write(&mut m, 0, &[0x33; 8192]);
    f.sync_all().unwrap();
    punch(&f, K, K);
    m[K as usize..2 * K as usize].fill(0);
    drop(f);
    (p, m)
}

/// Open `p` read-only once the daemon has released every writer of it
/// (the kernel sends RELEASE after close(2) returns): until then SEEK_DATA
/// is refused.
fn open_settled(p: &Path) -> File {
    let f = File::open(p).unwrap();
    let settled = wait_for(Duration::from_secs(10), || {
        seek(&f, 0, libc::SEEK_DATA) != Err(libc::EOPNOTSUPP)
    });
    assert!(settled, "SEEK_DATA still refused 10 s after the writer closed");
    f
}

fn seek_data_and_holes(mode: Mode) {
    require_fuse!();
    let v = Volume::new(mode);
    let (p, m) = sparse_file(&v, "sparse.bin");
    let f = open_settled(&p);
    let size = 3 * MIB;
    let (d, h) = (libc::SEEK_DATA, libc::SEEK_HOLE);
    // (offset, whence, answer): Err is the errno.
    let want: Vec<(u64, i32, Result<u64, i32>)> = if mode.base() == Mode::Xts {
        // xts has no entries: the whole file is data (FORMAT.md 7).
        vec![
            (0, d, Ok(0)),
            (5000, d, Ok(5000)),
            (0, h, Ok(size)),
            (2 * MIB + 4096, h, Ok(size)),
            (size - 1, d, Ok(size - 1)),
            (size, d, Err(libc::ENXIO)),
            (size, h, Err(libc::ENXIO)),
        ]
    } else {
        vec![
            (0, d, Ok(0)),
            (100, d, Ok(100)),
            (0, h, Ok(K)),
            (100, h, Ok(K)),
            (K, h, Ok(K)),
            (K + 7, d, Ok(17 * K)),
            (17 * K, h, Ok(18 * K)),
            (17 * K + 5, d, Ok(17 * K + 5)),
            (18 * K, d, Ok(2 * MIB)),
            (2 * MIB, h, Ok(2 * MIB + K)),
            (2 * MIB + K, d, Err(libc::ENXIO)),
            (2 * MIB + K + 1, h, Ok(2 * MIB + K + 1)),
            (size - 1, h, Ok(size - 1)),
            (size - 1, d, Err(libc::ENXIO)),
            (size, d, Err(libc::ENXIO)),
            (size, h, Err(libc::ENXIO)),
            (u64::MAX / 2, d, Err(libc::ENXIO)),
        ]
    };
    for (off, whence, ans) in want {
        let kind = if whence == d { "SEEK_DATA" } else { "SEEK_HOLE" };
        assert_eq!(seek(&f, off, whence), ans, "{}: {kind} from {off}", mode.name());
    }
    // What it reports as holes reads as zeros, and the file reads whole.
    let mut off = 0;
    while let Ok(hole) = seek(&f, off, h) {
        let end = seek(&f, hole, d).unwrap_or(size);
        let got = read_at(&f, hole, (end - hole) as usize).unwrap();
        assert!(
            got.iter().all(|&b| b == 0),
            "{}: hole {hole}..{end} holds data",
            mode.name()
        );
        if end >= size {
            break;
        }
        off = end;
    }
    assert_bytes_eq(&read_at(&f, 0, m.len() + 1).unwrap(), &m, "sparse.bin");
}

/// A file with a writer open and data of it only in the kernel's page
/// cache (unless the kernel's writeback got to it first): written and closed, opened once (so the daemon has seen it as
/// it is and lets later opens keep the cached pages, FOPEN_KEEP_CACHE),
/// then opened for writing and written at 1 MiB and past 2 MiB (the file
/// grows in the kernel only). Returns the writer and the file's model.
fn dirty_writer(v: &Volume, name: &str) -> (PathBuf, File, Vec<u8>) {
    let p = v.p(name);
    let mut m = vec![0x11u8; 5000];
    write_file(&p, &m);
    drop(File::open(&p).unwrap());
    let w = open_rw(&p);
    for (off, byte) in [(MIB, 0x22u8), (2 * MIB + 100, 0x33)] {
        write_at(&w, off, &[byte; 5000]).unwrap();
        model_write(&mut m, off, &[byte; 5000]);
    }
    (p, w, m)
}

/// While a writable handle is open, the kernel may hold data the daemon
/// has not seen (it sends FUSE_LSEEK without writing back first): lseek
/// is refused, on the writer's own descriptor as on any other, rather
/// than answered from stale entries; it answers again once the writer is
/// closed.
fn open_writer_is_refused(mode: Mode) {
    require_fuse!();
    let v = Volume::new(mode);
    let (p, w, _) = dirty_writer(&v, "busy.bin");
    let r = File::open(&p).unwrap();
    for f in [&w, &r] {
        for (off, whence) in [(0, libc::SEEK_DATA), (0, libc::SEEK_HOLE), (MIB, libc::SEEK_DATA)] {
            let got = seek(f, off, whence);
            assert_eq!(
                got,
                Err(libc::EOPNOTSUPP),
                "{}: lseek({off}, {whence}) with a writer open",
                mode.name()
            );
        }
    }
    drop((w, r));
    let r = open_settled(&p);
    assert_eq!(seek(&r, 0, libc::SEEK_HOLE), Ok(2 * K), "{}: after close", mode.name());
    assert_eq!(
        seek(&r, 2 * K, libc::SEEK_DATA),
        Ok(MIB),
        "{}: after close",
        mode.name()
    );
    assert_eq!(
        seek(&r, MIB, libc::SEEK_HOLE),
        Ok(MIB + 2 * K),
        "{}: after close",
        mode.name()
    );
    assert_eq!(
        seek(&r, 2 * MIB + 100, libc::SEEK_HOLE),
        Ok(2 * MIB + 5100),
        "{}: after close",
        mode.name()
    );
}

fn cp(args: &[&str], from: &Path, to: &Path) {
    let mut c = Command::new("cp");
    c.args(args).arg(from).arg(to);
    run_cmd(c, Duration::from_secs(120)).expect_ok("cp");
}

fn blocks(p: &Path) -> u64 {
    fs::metadata(p).unwrap().blocks()
}

/// A local directory for copies out of the mount (the test's temporary
/// directory: a file system that keeps holes).
fn out_dir(v: &Volume) -> PathBuf {
    let d = v.root().join("out");
    fs::create_dir_all(&d).unwrap();
    d
}

/// `cp --sparse=always` gives a sparse copy with the same bytes.
fn cp_copies_sparse(mode: Mode) {
    require_fuse!();
    let v = Volume::new(mode);
    let (p, m) = sparse_file(&v, "src.bin");
    let _ = open_settled(&p);
    let dst = out_dir(&v).join("always.bin");
    cp(&["--sparse=always"], &p, &dst);
    assert_bytes_eq(&fs::read(&dst).unwrap(), &m, "cp --sparse=always");
    // Three data blocks of 3 MiB (a file system may round up a little).
    assert!(
        blocks(&dst) <= 64,
        "{}: copy has {} blocks of 512",
        mode.name(),
        blocks(&dst)
    );
}
