//! Backing file system faults through real mounts: a full disk (a small
//! tmpfs under the cipher dir), a backing FS remounted read-only, permission
//! denied on backing files and directories (the daemon runs without
//! CAP_DAC_OVERRIDE), a backing file deleted under an open handle, and
//! rename/unlink races with I/O on open handles; with
//! `--no-writeback-cache` a full disk fails the buffered `write(2)` itself.
//!
//! Each fault must give the caller a clear errno (ENOSPC, EROFS, EACCES),
//! a rate-limited `backing fault:` line in the daemon log, no panic, and
//! must not lose anything already stored: old contents are checked after
//! the fault, after a remount.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mode_tests!(disk_full, disk_full_fails_the_write_without_writeback_cache);
mode_tests!(nonce: disk_full_between_data_and_entries);

/// A tmpfs mounted at a directory, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        let opts = std::ffi::CString::new(format!("size={size},mode=0755")).unwrap();
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                cstr(dir).as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        assert_eq!(r, 0, "mount tmpfs on {}: {}", dir.display(), io::Error::last_os_error());
        Tmpfs(dir.to_path_buf())
    }

    fn remount(&self, read_only: bool) -> io::Result<()> {
        let flags = libc::MS_REMOUNT | if read_only { libc::MS_RDONLY } else { 0 };
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                cstr(&self.0).as_ptr(),
                c"tmpfs".as_ptr(),
                flags,
                std::ptr::null(),
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let c = cstr(&self.0);
        if unsafe { libc::umount2(c.as_ptr(), 0) } != 0 {
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// An initialised volume whose cipher dir is a tmpfs of `size`.
fn volume_on_tmpfs(mode: Mode, size: &str) -> (Volume, Tmpfs) {
    let v = Volume::init(mode);
    let saved = v.root().join("saved");
    copy_tree(&v.cipher, &saved);
    let t = Tmpfs::mount(&v.cipher, size);
    copy_tree(&saved, &v.cipher);
    (v, t)
}

fn open_direct(p: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_DIRECT)
        .open(p)
}

/// Log lines of the daemon that report a backing fault with `what`.
fn fault_lines(v: &Volume, what: &str) -> usize {
    v.log()
        .lines()
        .filter(|l| l.contains("backing fault") && l.contains(what))
        .count()
}

#[track_caller]
fn assert_file(p: &Path, want: &[u8], ctx: &str) {
    let got = fs::read(p).unwrap_or_else(|e| panic!("{ctx}: read {}: {e}", p.display()));
    assert_bytes_eq(&got, want, ctx);
}

/// Append `chunk`-sized writes (O_DIRECT, so errors come back from write)
/// to a new file until the backing FS is full; returns the errno.
fn fill(p: &Path, chunk: usize, rng: &mut Rng) -> i32 {
    let f = open_direct(p, true).unwrap();
    let data = rng.bytes(chunk);
    let mut off = 0u64;
    for _ in 0..100_000 {
        match write_at(&f, off, &data) {
            Ok(()) => off += chunk as u64,
            Err(e) => return errno(&e),
        }
    }
    panic!("{}: the backing FS never filled up", p.display());
}

/// With `--no-writeback-cache`, a buffered writer on a full disk gets
/// ENOSPC from `write(2)` itself (no cached write succeeds that cannot be
/// stored), and what was written before the disk filled reads back whole
/// after a remount.
fn disk_full_fails_the_write_without_writeback_cache(mode: Mode) {
    require_fuse!();
    let (mut v, _t) = volume_on_tmpfs(mode, "4m");
    v.mount_with(&["--no-writeback-cache"]);
    let mut rng = Rng::for_test("faults-no-writeback");
    let kept = rng.bytes(300 * 1024);
    write_file(&v.p("kept"), &kept);
    let chunk = rng.bytes(64 * 1024);
    let mut f = File::create(v.p("big")).unwrap();
    let mut written = 0usize;
    let err = loop {
        match std::io::Write::write(&mut f, &chunk) {
            Ok(n) => written += n,
            Err(e) => break e,
        }
        assert!(written < 64 << 20, "4 MiB disk took {written} bytes of buffered writes");
    };
    assert_eq!(errno(&err), libc::ENOSPC, "buffered write on a full disk: {err}");
    assert!(written > 0 && written < 4 << 20, "{written} bytes before ENOSPC");
    drop(f);
    // Every byte write(2) accepted was stored.
    let big_len = fs::metadata(v.p("big")).unwrap().len() as usize;
    assert!(big_len >= written, "{big_len} bytes stored, {written} accepted");
    v.remount();
    assert_eq!(fs::read(v.p("kept")).unwrap(), kept);
    let big = fs::read(v.p("big")).unwrap();
    assert!(
        big.len() >= written,
        "after remount: {} bytes stored, {written} accepted",
        big.len()
    );
    for (i, c) in big[..written].chunks(chunk.len()).enumerate() {
        assert_eq!(c, &chunk[..c.len()], "chunk {i} of the accepted writes");
    }
}

/// A full backing FS: every write that needs space fails with ENOSPC (from
/// write or fsync), writes in place still work, and nothing stored before is
/// lost or torn (checked after freeing space and remounting). 8 faults.
fn disk_full(mode: Mode) {
    require_fuse!();
    let (mut v, _t) = volume_on_tmpfs(mode, "4m");
    v.mount();
    let mut rng = Rng::for_test("faults-disk-full");
    // Stored before the fault: spans the nnode and page 0; partial last blocks.
    let a = rng.bytes(200 * 1024);
    let b = rng.bytes(5000);
    let c = rng.bytes(3000);
    for (n, d) in [("a", &a), ("b", &b), ("c", &c)] {
        write_file(&v.p(n), d);
    }
    fs::create_dir(v.p("dir")).unwrap();
    write_file(&v.p("dir/x"), b"x in dir");
    let mut a_now = a.clone();
    let mut injected = 0;

    // 1. Fill the disk to the last page: big, then small chunks.
    for (i, chunk) in [1 << 20, 64 << 10, 4 << 10, 512].into_iter().enumerate() {
        let e = fill(&v.p(format!("fill{i}")), chunk, &mut rng);
        assert!(e == libc::ENOSPC || e == libc::EDQUOT, "fill with {chunk}: errno {e}");
    }
    injected += 1;

    // 2. Extending the partial last block of `b` (O_DIRECT): ENOSPC, and the
    // old block must not be torn (space is reserved before it is touched).
    let fb = open_direct(&v.p("b"), false).unwrap();
    assert_errno(
        write_at(&fb, 5000, &rng.bytes(20_000)),
        libc::ENOSPC,
        "extend b on a full disk",
    );
    drop(fb);
    injected += 1;

    // 3. Buffered append to `c` + fsync: ENOSPC from write or fsync.
    {
        let mut f = OpenOptions::new().append(true).open(v.p("c")).unwrap();
        let r = std::io::Write::write_all(&mut f, &rng.bytes(64 * 1024)).and_then(|_| f.sync_all());
        assert_errno(r, libc::ENOSPC, "buffered append to c + fsync");
    }
    injected += 1;

    // 4. An in-place overwrite needs no new space: it works.
    let fa = open_direct(&v.p("a"), false).unwrap();
    let blk = rng.bytes(4096);
    write_at(&fa, 3 * 4096, &blk).expect("overwrite in place on a full disk");
    a_now[3 * 4096..4 * 4096].copy_from_slice(&blk);
    drop(fa);
    injected += 1;

    // 5. A new file's first write: ENOSPC.
    let fnew = open_direct(&v.p("new"), true).unwrap();
    assert_errno(
        write_at(&fnew, 0, &rng.bytes(16 * 1024)),
        libc::ENOSPC,
        "write a new file",
    );
    drop(fnew);
    injected += 1;

    // 6. Growing `b` by truncate (pads its partial last block): ENOSPC.
    let r = OpenOptions::new()
        .write(true)
        .open(v.p("b"))
        .and_then(|f| f.set_len(9000));
    assert_errno(r, libc::ENOSPC, "truncate b up");
    injected += 1;

    // 7. mkdir needs a directory IV file: ENOSPC (or it fits in what is left).
    match fs::create_dir(v.p("newdir")) {
        Ok(()) => {}
        Err(e) => assert_eq!(errno(&e), libc::ENOSPC, "mkdir on a full disk: {e}"),
    }
    injected += 1;

    // 8. Reading everything still works on the full disk.
    assert_file(&v.p("a"), &a_now, "a on the full disk");
    assert_file(&v.p("dir/x"), b"x in dir", "dir/x on the full disk");
    injected += 1;

    // Free the space, remount (drops all caches) and check what was stored.
    for i in 0..4 {
        fs::remove_file(v.p(format!("fill{i}"))).unwrap();
    }
    v.remount();
    assert_file(&v.p("a"), &a_now, "a after the fault");
    assert_file(&v.p("b"), &b, "b after the fault (extension refused, old block intact)");
    let got_c = fs::read(v.p("c")).expect("c after the fault");
    assert_bytes_eq(&got_c[..c.len()], &c, "c's old content after the fault");
    assert_file(&v.p("dir/x"), b"x in dir", "dir/x after the fault");
    // Space is back: writes work again.
    write_file(&v.p("after"), &[7u8; 50_000]);
    assert_file(&v.p("after"), &[7u8; 50_000], "a write after space came back");
    let n = fault_lines(&v, "No space left on device");
    assert!(n >= 1, "no `backing fault` log line for ENOSPC:\n{}", v.log());
    assert!(n <= 40, "{n} ENOSPC log lines: not rate-limited");
    assert!(!v.log().contains("panicked"), "daemon panicked:\n{}", v.log());
    eprintln!(
        "faults: disk full ({}): {injected} injected, {injected} survived",
        mode.name()
    );
    v.unmount();
}

/// Pages of `[from, to)` of `f` that the file system has not allocated
/// (SEEK_DATA/SEEK_HOLE, 4 KiB pages).
fn unallocated_pages(f: &File, from: u64, to: u64) -> Vec<u64> {
    use std::os::unix::io::AsRawFd;
    let mut holes = Vec::new();
    let mut page = from / BLOCK;
    while page * BLOCK < to {
        let at = (page * BLOCK) as libc::off_t;
        // SAFETY: plain syscall on an open fd.
        let d = unsafe { libc::lseek(f.as_raw_fd(), at, libc::SEEK_DATA) };
        if d != at {
            holes.push(page);
        }
        page += 1;
    }
    holes
}

/// A full disk between a write's data and its nonce entries. Blocks
/// 240..256 of segment 1 are written (their entries share a backing page
/// with nothing else), blocks before them never were (their entries' page
/// was never allocated). With exactly enough space left for the new data
/// of blocks 200..240, an overwrite of blocks 200..256 must not end with
/// new data under old entries for 240..256 (a torn block: a GCM tag
/// failure, CTR garbage): every block reads back whole, old or new.
fn disk_full_between_data_and_entries(mode: Mode) {
    require_fuse!();
    let (mut v, _t) = volume_on_tmpfs(mode, "4m");
    v.mount();
    let mut rng = Rng::for_test("faults-disk-full-entries");
    let (first, tail, end) = (16 + 256 + 200, 16 + 256 + 240, 16 + 256 + 256u64);
    let old_tail = rng.bytes(((end - tail) * BLOCK) as usize);
    {
        let f = open_direct(&v.p("s"), true).unwrap();
        write_at(&f, tail * BLOCK, &old_tail).unwrap();
    }
    let backing = v
        .root_backing_entries()
        .into_iter()
        .find(|p| p.is_file())
        .expect("backing file of s");
    let bf = File::open(&backing).unwrap();
    // The precondition: entries of 200..240 unallocated, of 240..256 not.
    let ent = |b: u64| mode.block_entry_offset(b);
    let e = mode.entry_size();
    let y = unallocated_pages(&bf, ent(first), ent(tail));
    assert!(!y.is_empty(), "setup: the entries page of blocks 200..240 is allocated");
    assert!(
        unallocated_pages(&bf, ent(tail), ent(end - 1) + e).is_empty(),
        "setup: the entries of blocks 240..256 are not allocated"
    );
    let k = unallocated_pages(&bf, mode.block_data_offset(first), mode.block_data_offset(tail)).len();
    assert!(k > 0, "setup: the data of blocks 200..240 is allocated");
    drop(bf);
    // Keep exactly the space the new data needs, fill the rest.
    let spare = v.cipher.join("spare");
    fs::write(&spare, vec![1u8; k * BLOCK as usize]).unwrap();
    for (i, chunk) in [1 << 20, 64 << 10, 4 << 10, 512].into_iter().enumerate() {
        let e = fill(&v.p(format!("fill{i}")), chunk, &mut rng);
        assert!(e == libc::ENOSPC || e == libc::EDQUOT, "fill with {chunk}: errno {e}");
    }
    fs::remove_file(&spare).unwrap();
    let new = rng.bytes(((end - first) * BLOCK) as usize);
    let r = {
        let f = open_direct(&v.p("s"), false).unwrap();
        write_at(&f, first * BLOCK, &new)
    };
    if let Err(e) = &r {
        assert_eq!(errno(e), libc::ENOSPC, "overwrite on a full disk: {e}");
    }
    for i in 0..4 {
        fs::remove_file(v.p(format!("fill{i}"))).unwrap();
    }
    v.remount();
    let got = fs::read(v.p("s")).unwrap_or_else(|e| panic!("read s after the fault ({r:?}): {e}"));
    assert_eq!(got.len() as u64, end * BLOCK, "size of s");
    for b in first..end {
        let g = &got[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize];
        let n = &new[((b - first) * BLOCK) as usize..((b - first + 1) * BLOCK) as usize];
        let o = if b >= tail {
            old_tail[((b - tail) * BLOCK) as usize..((b - tail + 1) * BLOCK) as usize].to_vec()
        } else {
            vec![0u8; BLOCK as usize]
        };
        assert!(
            g == n || g == o.as_slice(),
            "block {b} is neither old nor new after the fault ({r:?})"
        );
    }
    assert!(!v.log().contains("panicked"), "daemon panicked:\n{}", v.log());
    v.unmount();
}

/// The backing FS remounted read-only under a live mount: every change
/// fails with EROFS, reads keep working, and after remounting it
/// read-write all data is there and writes work again. 8 faults.
#[test]
fn read_only_backing() {
    require_fuse!();
    let (mut v, t) = volume_on_tmpfs(Mode::Gcm, "64m");
    v.mount();
    let mut rng = Rng::for_test("faults-ro");
    let f = rng.bytes(100_000);
    write_file(&v.p("f"), &f);
    fs::create_dir(v.p("d")).unwrap();
    write_file(&v.p("d/g"), b"g");
    // Released handles close their backing files soon after close(2).
    let start = Instant::now();
    while let Err(e) = t.remount(true) {
        if start.elapsed() > Duration::from_secs(10) {
            let fds: Vec<_> = daemon_pids(&v.mnt)
                .iter()
                .flat_map(|p| fs::read_dir(format!("/proc/{p}/fd")).unwrap().flatten())
                .filter_map(|e| fs::read_link(e.path()).ok())
                .collect();
            panic!("remount the backing tmpfs read-only: {e}; daemon fds: {fds:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut injected = 0;
    let mut expect_erofs = |r: io::Result<()>, what: &str| {
        assert_errno(r, libc::EROFS, what);
        injected += 1;
    };
    expect_erofs(File::create(v.p("new")).map(drop), "create");
    expect_erofs(
        OpenOptions::new().write(true).open(v.p("f")).map(drop),
        "open for writing",
    );
    expect_erofs(fs::create_dir(v.p("d2")), "mkdir");
    expect_erofs(fs::remove_file(v.p("d/g")), "unlink");
    expect_erofs(fs::rename(v.p("f"), v.p("f2")), "rename");
    expect_erofs(
        fs::set_permissions(v.p("f"), fs::Permissions::from_mode(0o600)),
        "chmod",
    );
    expect_erofs(std::os::unix::fs::symlink("f", v.p("l")), "symlink");
    // Reads work (the backing file is opened read-only).
    assert_file(&v.p("f"), &f, "read f on a read-only backing FS");
    assert_file(&v.p("d/g"), b"g", "read d/g on a read-only backing FS");
    injected += 1;
    assert!(
        fault_lines(&v, "Read-only file system") >= 1,
        "no log line:\n{}",
        v.log()
    );
    t.remount(false).expect("remount read-write");
    v.remount();
    assert_file(&v.p("f"), &f, "f after the fault");
    write_file(&v.p("new"), b"works again");
    assert_file(&v.p("new"), b"works again", "write after the fault");
    eprintln!("faults: read-only backing: {injected} injected, {injected} survived");
    v.unmount();
}

/// Permission denied on backing files and directories, with the daemon
/// running without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH: EACCES to the
/// caller, a log line, nothing lost once the modes are restored. 6 faults.
#[test]
fn permission_denied_on_backing() {
    require_fuse!();
    if Command::new("setpriv").arg("--help").output().is_err() {
        warpfs_testkit::skip("setpriv (util-linux) is missing");
        return;
    }
    let mut v = Volume::new(Mode::Gcm);
    let mut rng = Rng::for_test("faults-perm");
    let f = rng.bytes(30_000);
    write_file(&v.p("f"), &f);
    fs::create_dir(v.p("d")).unwrap();
    write_file(&v.p("d/g"), b"g data");
    let bf = v.root_backing_entries().into_iter().find(|p| p.is_file()).unwrap();
    let bd = v.root_backing_entries().into_iter().find(|p| p.is_dir()).unwrap();
    v.unmount();
    // Mount again through setpriv: root without the DAC override caps.
    let o = run_cmd(
        {
            let mut c = Command::new("setpriv");
            c.arg("--bounding-set=-dac_override,-dac_read_search")
                .arg(BIN)
                .args(with_test_speculation(args![
                    "mount",
                    "--passfile",
                    &v.passfile,
                    "--log-file",
                    &v.logfile,
                    &v.cipher,
                    &v.mnt
                ]));
            c
        },
        Duration::from_secs(60),
    );
    assert!(o.ok(), "mount via setpriv\n{o}");
    let pids = daemon_pids(&v.mnt);
    let mut injected = 0;
    // A handle opened before the fault keeps working.
    let held = File::open(v.p("f")).unwrap();
    fs::set_permissions(&bf, fs::Permissions::from_mode(0o000)).unwrap();
    fs::set_permissions(&bd, fs::Permissions::from_mode(0o000)).unwrap();
    std::thread::sleep(Duration::from_millis(1100)); // entry/attr TTL
    assert_errno(
        File::open(v.p("f")).map(drop),
        libc::EACCES,
        "open a mode-000 backing file",
    );
    injected += 1;
    assert_errno(
        fs::read_dir(v.p("d")).map(drop),
        libc::EACCES,
        "list a mode-000 backing dir",
    );
    injected += 1;
    assert_errno(
        File::create(v.p("d/new")).map(drop),
        libc::EACCES,
        "create in a mode-000 backing dir",
    );
    injected += 1;
    assert_errno(
        fs::read(v.p("d/g")).map(drop),
        libc::EACCES,
        "open in a mode-000 backing dir",
    );
    injected += 1;
    let mut buf = vec![0u8; f.len()];
    std::os::unix::fs::FileExt::read_exact_at(&held, &mut buf, 0).expect("read on a handle opened before");
    assert_bytes_eq(&buf, &f, "read through the held handle");
    injected += 1;
    // Read-only backing file: opening for writing fails, reading works.
    fs::set_permissions(&bf, fs::Permissions::from_mode(0o444)).unwrap();
    drop(held);
    std::thread::sleep(Duration::from_millis(1100));
    assert_errno(
        OpenOptions::new().write(true).open(v.p("f")).map(drop),
        libc::EACCES,
        "open a 0444 file rw",
    );
    assert_file(&v.p("f"), &f, "read a 0444 backing file");
    injected += 1;
    assert!(fault_lines(&v, "Permission denied") >= 1, "no log line:\n{}", v.log());
    fs::set_permissions(&bf, fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(&bd, fs::Permissions::from_mode(0o755)).unwrap();
    unmount_path(&v.mnt).unwrap();
    assert!(wait_pids_gone(&pids, Duration::from_secs(15)).is_empty());
    v.mount();
    assert_file(&v.p("f"), &f, "f after the fault");
    assert_file(&v.p("d/g"), b"g data", "d/g after the fault");
    assert!(!v.log().contains("panicked"));
    eprintln!("faults: permission denied: {injected} injected, {injected} survived");
    v.unmount();
}

/// The backing file deleted (by someone else, in the cipher dir) under an
/// open handle: read, write, fsync, fstat and ftruncate on the handle keep
/// working (the daemon uses its open fd, never the path); a new lookup gives
/// ENOENT. 6 faults.
#[test]
fn backing_file_deleted_under_open_handle() {
    require_fuse!();
    for mode in [Mode::Gcm, Mode::Ctr] {
        let v = Volume::new(mode);
        let mut rng = Rng::for_test("faults-deleted");
        let data = rng.bytes(70_000);
        write_file(&v.p("f"), &data);
        let h = open_rw(&v.p("f"));
        fs::remove_file(v.single_backing_file()).unwrap();
        drop_cache(&h);
        let mut injected = 0;
        assert_bytes_eq(&read_at(&h, 0, data.len()).unwrap(), &data, "read after delete");
        injected += 1;
        let more = rng.bytes(9000);
        write_at(&h, 68_000, &more).expect("write after delete");
        injected += 1;
        h.sync_all().expect("fsync after delete");
        injected += 1;
        let md = h.metadata().expect("fstat after delete");
        assert_eq!(md.len(), 77_000);
        injected += 1;
        h.set_len(50_000).expect("ftruncate after delete");
        assert_eq!(h.metadata().unwrap().len(), 50_000);
        injected += 1;
        drop_cache(&h);
        assert_bytes_eq(&read_at(&h, 0, 60_000).unwrap(), &data[..50_000], "read after truncate");
        injected += 1;
        drop(h);
        std::thread::sleep(Duration::from_millis(1100));
        assert_errno(fs::metadata(v.p("f")).map(drop), libc::ENOENT, "stat after delete");
        assert!(!v.log().contains("panicked"));
        eprintln!(
            "faults: deleted under handle ({}): {injected} injected, {injected} survived",
            mode.name()
        );
    }
}

/// Renames and unlinks (through the mount) racing with reads and writes on
/// open handles of the same files: no error, no lost or mixed data. 2 faults.
#[test]
fn rename_and_unlink_races() {
    require_fuse!();
    let v = Volume::new(Mode::Gcm);
    let mut rng = Rng::for_test("faults-races");
    let data = rng.bytes(64 * 1024);
    write_file(&v.p("a"), &data);
    fs::create_dir(v.p("sub")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let h = Arc::new(open_rw(&v.p("a")));
    // I/O on the handle while another thread renames the file around.
    let io = {
        let (h, stop, data) = (h.clone(), stop.clone(), data.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let blk = (n % 16) as usize;
                write_at(&h, (blk * 4096) as u64, &data[blk * 4096..(blk + 1) * 4096]).unwrap();
                let got = read_at(&h, 0, data.len()).unwrap();
                assert_bytes_eq(&got, &data, "read during renames");
                n += 1;
            }
            n
        })
    };
    let names = [v.p("a"), v.p("b"), v.p("sub/c")];
    let start = Instant::now();
    let mut renames = 0;
    while start.elapsed() < Duration::from_secs(2) {
        let (from, to) = (&names[renames % 3], &names[(renames + 1) % 3]);
        fs::rename(from, to).unwrap();
        renames += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let ops = io.join().expect("I/O thread");
    assert!(ops > 0 && renames > 0);
    let last = &names[renames % 3];
    drop_cache(&h);
    assert_file(last, &data, "file after renames");
    // Unlink while writing through the handle: the handle keeps working.
    fs::remove_file(last).unwrap();
    write_at(&h, 0, b"after unlink").unwrap();
    h.sync_all().unwrap();
    assert_eq!(read_at(&h, 0, 12).unwrap(), b"after unlink");
    drop(h);
    assert!(
        v.root_backing_entries().iter().all(|p| p.is_dir()),
        "backing file left after unlink"
    );
    assert!(!v.log().contains("panicked"));
    eprintln!(
        "faults: races: {renames} renames during {ops} I/O rounds; unlink under a writer: 2 injected, 2 survived"
    );
}
