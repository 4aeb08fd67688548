//! File sizes: sparse files and holes, and truncation up and down.

use super::*;

mode_tests!(twofish: sparse_files, truncate_up_and_down);

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
