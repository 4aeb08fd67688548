//! The examples in contrib/ work as written: the `.mount` unit's
//! `What=`/`Where=`/`Type=`/`Options=` go through `mount -t TYPE -o OPTIONS
//! WHAT WHERE` (what systemd runs), the user service's `ExecStart=` and
//! `ExecStop=` run with systemd's specifiers expanded and the password in
//! the kernel keyring, and the fstab example's lines mount with `mount -a`.
//! Only the example paths (/srv/..., /mnt/..., /etc/warpfs/...) are
//! replaced by the test's. Against the build, `/usr/bin/warpfs` is the
//! built binary and type `fuse.warpfs` becomes `fuse` with `BIN#WHAT` (see
//! tests/fstab.rs); `WARPFS_INSTALLED_BIN` (scripts/deb.sh) runs them
//! exactly.

use crate::common::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const CONTRIB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib");
const T: Duration = Duration::from_secs(90);

fn installed() -> bool {
    std::env::var_os("WARPFS_INSTALLED_BIN").is_some()
}

/// The value of `Key=` in a unit file.
fn unit_value(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in\n{text}"))
        .to_string()
}

/// (type, source) as mount(8) gets them for a `fuse.warpfs` entry.
fn type_and_source(fstype: &str, what: &Path) -> (String, String) {
    if installed() || fstype != "fuse.warpfs" {
        (fstype.to_string(), what.display().to_string())
    } else {
        ("fuse".into(), format!("{BIN}#{}", what.display()))
    }
}

fn run(args: &[&str]) -> Out {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]);
    run_cmd(c, T)
}

fn umount_and_wait(v: &Volume, at: &Path) {
    let pids = warpfs_pids(v.cipher.as_os_str().as_encoded_bytes(), at);
    run(&["umount", at.to_str().unwrap()]).expect_ok("umount");
    assert!(wait_pids_gone(&pids, T).is_empty(), "daemon still running");
}

#[test]
fn the_mount_unit_mounts_as_systemd_runs_it() {
    require_fuse!();
    let dir = Path::new(CONTRIB).join("systemd");
    let unit = fs::read_to_string(dir.join("mnt-private.mount")).unwrap();
    let auto = fs::read_to_string(dir.join("mnt-private.automount")).unwrap();
    let (what, wher, fstype, opts) = (
        unit_value(&unit, "What"),
        unit_value(&unit, "Where"),
        unit_value(&unit, "Type"),
        unit_value(&unit, "Options"),
    );
    // systemd requires a mount unit's name to be its escaped mountpoint.
    assert_eq!(
        format!("{}.mount", wher.trim_start_matches('/').replace('/', "-")),
        "mnt-private.mount"
    );
    assert_eq!(unit_value(&auto, "Where"), wher);
    let v = Volume::init(Mode::Gcm);
    let opts = opts.replace("/etc/warpfs/private.pass", v.passfile.to_str().unwrap());
    assert_ne!(what, v.cipher.to_str().unwrap());
    let (t, src) = type_and_source(&fstype, &v.cipher);
    run(&["mount", "-t", &t, "-o", &opts, &src, v.mnt.to_str().unwrap()]).expect_ok("the unit's mount");
    write_file(&v.p("via-systemd"), b"ok");
    umount_and_wait(&v, &v.mnt);
}

/// Split an `ExecStart=` line as systemd does (words, double quotes) and
/// expand `%h`, `%i` and `%%`.
fn exec_words(line: &str, home: &Path, instance: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            '%' => match chars.next() {
                Some('h') => cur.push_str(home.to_str().unwrap()),
                Some('i') => cur.push_str(instance),
                Some('%') => cur.push('%'),
                other => panic!("specifier %{other:?} in {line}"),
            },
            c if c.is_whitespace() && !quoted => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            c => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

#[test]
fn the_user_service_mounts_with_the_password_from_the_keyring() {
    require_fuse!();
    let unit = fs::read_to_string(Path::new(CONTRIB).join("systemd/warpfs@.service")).unwrap();
    let v = Volume::init(Mode::Gcm);
    let home = tempfile::tempdir().unwrap();
    let instance = format!("test{}", std::process::id());
    let cipher = home.path().join(format!(".{instance}.warpfs"));
    let mnt: PathBuf = home.path().join(&instance);
    copy_tree(&v.cipher, &cipher);
    fs::create_dir(&mnt).unwrap();
    // The password in the user keyring, as the unit's comment says.
    let desc = format!("warpfs:{instance}");
    let mut k = Command::new("keyctl")
        .args(["padd", "user", &desc, "@u"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("keyctl (keyutils) is needed");
    std::io::Write::write_all(&mut k.stdin.take().unwrap(), format!("{PASSWORD}\n").as_bytes()).unwrap();
    let ko = k.wait_with_output().unwrap();
    if !ko.status.success() {
        warpfs_testkit::skip(format!(
            "the kernel keyring is not usable here: {}",
            String::from_utf8_lossy(&ko.stderr).trim()
        ));
        return;
    }
    let key_id = String::from_utf8_lossy(&ko.stdout).trim().to_string();
    struct Unlink(String);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = Command::new("keyctl").args(["unlink", &self.0, "@u"]).output();
        }
    }
    let _unlink = Unlink(key_id);

    let mut start = exec_words(&unit_value(&unit, "ExecStart"), home.path(), &instance);
    eprintln!("ExecStart: {start:?}");
    assert_eq!(start[0], "/usr/bin/warpfs");
    if !installed() {
        start[0] = BIN.into();
    }
    let mut c = Command::new(&start[0]);
    c.args(&start[1..]);
    run_cmd(c, T).expect_ok("ExecStart");
    assert!(is_mounted(&mnt), "ExecStart returned before the mount was live");
    write_file(&mnt.join("f"), b"from the user service");
    let pids = warpfs_pids(cipher.as_os_str().as_encoded_bytes(), &mnt);
    assert!(!pids.is_empty());
    let stop = exec_words(&unit_value(&unit, "ExecStop"), home.path(), &instance);
    let mut c = Command::new(&stop[0]);
    c.args(&stop[1..]);
    run_cmd(c, T).expect_ok("ExecStop");
    assert!(!is_mounted(&mnt));
    assert!(
        wait_pids_gone(&pids, T).is_empty(),
        "daemon still running after ExecStop"
    );
}

#[test]
fn the_fstab_example_lines_mount() {
    require_fuse!();
    let text = fs::read_to_string(Path::new(CONTRIB).join("fstab.example")).unwrap();
    let lines: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    let dir = tempfile::tempdir().unwrap();
    for f in &lines {
        let [what, wher, fstype, opts, ..] = f[..] else {
            panic!("bad line {f:?}")
        };
        if fstype == "warpfs" && !installed() {
            // Type warpfs needs the package's /sbin/mount.warpfs
            // (tests/fstab.rs covers it through scripts/deb.sh).
            continue;
        }
        let v = Volume::init(Mode::Gcm);
        let name = Path::new(what).file_stem().unwrap().to_str().unwrap();
        let opts = opts.replace(&format!("/etc/warpfs/{name}.pass"), v.passfile.to_str().unwrap());
        assert_ne!(opts, f[3], "the example's passfile is /etc/warpfs/{name}.pass");
        let (t, src) = type_and_source(fstype, &v.cipher);
        let fstab = dir.path().join(format!("fstab-{name}"));
        fs::write(&fstab, format!("{src} {} {t} {opts} 0 0\n", v.mnt.display())).unwrap();
        let _ = wher;
        let f = fstab.to_str().unwrap();
        if opts.split(',').any(|o| o == "noauto") {
            run(&["mount", "-T", f, v.mnt.to_str().unwrap()]).expect_ok("mount MOUNTPOINT");
        } else {
            run(&["mount", "-a", "-T", f]).expect_ok("mount -a");
        }
        assert!(is_mounted(&v.mnt), "{name}");
        write_file(&v.p("x"), b"y");
        umount_and_wait(&v, &v.mnt);
    }
}
