//! `warpfs mount --versions-seen` (FORMAT.md 16, docs/decisions/0099): a
//! whole file or a `warpfs.conf` put back to a version this host saw
//! replaced is refused, through real mounts; versions another host made are
//! taken without an alarm; without the option the same rollbacks pass (what
//! the option adds).

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::path::{Path, PathBuf};

fn state_dir(v: &Volume) -> PathBuf {
    v.cipher.parent().unwrap().join("state")
}

fn seen_args(v: &Volume) -> Vec<String> {
    vec!["--versions-seen".into(), state_dir(v).display().to_string()]
}

fn mount_seen(v: &mut Volume) {
    let a = seen_args(v);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    v.mount_with(&a);
}

fn read(p: &Path) -> std::io::Result<Vec<u8>> {
    fs::read(p)
}

/// One file, written in three commits on this host; returns the cipher
/// file and its bytes after the first commit.
fn three_commits(v: &mut Volume) -> (PathBuf, Vec<u8>) {
    mount_seen(v);
    write_file(&v.p("f"), b"first version");
    v.unmount();
    let backing = v.single_backing_file();
    let first = fs::read(&backing).unwrap();
    mount_seen(v);
    write_file(&v.p("f"), b"second version, longer");
    let f = open_rw(&v.p("f"));
    write_at(&f, 0, b"THIRD").unwrap();
    f.sync_all().unwrap();
    drop(f);
    v.unmount();
    (backing, first)
}

fn a_whole_file_put_back_is_refused(mode: Mode) {
    require_fuse!();
    let mut v = Volume::init_with(mode, &["--file-summary", "on"]);
    let (backing, first) = three_commits(&mut v);
    fs::write(&backing, &first).unwrap();

    // Without the option the old copy verifies: its record went with it.
    v.mount();
    assert_eq!(read(&v.p("f")).unwrap(), b"first version");
    v.unmount();

    mount_seen(&mut v);
    assert_errno(read(&v.p("f")), libc::EIO, "a file put back to a version seen replaced");
    let log = v.log();
    assert!(
        log.contains("/f") && log.contains("put back to an older version"),
        "no log line naming the file:\n{log}"
    );
    // Writes fail too; a truncation to 0 starts the file anew.
    assert!(fs::OpenOptions::new()
        .write(true)
        .open(v.p("f"))
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(b"x")?;
            f.sync_all()
        })
        .is_err());
    fs::write(v.p("f"), b"new start").unwrap();
    assert_eq!(read(&v.p("f")).unwrap(), b"new start");
    v.unmount();
}

#[test]
fn a_whole_gcm_file_put_back_is_refused() {
    a_whole_file_put_back_is_refused(Mode::Gcm);
}

#[test]
fn a_whole_xchacha20_poly1305_file_put_back_is_refused() {
    a_whole_file_put_back_is_refused(Mode::XChaCha20Poly1305);
}

#[test]
fn the_io_uring_transport_refuses_it_too() {
    require_fuse!();
    let param = Path::new("/sys/module/fuse/parameters/enable_uring");
    if warpfs_testkit::skip_if((!param.exists()).then(|| "no FUSE over io_uring in this kernel".to_string())) {
        return;
    }
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "on"]);
    // On for each mount and put back at its unmount.
    v.mount_args
        .extend(["--transport".into(), "uring".into(), "--uring-enable".into()]);
    let (backing, first) = three_commits(&mut v);
    fs::write(&backing, &first).unwrap();
    mount_seen(&mut v);
    assert_errno(read(&v.p("f")), libc::EIO, "put back, over the ring");
    v.unmount();
}

#[test]
fn a_file_saved_over_by_rename_or_deleted_and_put_back_is_refused() {
    require_fuse!();
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "on"]);
    mount_seen(&mut v);
    write_file(&v.p("doc"), b"draft one");
    write_file(&v.p("gone"), b"to be deleted");
    v.unmount();
    let before: Vec<(PathBuf, Vec<u8>)> = v
        .root_backing_entries()
        .into_iter()
        .map(|p| {
            let b = fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    mount_seen(&mut v);
    // As editors save: a new file renamed over the old one.
    write_file(&v.p("doc.tmp"), b"draft two");
    fs::rename(v.p("doc.tmp"), v.p("doc")).unwrap();
    fs::remove_file(v.p("gone")).unwrap();
    v.unmount();
    for (p, b) in &before {
        fs::write(p, b).unwrap();
    }
    mount_seen(&mut v);
    assert_errno(read(&v.p("doc")), libc::EIO, "a file put back after a rename over it");
    assert_errno(read(&v.p("gone")), libc::EIO, "a file put back after it was deleted");
    v.unmount();
}

#[test]
fn another_hosts_version_is_taken_even_with_a_lower_commit_number() {
    require_fuse!();
    // Host A and host B share the volume (their own state each); B starts
    // from A's first version and commits once; A commits twice more.
    let mut a = Volume::init_with(Mode::Gcm, &["--file-summary", "on"]);
    mount_seen(&mut a);
    write_file(&a.p("f"), b"shared start");
    a.unmount();
    let mut b = Volume::blank(Mode::Gcm);
    fs::remove_dir(&b.cipher).unwrap();
    copy_tree(&a.cipher, &b.cipher);
    mount_seen(&mut b);
    write_file(&b.p("f"), b"B's edit");
    b.unmount();
    let (backing_a, _) = three_commits(&mut a);
    // The sync tool lets B's version win on A.
    let name = backing_a.file_name().unwrap();
    fs::copy(b.cipher.join(name), &backing_a).unwrap();
    mount_seen(&mut a);
    assert_eq!(
        read(&a.p("f")).unwrap(),
        b"B's edit",
        "another host's version\n{}",
        a.log()
    );
    a.unmount();
    // And B, seeing A's newer version, takes it too.
    fs::copy(&backing_a, b.cipher.join(name)).unwrap();
    mount_seen(&mut b);
    assert_eq!(read(&b.p("f")).unwrap(), b"B's edit");
    b.unmount();
}

#[test]
fn a_version_seen_only_by_another_host_is_not_caught() {
    // What a single host cannot know, shown: B saw A's old version replaced,
    // A never did, so only B refuses it.
    require_fuse!();
    let mut a = Volume::init_with(Mode::Gcm, &["--file-summary", "on"]);
    mount_seen(&mut a);
    write_file(&a.p("f"), b"one");
    a.unmount();
    let backing = a.single_backing_file();
    let one = fs::read(&backing).unwrap();
    mount_seen(&mut a);
    write_file(&a.p("f"), b"two");
    a.unmount();
    let b = Volume::blank(Mode::Gcm);
    fs::remove_dir(&b.cipher).unwrap();
    copy_tree(&a.cipher, &b.cipher);
    let state_a = state_dir(&a);
    fs::remove_dir_all(&state_a).unwrap();
    fs::write(&backing, &one).unwrap();
    mount_seen(&mut a);
    assert_eq!(read(&a.p("f")).unwrap(), b"one", "a host with no memory of it takes it");
    a.unmount();
}

#[test]
fn an_old_config_put_back_after_a_passwd_is_refused() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    mount_seen(&mut v);
    v.unmount();
    let conf = v.cipher.join("warpfs.conf");
    let old = fs::read(&conf).unwrap();
    let newpass = v.cipher.parent().unwrap().join("new.txt");
    fs::write(&newpass, "a new password\n").unwrap();
    // The passwd records the config it replaced in the state (kept here).
    warpfs_seen(
        &v,
        args![
            "passwd",
            "--passfile",
            &v.passfile,
            "--new-passfile",
            &newpass,
            &v.cipher
        ],
    )
    .expect_ok("passwd");
    let oldpass = std::mem::replace(&mut v.passfile, newpass);
    mount_seen(&mut v);
    v.unmount();
    // The old config, which the old password opens, put back.
    fs::write(&conf, &old).unwrap();
    v.passfile = oldpass;
    let a = seen_args(&v);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let o = v.try_mount(&a);
    o.expect_code(11, "an old config put back");
    assert!(o.stderr.contains("put back") && o.stderr.contains("remove"), "{o}");
    assert!(!v.is_mounted());
    // Without the option it opens (what the option adds).
    v.mount();
    v.unmount();
    // Named with --config (a copy the user chose, as a sync conflict's is),
    // the same old config is used: the user decided.
    let copy = v.cipher.parent().unwrap().join("chosen.conf");
    fs::write(&copy, &old).unwrap();
    let mut a = seen_args(&v);
    a.extend(["--config".to_string(), copy.display().to_string()]);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    v.mount_with(&a);
    v.unmount();
}

#[test]
fn a_config_from_before_a_rekey_is_refused() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    mount_seen(&mut v);
    write_file(&v.p("f"), b"data");
    v.unmount();
    let conf = v.cipher.join("warpfs.conf");
    let old = fs::read(&conf).unwrap();
    warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]).expect_ok("rekey");
    mount_seen(&mut v);
    assert_eq!(read(&v.p("f")).unwrap(), b"data");
    v.unmount();
    fs::write(&conf, &old).unwrap();
    let a = seen_args(&v);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let o = v.try_mount(&a);
    o.expect_code(11, "a config from before a rekey");
    assert!(o.stderr.contains("older than the one this host last used"), "{o}");
}

#[test]
fn the_state_outside_cipherdir_is_authenticated() {
    require_fuse!();
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "on"]);
    mount_seen(&mut v);
    write_file(&v.p("f"), b"x");
    v.unmount();
    let states: Vec<_> = fs::read_dir(state_dir(&v))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "state"))
        .collect();
    assert_eq!(states.len(), 1, "{states:?}");
    // Nothing of the volume is in CIPHERDIR's name of it, nor in CIPHERDIR.
    assert!(!v.backing_paths().iter().any(|p| p.to_string_lossy().contains("state")));
    let mut b = fs::read(&states[0]).unwrap();
    let n = b.len();
    b[n - 40] ^= 1;
    fs::write(&states[0], &b).unwrap();
    // An edited state keeps only its key state: the mount goes on.
    mount_seen(&mut v);
    assert_eq!(read(&v.p("f")).unwrap(), b"x");
    v.unmount();
    fs::write(&states[0], b"garbage").unwrap();
    let a = seen_args(&v);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let o = v.try_mount(&a);
    assert!(!o.ok(), "a state that is not one must stop the mount\n{o}");
    assert!(o.stderr.contains(&states[0].display().to_string()), "{o}");
}

/// `warpfs ARGS` with the versions seen of this host kept in `v`'s state
/// directory (as `--versions-seen on` with `WARPFS_STATE_DIR` would).
fn warpfs_seen(v: &Volume, args: Vec<std::ffi::OsString>) -> Out {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(args).env("WARPFS_STATE_DIR", state_dir(v));
    run_cmd(cmd, std::time::Duration::from_secs(120))
}

#[test]
fn a_revoked_keyslot_put_back_before_any_mount_is_refused() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    mount_seen(&mut v);
    v.unmount();
    let conf = v.cipher.join("warpfs.conf");
    let second = v.cipher.parent().unwrap().join("second.txt");
    fs::write(&second, "the second slot's password\n").unwrap();
    warpfs_seen(
        &v,
        args![
            "key",
            "add",
            "--passfile",
            &v.passfile,
            "--password",
            "--new-passfile",
            &second,
            &v.cipher
        ],
    )
    .expect_ok("key add");
    let with_slot = fs::read(&conf).unwrap();
    warpfs_seen(&v, args!["key", "remove", "--passfile", &v.passfile, &v.cipher, "1"]).expect_ok("key remove");
    // No mount since: the revoked slot's config put back at once.
    fs::write(&conf, &with_slot).unwrap();
    v.passfile = second;
    let a = seen_args(&v);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let o = v.try_mount(&a);
    o.expect_code(11, "a config with a revoked keyslot put back");
    assert!(o.stderr.contains("put back"), "{o}");
    // Without the option the revoked slot still opens it (what the option adds).
    v.mount();
    v.unmount();
}
