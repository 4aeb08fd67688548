//! Running the binary: command results, timeouts, and the arguments every
//! test mount gets from the environment (`WARPFS_TEST_*`).

use super::{assert_errno, setxattr, BIN, CMD_TIMEOUT};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Result of one command run.
#[derive(Debug)]
pub struct Out {
    pub what: String,
    /// Exit code; `None` when killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
    /// Panic unless the exit code is `code`.
    pub fn expect_code(&self, code: i32, ctx: &str) -> &Self {
        assert_eq!(self.code, Some(code), "{ctx}: expected exit code {code}\n{self}");
        self
    }
    pub fn expect_ok(&self, ctx: &str) -> &Self {
        self.expect_code(0, ctx)
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "$ {}\nexit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--------------",
            self.what, self.code, self.stdout, self.stderr
        )
    }
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Run `cmd` with stdin from /dev/null (so a password prompt fails instead of
/// hanging) and stdout/stderr into anonymous files (a daemon child that keeps
/// them open cannot make us wait), killing it after `timeout` (then `code` is
/// `None` and stderr says so).
pub fn run_cmd(mut cmd: Command, timeout: Duration) -> Out {
    let what = describe(&cmd);
    let mut out = tempfile::tempfile().expect("tempfile");
    let mut err = tempfile::tempfile().expect("tempfile");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(err.try_clone().unwrap()));
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            let mut stderr = read_all(&mut err);
            stderr.push_str(&format!("\n[harness: killed after {timeout:?} timeout]"));
            return Out {
                what,
                code: None,
                stdout: read_all(&mut out),
                stderr,
            };
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Out {
        what,
        code: status.code(),
        stdout: read_all(&mut out),
        stderr: read_all(&mut err),
    }
}

fn read_all(f: &mut File) -> String {
    let mut v = Vec::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut v).unwrap();
    String::from_utf8_lossy(&v).into_owned()
}

/// The `--speculation` value every test mount gets: the one
/// [`with_speculation`](super::with_speculation) forced on this thread, else
/// `WARPFS_TEST_SPECULATION`.
pub fn test_speculation() -> Option<String> {
    if let Some(v) = super::forced_speculation() {
        return Some(v.to_string());
    }
    let v = std::env::var("WARPFS_TEST_SPECULATION").ok()?;
    let v = v.trim().to_ascii_lowercase();
    match v.as_str() {
        "" => None,
        "on" | "off" => Some(v),
        _ => panic!("WARPFS_TEST_SPECULATION must be on or off, not {v:?}"),
    }
}

/// Extra `warpfs mount` arguments for every mount of the tests, from
/// `WARPFS_TEST_MOUNT_ARGS` (whitespace-separated; scripts/option-matrix.sh
/// sets `--no-xattr`). An argument a mount already has is not repeated,
/// word by word: give an option with its value as one word
/// (`--versions-seen=on`).
pub fn test_mount_args() -> Vec<OsString> {
    std::env::var("WARPFS_TEST_MOUNT_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(OsString::from)
        .collect()
}

/// Whether the tests' mounts serve extended attributes (not under
/// `WARPFS_TEST_MOUNT_ARGS=--no-xattr`).
pub fn mounts_serve_xattrs() -> bool {
    !test_mount_args().iter().any(|a| a == "--no-xattr")
}

/// Whether the mount serves xattrs; under `--no-xattr` (option matrix) it
/// first checks that `p` refuses them (EOPNOTSUPP), for a caller that then
/// leaves its xattr checks out.
pub fn xattrs_or_refused(p: &Path) -> bool {
    if mounts_serve_xattrs() {
        return true;
    }
    assert_errno(
        setxattr(p, "user.x", b"v", 0),
        libc::EOPNOTSUPP,
        "setxattr under --no-xattr",
    );
    false
}

/// Whether the mount arguments `args` set the long option `name`: as
/// `--name`, `--name=V`, or in a `-o` list as `name` or `name=V` (`_` and
/// `-` alike, as `warpfs mount` reads them).
pub fn sets_option(args: &[OsString], name: &str) -> bool {
    let norm = |s: &[u8]| -> Vec<u8> { s.iter().map(|&c| if c == b'_' { b'-' } else { c }).collect() };
    let name = norm(name.as_bytes());
    let is = |item: &[u8]| {
        let item = norm(item);
        item == name || item.strip_prefix(name.as_slice()).is_some_and(|r| r.starts_with(b"="))
    };
    let mut list = false;
    args.iter().any(|a| {
        let a = a.as_bytes();
        let in_list = std::mem::replace(&mut list, a == b"-o");
        let opts = if in_list {
            a
        } else if let Some(rest) = a.strip_prefix(b"-o").filter(|r| !r.is_empty()) {
            rest
        } else {
            return a.strip_prefix(b"--").is_some_and(is);
        };
        opts.split(|&c| c == b',').any(is)
    })
}

/// `args` with `--speculation X` from `WARPFS_TEST_SPECULATION` inserted
/// after a leading `mount` that does not set it already (as an option or
/// in a `-o` list: [`sets_option`]), and the arguments of
/// [`test_mount_args`].
pub fn with_test_speculation(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.first().is_some_and(|a| a == "mount") {
        for a in test_mount_args().into_iter().rev() {
            if !args.contains(&a) {
                args.insert(1, a);
            }
        }
    }
    let is_mount = args.first().is_some_and(|a| a == "mount");
    let has = sets_option(&args, "speculation");
    if let (true, false, Some(v)) = (is_mount, has, test_speculation()) {
        args.splice(1..1, [OsString::from("--speculation"), OsString::from(v)]);
    }
    with_test_engine(args)
}

/// `args` with `--engine X` from `WARPFS_TEST_ENGINE` (cpu, opencl, cuda,
/// auto) inserted after a leading `mount` that does not set it already
/// ([`sets_option`]).
pub fn with_test_engine(mut args: Vec<OsString>) -> Vec<OsString> {
    let is_mount = args.first().is_some_and(|a| a == "mount");
    let has = sets_option(&args, "engine");
    let v = std::env::var("WARPFS_TEST_ENGINE").unwrap_or_default();
    if is_mount && !has && !v.trim().is_empty() {
        args.splice(1..1, [OsString::from("--engine"), OsString::from(v.trim())]);
    }
    args
}

/// Run `warpfs ARGS...` (a `mount` gets `WARPFS_TEST_SPECULATION`).
pub fn warpfs<I, S>(args: I) -> Out
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_os_string()).collect();
    let mut cmd = Command::new(BIN);
    cmd.args(with_test_speculation(args));
    run_cmd(cmd, CMD_TIMEOUT)
}

/// Build an argument vector from anything path- or string-like.
#[allow(unused_macros)]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        vec![$(std::ffi::OsString::from($a)),*]
    };
}
