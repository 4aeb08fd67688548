//! Writes checked against a reference model: random writes around block,
//! nnode and nonce-page boundaries, big sequential I/O, and append.

use super::*;

mode_tests!(twofish: random_writes, sequential_big_io);
mode_tests!(append);

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
