//! `setuid=USER` and `drop_privileges` through the mount helper
//! (`mount.warpfs CIPHERDIR MOUNTPOINT -o ...`, as mount(8) runs it): root
//! makes the mount, the extpass program and the daemon run as USER, the
//! mount is USER's; `drop_privileges` alone, an unknown user and a user
//! who is not root asking for another are refused.

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const NOBODY: u32 = 65534;

/// `mount.warpfs`, a link to the binary under test (the helper is known
/// by its name, as the package's /sbin/mount.warpfs).
fn helper(v: &Volume) -> PathBuf {
    let dir = v.root().join("sbin");
    fs::create_dir_all(&dir).unwrap();
    let h = dir.join("mount.warpfs");
    if !h.exists() {
        std::os::unix::fs::symlink(BIN, &h).unwrap();
    }
    h
}

fn run_helper(v: &Volume, opts: &str) -> Out {
    let mut c = Command::new(helper(v));
    c.arg(&v.cipher).arg(&v.mnt).arg("-o").arg(opts);
    run_cmd(c, Duration::from_secs(90))
}

/// "Uid:", "Gid:", "CapPrm:" and "CapEff:" of every thread of `pid`.
fn thread_ids(pid: i32) -> Vec<String> {
    let mut out = Vec::new();
    for t in fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let st = fs::read_to_string(t.unwrap().path().join("status")).unwrap_or_default();
        let pick: Vec<&str> = st
            .lines()
            .filter(|l| ["Uid:", "Gid:", "CapPrm:", "CapEff:"].iter().any(|k| l.starts_with(k)))
            .collect();
        out.push(pick.join(" ").split_whitespace().collect::<Vec<_>>().join(" "));
    }
    out
}

/// The super-block options of the mount at `mnt` (after " - " in mountinfo).
fn super_options(mnt: &Path) -> String {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
        .unwrap_or_else(|| panic!("{} not in mountinfo", mnt.display()));
    line.split(" - ").nth(1).unwrap().split(' ').nth(2).unwrap().to_string()
}

/// A volume whose directories user `nobody` may use: the cipher dir is
/// nobody's, the rest readable, and a directory nobody may write in.
fn volume_for_nobody() -> (Volume, PathBuf) {
    let v = Volume::init(Mode::Gcm);
    fs::set_permissions(v.root(), fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = Command::new("chown");
    c.arg("-R").arg(format!("{NOBODY}:{NOBODY}")).arg(&v.cipher);
    run_cmd(c, Duration::from_secs(30)).expect_ok("chown the cipher dir");
    let out = v.root().join("out");
    fs::create_dir(&out).unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o777)).unwrap();
    (v, out)
}

#[test]
fn setuid_runs_extpass_and_the_daemon_as_the_user() {
    require_fuse!();
    let (v, out) = volume_for_nobody();
    let uid_file = out.join("extpass-uid");
    let opts = format!(
        "setuid=nobody,drop_privileges,log_file={},extpass=id -u >{}; cat {}",
        v.logfile.display(),
        uid_file.display(),
        v.passfile.display()
    );
    let o = run_helper(&v, &opts);
    o.expect_ok(&format!("mount.warpfs -o {opts}\nlog:\n{}", v.log()));
    let pids = warpfs_pids(v.cipher.as_os_str().as_encoded_bytes(), &v.mnt);
    // Look first, clean up, then judge.
    let extpass_uid = fs::read_to_string(&uid_file).unwrap_or_default();
    let owner = super_options(&v.mnt);
    let threads: Vec<String> = pids.iter().flat_map(|&p| thread_ids(p)).collect();
    let as_nobody = Command::new("sh")
        .arg("-c")
        .arg(format!("echo made-by-nobody >{0}/f && cat {0}/f", v.mnt.display()))
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    let root_stat = fs::metadata(v.p("f"));
    let backing_owners: Vec<u32> = fs::read_dir(&v.cipher)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().uid())
        .collect();
    let um = unmount_path(&v.mnt);
    let alive = wait_pids_gone(&pids, Duration::from_secs(15));

    assert_eq!(
        extpass_uid.trim(),
        NOBODY.to_string(),
        "extpass ran as uid {extpass_uid:?}"
    );
    assert!(
        owner.split(',').any(|o| o == format!("user_id={NOBODY}")),
        "the mount is not nobody's: {owner}"
    );
    assert!(!pids.is_empty(), "no daemon found");
    let want_uid = format!("Uid: {NOBODY} {NOBODY} {NOBODY} {NOBODY}");
    let want_gid = format!("Gid: {NOBODY} {NOBODY} {NOBODY} {NOBODY}");
    for t in &threads {
        assert!(
            t.contains(&want_uid) && t.contains(&want_gid),
            "a daemon thread is not nobody's: {t}\nlog:\n{}",
            v.log()
        );
        assert!(
            t.contains("CapPrm: 0000000000000000") && t.contains("CapEff: 0000000000000000"),
            "a daemon thread kept capabilities: {t}"
        );
    }
    assert_eq!(
        String::from_utf8_lossy(&as_nobody.stdout).trim(),
        "made-by-nobody",
        "nobody cannot use its mount: {}",
        String::from_utf8_lossy(&as_nobody.stderr)
    );
    assert_eq!(
        root_stat.map_err(|e| e.raw_os_error()).err(),
        Some(Some(libc::EACCES)),
        "root got into nobody's mount (no allow_other)"
    );
    assert!(
        backing_owners.iter().all(|&u| u == NOBODY),
        "the daemon wrote CIPHERDIR as another user: {backing_owners:?}"
    );
    um.unwrap();
    assert!(alive.is_empty(), "daemon {alive:?} still running after umount");
}

#[test]
fn drop_privileges_alone_an_unknown_user_or_no_root_is_refused() {
    require_fuse!();
    let (v, out) = volume_for_nobody();
    let marker = out.join("extpass-ran");
    let extpass = format!("extpass=touch {}; cat {}", marker.display(), v.passfile.display());
    for (opts, code, says) in [
        (format!("drop_privileges,{extpass}"), E_USAGE, "--setuid"),
        (
            format!("setuid=no-such-user-warpfs,{extpass}"),
            E_USAGE,
            "no-such-user-warpfs",
        ),
    ] {
        let o = run_helper(&v, &opts);
        o.expect_code(code, &opts);
        assert!(o.stderr.contains(says), "{opts}: no word of {says}\n{o}");
        assert!(!is_mounted(&v.mnt), "{opts} mounted");
        assert!(!marker.exists(), "{opts}: extpass ran before the refusal");
    }
    // mount.fuse3 (type fuse.warpfs) with drop_privileges hands over a
    // /dev/fuse descriptor as the mountpoint: refused, saying so.
    let mut c = Command::new(helper(&v));
    c.arg(&v.cipher).arg("/dev/fd/3").arg("-o").arg(&extpass);
    let o = run_cmd(c, Duration::from_secs(30));
    o.expect_code(E_USAGE, "a /dev/fd/N mountpoint");
    assert!(o.stderr.contains("drop_privileges"), "{o}");
    // Only root may run a mount as someone else.
    let mut c = Command::new(helper(&v));
    c.arg(&v.cipher)
        .arg(&v.mnt)
        .arg("-o")
        .arg(format!("setuid=root,{extpass}"))
        .uid(NOBODY)
        .gid(NOBODY);
    let o = run_cmd(c, Duration::from_secs(30));
    o.expect_code(E_MOUNT, "setuid=root asked by nobody");
    assert!(o.stderr.contains("only root"), "{o}");
    assert!(!is_mounted(&v.mnt));
    assert!(!marker.exists(), "extpass ran for a refused setuid");
}
