//! The examples in contrib/ work as written: the `.mount` units'
//! `What=`/`Where=`/`Type=`/`Options=` go through `mount -t TYPE -o OPTIONS
//! WHAT WHERE` as systemd runs it (no terminal, standard input
//! /dev/null), the password-file unit and the TPM2 unit (a slot on a
//! software TPM, no password anywhere); every unit is named after its
//! `Where=` and passes `systemd-analyze verify`; the user service's
//! `ExecStart=` and `ExecStop=` run with systemd's specifiers expanded and
//! the password in the kernel keyring, and the fstab example's lines mount
//! with `mount -a`. Only the example paths (/srv/..., /mnt/...,
//! /etc/warpfs/...) are replaced by the test's, and the TPM2 unit's `tpm2`
//! is given the software TPM's TCTI. Against the build, `/usr/bin/warpfs`
//! is the built binary and type `fuse.warpfs` becomes `fuse` with
//! `BIN#WHAT` (see tests/daily/fstab.rs); `WARPFS_INSTALLED_BIN` (scripts/deb.sh)
//! runs them exactly.

use crate::common::*;
use std::fs;
use std::os::unix::process::CommandExt;
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

/// `mount -t TYPE -o OPTIONS WHAT WHERE` as systemd runs it: standard
/// input /dev/null ([`run_cmd`]) and no controlling terminal (a session of
/// its own), so a password prompt, which reads /dev/tty, fails at once.
fn mount_as_systemd(fstype: &str, opts: &str, what: &Path, at: &Path) -> Out {
    let (t, src) = type_and_source(fstype, what);
    let mut c = Command::new("mount");
    c.args(["-t", &t, "-o", opts, &src, at.to_str().unwrap()]);
    // SAFETY: setsid(2) is async-signal-safe and touches no memory.
    unsafe {
        c.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    run_cmd(c, T)
}

/// A unit file of contrib/systemd/.
fn unit_file(name: &str) -> String {
    let p = Path::new(CONTRIB).join("systemd").join(name);
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The unit name of a path, as `systemd-escape -p --suffix=SUFFIX` makes
/// it: slashes trimmed, `/` as `-`, bytes other than ASCII letters,
/// digits, `:`, `_` and `.` (and a leading `.`) as `\xNN`.
fn path_unit_name(path: &str, suffix: &str) -> String {
    let p = path.trim_matches('/');
    let mut name = String::new();
    if p.is_empty() {
        name.push('-');
    }
    for (i, b) in p.bytes().enumerate() {
        match b {
            b'/' => name.push('-'),
            b'.' if i == 0 => name.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || b":_.".contains(&b) => name.push(b as char),
            b => name.push_str(&format!("\\x{b:02x}")),
        }
    }
    format!("{name}.{suffix}")
}

/// systemd loads a mount or automount unit only when its file name is its
/// escaped `Where=`.
#[test]
fn the_units_are_named_after_their_mountpoints() {
    assert_eq!(path_unit_name("/mnt/private", "mount"), "mnt-private.mount");
    assert_eq!(path_unit_name("/srv/a-b/.c", "mount"), "srv-a\\x2db-.c.mount");
    let mut names: Vec<String> = fs::read_dir(Path::new(CONTRIB).join("systemd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".mount") || n.ends_with(".automount"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["mnt-private.automount", "mnt-private.mount", "mnt-vault.mount"],
        "the units this test knows"
    );
    for n in &names {
        let (_, suffix) = n.rsplit_once('.').unwrap();
        let wher = unit_value(&unit_file(n), "Where");
        assert_eq!(&path_unit_name(&wher, suffix), n, "{n}: Where={wher}");
    }
    assert_eq!(
        unit_value(&unit_file("mnt-private.automount"), "Where"),
        unit_value(&unit_file("mnt-private.mount"), "Where")
    );
}

#[test]
fn the_mount_unit_mounts_as_systemd_runs_it() {
    require_fuse!();
    let unit = unit_file("mnt-private.mount");
    let (what, fstype, opts) = (
        unit_value(&unit, "What"),
        unit_value(&unit, "Type"),
        unit_value(&unit, "Options"),
    );
    let v = Volume::init(Mode::Gcm);
    let opts = opts.replace("/etc/warpfs/private.pass", v.passfile.to_str().unwrap());
    assert_ne!(what, v.cipher.to_str().unwrap());
    mount_as_systemd(&fstype, &opts, &v.cipher, &v.mnt).expect_ok("the unit's mount");
    write_file(&v.p("via-systemd"), b"ok");
    umount_and_wait(&v, &v.mnt);
}

/// The TPM2 unit mounts with no password anywhere: its volume has a TPM2
/// slot (sealed to PCR 7, as its comment says) on a software TPM and no
/// password file, nothing can answer a prompt, and it mounts, twice, the
/// file written through the first mount read through the second.
#[test]
fn the_tpm2_mount_unit_mounts_with_no_password_as_systemd_runs_it() {
    require_fuse!();
    let unit = unit_file("mnt-vault.mount");
    let (what, fstype, opts) = (
        unit_value(&unit, "What"),
        unit_value(&unit, "Type"),
        unit_value(&unit, "Options"),
    );
    assert!(
        unit_value(&unit, "After")
            .split_whitespace()
            .any(|u| u == "tpm2.target"),
        "ordered after the TPM is usable:\n{unit}"
    );
    assert!(unit.contains("warpfs key add --tpm2 --tpm2-pcrs 7"), "{unit}");
    // tpm2 at the default TPM device, and no other source of the key.
    let list: Vec<&str> = opts.split(',').collect();
    assert!(list.contains(&"tpm2"), "Options={opts}");
    for o in &list {
        let key = o.split('=').next().unwrap();
        assert!(
            !["tpm2-tcti", "passfile", "extpass", "keyfile", "config"].contains(&key),
            "Options={opts}"
        );
    }
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
    fs::remove_file(&v.passfile).unwrap();
    assert_ne!(what, v.cipher.to_str().unwrap());
    // The only change to the unit's options: `tpm2` is given the software
    // TPM's TCTI (the unit's TPM is the default, /dev/tpmrm0).
    let tcti = format!("tpm2,tpm2-tcti={}", tpm.tcti_short());
    let opts = list
        .iter()
        .map(|o| if *o == "tpm2" { tcti.as_str() } else { o })
        .collect::<Vec<_>>()
        .join(",");
    mount_as_systemd(&fstype, &opts, &v.cipher, &v.mnt).expect_ok("the TPM2 unit's mount");
    assert!(is_mounted(&v.mnt), "the TPM2 unit's mount is not live");
    write_file(&v.p("via-tpm2"), b"unlocked by the TPM at boot");
    umount_and_wait(&v, &v.mnt);
    mount_as_systemd(&fstype, &opts, &v.cipher, &v.mnt).expect_ok("the TPM2 unit's mount, again");
    assert_eq!(fs::read(v.p("via-tpm2")).unwrap(), b"unlocked by the TPM at boot");
    umount_and_wait(&v, &v.mnt);
}

/// `systemd-analyze verify` loads each unit of contrib/systemd as systemd
/// would and finds nothing wrong with it: no unknown or misspelt setting,
/// no missing unit it requires, a name that matches `Where=`.
#[test]
fn the_units_pass_systemd_analyze_verify() {
    if let Err(e) = Command::new("systemd-analyze").arg("--version").output() {
        warpfs_testkit::skip(format!("systemd-analyze (package systemd) does not run: {e}"));
        return;
    }
    let dir = Path::new(CONTRIB).join("systemd");
    let mut found = 0;
    for e in fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if !(name.ends_with(".mount") || name.ends_with(".automount")) {
            continue;
        }
        let mut c = Command::new("systemd-analyze");
        c.args(["verify", "--man=no"]).arg(dir.join(&name));
        let o = run_cmd(c, T);
        // Its warnings about units of this system (not ours) are no
        // concern of the example's.
        let ours: Vec<&str> = o
            .stdout
            .lines()
            .chain(o.stderr.lines())
            .filter(|l| l.contains(&name))
            .collect();
        assert!(o.ok() && ours.is_empty(), "systemd-analyze verify {name}:\n{o}");
        found += 1;
    }
    assert!(found >= 3, "no units in {}", dir.display());
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
            // (tests/daily/fstab.rs covers it through scripts/deb.sh).
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
