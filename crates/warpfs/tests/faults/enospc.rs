//! A full backing file system: ENOSPC from write or fsync, writes in
//! place still working, no torn block between a write's data and its nonce
//! entries, with `--no-writeback-cache` the failing `write(2)` itself, and
//! fallocate(2) holding space for later writes.

use super::*;

// Over Twofish in CI: `disk_full`; the rest in scripts/twofish-matrix.sh.
mode_tests!(twofish: disk_full);
mode_tests!(all: disk_full_fails_the_write_without_writeback_cache, fallocate_holds_the_space);
mode_tests!(nonce: disk_full_between_data_and_entries, statfs_counts_what_plaintext_fits);

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

fn fallocate(f: &File, mode: i32, off: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: plain syscall on an open fd.
    match unsafe { libc::fallocate(f.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// fallocate(2) allocates, as it promises: more than the backing file
/// system holds fails with ENOSPC and leaves the size alone, and what it
/// did allocate (with and without FALLOC_FL_KEEP_SIZE) is there for writes
/// made after the disk filled up (generic/213 and generic/568 check the
/// same).
fn fallocate_holds_the_space(mode: Mode) {
    require_fuse!();
    const MIB: u64 = 1 << 20;
    let (mut v, _t) = volume_on_tmpfs(mode, "8m");
    v.mount();
    let mut rng = Rng::for_test("faults-fallocate");
    let f = open_rw(&v.p("pre"));
    let e = fallocate(&f, 0, 0, 64 * MIB).expect_err("fallocate of 64 MiB on an 8 MiB disk");
    assert_eq!(errno(&e), libc::ENOSPC, "{e}");
    assert_eq!(f.metadata().unwrap().len(), 0, "size after a failed fallocate");
    fallocate(&f, 0, 0, 2 * MIB).expect("fallocate of 2 MiB");
    assert_eq!(f.metadata().unwrap().len(), 2 * MIB);
    assert!(
        read_at(&f, 0, 2 * MIB as usize).unwrap().iter().all(|b| *b == 0),
        "fallocated range reads zeros"
    );
    let k = open_rw(&v.p("keep"));
    fallocate(&k, libc::FALLOC_FL_KEEP_SIZE, 0, MIB).expect("fallocate KEEP_SIZE of 1 MiB");
    assert_eq!(k.metadata().unwrap().len(), 0, "KEEP_SIZE changes no size");
    // The rest of the disk goes to another file.
    let full = fill(&v.p("filler"), 64 * 1024, &mut rng);
    assert_eq!(full, libc::ENOSPC);
    let (a, b) = (rng.bytes(2 * MIB as usize), rng.bytes(MIB as usize));
    write_at(&f, 0, &a).unwrap();
    f.sync_all()
        .expect("fsync of writes into the fallocated range on a full disk");
    write_at(&k, 0, &b).unwrap();
    k.sync_all()
        .expect("fsync of writes into the KEEP_SIZE range on a full disk");
    drop((f, k));
    v.remount();
    assert_bytes_eq(&fs::read(v.p("pre")).unwrap(), &a, "fallocated file after remount");
    assert_bytes_eq(&fs::read(v.p("keep")).unwrap(), &b, "KEEP_SIZE file after remount");
}

/// The free space statfs shows is plaintext that fits: one fallocate of
/// all of it but 128 KiB succeeds (generic/103 fills a file system so).
/// Shown as the backing store's bytes it would not: gcm and ctr keep
/// about 0.4-0.8% more (nonce entries and pages), more than the margin on
/// a 128 MiB store.
fn statfs_counts_what_plaintext_fits(mode: Mode) {
    require_fuse!();
    let (mut v, _t) = volume_on_tmpfs(mode, "128m");
    v.mount();
    let s = statvfs(&v.mnt).expect("statvfs on the mount");
    let free = s.f_bavail * s.f_frsize;
    let f = open_rw(&v.p("fill"));
    fallocate(&f, 0, 0, free - (128 << 10))
        .unwrap_or_else(|e| panic!("fallocate of the {free} bytes shown free, less 128 KiB: {e}"));
    let after = statvfs(&v.mnt).unwrap();
    assert!(
        after.f_bavail * after.f_frsize < 1 << 20,
        "{} bytes still shown free",
        after.f_bavail * after.f_frsize
    );
}
