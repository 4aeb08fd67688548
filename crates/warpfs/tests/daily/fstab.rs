//! Mounting the way Linux users do: util-linux's own `mount -a -T FSTAB`,
//! `mount MOUNTPOINT` of one entry and `umount`, through mount.fuse3
//! (`warpfs CIPHERDIR MOUNTPOINT -o OPTIONS`) and through the package's
//! mount.warpfs helper (`mount -t warpfs`).
//!
//! mount(8) runs helpers with no PATH, so mount.fuse3 finds `warpfs` only
//! where a package puts it. Against the build, the entries name the binary
//! the old FUSE way (`/path/to/warpfs#CIPHERDIR`, type `fuse`: the same
//! mount.fuse3 call); `WARPFS_INSTALLED_BIN=/usr/bin/warpfs` (scripts/deb.sh,
//! after `dpkg -i`) tests the installed binary with the entries users
//! write (`CIPHERDIR MOUNTPOINT fuse.warpfs ...`) and runs the #[ignore]d
//! tests, which need the package's /sbin/mount.warpfs. An entry with
//! `-o tpm2,tpm2-tcti=...` unlocks with a TPM2 slot on a software TPM
//! (swtpm) started by the test.

use crate::common::*;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(90);

/// The installed binary under test, if any.
fn installed() -> Option<PathBuf> {
    std::env::var_os("WARPFS_INSTALLED_BIN").map(PathBuf::from)
}

/// The binary the mounts run.
fn bin() -> PathBuf {
    installed().unwrap_or_else(|| PathBuf::from(BIN))
}

/// An fstab line for `v` with `opts`, as a user writes it for the installed
/// binary, or naming the build's binary for mount.fuse3.
fn fstab_line(v: &Volume, opts: &str) -> String {
    match installed() {
        Some(_) => format!("{} {} fuse.warpfs {opts} 0 0", v.cipher.display(), v.mnt.display()),
        None => format!("{}#{} {} fuse {opts} 0 0", BIN, v.cipher.display(), v.mnt.display()),
    }
}

fn run(args: &[&str]) -> Out {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]);
    run_cmd(c, T)
}

/// The daemon serving `v`, started by a helper (`warpfs CIPHERDIR MNT ...`).
fn helper_daemons(v: &Volume) -> Vec<i32> {
    warpfs_pids(v.cipher.as_os_str().as_encoded_bytes(), &v.mnt)
}

/// `umount MNT` and check that the daemon is gone.
fn umount_and_daemon_gone(v: &Volume) {
    let pids = helper_daemons(v);
    assert!(!pids.is_empty(), "no daemon found for {}", v.mnt.display());
    run(&["umount", v.mnt.to_str().unwrap()]).expect_ok("umount");
    assert!(!is_mounted(&v.mnt));
    let alive = wait_pids_gone(&pids, Duration::from_secs(30));
    assert!(alive.is_empty(), "daemon(s) {alive:?} still running after umount");
}

#[test]
fn fstab_entries_mount_with_mount_a_and_by_their_mountpoint() {
    require_fuse!();
    let a = Volume::init(Mode::Gcm);
    let b = Volume::init(Mode::Gcm);
    let dir = tempfile::tempdir().unwrap();
    let fstab = dir.path().join("fstab");
    let line_a = fstab_line(
        &a,
        &format!(
            "passfile={},nofail,_netdev,x-systemd.automount,noatime,idle=1h,engine_threads=1",
            a.passfile.display()
        ),
    );
    // A space inside an option is \040 in fstab (extpass=cat FILE).
    let line_b = fstab_line(&b, &format!("extpass=cat\\040{},noauto,nosuid", b.passfile.display()));
    eprintln!("fstab:\n{line_a}\n{line_b}");
    fs::write(&fstab, format!("# test fstab\n{line_a}\n{line_b}\n")).unwrap();
    let f = fstab.to_str().unwrap();

    run(&["mount", "-a", "-T", f]).expect_ok("mount -a");
    assert!(is_mounted(&a.mnt), "mount -a did not mount the auto entry");
    assert!(!is_mounted(&b.mnt), "mount -a mounted a noauto entry");
    assert!(
        mount_options(&a.mnt).unwrap().contains("noatime"),
        "{:?}",
        mount_options(&a.mnt)
    );
    write_file(&a.p("hello.txt"), b"from fstab");
    assert_eq!(fs::read(a.p("hello.txt")).unwrap(), b"from fstab");
    umount_and_daemon_gone(&a);

    // One entry by its mountpoint (`mount MOUNTPOINT`), noauto or not.
    run(&["mount", "-T", f, b.mnt.to_str().unwrap()]).expect_ok("mount MOUNTPOINT");
    assert!(mount_options(&b.mnt).unwrap().contains("nosuid"));
    write_file(&b.p("x"), b"y");
    umount_and_daemon_gone(&b);
    run(&["mount", "-T", f, a.mnt.to_str().unwrap()]).expect_ok("mount MOUNTPOINT again");
    assert_eq!(
        fs::read(a.p("hello.txt")).unwrap(),
        b"from fstab",
        "data kept across mounts"
    );
    umount_and_daemon_gone(&a);
}

#[test]
fn an_unknown_option_is_one_error_line_and_exit_2() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    let bin = bin();
    let opts = format!("passfile={},frobnicate=3", v.passfile.display());
    let o = run(&[
        bin.to_str().unwrap(),
        v.cipher.to_str().unwrap(),
        v.mnt.to_str().unwrap(),
        "-o",
        &opts,
    ]);
    o.expect_code(2, "unknown -o option");
    assert_eq!(o.stderr.trim(), "warpfs: unknown mount option 'frobnicate=3'", "{o}");
    assert!(!is_mounted(&v.mnt));
    // The same through mount(8): it fails and passes the line on.
    let dir = tempfile::tempdir().unwrap();
    let fstab = dir.path().join("fstab");
    fs::write(&fstab, fstab_line(&v, &opts) + "\n").unwrap();
    let o = run(&["mount", "-T", fstab.to_str().unwrap(), v.mnt.to_str().unwrap()]);
    assert!(!o.ok(), "{o}");
    assert!(o.stderr.contains("unknown mount option 'frobnicate=3'"), "{o}");
    assert!(!is_mounted(&v.mnt));
    // Malformed ones too, and `warpfs mount -o` says the same.
    for (bad, msg) in [
        ("passfile", "mount option 'passfile' needs a value"),
        ("no_xattr=1", "mount option 'no_xattr' takes no value"),
    ] {
        let o = run(&[
            BIN,
            "mount",
            "-o",
            bad,
            v.cipher.to_str().unwrap(),
            v.mnt.to_str().unwrap(),
        ]);
        o.expect_code(2, bad);
        assert!(o.stderr.contains(msg) && o.stderr.trim().lines().count() == 1, "{o}");
    }
}

#[test]
fn every_mount_option_is_an_o_option() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    let bin = bin();
    let opts = format!(
        "passfile={},ro,fsname=warpfs-test-vol,force_owner=4321:8765,no_xattr,caches=none,\
         engine=cpu,speculation=off,threads=2,log_file={}",
        v.passfile.display(),
        v.logfile.display()
    );
    run(&[
        bin.to_str().unwrap(),
        v.cipher.to_str().unwrap(),
        v.mnt.to_str().unwrap(),
        "-o",
        &opts,
    ])
    .expect_ok("warpfs CIPHERDIR MNT -o ...");
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(v.mnt.to_str().unwrap()))
        .unwrap();
    assert!(line.contains(" warpfs-test-vol "), "fsname: {line}");
    assert!(mount_options(&v.mnt).unwrap().split(',').any(|o| o == "ro"));
    let m = fs::metadata(&v.mnt).unwrap();
    assert_eq!((m.uid(), m.gid()), (4321, 8765), "force_owner");
    assert_eq!(
        fs::write(v.p("f"), b"x").unwrap_err().raw_os_error(),
        Some(libc::EROFS),
        "ro"
    );
    let log = v.log();
    assert!(log.contains("speculation off"), "{log}");
    umount_and_daemon_gone(&v);
}

#[test]
fn fake_mode_checks_options_and_mounts_nothing() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    let (c, m) = (v.cipher.to_str().unwrap(), v.mnt.to_str().unwrap());
    run(&[BIN, c, m, "-f", "-o", "ro"]).expect_ok("fake");
    assert!(!is_mounted(&v.mnt));
    run(&[BIN, c, m, "-f", "-o", "bogus"]).expect_code(2, "fake with a bad option");
}

/// mount(8) with type `warpfs` runs the package's /sbin/mount.warpfs.
#[test]
#[ignore = "needs the installed package (scripts/deb.sh runs it)"]
fn type_warpfs_runs_the_installed_mount_helper() {
    require_fuse!();
    assert!(Path::new("/sbin/mount.warpfs").exists(), "no /sbin/mount.warpfs");
    let v = Volume::init(Mode::Gcm);
    let opts = format!("passfile={},noatime,nofail", v.passfile.display());
    run(&[
        "mount",
        "-t",
        "warpfs",
        "-o",
        &opts,
        v.cipher.to_str().unwrap(),
        v.mnt.to_str().unwrap(),
    ])
    .expect_ok("mount -t warpfs");
    write_file(&v.p("a"), b"b");
    let pids = warpfs_pids(v.cipher.as_os_str().as_encoded_bytes(), &v.mnt);
    run(&["umount", v.mnt.to_str().unwrap()]).expect_ok("umount");
    assert!(wait_pids_gone(&pids, Duration::from_secs(30)).is_empty());
    // And from an fstab entry of type warpfs.
    let dir = tempfile::tempdir().unwrap();
    let fstab = dir.path().join("fstab");
    let line = format!("{} {} warpfs {opts} 0 0\n", v.cipher.display(), v.mnt.display());
    fs::write(&fstab, &line).unwrap();
    run(&["mount", "-a", "-T", fstab.to_str().unwrap()]).expect_ok("mount -a, type warpfs");
    assert_eq!(fs::read(v.p("a")).unwrap(), b"b");
    let pids = warpfs_pids(v.cipher.as_os_str().as_encoded_bytes(), &v.mnt);
    run(&["umount", v.mnt.to_str().unwrap()]).expect_ok("umount");
    assert!(wait_pids_gone(&pids, Duration::from_secs(30)).is_empty());
}

#[test]
fn nonempty_mounts_over_files_only_when_asked() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    write_file(&v.mnt.join("underneath"), b"hidden while mounted");
    let bin = bin();
    let (c, m) = (v.cipher.to_str().unwrap(), v.mnt.to_str().unwrap());
    let pass = format!("passfile={}", v.passfile.display());
    run(&[bin.to_str().unwrap(), c, m, "-o", &pass]).expect_code(13, "over a non-empty directory");
    assert!(!is_mounted(&v.mnt));
    run(&[bin.to_str().unwrap(), c, m, "-o", &format!("{pass},nonempty")]).expect_ok("-o nonempty");
    assert!(!v.mnt.join("underneath").exists(), "the files underneath are hidden");
    umount_and_daemon_gone(&v);
    assert_eq!(fs::read(v.mnt.join("underneath")).unwrap(), b"hidden while mounted");
}

/// An fstab entry that unlocks with a TPM2 keyslot (`-o tpm2,tpm2-tcti=`):
/// `mount -a` mounts it with no password anywhere and no prompt, and a
/// TPM that refuses (its PCR changed) fails the entry with the reason.
#[test]
fn an_fstab_entry_unlocks_with_a_tpm2_slot_and_no_password() {
    require_fuse!();
    let Some(tpm) = warpfs_testkit::swtpm::for_test() else {
        return;
    };
    let v = Volume::init(Mode::Gcm);
    run(&[
        BIN,
        "key",
        "add",
        "--passfile",
        v.passfile.to_str().unwrap(),
        "--tpm2",
        "--tpm2-tcti",
        &tpm.tcti_short(),
        "--tpm2-pcrs",
        "7",
        v.cipher.to_str().unwrap(),
    ])
    .expect_ok("key add --tpm2");
    // Whatever the entry does, it cannot fall back to the password.
    fs::remove_file(&v.passfile).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fstab = dir.path().join("fstab");
    let opts = format!("tpm2,tpm2-tcti={},nofail,noatime", tpm.tcti_short());
    fs::write(&fstab, fstab_line(&v, &opts) + "\n").unwrap();
    let f = fstab.to_str().unwrap();
    run(&["mount", "-a", "-T", f]).expect_ok("mount -a with -o tpm2");
    assert!(is_mounted(&v.mnt), "mount -a did not mount the tpm2 entry");
    write_file(&v.p("boot.txt"), b"unlocked by the TPM");
    umount_and_daemon_gone(&v);
    // A changed PCR 7 (another boot chain): the entry fails, saying why.
    let t = warpfs_tpm2::Tcti::parse(&tpm.tcti()).unwrap();
    warpfs_tpm2::extend_pcr(&t, 7, b"another boot loader").unwrap();
    let o = run(&["mount", "-T", f, v.mnt.to_str().unwrap()]);
    assert!(!o.ok(), "{o}");
    assert!(o.stderr.contains("PCR 7 changed"), "{o}");
    assert!(!is_mounted(&v.mnt));
}

/// `mount -o remount,ro MOUNTPOINT` and back to `rw` (mount(8) hands a
/// remount to the helper too): the same daemon goes on serving, writes
/// fail with EROFS only while read-only, and the options not named
/// (`nosuid`, `nodev`) stay on.
#[test]
fn remount_read_only_and_back() {
    require_fuse!();
    let v = Volume::init(Mode::Gcm);
    let dir = tempfile::tempdir().unwrap();
    let fstab = dir.path().join("fstab");
    let line = fstab_line(&v, &format!("passfile={},nosuid,nodev", v.passfile.display()));
    fs::write(&fstab, format!("{line}\n")).unwrap();
    let (f, m) = (fstab.to_str().unwrap(), v.mnt.to_str().unwrap());
    run(&["mount", "-T", f, m]).expect_ok("mount MOUNTPOINT");
    write_file(&v.p("before"), b"kept");
    let pids = helper_daemons(&v);
    let flags = |ctx: &str| {
        let o = mount_options(&v.mnt).unwrap_or_else(|| panic!("{ctx}: not mounted"));
        o.split(',').map(str::to_string).collect::<Vec<_>>()
    };
    run(&["mount", "-T", f, "-o", "remount,ro", m]).expect_ok("mount -o remount,ro");
    let o = flags("read-only");
    assert!(o.iter().any(|x| x == "ro"), "not read-only after remount,ro: {o:?}");
    assert!(
        o.iter().any(|x| x == "nosuid") && o.iter().any(|x| x == "nodev"),
        "{o:?}"
    );
    let e = fs::write(v.p("during"), b"x").expect_err("a write on a read-only remount");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    assert_eq!(fs::read(v.p("before")).unwrap(), b"kept");
    run(&["mount", "-T", f, "-o", "remount,rw", m]).expect_ok("mount -o remount,rw");
    let o = flags("read-write");
    assert!(o.iter().any(|x| x == "rw"), "not read-write after remount,rw: {o:?}");
    assert!(
        o.iter().any(|x| x == "nosuid") && o.iter().any(|x| x == "nodev"),
        "{o:?}"
    );
    write_file(&v.p("after"), b"written");
    assert_eq!(helper_daemons(&v), pids, "the same daemon serves the mount");
    umount_and_daemon_gone(&v);
}
