//! Direct I/O beside the page cache: an asynchronous direct write leaves
//! no page cached over its range with the bytes from before it.

use super::*;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

mode_tests!(async_direct_write_drops_stale_pages);

/// `struct iocb` of <linux/aio_abi.h> (little-endian field order).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: i32,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

/// `struct io_event` of <linux/aio_abi.h>.
#[repr(C)]
#[derive(Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PWRITE: u16 = 1;

/// One asynchronous write through Linux AIO (io_submit), waited for:
/// the kernel sees a kiocb that is not synchronous, as fio's libaio and
/// generic/451's writer make.
fn aio_pwrite(fd: i32, buf: *const u8, len: usize, off: i64) -> i64 {
    let mut ctx: libc::c_ulong = 0;
    let r = unsafe { libc::syscall(libc::SYS_io_setup, 1, &mut ctx as *mut libc::c_ulong) };
    assert_eq!(r, 0, "io_setup: {}", std::io::Error::last_os_error());
    let mut cb = Iocb {
        opcode: IOCB_CMD_PWRITE,
        fildes: fd as u32,
        buf: buf as u64,
        nbytes: len as u64,
        offset: off,
        ..Iocb::default()
    };
    let mut cbs = [&mut cb as *mut Iocb];
    let r = unsafe { libc::syscall(libc::SYS_io_submit, ctx, 1, cbs.as_mut_ptr()) };
    assert_eq!(r, 1, "io_submit: {}", std::io::Error::last_os_error());
    let mut ev = IoEvent::default();
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_getevents,
            ctx,
            1,
            1,
            &mut ev as *mut IoEvent,
            std::ptr::null_mut::<libc::timespec>(),
        )
    };
    assert_eq!(r, 1, "io_getevents: {}", std::io::Error::last_os_error());
    unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
    ev.res
}

/// The write's source buffer is a mapping of the same file, one region
/// further on: the kernel drops the cached pages of the write's range,
/// then faults the source in, which reads the old bytes of the range's
/// second half (and, by read-around, more) back into the page cache while
/// the write is in flight. Once it completes, buffered reads must see what
/// it wrote (the kernel drops the range again after a synchronous direct
/// write; after an asynchronous one only if the mount made it synchronous:
/// no FUSE_ASYNC_DIO). generic/451 finds the same with racing readers.
fn async_direct_write_drops_stale_pages(mode: Mode) {
    require_fuse!();
    const R: usize = 64 << 10;
    let mut rng = Rng::for_test(&format!("aio-dio-{}", mode.name()));
    let v = Volume::new(mode);
    let path = v.p("aio");
    let old = rng.bytes(3 * R);
    {
        let f = open_rw(&path);
        write_at(&f, 0, &old).unwrap();
        f.sync_all().unwrap();
    }
    let direct = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .expect("open with O_DIRECT");
    let buffered = File::open(&path).unwrap();
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            3 * R,
            libc::PROT_READ,
            libc::MAP_SHARED,
            buffered.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
    // Regions 1 and 2 written over regions 0 and 1: the file does not grow,
    // so the kernel may complete the write asynchronously.
    let src = unsafe { (p as *const u8).add(R) };
    let n = aio_pwrite(direct.as_raw_fd(), src, 2 * R, 0);
    unsafe { libc::munmap(p, 3 * R) };
    assert_eq!(n, 2 * R as i64, "asynchronous direct write of {} bytes", 2 * R);
    let mut want = old[R..].to_vec();
    want.extend_from_slice(&old[2 * R..]);
    // Through the page cache first, as the write left it.
    let got = read_at(&buffered, 0, 3 * R).unwrap();
    assert_bytes_eq(&got, &want, "buffered read after an asynchronous direct write");
    let got = read_at(&File::open(&path).unwrap(), 0, 3 * R).unwrap();
    assert_bytes_eq(&got, &want, "buffered read through a new descriptor");
    drop((direct, buffered));
    let f = File::open(&path).unwrap();
    drop_cache(&f);
    assert_bytes_eq(&read_at(&f, 0, 3 * R).unwrap(), &want, "read after dropping the cache");
}
