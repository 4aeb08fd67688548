//! Open handles while their files change underneath: the backing file
//! deleted, and renames and unlinks racing with reads and writes.

use super::*;

/// The backing file deleted (by someone else, in the cipher dir) under an
/// open handle: read, write, fsync, fstat and ftruncate on the handle keep
/// working (the daemon uses its open fd, never the path); a new lookup gives
/// ENOENT. 6 faults.
#[test]
fn backing_file_deleted_under_open_handle() {
    require_fuse!();
    for mode in [Mode::Gcm, Mode::Ctr] {
        // Names and attributes valid 0 s in the kernel: the stat after the
        // delete is a lookup the daemon answers, not a cached entry.
        let mut v = Volume::init(mode);
        v.mount_with(&["--cache-timeout", "0"]);
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
