//! I/O the kernel drives: writes through a shared mmap, copies within the
//! mount (copy_file_range), the mount's bdi read-ahead and dirty limit, and
//! access times under `-o noatime`.

use super::*;

mode_tests!(mmap_writes, copy_between_files, noatime_leaves_the_atime);

fn mmap_writes(mode: Mode) {
    require_fuse!();
    use std::os::fd::AsRawFd;
    let mut rng = Rng::for_test(&format!("mmap-{}", mode.name()));
    let mut v = Volume::new(mode);
    let path = v.p("mapped.bin");
    let len = 300_000usize;
    let mut model = rng.bytes(len);
    {
        let f = open_rw(&path);
        write_at(&f, 0, &model).unwrap();
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        let map = unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len) };
        assert_bytes_eq(map, &model, "mapped content");
        for _ in 0..50 {
            let off = if rng.chance(30) {
                NNODE_DATA as usize - rng.range(0, 3000) as usize
            } else {
                rng.below(len as u64 - 5000) as usize
            };
            let n = rng.range(1, 5000) as usize;
            let d = rng.bytes(n);
            map[off..off + n].copy_from_slice(&d);
            model[off..off + n].copy_from_slice(&d);
        }
        let r = unsafe { libc::msync(p, len, libc::MS_SYNC) };
        assert_eq!(r, 0, "msync: {}", std::io::Error::last_os_error());
        unsafe { libc::munmap(p, len) };
    }
    verify(&path, &model, &mut rng, "after msync");
    v.remount();
    verify(&path, &model, &mut rng, "mmap writes after remount");
}

fn copy_between_files(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("copy-{}", mode.name()));
    let mut v = Volume::new(mode);
    let data = rng.bytes(1_500_000);
    write_file(&v.p("src"), &data);
    fs::create_dir(v.p("sub")).unwrap();
    // std::io::copy uses copy_file_range where it can.
    let n = std::io::copy(
        &mut File::open(v.p("src")).unwrap(),
        &mut File::create(v.p("sub/dst")).unwrap(),
    )
    .expect("copy within the mount");
    assert_eq!(n, data.len() as u64);
    fs::copy(v.p("src"), v.p("sub/dst2")).expect("fs::copy within the mount");
    v.remount();
    for p in ["src", "sub/dst", "sub/dst2"] {
        assert_bytes_eq(&fs::read(v.p(p)).unwrap(), &data, p);
    }
}

/// The mount tunes its bdi (as root): 1 MiB read-ahead, and a dirty limit
/// raised to 128 MiB or 1/64 of RAM, whichever is less.
#[test]
fn mount_tunes_the_bdi() {
    require_fuse!();
    let v = Volume::new(Mode::Gcm);
    let mp = fs::canonicalize(&v.mnt)
        .unwrap()
        .to_string_lossy()
        .replace(' ', "\\040");
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dev = info
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() > 4 && f[4] == mp).then(|| f[2].to_string())
        })
        .next_back()
        .expect("the mount in mountinfo");
    let read = |name: &str| fs::read_to_string(format!("/sys/class/bdi/{dev}/{name}")).map(|s| s.trim().to_string());
    assert_eq!(read("read_ahead_kb").unwrap(), "1024");
    let Ok(max) = read("max_bytes") else {
        warpfs_testkit::skip("no /sys/class/bdi/*/max_bytes (Linux < 6.2): the dirty limit is unchecked");
        return;
    };
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|s| s.trim().strip_suffix("kB"))
        .and_then(|s| s.trim().parse().ok())
        .unwrap();
    let want = (128u64 << 20).min(kb * 1024 / 64);
    // The kernel keeps the limit as a ratio of its dirty threshold, so the
    // value read back is rounded.
    let max: u64 = max.parse().unwrap();
    assert!(max + (1 << 20) >= want, "max_bytes {max}, want at least {want}");
}

/// The access time of the backing file (the one the mount shows), in ns.
fn backing_atime(v: &Volume) -> i128 {
    let m = fs::metadata(v.single_backing_file()).unwrap();
    m.atime() as i128 * 1_000_000_000 + m.atime_nsec() as i128
}

/// Read `name` whole after a fresh mount with `opts` (nothing cached: the
/// daemon reads the backing file) and return the backing file's atime
/// before and after.
fn atime_across_a_read(v: &mut Volume, opts: &[&str], data: &[u8]) -> (i128, i128) {
    // An access time older than the modification time: relatime, the
    // backing mount's usual rule, moves it on the next read.
    let old = libc::timespec {
        tv_sec: 946_684_800, // 2000-01-01
        tv_nsec: 0,
    };
    let now = libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_NOW,
    };
    let c = cstr(&v.single_backing_file());
    // SAFETY: valid C string and a two-element array.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [old, now].as_ptr(), 0) };
    assert_eq!(r, 0, "utimensat: {}", std::io::Error::last_os_error());
    v.mount_with(opts);
    let before = backing_atime(v);
    assert_bytes_eq(&fs::read(v.p("f")).unwrap(), data, "content");
    let after = backing_atime(v);
    v.unmount();
    (before, after)
}

/// `-o noatime`: reading a file through the mount leaves the access time
/// it shows (the backing file's) where it was; without it the daemon's
/// read moves it, as the backing mount's own rule says.
fn noatime_leaves_the_atime(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let data = Rng::for_test(&format!("noatime-{}", mode.name())).bytes(70_000);
    write_file(&v.p("f"), &data);
    v.unmount();
    let (before, after) = atime_across_a_read(&mut v, &[], &data);
    assert_ne!(
        before, after,
        "{mode:?}: control: a read without noatime left the backing atime; the backing mount must update atimes"
    );
    let (before, after) = atime_across_a_read(&mut v, &["-o", "noatime"], &data);
    assert_eq!(
        before, after,
        "{mode:?}: -o noatime: a read moved the atime the mount shows"
    );
}
