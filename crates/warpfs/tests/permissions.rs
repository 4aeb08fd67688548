//! Who checks permissions. Without `allow_other` only the user the daemon
//! runs as gets into the mount, so the kernel's `default_permissions` is
//! off: the backing file system refuses what the mode bits refuse (the
//! daemon works as that user on entries that carry the same modes), and the
//! daemon answers access(2) and chdir from the backing entry. With
//! `allow_other`, or `-o default_permissions`, the kernel checks. Run as
//! root and as a user mounting through fusermount3. Set-user-ID and
//! set-group-ID bits are dropped on writes and truncations as on a local
//! file system (by the daemon, under FUSE_HANDLE_KILLPRIV_V2).

#[macro_use]
mod common;

use common::*;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const NOBODY: u32 = 65534;

/// The super-block options of the mount at `p` (where `default_permissions`,
/// `allow_other` and `user_id` are listed).
fn super_options(p: &Path) -> String {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = p.to_str().unwrap();
    info.lines()
        .filter(|l| l.split(' ').nth(4) == Some(want))
        .filter_map(|l| l.split(" - ").nth(1))
        .filter_map(|rest| rest.split(' ').nth(2).map(str::to_owned))
        .next_back()
        .unwrap_or_else(|| panic!("{} is not mounted", p.display()))
}

fn has_default_permissions(p: &Path) -> bool {
    super_options(p).split(',').any(|o| o == "default_permissions")
}

/// access(2) of `p` for the test (root): Ok or the errno.
fn access(p: &Path, mask: i32) -> Result<(), i32> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid C string.
    if unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mask, libc::AT_SYMLINK_NOFOLLOW) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// What root may do, asked through access(2): the same answers whether the
/// daemon (faccessat on the backing entry) or the kernel decides.
fn check_root_access(v: &Volume, how: &str) {
    assert_eq!(
        access(&v.p("f644"), libc::X_OK),
        Err(libc::EACCES),
        "{how}: X_OK on 0644"
    );
    assert_eq!(access(&v.p("f755"), libc::X_OK), Ok(()), "{how}: X_OK on 0755");
    assert_eq!(access(&v.p("f444"), libc::W_OK), Ok(()), "{how}: W_OK on 0444 (root)");
    assert_eq!(
        access(&v.p("d000"), libc::R_OK | libc::X_OK),
        Ok(()),
        "{how}: dir 0000 (root)"
    );
    assert_eq!(
        access(&v.p("missing"), libc::F_OK),
        Err(libc::ENOENT),
        "{how}: F_OK, missing"
    );
    assert_eq!(
        access(&v.p("dangling"), libc::F_OK),
        Ok(()),
        "{how}: F_OK on a dangling link"
    );
    assert_eq!(access(&v.mnt, libc::W_OK | libc::X_OK), Ok(()), "{how}: the root");
}

#[test]
fn kernel_checks_only_with_allow_other_and_access_answers_alike() {
    require_fuse!();
    for mode in [Mode::Gcm, Mode::Ctr] {
        let mut v = Volume::new(mode);
        assert!(
            !has_default_permissions(&v.mnt),
            "{mode:?}: default_permissions without allow_other: {}",
            super_options(&v.mnt)
        );
        for (name, m) in [("f644", 0o644), ("f755", 0o755), ("f444", 0o444)] {
            write_file(&v.p(name), b"x");
            chmod(&v.p(name), m);
        }
        fs::create_dir(v.p("d000")).unwrap();
        chmod(&v.p("d000"), 0o000);
        std::os::unix::fs::symlink("nowhere", v.p("dangling")).unwrap();
        check_root_access(&v, "the daemon answers");
        v.unmount();

        for opts in ["allow_other", "default_permissions"] {
            v.mount_with(&["-o", opts]);
            assert!(
                has_default_permissions(&v.mnt),
                "{mode:?}: -o {opts} without default_permissions: {}",
                super_options(&v.mnt)
            );
            check_root_access(&v, opts);
            v.unmount();
        }

        v.mount_with(&["-o", "ro"]);
        assert_eq!(
            access(&v.p("f644"), libc::W_OK),
            Err(libc::EROFS),
            "{mode:?}: W_OK read-only"
        );
        assert_eq!(access(&v.p("f644"), libc::R_OK), Ok(()), "{mode:?}: R_OK read-only");
        v.unmount();
    }
}

/// Each line: what was tried, then `ok` or `no`. Run as the mount's user in
/// the mountpoint.
const AS_OWNER: &str = r#"
r() { if "$@" 2>/dev/null >/dev/null; then echo "$label ok"; else echo "$label no"; fi; }
echo hi > f; chmod 444 f
label=append-0444 r sh -c 'echo x >> f'
label=test-w-0444 r test -w f
label=test-r-0444 r test -r f
label=test-x-0444 r test -x f
chmod 755 f
label=test-x-0755 r test -x f
chmod 000 f
label=cat-0000 r cat f
label=test-r-0000 r test -r f
chmod 600 f
label=cat-0600 r cat f
mkdir d; chmod 555 d
label=create-in-0555 r touch d/y
label=mkdir-in-0555 r mkdir d/e
chmod 755 d; touch d/y; chmod 555 d
label=unlink-in-0555 r rm -f d/y
label=rename-in-0555 r mv d/y d/z
chmod 000 d
label=cd-0000 r sh -c 'cd d'
label=ls-0000 r ls d
chmod 700 d
label=cd-0700 r sh -c 'cd d'
label=ls-0700 r ls d
echo "content $(cat f)"
echo "owner $(stat -c %u f)"
echo "in-d $(ls d)"
"#;

const EXPECTED: &str = "append-0444 no
test-w-0444 no
test-r-0444 ok
test-x-0444 no
test-x-0755 ok
cat-0000 no
test-r-0000 no
cat-0600 ok
create-in-0555 no
mkdir-in-0555 no
unlink-in-0555 no
rename-in-0555 no
cd-0000 no
ls-0000 no
cd-0700 ok
ls-0700 ok
content hi
owner 65534
in-d y
";

/// Run `script` with sh as `nobody` in the mount of `v`; its output must be
/// `expected`.
fn expect_as_nobody(v: &Volume, script: &str, expected: &str) {
    use std::os::unix::process::CommandExt;
    let o = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&v.mnt)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("run sh as nobody");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        expected,
        "stderr: {}\nlog:\n{}",
        String::from_utf8_lossy(&o.stderr),
        v.log()
    );
}

#[test]
fn a_users_own_mount_refuses_what_the_mode_bits_refuse() {
    require_fuse!();
    if warpfs_testkit::skip_if(user_mounts_unavailable()) {
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut v = Volume::init(Mode::Gcm);
    v.give_to(NOBODY, NOBODY);
    v.mount();
    let opts = super_options(&v.mnt);
    assert!(
        opts.split(',').any(|o| o == format!("user_id={NOBODY}")),
        "not the user's mount: {opts}"
    );
    assert!(!has_default_permissions(&v.mnt), "default_permissions: {opts}");

    expect_as_nobody(&v, AS_OWNER, EXPECTED);
    // (The last lines: nothing refused was half done, and what the user
    // made is the user's. Root cannot look itself: without allow_other the
    // kernel lets only the mount's user in.)
    assert!(fs::metadata(v.p("f")).is_err(), "root got into a user's mount");

    // The user reads the stats of their own mount (control ioctl, uid check).
    let o = Command::new(BIN)
        .args(["stats", "--json"])
        .arg(&v.mnt)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("run warpfs stats as nobody");
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("\"applies\""),
        "warpfs stats as the mount's user: {o:?}"
    );
    v.unmount();
}

/// What a local file system (ext4 here) does to set-id bits when their
/// owner, not root, writes or truncates; run in the mount as that user.
const SET_ID_SCRIPT: &str = r#"
echo hi > f && chmod 4755 f && echo more >> f && stat -c "write %a" f
chmod 4755 f && : > f && stat -c "o_trunc %a" f
chmod 4755 f && truncate -s 10 f && stat -c "truncate %a" f
chmod 4755 f && fallocate -l 100000 f && stat -c "fallocate %a" f
chmod 6755 f && echo x >> f && stat -c "6755-write %a" f
chmod 2775 f && echo x >> f && stat -c "2775-write %a" f
chmod 2745 f && echo x >> f && stat -c "2745-write %a" f
chmod 4755 f && cat f > /dev/null && stat -c "read %a" f
wc -c < f
dd if=/dev/zero of=g bs=10 count=3000 status=none && wc -c < g
"#;

const SET_ID_EXPECTED: &str = "write 755
o_trunc 755
truncate 755
fallocate 755
6755-write 755
2775-write 775
2745-write 2745
read 4755
100006
30000
";

/// The count in the daemon's unmount line "N getxattr request(s) for names
/// outside user.*" (the kernel's `security.capability` probes).
fn probes(log: &str) -> Option<u64> {
    log.lines()
        .find(|l| l.contains("getxattr request(s) for names outside user.*"))
        .and_then(|l| l.split("at unmount: ").nth(1))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[test]
fn the_owner_loses_set_id_bits_on_writes_and_truncations_as_on_ext4() {
    require_fuse!();
    if warpfs_testkit::skip_if(user_mounts_unavailable()) {
        return;
    }
    let mut v = Volume::init(Mode::Gcm);
    v.give_to(NOBODY, NOBODY);
    v.mount();
    expect_as_nobody(&v, SET_ID_SCRIPT, SET_ID_EXPECTED);
    v.unmount();
    // The kernel asks whether a file has privileges to drop once, not
    // before each of the 3,000 writes (SB_NOSEC under
    // FUSE_HANDLE_KILLPRIV_V2), where the kernel offers it.
    let log = v.log();
    let n = probes(&log).unwrap_or_else(|| panic!("no probe count at unmount:\n{log}"));
    if log.contains("the kernel offers FUSE_HANDLE_KILLPRIV_V2: true") {
        assert!(n < 300, "{n} security.capability probes for 3,000 writes:\n{log}");
    } else {
        eprintln!("the kernel does not offer FUSE_HANDLE_KILLPRIV_V2: {n} probes");
    }
}

#[test]
fn root_keeps_set_id_bits_on_writes_and_loses_them_on_chown() {
    require_fuse!();
    let v = Volume::new(Mode::Gcm);
    let f = v.p("f");
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    write_file(&f, b"hi");
    chmod(&f, 0o6755);
    // Root has CAP_FSETID: writes and truncations keep the bits (as on ext4).
    {
        use std::io::Write;
        let mut h = fs::OpenOptions::new().append(true).open(&f).unwrap();
        h.write_all(b"more").unwrap();
    }
    assert_eq!(mode(&f), 0o6755, "after root's write");
    fs::OpenOptions::new().write(true).truncate(true).open(&f).unwrap();
    assert_eq!(mode(&f), 0o6755, "after root's O_TRUNC");
    fs::OpenOptions::new().write(true).open(&f).unwrap().set_len(7).unwrap();
    assert_eq!(mode(&f), 0o6755, "after root's truncate");
    // A chown drops them for anyone.
    let c = CString::new(f.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::chown(c.as_ptr(), NOBODY, u32::MAX) }, 0);
    assert_eq!(mode(&f), 0o755, "after chown");
}

#[test]
fn set_id_bits_asked_for_at_creation_are_kept() {
    require_fuse!();
    let v = Volume::new(Mode::Gcm);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    // The daemon gives each new entry to its caller with a chown, which
    // clears set-id bits of a non-directory: they must come back.
    let f = v.p("suid");
    let c = CString::new(f.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string; the fd is closed at once.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL,
            0o4755 as libc::c_uint,
        )
    };
    assert!(fd >= 0, "{}", std::io::Error::last_os_error());
    // SAFETY: an fd this test opened.
    unsafe { libc::close(fd) };
    assert_eq!(mode(&f), 0o4755 & !umask(), "created with O_CREAT");
    let n = v.p("sgid");
    let c = CString::new(n.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mknod(c.as_ptr(), libc::S_IFREG | 0o2755, 0) }, 0);
    assert_eq!(mode(&n), 0o2755 & !umask(), "made with mknod");
    // Plain files keep plain modes.
    write_file(&v.p("plain"), b"x");
    assert_eq!(mode(&v.p("plain")), 0o666 & !umask());
}

/// The process's umask (read, not set: tests run in parallel).
fn umask() -> u32 {
    let s = fs::read_to_string("/proc/self/status").unwrap();
    let m = s.lines().find_map(|l| l.strip_prefix("Umask:")).unwrap().trim();
    u32::from_str_radix(m, 8).unwrap()
}
