//! File content I/O through a real mount: random writes, sparse files,
//! truncation, append, big sequential I/O, concurrent writers.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};

mode_tests!(twofish: random_writes, sequential_big_io, sparse_files, truncate_up_and_down);
mode_tests!(append, concurrent_writers, mmap_writes, copy_between_files,);

/// Offsets where block, nnode and nonce-page boundaries fall.
fn hot_offsets() -> Vec<u64> {
    vec![
        0,
        BLOCK,
        15 * BLOCK,
        NNODE_DATA,
        NNODE_DATA + BLOCK,
        NNODE_DATA + SEGMENT,
        NNODE_DATA + 2 * SEGMENT,
        3 * 1024 * 1024,
    ]
}

/// Apply a write to the reference model.
fn model_write(model: &mut Vec<u8>, off: u64, data: &[u8]) {
    let end = off as usize + data.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[off as usize..end].copy_from_slice(data);
}

/// Read the whole file through a fresh descriptor after dropping its cached
/// pages, and compare with the model (also a few random sub-range reads).
fn verify(path: &Path, model: &[u8], rng: &mut Rng, ctx: &str) {
    let f = File::open(path).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    drop_cache(&f);
    let len = f.metadata().unwrap().len();
    assert_eq!(len, model.len() as u64, "{ctx}: st_size");
    let all = read_at(&f, 0, model.len() + 10).unwrap_or_else(|e| panic!("{ctx}: read: {e}"));
    assert_bytes_eq(&all, model, ctx);
    for _ in 0..8 {
        if model.is_empty() {
            break;
        }
        let off = rng.below(model.len() as u64);
        let n = rng.range(1, 70_000) as usize;
        let got = read_at(&f, off, n).unwrap_or_else(|e| panic!("{ctx}: read_at {off}+{n}: {e}"));
        let end = (off as usize + n).min(model.len());
        assert_bytes_eq(&got, &model[off as usize..end], &format!("{ctx}: read_at({off}, {n})"));
    }
}

/// Check the backing length of the only cipher file in the root against
/// FORMAT.md 3.4 (call while unmounted).
fn check_backing_len(v: &Volume, size: u64, ctx: &str) {
    let b = v.single_backing_file();
    let got = fs::metadata(&b).unwrap().len();
    assert_eq!(
        got,
        v.mode.backing_len(size),
        "{ctx}: backing length for plaintext size {size} (FORMAT.md 3.4)"
    );
}

fn random_writes(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("random_writes-{}", mode.name()));
    let mut v = Volume::new(mode);
    let path = v.p("random.bin");
    let max: u64 = 3 * 1024 * 1024 + 12_345;
    let hot = hot_offsets();
    let mut model: Vec<u8> = Vec::new();
    let f = open_rw(&path);
    for i in 0..160 {
        let off = if rng.chance(55) {
            let h = hot[rng.below(hot.len() as u64) as usize] as i64;
            (h + rng.range(0, 10_000) as i64 - 5_000).clamp(0, max as i64 - 1) as u64
        } else {
            rng.below(max)
        };
        let len = match rng.below(10) {
            0..=2 => rng.range(1, 16),
            3..=5 => rng.range(1, 8192),
            _ => rng.range(1, 300_000),
        }
        .min(max - off);
        if rng.chance(5) {
            let size = rng.below(max);
            f.set_len(size)
                .unwrap_or_else(|e| panic!("op {i}: set_len({size}): {e}"));
            model.resize(size as usize, 0);
            continue;
        }
        let data = rng.bytes(len as usize);
        if rng.chance(20) {
            // Through a short-lived descriptor of its own.
            let g = open_rw(&path);
            write_at(&g, off, &data).unwrap_or_else(|e| panic!("op {i}: write {off}+{len} (new fd): {e}"));
        } else {
            write_at(&f, off, &data).unwrap_or_else(|e| panic!("op {i}: write {off}+{len}: {e}"));
        }
        model_write(&mut model, off, &data);
        if i % 40 == 39 {
            verify(&path, &model, &mut rng, &format!("after op {i}"));
        }
    }
    verify(&path, &model, &mut rng, "after all writes");
    drop(f);
    v.unmount();
    check_backing_len(&v, model.len() as u64, "after unmount");
    v.mount();
    verify(&path, &model, &mut rng, "after remount");
}

fn sequential_big_io(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("sequential_big_io-{}", mode.name()));
    let mut v = Volume::new(mode);
    let path = v.p("big.bin");
    let data = rng.bytes(3 * 1024 * 1024 + 4097);
    {
        let mut f = File::create(&path).unwrap();
        // 1 MiB writes, then an odd tail.
        for chunk in data.chunks(1024 * 1024) {
            f.write_all(chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    // Read back in odd-sized sequential chunks.
    let mut f = File::open(&path).unwrap();
    drop_cache(&f);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 123_457];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert_bytes_eq(&got, &data, "sequential read");
    // Seek + read across each segment boundary.
    for b in [NNODE_DATA, NNODE_DATA + SEGMENT, NNODE_DATA + 2 * SEGMENT] {
        f.seek(SeekFrom::Start(b - 10)).unwrap();
        let mut x = [0u8; 20];
        f.read_exact(&mut x).unwrap();
        assert_eq!(&x[..], &data[b as usize - 10..b as usize + 10], "across boundary {b}");
    }
    let blocks = f.metadata().unwrap().blocks() * 512;
    assert!(
        blocks >= data.len() as u64,
        "st_blocks of a fully written {} byte file is {blocks} bytes",
        data.len()
    );
    drop(f);
    v.unmount();
    check_backing_len(&v, data.len() as u64, "after unmount");
    v.mount();
    assert_bytes_eq(&fs::read(&path).unwrap(), &data, "after remount");
}

fn sparse_files(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("sparse_files-{}", mode.name()));
    let mut v = Volume::new(mode);

    // 1. Seek far and write: everything before is a hole.
    let far = 5 * 1024 * 1024 + 123;
    let mut m1 = vec![0u8; far as usize];
    m1.extend_from_slice(b"tail-data");
    {
        let mut f = File::create(v.p("far.bin")).unwrap();
        f.seek(SeekFrom::Start(far)).unwrap();
        f.write_all(b"tail-data").unwrap();
        f.sync_all().unwrap();
    }
    verify(&v.p("far.bin"), &m1, &mut rng, "far write");

    // 2. Data at both ends, a hole in the middle, then a write into the hole.
    let mut m2 = Vec::new();
    {
        let f = open_rw(&v.p("middle.bin"));
        let a = rng.bytes(100);
        let b = rng.bytes(10);
        write_at(&f, 0, &a).unwrap();
        model_write(&mut m2, 0, &a);
        write_at(&f, 3 * 1024 * 1024, &b).unwrap();
        model_write(&mut m2, 3 * 1024 * 1024, &b);
        verify(&v.p("middle.bin"), &m2, &mut rng, "two ends");
        let c = rng.bytes(5000);
        let off = 1024 * 1024 + 512 * 1024 + 1000;
        write_at(&f, off, &c).unwrap();
        model_write(&mut m2, off, &c);
        verify(&v.p("middle.bin"), &m2, &mut rng, "write into hole");
    }

    // 3. A hole inside the nnode range.
    let mut m3 = Vec::new();
    {
        let f = open_rw(&v.p("nnode-hole.bin"));
        let a = rng.bytes(3000);
        write_at(&f, 0, &a).unwrap();
        model_write(&mut m3, 0, &a);
        let b = rng.bytes(2000);
        write_at(&f, 40_000, &b).unwrap();
        model_write(&mut m3, 40_000, &b);
        verify(&v.p("nnode-hole.bin"), &m3, &mut rng, "nnode hole");
    }

    v.unmount();
    // The backing file of far.bin stays sparse (FORMAT.md 3.6).
    let far_len = mode.backing_len(m1.len() as u64);
    let backing: Vec<_> = v
        .root_backing_entries()
        .into_iter()
        .filter(|p| fs::metadata(p).unwrap().len() == far_len)
        .collect();
    assert_eq!(backing.len(), 1, "backing file of far.bin (length {far_len}) not found");
    let alloc = fs::metadata(&backing[0]).unwrap().blocks() * 512;
    assert!(
        alloc < 256 * 1024,
        "backing file of a 5 MiB file with 9 written bytes allocates {alloc} bytes: holes are not kept sparse"
    );
    v.mount();
    verify(&v.p("far.bin"), &m1, &mut rng, "far write after remount");
    verify(&v.p("middle.bin"), &m2, &mut rng, "middle after remount");
    verify(&v.p("nnode-hole.bin"), &m3, &mut rng, "nnode hole after remount");
}

fn truncate_path(p: &Path, len: u64) -> std::io::Result<()> {
    let c = cstr(p);
    if unsafe { libc::truncate(c.as_ptr(), len as libc::off_t) } < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn truncate_up_and_down(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("truncate-{}", mode.name()));
    let mut v = Volume::new(mode);
    let path = v.p("trunc.bin");
    let mut model = rng.bytes(3 * 1024 * 1024 + 5);
    let f = open_rw(&path);
    write_at(&f, 0, &model).unwrap();
    let mib = 1024 * 1024;
    let steps: &[u64] = &[
        2 * mib + 100,
        2 * mib + 100 + 50_000,
        NNODE_DATA + SEGMENT,
        NNODE_DATA + SEGMENT + 1,
        NNODE_DATA,
        NNODE_DATA + 1,
        70_000,
        4095,
        4097,
        0,
        10,
        mib + NNODE_DATA + 3,
        4096,
        3 * mib,
    ];
    for (i, &size) in steps.iter().enumerate() {
        if i % 2 == 0 {
            f.set_len(size).unwrap_or_else(|e| panic!("ftruncate({size}): {e}"));
        } else {
            truncate_path(&path, size).unwrap_or_else(|e| panic!("truncate({size}): {e}"));
        }
        model.resize(size as usize, 0);
        let ctx = format!("after truncate #{i} to {size}");
        verify(&path, &model, &mut rng, &ctx);
        // After a shrink, a write beyond the end leaves zeros in between
        // (stale bytes of the old block must not come back).
        if i % 3 == 2 {
            let off = size + rng.range(1, 9000);
            let n = rng.range(1, 5000) as usize;
            let d = rng.bytes(n);
            write_at(&f, off, &d).unwrap();
            model_write(&mut model, off, &d);
            verify(&path, &model, &mut rng, &format!("{ctx} + write at {off}"));
        }
    }
    drop(f);

    // Truncate to zero leaves an empty backing file (FORMAT.md 3.6).
    fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
    model.clear();
    verify(&path, &model, &mut rng, "after O_TRUNC");
    v.unmount();
    check_backing_len(&v, 0, "after O_TRUNC");
    v.mount();
    let d = rng.bytes(70_001);
    {
        let f = open_rw(&path);
        write_at(&f, 0, &d).unwrap();
        f.set_len(65_537).unwrap();
    }
    model = d[..65_537].to_vec();
    v.remount();
    verify(&path, &model, &mut rng, "after remount");
    v.unmount();
    check_backing_len(&v, model.len() as u64, "final");
}

fn append(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("append-{}", mode.name()));
    let mut v = Volume::new(mode);
    let path = v.p("log.txt");
    let mut model = Vec::new();
    {
        let mut f = OpenOptions::new().create(true).append(true).open(&path).unwrap();
        for n in [1usize, 4095, 4096, 4097, 60_000, 70_000, 1024 * 1024, 3, 200_000] {
            let d = rng.bytes(n);
            f.write_all(&d).unwrap();
            model.extend_from_slice(&d);
            assert_eq!(
                f.metadata().unwrap().len(),
                model.len() as u64,
                "size after appending {n}"
            );
        }
    }
    verify(&path, &model, &mut rng, "single appender");
    {
        // Two O_APPEND descriptors interleaved: every write lands at the end.
        let mut a = OpenOptions::new().append(true).open(&path).unwrap();
        let mut b = OpenOptions::new().append(true).open(&path).unwrap();
        for i in 0..20 {
            let n = rng.range(1, 9000) as usize;
            let d = rng.bytes(n);
            if i % 2 == 0 { &mut a } else { &mut b }.write_all(&d).unwrap();
            model.extend_from_slice(&d);
        }
    }
    verify(&path, &model, &mut rng, "two appenders");
    v.remount();
    verify(&path, &model, &mut rng, "after remount");
}

/// Deterministic 4 KiB content of `writer` for block `b`.
fn pattern(writer: u64, b: u64) -> Vec<u8> {
    Rng::new(writer * 1_000_003 + b + 1).bytes(BLOCK as usize)
}

/// Whether every byte of `blk` (block `b` as a concurrent buffered read
/// returned it) is that byte of some writer's version of block `b`: a page
/// the kernel copied out while a write was copying into it, as Linux allows
/// on any file system (buffered reads take no lock against buffered
/// writes). Bytes a wrong mask or a mismatched nonce produce match one of
/// the five versions with probability 5/256 each, so a block of them fails.
fn spliced_or_none(blk: &[u8], b: u64, pats: &[Vec<Vec<u8>>]) -> bool {
    blk.iter()
        .enumerate()
        .all(|(i, &x)| pats.iter().any(|p| p[b as usize][i] == x))
}

fn concurrent_writers(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("concurrent-{}", mode.name()));
    let mut v = Volume::new(mode);

    // Phase A: disjoint, unaligned regions (neighbours share a block, so
    // partial-block read-modify-write must not lose the other's bytes).
    let region = 300_001usize;
    let path = v.p("disjoint.bin");
    File::create(&path).unwrap();
    let datas: Vec<Vec<u8>> = (0..4).map(|_| rng.bytes(region)).collect();
    let seeds: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let data = datas[t].clone();
            let path = path.clone();
            let barrier = barrier.clone();
            let seed = seeds[t];
            std::thread::spawn(move || {
                let mut r = Rng::new(seed);
                let mut chunks = Vec::new();
                let mut o = 0usize;
                while o < data.len() {
                    let n = (r.range(1, 20_000) as usize).min(data.len() - o);
                    chunks.push((o, n));
                    o += n;
                }
                for i in (1..chunks.len()).rev() {
                    let j = r.below(i as u64 + 1) as usize;
                    chunks.swap(i, j);
                }
                let f = OpenOptions::new().write(true).open(&path).unwrap();
                barrier.wait();
                let base = (t * region) as u64;
                for (o, n) in chunks {
                    write_at(&f, base + o as u64, &data[o..o + n])
                        .unwrap_or_else(|e| panic!("writer {t}: write at {}: {e}", base + o as u64));
                }
                f.sync_all().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread panicked");
    }
    let model: Vec<u8> = datas.concat();
    verify(&path, &model, &mut rng, "disjoint concurrent writers");

    // Phase B: four writers over the same 300 blocks (block-aligned runs),
    // plus a reader that must never get an error.
    let nblocks = 300u64;
    let path = v.p("overlap.bin");
    let pats: Arc<Vec<Vec<Vec<u8>>>> =
        Arc::new((0..5).map(|w| (0..nblocks).map(|b| pattern(w, b)).collect()).collect());
    {
        let f = open_rw(&path);
        let init: Vec<u8> = pats[4].concat();
        write_at(&f, 0, &init).unwrap();
        f.sync_all().unwrap();
    }
    let check_block = |blk: &[u8], b: u64, allowed: &[u64], pats: &Vec<Vec<Vec<u8>>>| -> Option<String> {
        if allowed.iter().any(|&w| pats[w as usize][b as usize] == blk) {
            None
        } else {
            let first = blk.iter().position(|x| *x != 0);
            // Which writer each 16-byte piece matches (a torn block shows
            // pieces of two writers; a wrong mask matches nobody).
            let mut pieces = String::new();
            let mut last = None;
            for (i, c) in blk.chunks(16).enumerate() {
                let who = (0..5u64).find(|&w| pats[w as usize][b as usize][i * 16..i * 16 + c.len()] == *c);
                if Some(who) != last {
                    pieces.push_str(&format!(
                        " @{}:{}",
                        i * 16,
                        who.map_or("-".to_string(), |w| w.to_string())
                    ));
                    last = Some(who);
                }
            }
            Some(format!(
                "block {b} ({} bytes) equals none of writers {allowed:?} (first non-zero byte at {first:?}; pieces{pieces})",
                blk.len()
            ))
        }
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader_problems = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let path = path.clone();
        let stop = stop.clone();
        let problems = reader_problems.clone();
        let pats = pats.clone();
        std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let f = File::open(&path).unwrap();
            let mut r = Rng::new(99);
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                let b0 = r.below(nblocks - 16);
                match read_at(&f, b0 * BLOCK, 16 * BLOCK as usize) {
                    Err(e) => problems.lock().unwrap().push(format!("read at block {b0}: {e}")),
                    Ok(buf) => {
                        for (k, blk) in buf.chunks(BLOCK as usize).enumerate() {
                            // A buffered read() racing a buffered write() of the
                            // same page may see the page half-copied: Linux
                            // copies page-cache pages in and out without a lock
                            // (plain ext4 shows the same torn pages; see
                            // `spliced_or_none`). Each byte must still be that
                            // byte of some writer's block: a mask made for
                            // another nonce, or ciphertext and nonce entry of
                            // two different writes, turn the block into
                            // bytes no writer wrote.
                            let b = b0 + k as u64;
                            if let Some(p) = check_block(blk, b, &[0, 1, 2, 3, 4], &pats) {
                                if spliced_or_none(blk, b, &pats) {
                                    eprintln!("concurrent read: torn page (allowed): {p}");
                                } else {
                                    problems.lock().unwrap().push(format!("concurrent read: {p}"));
                                }
                            }
                        }
                    }
                }
                reads += 1;
            }
            reads
        })
    };
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4u64)
        .map(|w| {
            let path = path.clone();
            let barrier = barrier.clone();
            let pats = pats.clone();
            let seed = seeds[w as usize] ^ 0x55;
            std::thread::spawn(move || {
                let mut r = Rng::new(seed);
                let f = OpenOptions::new().write(true).open(&path).unwrap();
                barrier.wait();
                for _round in 0..2 {
                    let mut b = 0u64;
                    let mut runs = Vec::new();
                    while b < nblocks {
                        let n = r.range(1, 8).min(nblocks - b);
                        runs.push((b, n));
                        b += n;
                    }
                    for i in (1..runs.len()).rev() {
                        let j = r.below(i as u64 + 1) as usize;
                        runs.swap(i, j);
                    }
                    for (b, n) in runs {
                        let buf: Vec<u8> = (b..b + n).flat_map(|x| pats[w as usize][x as usize].clone()).collect();
                        write_at(&f, b * BLOCK, &buf)
                            .unwrap_or_else(|e| panic!("overlap writer {w}: write blocks {b}+{n}: {e}"));
                    }
                }
                f.sync_all().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().expect("overlap writer panicked");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().expect("reader panicked");
    let problems = reader_problems.lock().unwrap().clone();
    assert!(
        problems.is_empty(),
        "{} problems in {reads} concurrent reads, e.g.:\n{}",
        problems.len(),
        problems.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
    let check_all = |ctx: &str| -> Vec<u8> {
        let f = File::open(&path).unwrap();
        drop_cache(&f);
        let all = read_at(&f, 0, (nblocks * BLOCK) as usize + 1).unwrap_or_else(|e| panic!("{ctx}: read: {e}"));
        assert_eq!(all.len() as u64, nblocks * BLOCK, "{ctx}: length");
        let bad: Vec<String> = all
            .chunks(BLOCK as usize)
            .enumerate()
            .filter_map(|(b, blk)| check_block(blk, b as u64, &[0, 1, 2, 3], &pats))
            .collect();
        assert!(
            bad.is_empty(),
            "{ctx}: {} bad blocks, e.g. {:?}",
            bad.len(),
            &bad[..bad.len().min(5)]
        );
        all
    };
    let before = check_all("after overlapping writers");
    v.remount();
    let after = check_all("after remount");
    assert_bytes_eq(&after, &before, "overlap.bin across remount");
    verify(&v.p("disjoint.bin"), &model, &mut rng, "disjoint after remount");
}

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
