//! Signals and external unmounts: foreground and background daemons
//! unmount cleanly, a busy mount is detached and served until its last
//! file closes, and a second signal stops the daemon.

use super::*;

fn foreground_signal(sig: i32) {
    let mut v = Volume::init(Mode::Gcm);
    let mut fg = Foreground::start(&v, &[]);
    write_file(&v.p("fg.txt"), b"written in the foreground");
    fg.signal(sig);
    let st = fg.exited(Duration::from_secs(15), &format!("signal {sig}"));
    assert_eq!(
        st.code(),
        Some(0),
        "mount -f exit status after signal {sig}; stderr:\n{}",
        fg.stderr()
    );
    assert!(
        !is_mounted(&v.mnt),
        "still mounted after mount -f exited on signal {sig}"
    );
    drop(fg);
    v.mount();
    assert_eq!(fs::read(v.p("fg.txt")).unwrap(), b"written in the foreground");
}

#[test]
fn foreground_sigterm_unmounts_cleanly() {
    require_fuse!();
    foreground_signal(libc::SIGTERM);
}

#[test]
fn foreground_sigint_unmounts_cleanly() {
    require_fuse!();
    foreground_signal(libc::SIGINT);
}

#[test]
fn foreground_exits_on_external_unmount() {
    require_fuse!();
    let v = Volume::init(Mode::Ctr);
    let mut fg = Foreground::start(&v, &[]);
    unmount_path(&v.mnt).unwrap();
    let st = fg
        .wait(Duration::from_secs(15))
        .expect("mount -f still running 15 s after umount");
    assert_eq!(
        st.code(),
        Some(0),
        "mount -f exit status after umount; stderr:\n{}",
        fg.stderr()
    );
}

/// A mount still in use when SIGTERM comes is detached (as `umount -l`):
/// it leaves the namespace at once, the file held open on it keeps working,
/// and the daemon exits cleanly when that file is closed. (Before, the
/// failed unmount was only logged and the daemon ran on, deaf to signals.)
#[test]
fn a_busy_mount_is_detached_on_a_signal_and_served_until_its_last_file_closes() {
    require_fuse!();
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut v = Volume::init(Mode::Gcm);
    let mut fg = Foreground::start(&v, &[]);
    let mut held = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(v.p("held.txt"))
        .unwrap();
    held.write_all(b"before the signal, ").unwrap();
    fg.signal(libc::SIGTERM);
    assert!(
        wait_unmounted(&v.mnt, Duration::from_secs(15)),
        "still mounted 15 s after SIGTERM with a file open; log:\n{}",
        fg.stderr()
    );
    assert!(
        fg.wait(Duration::ZERO).is_none(),
        "the daemon left while a file was open on its detached mount; log:\n{}",
        fg.stderr()
    );
    held.write_all(b"after it").unwrap();
    held.sync_all().unwrap();
    held.seek(SeekFrom::Start(0)).unwrap();
    let mut back = String::new();
    held.read_to_string(&mut back).unwrap();
    assert_eq!(back, "before the signal, after it");
    drop(held);
    let st = fg.exited(Duration::from_secs(15), "SIGTERM, then the last open file closed");
    let log = fg.stderr();
    assert_eq!(st.code(), Some(0), "exit status; log:\n{log}");
    assert!(log.contains("is busy: detached it"), "no word of the detach:\n{log}");
    drop(fg);
    v.mount();
    assert_eq!(fs::read(v.p("held.txt")).unwrap(), b"before the signal, after it");
}

/// A second signal ends a daemon whose detached mount is still in use, at
/// once and with status 1; what was synced before is kept.
#[test]
fn a_second_signal_stops_a_daemon_whose_detached_mount_is_in_use() {
    require_fuse!();
    use std::io::Write;
    let mut v = Volume::init(Mode::Ctr);
    let mut fg = Foreground::start(&v, &[]);
    let mut held = File::create(v.p("held.txt")).unwrap();
    held.write_all(b"synced before the signals").unwrap();
    held.sync_all().unwrap();
    fg.signal(libc::SIGINT);
    assert!(
        wait_unmounted(&v.mnt, Duration::from_secs(15)),
        "still mounted 15 s after SIGINT with a file open; log:\n{}",
        fg.stderr()
    );
    fg.signal(libc::SIGINT);
    let st = fg.exited(Duration::from_secs(15), "a second SIGINT");
    let log = fg.stderr();
    assert_eq!(st.code(), Some(1), "exit status; log:\n{log}");
    assert!(log.contains("SIGINT received again: stopping now"), "{log}");
    assert!(
        held.write_all(b", lost").and_then(|_| held.sync_all()).is_err(),
        "a write reached a daemon that is gone"
    );
    drop(held);
    drop(fg);
    v.mount();
    assert_eq!(fs::read(v.p("held.txt")).unwrap(), b"synced before the signals");
}

/// A background daemon unmounts cleanly on SIGTERM (as at shutdown) rather
/// than dying and leaving a dead mount behind.
#[test]
fn a_daemon_unmounts_cleanly_on_sigterm() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    v.mount();
    write_file(&v.p("d.txt"), b"written before SIGTERM");
    let pids = v.daemon_pids().to_vec();
    assert!(!pids.is_empty(), "no daemon found for {}", v.mnt.display());
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGTERM) };
    }
    let alive = wait_pids_gone(&pids, Duration::from_secs(15));
    assert!(
        alive.is_empty(),
        "daemon {alive:?} still running 15 s after SIGTERM; log:\n{}",
        v.log()
    );
    assert!(
        !is_mounted(&v.mnt),
        "the daemon left a dead mount behind; log:\n{}",
        v.log()
    );
    let log = v.log();
    assert!(log.contains("SIGTERM received, unmounting"), "{log}");
    assert!(log.contains("unmounted "), "{log}");
    v.daemon_stopped();
    v.mount();
    assert_eq!(fs::read(v.p("d.txt")).unwrap(), b"written before SIGTERM");
}

/// The same for a user's own daemon (mounted through fusermount3, which it
/// also unmounts through): SIGTERM with a file open detaches the mount, and
/// the daemon exits once the file is closed.
#[test]
fn a_users_daemon_detaches_its_busy_mount_on_sigterm() {
    require_fuse!();
    if warpfs_testkit::skip_if(user_mounts_unavailable()) {
        return;
    }
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    let mut v = Volume::init(Mode::Gcm);
    v.give_to(NOBODY, NOBODY);
    v.mount();
    // `nobody` holds a file open (the shell opens it, then becomes sleep).
    let mut holder = std::process::Command::new("sh")
        .arg("-c")
        .arg("echo held > held.txt && exec sleep 60 < held.txt")
        .current_dir(&v.mnt)
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .unwrap();
    let comm = format!("/proc/{}/comm", holder.id());
    let start = Instant::now();
    while fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep" {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the holder never opened its file"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pids = v.daemon_pids().to_vec();
    assert!(!pids.is_empty(), "no daemon found for {}", v.mnt.display());
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGTERM) };
    }
    let detached = wait_unmounted(&v.mnt, Duration::from_secs(15));
    let running = pids.iter().any(|p| !pid_gone(*p));
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(detached, "still mounted 15 s after SIGTERM; log:\n{}", v.log());
    assert!(
        running,
        "the daemon left while a file was open on its mount; log:\n{}",
        v.log()
    );
    let alive = wait_pids_gone(&pids, Duration::from_secs(15));
    assert!(
        alive.is_empty(),
        "daemon {alive:?} still running after the last file closed; log:\n{}",
        v.log()
    );
    assert!(v.log().contains("unmounted "), "{}", v.log());
    v.daemon_stopped();
    v.mount();
    let o = std::process::Command::new("cat")
        .arg(v.p("held.txt"))
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "held\n", "{o:?}");
}
