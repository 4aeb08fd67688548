//! `mount`: failures (exit 13), the daemon's life from mount to unmount,
//! and the mount options (read-only, threads, allow_other, the log file).

use super::*;

#[test]
fn mount_failures_exit_13() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    let missing = v.root().join("no-such-dir");
    let o = warpfs(args!["mount", "--passfile", &v.passfile, &v.cipher, &missing]);
    o.expect_code(E_MOUNT, "mount on a missing mountpoint");
    let file = v.root().join("a-file");
    File::create(&file).unwrap();
    let o = warpfs(args!["mount", "--passfile", &v.passfile, &v.cipher, &file]);
    o.expect_code(E_MOUNT, "mount on a regular file");
    assert!(!is_mounted(&file));
    v.mount();
    write_file(&v.p("x"), b"x");
    // A cipher dir that was never initialised.
    let empty = v.root().join("empty-cipher");
    let mnt2 = v.root().join("mnt2");
    fs::create_dir(&empty).unwrap();
    fs::create_dir(&mnt2).unwrap();
    let o = warpfs(args!["mount", "--passfile", &v.passfile, &empty, &mnt2]);
    assert!(
        matches!(o.code, Some(1) | Some(E_CONFIG)),
        "mount of an uninitialised dir: expected exit 1 or 11\n{o}"
    );
    assert!(!is_mounted(&mnt2));
}

#[test]
fn mount_returns_when_live_and_daemon_exits_on_unmount() {
    require_fuse!();
    let v = Volume::init(Mode::Ctr);
    let o = warpfs(args![
        "mount",
        "--passfile",
        &v.passfile,
        "--log-file",
        &v.logfile,
        &v.cipher,
        &v.mnt
    ]);
    o.expect_ok("mount");
    let live = is_mounted(&v.mnt);
    let pids = daemon_pids(&v.mnt);
    // Clean up before asserting.
    let stat_ok = live && fs::metadata(&v.mnt).map(|m| m.is_dir()).unwrap_or(false);
    let t = Instant::now();
    while !is_mounted(&v.mnt) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let um = unmount_path(&v.mnt);
    let alive = wait_pids_gone(&pids, Duration::from_secs(15));
    for p in &alive {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert!(live, "`warpfs mount` returned before the mount was live");
    assert!(stat_ok, "stat of the fresh mount root failed");
    um.expect("unmount");
    assert!(
        !pids.is_empty(),
        "no `warpfs mount` daemon process found for {}",
        v.mnt.display()
    );
    assert!(alive.is_empty(), "daemon {alive:?} still running 15 s after unmount");
}

#[test]
fn read_only_mount() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("f"), b"read only");
    v.unmount();
    v.mount_with(&["-o", "ro"]);
    let opts = mount_options(&v.mnt).unwrap_or_default();
    assert!(opts.split(',').any(|o| o == "ro"), "mount options {opts:?} lack ro");
    assert_eq!(fs::read(v.p("f")).unwrap(), b"read only");
    assert_errno(File::create(v.p("g")), libc::EROFS, "create on a ro mount");
    assert_errno(
        fs::OpenOptions::new().write(true).open(v.p("f")),
        libc::EROFS,
        "open for write on ro",
    );
    assert_errno(fs::remove_file(v.p("f")), libc::EROFS, "unlink on ro");
    assert_errno(fs::create_dir(v.p("d")), libc::EROFS, "mkdir on ro");
    let state = dir_state(&v.cipher);
    v.unmount();
    assert_eq!(dir_state(&v.cipher), state, "ro mount changed the cipher dir");
}

#[test]
fn threads_option() {
    require_fuse!();
    let mut v = Volume::init(Mode::Ctr);
    for n in ["1", "4"] {
        v.mount_with(&["--threads", n]);
        let data = Rng::new(n.len() as u64).bytes(300_000);
        write_file(&v.p(format!("t{n}")), &data);
        assert_eq!(fs::read(v.p(format!("t{n}"))).unwrap(), data);
        v.unmount();
    }
}

/// Run `cat FILE` as user `nobody` (65534); returns (success, stdout).
fn cat_as_nobody(p: &std::path::Path) -> (bool, String) {
    use std::os::unix::process::CommandExt;
    let o = std::process::Command::new("cat")
        .arg(p)
        .uid(65534)
        .gid(65534)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run cat as nobody");
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn allow_other_option() {
    require_fuse!();
    use std::os::unix::fs::PermissionsExt;
    let mut v = Volume::init(Mode::Gcm);
    // The fixture's temp dir is 0700; let other users reach the mountpoint.
    fs::set_permissions(v.root(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&v.cipher, fs::Permissions::from_mode(0o755)).unwrap();
    v.mount();
    write_file(&v.p("pub.txt"), b"public");
    fs::set_permissions(v.p("pub.txt"), fs::Permissions::from_mode(0o644)).unwrap();
    write_file(&v.p("private.txt"), b"private");
    fs::set_permissions(v.p("private.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    let (ok, _) = cat_as_nobody(&v.p("pub.txt"));
    assert!(!ok, "another user read the mount without allow_other");
    v.unmount();
    v.mount_with(&["-o", "allow_other"]);
    let (ok, out) = cat_as_nobody(&v.p("pub.txt"));
    assert!(
        ok && out == "public",
        "with allow_other another user cannot read a 0644 file ({ok}, {out:?})"
    );
    let (ok, _) = cat_as_nobody(&v.p("private.txt"));
    assert!(
        !ok,
        "with allow_other another user read a 0600 root file (permissions not enforced)"
    );
}

#[test]
fn log_file_is_not_world_writable() {
    require_fuse!();
    use std::os::unix::fs::MetadataExt;
    let mut v = Volume::new(Mode::Ctr);
    write_file(&v.p("f"), b"x");
    v.unmount();
    let m = fs::metadata(&v.logfile).expect("the --log-file was not created");
    assert_eq!(
        m.mode() & 0o022,
        0,
        "--log-file created with mode {:o} (group/world-writable)",
        m.mode() & 0o7777
    );
}
