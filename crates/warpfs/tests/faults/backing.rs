//! The backing directory refusing changes: remounted read-only (EROFS),
//! and permission denied on its files and directories (EACCES).

use super::*;

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
                    // Names and attributes valid 0 s in the kernel: each
                    // open below is a lookup the daemon answers.
                    "--cache-timeout",
                    "0",
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
