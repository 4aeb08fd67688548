//! Concurrent writers and readers on the same files: no lost or mixed
//! blocks, beyond the torn pages Linux allows any buffered reader.

use super::*;

mode_tests!(concurrent_writers);

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
