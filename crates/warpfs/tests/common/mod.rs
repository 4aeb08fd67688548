//! Shared harness for the mount-level integration tests.
//!
//! `Volume` is a temporary cipher dir + mountpoint + passfile + log file. It
//! initialises the volume with `warpfs init`, mounts it with `warpfs mount`
//! (daemon mode, `--log-file`), and unmounts it on drop (`fusermount3 -u`
//! when present, else umount(2), falling back to a lazy unmount).
//!
//! Tests that need a kernel mount call `require_fuse!()` first: when not root
//! or without /dev/fuse they return, counted as skipped (`warpfs_testkit`).
//!
//! `WARPFS_TEST_SPECULATION=on|off` adds `--speculation on|off` to every
//! `warpfs mount` the tests run (unless the test passes `--speculation`
//! itself), so the whole suite can run with the keystream engine's
//! look-ahead on and off; unset, mounts use the binary's default.
//! `WARPFS_TEST_ENGINE=cpu|opencl|cuda|auto` likewise adds `--engine X`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_warpfs");
/// The password every fixture volume uses.
pub const PASSWORD: &str = "correct horse battery staple";
/// Plaintext block size (FORMAT.md section 3).
pub const BLOCK: u64 = 4096;
/// Data bytes covered by the nnode (blocks 0..15).
pub const NNODE_DATA: u64 = 16 * BLOCK;
/// Data bytes between two nonce pages.
pub const SEGMENT: u64 = 256 * BLOCK;

const CMD_TIMEOUT: Duration = Duration::from_secs(90);
const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);
const DAEMON_EXIT_TIMEOUT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// Skipping

/// Why mount tests cannot run here, or `None` when they can.
pub fn fuse_unavailable() -> Option<String> {
    if std::env::var_os("WARPFS_SKIP_MOUNT_TESTS").is_some() {
        return Some("WARPFS_SKIP_MOUNT_TESTS is set".into());
    }
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    if let Err(e) = OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    None
}

/// Return from the calling test, counted as skipped (`warpfs_testkit::skip`:
/// printed, recorded, a failure under WARPFS_NO_SKIP=1), when FUSE mounts
/// are not possible.
#[allow(unused_macros)]
macro_rules! require_fuse {
    () => {
        if warpfs_testkit::skip_if($crate::common::fuse_unavailable()) {
            return;
        }
    };
}

/// `mode_tests!(a, b)` makes `a::gcm`, `a::ctr`, `b::gcm`, `b::ctr` tests
/// calling `fn a(mode: Mode)` and `fn b(mode: Mode)`.
#[allow(unused_macros)]
macro_rules! mode_tests {
    // Tests about nonce entries, tags or masks: gcm and ctr only.
    (nonce: $($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn gcm() {
                    super::$name($crate::common::Mode::Gcm)
                }
                #[test]
                fn ctr() {
                    super::$name($crate::common::Mode::Ctr)
                }
            }
        )*
    };
    // Every mode over both block ciphers (AES and Twofish, FORMAT.md 11).
    (twofish: $($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn gcm() {
                    super::$name($crate::common::Mode::Gcm)
                }
                #[test]
                fn ctr() {
                    super::$name($crate::common::Mode::Ctr)
                }
                #[test]
                fn xts() {
                    super::$name($crate::common::Mode::Xts)
                }
                #[test]
                fn gcm_twofish() {
                    super::$name($crate::common::Mode::GcmTwofish)
                }
                #[test]
                fn ctr_twofish() {
                    super::$name($crate::common::Mode::CtrTwofish)
                }
                #[test]
                fn xts_twofish() {
                    super::$name($crate::common::Mode::XtsTwofish)
                }
            }
        )*
    };
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn gcm() {
                    super::$name($crate::common::Mode::Gcm)
                }
                #[test]
                fn ctr() {
                    super::$name($crate::common::Mode::Ctr)
                }
                #[test]
                fn xts() {
                    super::$name($crate::common::Mode::Xts)
                }
            }
        )*
    };
}

// ---------------------------------------------------------------------------
// Content modes and the FORMAT.md section 3 layout arithmetic

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Gcm,
    Ctr,
    /// XTS: no nonce entries (E = 0), data right after the 32-byte header.
    Xts,
    /// The same three layouts over Twofish (FORMAT.md 11).
    GcmTwofish,
    CtrTwofish,
    XtsTwofish,
}

impl Mode {
    /// The `content_mode` of the config (`warpfs info` shows it).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Gcm => "gcm",
            Mode::Ctr => "ctr",
            Mode::Xts => "xts",
            Mode::GcmTwofish => "gcm-twofish",
            Mode::CtrTwofish => "ctr-twofish",
            Mode::XtsTwofish => "xts-twofish",
        }
    }
    /// The block mode alone (the layout): `Gcm`, `Ctr` or `Xts`.
    pub fn base(self) -> Mode {
        match self {
            Mode::Gcm | Mode::GcmTwofish => Mode::Gcm,
            Mode::Ctr | Mode::CtrTwofish => Mode::Ctr,
            Mode::Xts | Mode::XtsTwofish => Mode::Xts,
        }
    }
    /// The `warpfs init` flags that make this mode.
    pub fn init_args(self) -> Vec<&'static str> {
        let mut a = vec!["--mode", self.base().name()];
        if self != self.base() {
            a.extend(["--cipher", "twofish"]);
        }
        a
    }
    /// The content-mode byte at header offset 6.
    pub fn mode_byte(self) -> u8 {
        match self.base() {
            Mode::Ctr => 1,
            Mode::Gcm => 2,
            _ => 3,
        }
    }
    /// Nonce entry size E.
    pub fn entry_size(self) -> u64 {
        match self.base() {
            Mode::Ctr => 16,
            Mode::Gcm => 32,
            _ => 0,
        }
    }
    /// A raw nonce entry with the file-summary slot (bytes 12..16 of a
    /// gcm entry, FORMAT.md 12) cleared: what format 1 stores there (a
    /// written entry never has an all-zero nonce; a hole's entry is zero).
    pub fn entry_view(self, raw: &[u8]) -> Vec<u8> {
        let mut v = raw.to_vec();
        if self.base() == Mode::Gcm && v.len() == 32 {
            v[12..16].fill(0);
        }
        v
    }
    /// H = 32 + 16·E.
    pub fn header_size(self) -> u64 {
        32 + 16 * self.entry_size()
    }
    /// P = 256·E.
    pub fn page_size(self) -> u64 {
        256 * self.entry_size()
    }
    /// Backing offset of the data of block `b`.
    pub fn block_data_offset(self, b: u64) -> u64 {
        let h = self.header_size();
        if b < 16 {
            h + BLOCK * b
        } else {
            let (k, i) = ((b - 16) / 256, (b - 16) % 256);
            h + NNODE_DATA + k * (self.page_size() + SEGMENT) + self.page_size() + BLOCK * i
        }
    }
    /// Backing offset of the nonce entry of block `b`.
    pub fn block_entry_offset(self, b: u64) -> u64 {
        let h = self.header_size();
        if b < 16 {
            32 + b * self.entry_size()
        } else {
            let (k, i) = ((b - 16) / 256, (b - 16) % 256);
            h + NNODE_DATA + k * (self.page_size() + SEGMENT) + i * self.entry_size()
        }
    }
    /// The plaintext size of a cipher file of backing length `len`
    /// (FORMAT.md 3.4); `None` when corrupt (`0 < len < H`).
    pub fn plain_size(self, len: u64) -> Option<u64> {
        let h = self.header_size();
        if len == 0 {
            return Some(0);
        }
        let r = len.checked_sub(h)?;
        if r <= NNODE_DATA {
            return Some(r);
        }
        let r2 = r - NNODE_DATA;
        let seg = self.page_size() + SEGMENT;
        let (k, q) = (r2 / seg, r2 % seg);
        Some(NNODE_DATA + k * SEGMENT + q.saturating_sub(self.page_size()))
    }
    /// The backing length of a plaintext of `size` bytes (FORMAT.md 3.4).
    pub fn backing_len(self, size: u64) -> u64 {
        let h = self.header_size();
        if size == 0 {
            0
        } else if size <= NNODE_DATA {
            h + size
        } else {
            let rest = size - NNODE_DATA;
            let (k, q) = (rest / SEGMENT, rest % SEGMENT);
            let base = h + NNODE_DATA + k * (self.page_size() + SEGMENT);
            if q == 0 {
                base
            } else {
                base + self.page_size() + q
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Small PRNG (xorshift64*), deterministic per seed

pub struct Rng(u64);

impl Rng {
    /// A generator seeded from `WARPFS_TEST_SEED` when set, else from `tag`.
    /// The seed is printed so a failure can be replayed.
    pub fn for_test(tag: &str) -> Rng {
        let seed = match std::env::var("WARPFS_TEST_SEED") {
            Ok(s) => s.parse().expect("WARPFS_TEST_SEED must be a u64"),
            Err(_) => tag.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            }),
        };
        eprintln!("[{tag}] seed {seed} (set WARPFS_TEST_SEED to replay)");
        Rng::new(seed)
    }
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }
}

// ---------------------------------------------------------------------------
// Running the binary

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

/// The `--speculation` value every test mount gets (`WARPFS_TEST_SPECULATION`).
pub fn test_speculation() -> Option<String> {
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
/// sets `--no-xattr`). An argument a mount already has is not repeated.
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

/// `args` with `--speculation X` from `WARPFS_TEST_SPECULATION` inserted
/// after a leading `mount` that does not set it already, and the
/// arguments of [`test_mount_args`].
pub fn with_test_speculation(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.first().is_some_and(|a| a == "mount") {
        for a in test_mount_args().into_iter().rev() {
            if !args.contains(&a) {
                args.insert(1, a);
            }
        }
    }
    let is_mount = args.first().is_some_and(|a| a == "mount");
    let has = args
        .iter()
        .any(|a| a == "--speculation" || a.as_bytes().starts_with(b"--speculation="));
    if let (true, false, Some(v)) = (is_mount, has, test_speculation()) {
        args.splice(1..1, [OsString::from("--speculation"), OsString::from(v)]);
    }
    with_test_engine(args)
}

/// `args` with `--engine X` from `WARPFS_TEST_ENGINE` (cpu, opencl, cuda,
/// auto) inserted after a leading `mount` that does not set it already.
pub fn with_test_engine(mut args: Vec<OsString>) -> Vec<OsString> {
    let is_mount = args.first().is_some_and(|a| a == "mount");
    let has = args
        .iter()
        .any(|a| a == "--engine" || a.as_bytes().starts_with(b"--engine="));
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

// ---------------------------------------------------------------------------
// Mount table and daemon processes

fn unescape_mountinfo(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The file-system type of the mount at exactly `p`, if `p` is a mount point.
pub fn mount_fstype(p: &Path) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = p.as_os_str().as_bytes();
    let mut found = None;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() < 5 || unescape_mountinfo(fields[4]) != want {
            continue;
        }
        // Optional fields end at "-"; the fs type follows it.
        if let Some(dash) = fields.iter().position(|f| *f == "-") {
            found = fields.get(dash + 1).map(|s| s.to_string());
        }
    }
    found
}

pub fn is_mounted(p: &Path) -> bool {
    mount_fstype(p).is_some()
}

/// The mount options (per-mount field) of the mount at `p`.
pub fn mount_options(p: &Path) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = p.as_os_str().as_bytes();
    let mut found = None;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() >= 6 && unescape_mountinfo(fields[4]) == want {
            found = Some(fields[5].to_string());
        }
    }
    found
}

/// Pids of `warpfs ... mount ... MNT` processes (other than us).
pub fn daemon_pids(mnt: &Path) -> Vec<i32> {
    warpfs_pids(b"mount", mnt)
}

/// Pids of `warpfs ... WORD ... MNT` processes (other than us).
pub fn warpfs_pids(word: &[u8], mnt: &Path) -> Vec<i32> {
    let me = std::process::id() as i32;
    let want = mnt.as_os_str().as_bytes();
    let mut pids = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_warpfs = argv.first().map(|a0| a0.ends_with(b"warpfs")).unwrap_or(false);
        if is_warpfs && argv.contains(&word) && argv.contains(&want) {
            pids.push(pid);
        }
    }
    pids
}

/// Whether a process is gone (or a zombie).
pub fn pid_gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// Wait until all `pids` are gone; returns those still alive after `timeout`.
pub fn wait_pids_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let alive: Vec<i32> = pids.iter().copied().filter(|p| !pid_gone(*p)).collect();
        if alive.is_empty() || start.elapsed() > timeout {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run `f` in a forked child that has become user `uid` (group `gid`, no
/// supplementary groups); its result (0–255) is the child's exit status,
/// returned here (a child killed by a signal gives -1). `f` runs after
/// `fork` in a multithreaded process: it must only make system calls on
/// data prepared before (no allocation, no locks, no panics).
pub fn in_child_as(uid: u32, gid: u32, f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only makes system calls (setgroups, setresgid,
    // setresuid, what `f` makes) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: plain system calls; _exit never returns.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(gid, gid, gid) != 0
                || libc::setresuid(uid, uid, uid) != 0
            {
                libc::_exit(255);
            }
            libc::_exit(f());
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid, "waitpid: {}", io::Error::last_os_error());
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    }
}

/// Why a user other than root cannot mount here (fusermount3 missing or
/// not set-user-ID, /dev/fuse not open to everyone), or `None`.
pub fn user_mounts_unavailable() -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let fm = ["/usr/bin/fusermount3", "/bin/fusermount3"]
        .iter()
        .find_map(|p| fs::metadata(p).ok());
    match fm {
        Some(m) if m.permissions().mode() & 0o4000 != 0 => {}
        Some(_) => return Some("fusermount3 is not set-user-ID".into()),
        None => return Some("no fusermount3".into()),
    }
    match fs::metadata("/dev/fuse") {
        Ok(m) if m.permissions().mode() & 0o006 == 0o006 => None,
        Ok(m) => Some(format!(
            "/dev/fuse is mode {:o}, not open to other users (Debian's udev makes it 0666; scripts/test.sh does too)",
            m.permissions().mode() & 0o777
        )),
        Err(e) => Some(format!("/dev/fuse: {e}")),
    }
}

fn have_fusermount3() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    *HAVE.get_or_init(|| {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join("fusermount3").is_file()))
            .unwrap_or(false)
    })
}

fn umount2(mnt: &Path, flags: libc::c_int) -> io::Result<()> {
    let c = cstr(mnt);
    check(unsafe { libc::umount2(c.as_ptr(), flags) })
}

/// Unmount `mnt`: `fusermount3 -u` when installed, else the umount2 syscall
/// (what `umount` does, without its path canonicalisation, which would stat a
/// possibly hung mount); retried briefly on EBUSY, then a lazy unmount
/// (`umount -l`). Returns an error text if it is still mounted.
pub fn unmount_path(mnt: &Path) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..20 {
        if have_fusermount3() {
            let mut c = Command::new("fusermount3");
            c.arg("-u").arg(mnt);
            let o = run_cmd(c, Duration::from_secs(20));
            if !o.ok() {
                last = o.to_string();
            }
            if o.code.is_none() {
                break; // hung: go straight to the lazy unmount
            }
        } else if let Err(e) = umount2(mnt, 0) {
            last = format!("umount2({}): {e}", mnt.display());
        }
        if !is_mounted(mnt) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let lazy = umount2(mnt, libc::MNT_DETACH);
    if is_mounted(mnt) {
        Err(format!("cannot unmount {}:\n{last}\nlazy: {lazy:?}", mnt.display()))
    } else {
        eprintln!("note: {} needed a lazy unmount; last attempt:\n{last}", mnt.display());
        Ok(())
    }
}

/// Kill (SIGKILL) every warpfs process serving `mnt`; returns their pids.
/// Killing the daemon aborts its FUSE connection, which unblocks any system
/// call stuck on the mount with ENOTCONN.
pub fn kill_daemons(mnt: &Path) -> Vec<i32> {
    let pids = daemon_pids(mnt);
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    pids
}

/// Kills the daemons of a mount if the test is still running after a
/// deadline, so a hung daemon fails the test instead of hanging CI.
/// `WARPFS_TEST_WATCHDOG_SECS` sets the deadline (default 300).
pub struct Watchdog {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    pub fn start(mnt: &Path) -> Watchdog {
        let secs = std::env::var("WARPFS_TEST_WATCHDOG_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(300u64);
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = done.clone();
        let mnt = mnt.to_path_buf();
        let name = std::thread::current().name().unwrap_or("?").to_string();
        std::thread::spawn(move || {
            let start = Instant::now();
            while !d.load(std::sync::atomic::Ordering::Relaxed) {
                if start.elapsed() > Duration::from_secs(secs) {
                    let pids = kill_daemons(&mnt);
                    eprintln!(
                        "WATCHDOG: test {name} still running after {secs} s; killed warpfs {pids:?} serving {}",
                        mnt.display()
                    );
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Watchdog { done }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------
// Volume fixture

/// An initialised cipher dir per mode, made once per test binary and copied
/// into each `Volume` (saves one KDF run per test).
fn template(mode: Mode) -> &'static Path {
    template_with(mode, &[])
}

/// [`template`] made with `extra` arguments of `warpfs init` (e.g.
/// `--file-summary off`): one per (mode, arguments) and test binary.
fn template_with(mode: Mode, extra: &[&str]) -> &'static Path {
    static T: std::sync::Mutex<BTreeMap<String, &'static OnceLock<PathBuf>>> = std::sync::Mutex::new(BTreeMap::new());
    let tag = format!("{}{}", mode.name(), extra.join("").replace(['-', ' '], ""));
    let slot: &'static OnceLock<PathBuf> = T
        .lock()
        .unwrap()
        .entry(tag.clone())
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    slot.get_or_init(|| {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("warpfs-templates");
        fs::create_dir_all(&base).unwrap();
        // Remove templates of test processes that are gone.
        if let Ok(rd) = fs::read_dir(&base) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) {
                    if pid_gone(pid) {
                        let _ = fs::remove_dir_all(e.path());
                    }
                }
            }
        }
        let dir = base.join(format!("{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let pass = dir.join("pass");
        fs::write(&pass, format!("{PASSWORD}\n")).unwrap();
        let cipher = dir.join("cipher");
        fs::create_dir(&cipher).unwrap();
        let mut a = args!["init", "--passfile", &pass];
        a.extend(mode.init_args().into_iter().map(OsString::from));
        a.extend(extra.iter().map(OsString::from));
        a.push(cipher.clone().into_os_string());
        warpfs(a).expect_ok("warpfs init (template volume)");
        cipher
    })
}

pub fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        let to = dst.join(e.file_name());
        if ft.is_dir() {
            copy_tree(&e.path(), &to);
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(e.path()).unwrap(), &to).unwrap();
        } else {
            fs::copy(e.path(), &to).unwrap();
        }
    }
}

pub struct Volume {
    tmp: tempfile::TempDir,
    pub mode: Mode,
    pub cipher: PathBuf,
    pub mnt: PathBuf,
    pub passfile: PathBuf,
    pub logfile: PathBuf,
    /// Extra arguments for every `mount` (e.g. `-o ro`).
    pub mount_args: Vec<OsString>,
    /// The (uid, gid) `mount` runs as; `None`: the test's own (root).
    pub mount_as: Option<(u32, u32)>,
    mounted: bool,
    daemon: Vec<i32>,
    _watchdog: Watchdog,
}

impl Volume {
    /// Directories and passfile only; the cipher dir is empty (not initialised).
    pub fn blank(mode: Mode) -> Volume {
        let tmp = tempfile::Builder::new().prefix("warpfs-test-").tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let cipher = root.join("cipher");
        let mnt = root.join("mnt");
        fs::create_dir(&cipher).unwrap();
        fs::create_dir(&mnt).unwrap();
        let passfile = root.join("password.txt");
        fs::write(&passfile, format!("{PASSWORD}\n")).unwrap();
        let _watchdog = Watchdog::start(&mnt);
        Volume {
            tmp,
            mode,
            cipher,
            mnt,
            passfile,
            logfile: root.join("warpfs.log"),
            mount_args: Vec::new(),
            mount_as: None,
            mounted: false,
            daemon: Vec::new(),
            _watchdog,
        }
    }

    /// An initialised, unmounted volume (copied from a per-mode template).
    pub fn init(mode: Mode) -> Volume {
        let v = Volume::blank(mode);
        copy_tree(template(mode), &v.cipher);
        v
    }

    /// An initialised, unmounted volume made with `extra` arguments of
    /// `warpfs init` (e.g. `["--file-summary", "off"]`).
    pub fn init_with(mode: Mode, extra: &[&str]) -> Volume {
        let v = Volume::blank(mode);
        copy_tree(template_with(mode, extra), &v.cipher);
        v
    }

    /// Run `warpfs init` for real on a blank volume.
    pub fn init_fresh(mode: Mode) -> (Volume, Out) {
        let v = Volume::blank(mode);
        let mut a = args!["init", "--passfile", &v.passfile];
        a.extend(mode.init_args().into_iter().map(OsString::from));
        a.push(v.cipher.clone().into());
        let o = warpfs(a);
        (v, o)
    }

    /// An initialised and mounted volume.
    pub fn new(mode: Mode) -> Volume {
        let mut v = Volume::init(mode);
        v.mount();
        v
    }

    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    /// Hand the volume's directory (cipher dir, mountpoint, passfile) to
    /// `uid`:`gid` and mount as that user from now on (through
    /// fusermount3, as any user's mount).
    pub fn give_to(&mut self, uid: u32, gid: u32) {
        let mut c = Command::new("chown");
        c.arg("-R").arg(format!("{uid}:{gid}")).arg(self.root());
        run_cmd(c, CMD_TIMEOUT).expect_ok("chown the volume");
        self.mount_as = Some((uid, gid));
    }

    /// Path inside the mount.
    pub fn p(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.mnt.join(rel)
    }

    /// Run `warpfs mount` with this volume's passfile, log file and
    /// `mount_args` plus `extra`; returns the command output. On success the
    /// volume is recorded as mounted.
    pub fn try_mount(&mut self, extra: &[&str]) -> Out {
        self.try_mount_env(extra, &[])
    }

    /// [`Volume::try_mount`] with extra environment for the daemon.
    pub fn try_mount_env(&mut self, extra: &[&str], env: &[(&str, &str)]) -> Out {
        assert!(!self.mounted, "already mounted");
        let mut a: Vec<OsString> = args!["mount", "--passfile", &self.passfile, "--log-file", &self.logfile];
        a.extend(self.mount_args.iter().cloned());
        a.extend(extra.iter().map(OsString::from));
        a.push(self.cipher.clone().into());
        a.push(self.mnt.clone().into());
        let mut cmd = Command::new(BIN);
        cmd.args(with_test_speculation(a));
        if let Some((uid, gid)) = self.mount_as {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let o = run_cmd(cmd, CMD_TIMEOUT);
        if o.ok() {
            // The contract: mount returns once the mount is live. Be tolerant
            // here (other tests), strict in cli::mount_returns_when_live.
            let start = Instant::now();
            while !is_mounted(&self.mnt) && start.elapsed() < MOUNT_TIMEOUT {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(
                is_mounted(&self.mnt),
                "warpfs mount exited 0 but {} is not mounted\n{o}\nlog:\n{}",
                self.mnt.display(),
                self.log()
            );
            if start.elapsed() > Duration::from_millis(50) {
                eprintln!(
                    "CONTRACT: `warpfs mount` returned {:?} before the mount was live",
                    start.elapsed()
                );
            }
            self.mounted = true;
            self.daemon = daemon_pids(&self.mnt);
        }
        o
    }

    pub fn mount(&mut self) {
        let o = self.try_mount(&[]);
        assert!(o.ok(), "mount failed\n{o}\nlog:\n{}", self.log());
    }

    pub fn mount_with(&mut self, extra: &[&str]) {
        let o = self.try_mount(extra);
        assert!(o.ok(), "mount {extra:?} failed\n{o}\nlog:\n{}", self.log());
    }

    pub fn is_mounted(&self) -> bool {
        self.mounted
    }

    /// Unmount and wait for the daemon to exit.
    pub fn unmount(&mut self) {
        if let Err(e) = self.try_unmount() {
            panic!("{e}");
        }
    }

    fn try_unmount(&mut self) -> Result<(), String> {
        if !self.mounted {
            if !is_mounted(&self.mnt) {
                return Ok(());
            }
            // Mounted although `mount` did not succeed (e.g. it hung): the
            // daemon is in an unknown state, so kill it first.
            kill_daemons(&self.mnt);
        }
        let r = unmount_path(&self.mnt);
        self.mounted = false;
        r?;
        let alive = wait_pids_gone(&self.daemon, DAEMON_EXIT_TIMEOUT);
        if !alive.is_empty() {
            for pid in &alive {
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            return Err(format!(
                "warpfs daemon(s) {alive:?} still running {DAEMON_EXIT_TIMEOUT:?} after unmounting {} (killed)",
                self.mnt.display()
            ));
        }
        Ok(())
    }

    /// The daemon's pids, as found when it mounted.
    pub fn daemon_pids(&self) -> &[i32] {
        &self.daemon
    }

    /// The test stopped the daemon and saw the mount go: count the volume
    /// unmounted.
    pub fn daemon_stopped(&mut self) {
        assert!(!is_mounted(&self.mnt), "{} is still mounted", self.mnt.display());
        self.mounted = false;
    }

    pub fn remount(&mut self) {
        self.unmount();
        self.mount();
    }

    /// Contents of the daemon's log file (empty if none).
    pub fn log(&self) -> String {
        fs::read(&self.logfile)
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }

    /// Every path under the cipher dir (files, dirs, links), recursively.
    pub fn backing_paths(&self) -> Vec<PathBuf> {
        let mut v = Vec::new();
        walk(&self.cipher, &mut v);
        v.sort();
        v
    }

    /// Backing entries of the cipher root other than `warpfs.conf` and
    /// `warpfs.diriv`.
    pub fn root_backing_entries(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(&self.cipher)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap();
                n != "warpfs.conf" && n != "warpfs.diriv"
            })
            .collect();
        v.sort();
        v
    }

    /// The backing file of the only plaintext entry in the root.
    pub fn single_backing_file(&self) -> PathBuf {
        let v = self.root_backing_entries();
        assert_eq!(
            v.len(),
            1,
            "expected exactly one backing entry in the cipher root, found {v:?}"
        );
        v.into_iter().next().unwrap()
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if panicking && (self.mounted || is_mounted(&self.mnt)) {
            let log = self.log();
            if !log.is_empty() {
                let tail: String = log
                    .chars()
                    .rev()
                    .take(4000)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                eprintln!("--- warpfs log ({}) tail ---\n{tail}\n---", self.logfile.display());
            }
            // The test failed: the daemon may be hung; don't wait for it.
            kill_daemons(&self.mnt);
        }
        let r = self.try_unmount();
        let left = kill_daemons(&self.mnt);
        if !left.is_empty() {
            eprintln!(
                "Volume drop: killed leftover warpfs processes {left:?} of {}",
                self.mnt.display()
            );
        }
        if let Err(e) = r {
            eprintln!("Volume drop: {e}");
            if !panicking {
                panic!("{e}");
            }
        }
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        out.push(p.clone());
        if e.file_type().unwrap().is_dir() {
            walk(&p, out);
        }
    }
}

// ---------------------------------------------------------------------------
// A foreground (`-f`) mount, our own child process

pub struct Foreground {
    pub child: Child,
    pub stderr_path: PathBuf,
    pub mnt: PathBuf,
}

impl Foreground {
    /// Spawn `warpfs mount -f ...` and wait until the mount is live.
    pub fn start(v: &Volume, extra: &[&str]) -> Foreground {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stderr_path = v.root().join(format!("fg-stderr-{n}"));
        let err = File::create(&stderr_path).unwrap();
        let mut cmd = Command::new(BIN);
        let mut a: Vec<OsString> = args!["mount", "-f", "--passfile", &v.passfile];
        a.extend(extra.iter().map(OsString::from));
        cmd.args(with_test_speculation(a));
        cmd.arg(&v.cipher).arg(&v.mnt);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::from(err));
        let mut child = cmd.spawn().unwrap();
        let start = Instant::now();
        while !is_mounted(&v.mnt) {
            if let Some(st) = child.try_wait().unwrap() {
                panic!(
                    "warpfs mount -f exited ({st}) before mounting; stderr:\n{}",
                    fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            assert!(start.elapsed() < MOUNT_TIMEOUT, "warpfs mount -f did not mount in time");
            std::thread::sleep(Duration::from_millis(10));
        }
        Foreground {
            child,
            stderr_path,
            mnt: v.mnt.clone(),
        }
    }

    pub fn stderr(&self) -> String {
        fs::read(&self.stderr_path)
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }

    pub fn signal(&self, sig: i32) {
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Wait for the process to exit; `None` on timeout.
    pub fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            if start.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Foreground {
    /// The exit status within `timeout`, else a panic that says `what` and
    /// shows the daemon's log and where each of its threads waits.
    pub fn exited(&mut self, timeout: Duration, what: &str) -> std::process::ExitStatus {
        if let Some(st) = self.wait(timeout) {
            return st;
        }
        panic!(
            "{what}: `warpfs mount -f` still running after {timeout:?} (mounted: {}); its threads:\n{}\nits log:\n{}",
            is_mounted(&self.mnt),
            thread_states(self.child.id() as i32),
            self.stderr()
        );
    }
}

/// Poll `cond` until it holds; `false` after `timeout` (a hand-off with a
/// deadline, never a timing assertion).
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Wait until nothing is mounted at `p`; `false` after `timeout`.
pub fn wait_unmounted(p: &Path, timeout: Duration) -> bool {
    let start = Instant::now();
    while is_mounted(p) {
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// One line per thread of `pid`: name, state and kernel wait channel.
pub fn thread_states(pid: i32) -> String {
    let Ok(rd) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("(no /proc/{pid}/task)");
    };
    let mut out = Vec::new();
    for t in rd.flatten() {
        let read = |f: &str| fs::read_to_string(t.path().join(f)).unwrap_or_default();
        let state = read("stat")
            .rsplit_once(')')
            .map(|(_, r)| r.trim_start().chars().take(1).collect::<String>());
        out.push(format!(
            "  {} {} {}",
            read("comm").trim(),
            state.unwrap_or_default(),
            read("wchan").trim()
        ));
    }
    out.sort();
    out.join("\n")
}

impl Drop for Foreground {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.child.kill();
        }
        if is_mounted(&self.mnt) {
            let _ = unmount_path(&self.mnt);
        }
        if self.wait(Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------
// Syscall helpers (libc)

pub fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

/// Assert that `r` failed with `want` errno.
#[track_caller]
pub fn assert_errno<T: std::fmt::Debug>(r: io::Result<T>, want: i32, ctx: &str) {
    match r {
        Ok(v) => panic!(
            "{ctx}: expected {} but succeeded ({v:?})",
            io::Error::from_raw_os_error(want)
        ),
        Err(e) => assert_eq!(
            errno(&e),
            want,
            "{ctx}: expected {} got {e}",
            io::Error::from_raw_os_error(want)
        ),
    }
}

pub fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    let (a, b) = (cstr(from), cstr(to));
    check(unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags) })
}

pub fn mknod_fifo(p: &Path, mode: libc::mode_t) -> io::Result<()> {
    let c = cstr(p);
    check(unsafe { libc::mknod(c.as_ptr(), libc::S_IFIFO | mode, 0) })
}

pub fn utimens(p: &Path, atime: (i64, i64), mtime: (i64, i64), nofollow: bool) -> io::Result<()> {
    let c = cstr(p);
    let ts = [
        libc::timespec {
            tv_sec: atime.0 as _,
            tv_nsec: atime.1 as _,
        },
        libc::timespec {
            tv_sec: mtime.0 as _,
            tv_nsec: mtime.1 as _,
        },
    ];
    let flags = if nofollow { libc::AT_SYMLINK_NOFOLLOW } else { 0 };
    check(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), ts.as_ptr(), flags) })
}

pub fn statvfs(p: &Path) -> io::Result<libc::statvfs> {
    let c = cstr(p);
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::statvfs(c.as_ptr(), &mut s) })?;
    Ok(s)
}

pub fn fallocate(f: &File, mode: libc::c_int, off: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    check(unsafe { libc::fallocate(f.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) })
}

pub fn setxattr(p: &Path, name: &str, value: &[u8], flags: libc::c_int) -> io::Result<()> {
    let (c, n) = (cstr(p), CString::new(name).unwrap());
    check(unsafe { libc::setxattr(c.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) })
}

pub fn getxattr(p: &Path, name: &str) -> io::Result<Vec<u8>> {
    let (c, n) = (cstr(p), CString::new(name).unwrap());
    let size = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    if size < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; size as usize + 1];
    let got = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(got as usize);
    Ok(buf)
}

/// The size `getxattr` reports with a zero-sized buffer.
pub fn getxattr_size(p: &Path, name: &str) -> io::Result<usize> {
    let (c, n) = (cstr(p), CString::new(name).unwrap());
    let size = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    if size < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(size as usize)
    }
}

pub fn listxattr(p: &Path) -> io::Result<Vec<String>> {
    let c = cstr(p);
    let size = unsafe { libc::listxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    if size < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; size as usize + 256];
    let got = unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(got as usize);
    Ok(buf
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect())
}

pub fn removexattr(p: &Path, name: &str) -> io::Result<()> {
    let (c, n) = (cstr(p), CString::new(name).unwrap());
    check(unsafe { libc::removexattr(c.as_ptr(), n.as_ptr()) })
}

/// Whether the file system holding `dir` supports `user.*` xattrs.
pub fn backing_supports_user_xattrs(dir: &Path) -> bool {
    let probe = dir.join(".xattr-probe");
    fs::write(&probe, b"x").unwrap();
    let ok = setxattr(&probe, "user.probe", b"1", 0).is_ok();
    fs::remove_file(&probe).unwrap();
    ok
}

/// Write back and drop the kernel's cached pages of `f`, so the next read
/// goes to the daemon (and through decryption).
pub fn drop_cache(f: &File) {
    try_drop_cache(f).expect("fsync");
}

/// `drop_cache` that reports a failed fsync (the pages are dropped anyway
/// where they are clean).
pub fn try_drop_cache(f: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let r = f.sync_all();
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    r
}

/// Read exactly `len` bytes at `off` (fewer only at EOF).
pub fn read_at(f: &File, off: u64, len: usize) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = f.read_at(&mut buf[done..], off + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(buf)
}

pub fn write_at(f: &File, off: u64, data: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(data, off)
}

pub fn open_rw(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(p)
        .unwrap_or_else(|e| panic!("open {}: {e}", p.display()))
}

/// Compare two byte slices, reporting the first difference and its block.
#[track_caller]
pub fn assert_bytes_eq(got: &[u8], want: &[u8], ctx: &str) {
    if got == want {
        return;
    }
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    match first {
        Some(i) => {
            let last = got.iter().zip(want).rposition(|(a, b)| a != b).unwrap();
            panic!(
                "{ctx}: contents differ (len got {} want {}); first diff at byte {i} (block {}), \
                 last diff at byte {last} (block {}); got {:02x?} want {:02x?}",
                got.len(),
                want.len(),
                i / BLOCK as usize,
                last / BLOCK as usize,
                &got[i..(i + 16).min(got.len())],
                &want[i..(i + 16).min(want.len())]
            )
        }
        None => panic!(
            "{ctx}: length differs: got {} want {} (common prefix equal)",
            got.len(),
            want.len()
        ),
    }
}

// ---------------------------------------------------------------------------
// Tree snapshots

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(Vec<u8>),
    Dir,
    Symlink(PathBuf),
    Fifo,
    Other(String),
}

/// Every entry under `root`, keyed by relative path, with its content.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut m = BTreeMap::new();
    snap(root, Path::new(""), &mut m);
    m
}

fn snap(root: &Path, rel: &Path, m: &mut BTreeMap<PathBuf, Node>) {
    let dir = root.join(rel);
    for e in fs::read_dir(&dir).unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display())) {
        let e = e.unwrap();
        let r = rel.join(e.file_name());
        let p = root.join(&r);
        let md = fs::symlink_metadata(&p).unwrap();
        let ft = md.file_type();
        let node = if ft.is_dir() {
            Node::Dir
        } else if ft.is_symlink() {
            Node::Symlink(fs::read_link(&p).unwrap())
        } else if ft.is_file() {
            Node::File(fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())))
        } else if ft.is_fifo() {
            Node::Fifo
        } else {
            Node::Other(format!("{:o}", md.mode()))
        };
        let is_dir = node == Node::Dir;
        m.insert(r.clone(), node);
        if is_dir {
            snap(root, &r, m);
        }
    }
}

/// Compare two snapshots with a readable message.
#[track_caller]
pub fn assert_snapshots_eq(got: &BTreeMap<PathBuf, Node>, want: &BTreeMap<PathBuf, Node>, ctx: &str) {
    let mut problems = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => problems.push(format!("missing: {}", k.display())),
            Some(g) if g != v => problems.push(format!("differs: {} ({})", k.display(), short_node(g, v))),
            _ => {}
        }
    }
    for k in got.keys() {
        if !want.contains_key(k) {
            problems.push(format!("unexpected: {}", k.display()));
        }
    }
    assert!(problems.is_empty(), "{ctx}: trees differ:\n  {}", problems.join("\n  "));
}

fn short_node(got: &Node, want: &Node) -> String {
    match (got, want) {
        (Node::File(g), Node::File(w)) => {
            let first = g.iter().zip(w).position(|(a, b)| a != b);
            format!("file len got {} want {}, first diff at {first:?}", g.len(), w.len())
        }
        _ => format!("got {got:?} want {want:?}"),
    }
}

/// State of every path under `dir`: (kind, len, mode, mtime ns, ctime ns);
/// used to prove a command wrote nothing.
pub fn dir_state(dir: &Path) -> BTreeMap<PathBuf, (u32, u64, u32, i128, i128)> {
    let mut paths = vec![dir.to_path_buf()];
    walk(dir, &mut paths);
    paths
        .into_iter()
        .map(|p| {
            let md = fs::symlink_metadata(&p).unwrap();
            let st = (
                md.mode() & libc::S_IFMT,
                md.len(),
                md.mode(),
                md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128,
                md.ctime() as i128 * 1_000_000_000 + md.ctime_nsec() as i128,
            );
            (p, st)
        })
        .collect()
}

/// Does `hay` contain `needle`?
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Write `data` to `p` (create/truncate), fsync.
pub fn write_file(p: &Path, data: &[u8]) {
    let mut f = File::create(p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
    f.write_all(data)
        .unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    f.sync_all().unwrap_or_else(|e| panic!("fsync {}: {e}", p.display()));
}
