//! Process hygiene of every command that handles a password or key
//! (SECURITY.md "Keys in memory"): `init`, `passwd`, `fsck`, `rekey`,
//! `mount` and `container open` are non-dumpable before they read the
//! password. Each runs as `nobody` with its password coming from a pipe
//! the test holds open; once it blocks reading that pipe, the owner of its
//! /proc entries shows the dumpable flag (a non-dumpable process's
//! /proc/PID files belong to root, a dumpable one's to its user). The
//! commands that open a volume with a TPM2 or FIDO2 slot instead are
//! checked the same way once they wait on the device (one that takes each
//! request and never answers), and neither the key a TPM unseals nor a
//! security key's hmac-secret output (nor the volume key) reaches a
//! mount's log or its output, even at the trace level.

#[macro_use]
mod common;

use common::*;
use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use warpfs_testkit::{ctap2::Authenticator, swtpm};

const NOBODY: u32 = 65534;

/// Whether `pid` is blocked in read(2) (x86-64: syscall 0) on a pipe (its
/// stdin, or a copy of it).
fn reading_stdin(pid: u32) -> bool {
    let Ok(s) = fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let mut w = s.split_whitespace();
    if w.next() != Some("0") {
        return false;
    }
    let Some(fd) = w
        .next()
        .and_then(|a| i64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
    else {
        return false;
    };
    fs::read_link(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|t| t.to_string_lossy().starts_with("pipe:"))
}

/// Run `warpfs ARGS` as nobody until it waits for its password on stdin;
/// returns the uid owning its /proc/PID/status then.
fn owner_while_reading_password(args: &[OsString]) -> u32 {
    owner_while_waiting(args, &[], "its password", reading_stdin)
}

/// Run `warpfs ARGS` as nobody, with `env`, until `waiting(pid)` (it
/// waits for `what`); returns the uid owning its /proc/PID/status then.
fn owner_while_waiting(args: &[OsString], env: &[(&str, &OsString)], what: &str, waiting: impl Fn(u32) -> bool) -> u32 {
    let mut child = Command::new(BIN);
    child
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        child.env(k, v);
    }
    let mut child = child.spawn().expect("spawn warpfs");
    let pid = child.id();
    let start = Instant::now();
    while !waiting(pid) {
        if let Some(st) = child.try_wait().unwrap() {
            let mut e = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut e);
            panic!("warpfs {args:?} exited ({st}) before waiting for {what}: {e}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "warpfs {args:?} did not wait for {what}"
        );
        std::thread::yield_now();
    }
    let uid = fs::metadata(format!("/proc/{pid}/status")).unwrap().uid();
    child.kill().unwrap();
    let _ = child.wait();
    uid
}

#[test]
fn every_command_that_reads_a_password_is_non_dumpable() {
    require_fuse!();
    // Without file summaries: `warpfs upgrade` has something to do.
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "off"]);
    let fresh = v.root().join("fresh");
    fs::create_dir(&fresh).unwrap();
    let image = v.root().join("image");
    warpfs(args![
        "container",
        "create",
        "--passfile",
        &v.passfile,
        "--size",
        "1M",
        "--kdf-memory",
        "32768",
        "--kdf-iterations",
        "2",
        &image
    ])
    .expect_ok("container create");
    let cmnt = v.root().join("cmnt");
    fs::create_dir(&cmnt).unwrap();
    v.give_to(NOBODY, NOBODY);
    let stdin = OsString::from("/dev/stdin");
    let (c, m) = (v.cipher.clone().into_os_string(), v.mnt.clone().into_os_string());
    let cmds: Vec<(&str, Vec<OsString>)> = vec![
        ("init", args!["init", "--passfile", &stdin, "--quiet", &fresh]),
        ("passwd", args!["passwd", "--passfile", &stdin, &c]),
        ("fsck", args!["fsck", "--passfile", &stdin, &c]),
        ("rekey", args!["rekey", "--passfile", &stdin, &c]),
        ("upgrade", args!["upgrade", "--passfile", &stdin, &c]),
        ("mount", args!["mount", "--passfile", &stdin, &c, &m]),
        ("key add", args!["key", "add", "--passfile", &stdin, "--recovery", &c]),
        ("key remove", args!["key", "remove", "--passfile", &stdin, &c, "1"]),
        (
            "container open",
            args!["container", "open", "--passfile", &stdin, &image, &cmnt],
        ),
    ];
    for (name, a) in &cmds {
        let owner = owner_while_reading_password(a);
        assert_eq!(owner, 0, "warpfs {name} is dumpable while it reads the password");
    }
    eprintln!(
        "hygiene: {} commands non-dumpable before reading the password",
        cmds.len()
    );
}

fn vmlck_kb(pid: i32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmLck:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

/// After an online rekey finishes, the mount daemon lets go of the old
/// key generation: its content key, GHASH key and write pool (with the
/// pool's locked masks for future nonces) are dropped, so the daemon's
/// locked memory does not keep both generations' pools (64 masks of two
/// pages each, 512 KiB, per pool).
#[test]
fn an_online_rekey_releases_the_old_generation() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    // Speculation on: the pool holds its 64 masks ready (512 KiB locked).
    v.mount_with(&["--speculation", "on", "--pool-size", "64"]);
    for i in 0..4 {
        write_file(&v.p(format!("f{i}")), &vec![i as u8; 300_000]);
    }
    let pid = daemon_pids(&v.mnt)[0];
    if v.log().contains("cannot lock key memory") {
        warpfs_testkit::skip("mlock is not allowed here");
        return;
    }
    let before = vmlck_kb(pid);
    warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]).expect_ok("online rekey");
    // New writes under the new generation fill its pool.
    for i in 0..4 {
        write_file(&v.p(format!("g{i}")), &vec![i as u8; 300_000]);
    }
    let after = vmlck_kb(pid);
    eprintln!("daemon VmLck: {before} kB before the rekey, {after} kB after it");
    assert!(
        after < before + 256,
        "the daemon's locked memory grew from {before} kB to {after} kB: the old generation's pool was kept"
    );
    for i in 0..4 {
        assert_eq!(fs::read(v.p(format!("f{i}"))).unwrap(), vec![i as u8; 300_000]);
    }
}

/// A device that reads each request and never answers: whoever reaches
/// it waits there until killed. Counts the requests read.
struct Silent(Arc<AtomicU32>);

impl Silent {
    fn reached(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }

    /// Take each connection `accept` gives, read its first byte, count it
    /// and keep it open.
    fn serve<S: Read + Send + 'static>(&self, mut accept: impl FnMut() -> Option<S> + Send + 'static) {
        let n = self.0.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while let Some(mut s) = accept() {
                if s.read(&mut [0u8]).is_ok_and(|r| r == 1) {
                    n.fetch_add(1, Ordering::SeqCst);
                }
                held.push(s);
            }
        });
    }

    /// A FIDO2 test authenticator's socket at `path`, open to every user.
    fn fido2(path: &Path) -> Silent {
        use std::os::unix::fs::PermissionsExt;
        let l = std::os::unix::net::UnixListener::bind(path).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o777)).unwrap();
        let d = Silent(Arc::default());
        d.serve(move || l.accept().ok().map(|(s, _)| s));
        d
    }

    /// A TPM simulator on loopback ports P (commands) and P + 1 (its
    /// control channel); its TCTI.
    fn tpm() -> (Silent, String) {
        let d = Silent(Arc::default());
        loop {
            let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = a.local_addr().unwrap().port();
            let Ok(b) = std::net::TcpListener::bind(("127.0.0.1", port.wrapping_add(1))) else {
                continue;
            };
            for l in [a, b] {
                d.serve(move || l.accept().ok().map(|(s, _)| s));
            }
            return (d, format!("swtpm:port={port}"));
        }
    }
}

/// A volume (as `Volume::init`) with a TPM2 slot on `tpm` and a FIDO2
/// slot on `key`.
fn with_device_slots(tpm: &swtpm::Swtpm, key: &Authenticator) -> Volume {
    let v = Volume::init(Mode::Gcm);
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--tpm2",
        "--tpm2-tcti",
        tpm.tcti_short(),
        &v.cipher
    ])
    .expect_ok("key add --tpm2");
    let mut c = Command::new(BIN);
    c.args(args!["key", "add", "--passfile", &v.passfile, "--fido2", &v.cipher])
        .env(TEST_ENV, key.path());
    run_cmd(c, Duration::from_secs(60)).expect_ok("key add --fido2");
    v
}

const TEST_ENV: &str = "WARPFS_FIDO2_TEST_AUTHENTICATOR";

#[test]
fn every_command_that_asks_a_tpm_or_security_key_is_non_dumpable() {
    require_fuse!();
    let Some(tpm) = swtpm::for_test() else { return };
    let dir = tempfile::tempdir().unwrap();
    let key = Authenticator::start(&dir.path().join("key"));
    let mut v = with_device_slots(&tpm, &key);
    v.give_to(NOBODY, NOBODY);
    let fake_key = v.root().join("silent-key");
    let silent_key = Silent::fido2(&fake_key);
    let (silent_tpm, tcti) = Silent::tpm();
    let (c, m) = (v.cipher.clone().into_os_string(), v.mnt.clone().into_os_string());
    let p = v.passfile.clone().into_os_string();
    let t = OsString::from(&tcti);
    let tpm_cmds: Vec<(&str, Vec<OsString>)> = vec![
        ("mount --tpm2", args!["mount", "--tpm2", "--tpm2-tcti", &t, &c, &m]),
        ("fsck --tpm2", args!["fsck", "--tpm2", "--tpm2-tcti", &t, &c]),
        ("rekey --tpm2", args!["rekey", "--tpm2", "--tpm2-tcti", &t, &c]),
        (
            "key add --tpm2",
            args!["key", "add", "--passfile", &p, "--tpm2", "--tpm2-tcti", &t, &c],
        ),
    ];
    let fido2_cmds: Vec<(&str, Vec<OsString>)> = vec![
        ("mount --fido2", args!["mount", "--fido2", &c, &m]),
        ("fsck --fido2", args!["fsck", "--fido2", &c]),
        ("rekey --fido2", args!["rekey", "--fido2", &c]),
        (
            "key add --unlock-fido2",
            args!["key", "add", "--unlock-fido2", "--recovery", &c],
        ),
        ("key add --fido2", args!["key", "add", "--passfile", &p, "--fido2", &c]),
    ];
    let sock = fake_key.clone().into_os_string();
    for (cmds, device, env) in [
        (&tpm_cmds, &silent_tpm, vec![]),
        (&fido2_cmds, &silent_key, vec![(TEST_ENV, &sock)]),
    ] {
        for (name, a) in cmds {
            let before = device.reached();
            let owner = owner_while_waiting(a, &env, "its device", |_| device.reached() > before);
            assert_eq!(owner, 0, "warpfs {name} is dumpable while it asks the device");
        }
    }
    eprintln!(
        "hygiene: {} commands non-dumpable while they ask a TPM or security key",
        tpm_cmds.len() + fido2_cmds.len()
    );
}

/// `secret` in `hay`: raw, in hex (either case) or in base64 (either
/// alphabet); which form, if any.
fn holds(hay: &[u8], secret: &[u8]) -> Option<&'static str> {
    let found = |needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let b64 = |alphabet: &[u8]| -> Vec<u8> {
        let mut out = Vec::new();
        for c in secret.chunks(3) {
            let n = c
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..=c.len() {
                out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize]);
            }
        }
        out
    };
    const STD: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    [
        ("raw", secret.to_vec()),
        ("hex", hex.clone().into_bytes()),
        ("HEX", hex.to_uppercase().into_bytes()),
        ("base64", b64(STD)),
        ("base64url", b64(URL)),
    ]
    .into_iter()
    .find(|(_, n)| found(n))
    .map(|(what, _)| what)
}

#[test]
fn no_unsealed_or_hmac_secret_key_reaches_a_mounts_log() {
    require_fuse!();
    let Some(tpm) = swtpm::for_test() else { return };
    let dir = tempfile::tempdir().unwrap();
    let key = Authenticator::start(&dir.path().join("key"));
    let v = with_device_slots(&tpm, &key);
    // The secrets, through the library: the volume key, the key the TPM
    // unseals for the tpm2 slot, the security key's output for the fido2 one.
    let cfg = warpfs_config::Config::load(&v.cipher).unwrap();
    let volume_key = cfg.unlock(PASSWORD.as_bytes()).unwrap();
    let o = cfg.slots().iter().find_map(|s| s.tpm2()).unwrap();
    let sealed = warpfs_tpm2::Sealed {
        pcrs: o.pcrs.clone(),
        public: o.public.clone(),
        private: o.private.clone(),
    };
    let unsealed = warpfs_tpm2::unseal(&warpfs_tpm2::Tcti::parse(&tpm.tcti()).unwrap(), &sealed).unwrap();
    let f = cfg.slots().iter().find_map(|s| s.fido2()).unwrap();
    let output = key.output(&f.credential, &f.salt).unwrap();
    let secrets: [(&str, &[u8]); 3] = [
        ("the volume key", volume_key.as_bytes()),
        ("the key the TPM unsealed", &unsealed[..]),
        ("the security key's output", &output),
    ];
    for how in ["--tpm2", "--fido2"] {
        let _ = fs::remove_file(&v.logfile);
        let mut c = Command::new(BIN);
        c.args(args!["mount", "--log-file", &v.logfile, how, &v.cipher, &v.mnt])
            .env("WARPFS_LOG", "trace")
            .env(TEST_ENV, key.path());
        let o = run_cmd(c, Duration::from_secs(60));
        o.expect_ok(&format!("mount {how}"));
        write_file(&v.p("f"), b"opened by a device");
        assert_eq!(fs::read(v.p("f")).unwrap(), b"opened by a device");
        unmount_path(&v.mnt).unwrap();
        let log = v.log();
        assert!(
            log.contains("TRACE") || log.contains("DEBUG"),
            "{how}: not a trace log:\n{log}"
        );
        for (what, secret) in secrets {
            for (place, text) in [("log", log.as_str()), ("stdout", &o.stdout), ("stderr", &o.stderr)] {
                if let Some(form) = holds(text.as_bytes(), secret) {
                    panic!("mount {how}: {what} is in its {place} ({form})");
                }
            }
        }
    }
}
