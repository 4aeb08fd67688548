//! Honest accounting of tests that cannot run here.
//!
//! The libtest harness knows only "ok", "FAILED" and "ignored": a test that
//! returns early because the machine lacks something (root, /dev/fuse, an
//! OpenCL platform) reports "ok". Such a test calls [`skip`] instead of
//! returning silently, which
//!
//! - prints `SKIPPED <binary>::<test>: <reason>` on the process's real
//!   standard error (not through `eprintln!`, which libtest captures and
//!   shows only for failed tests), once per test;
//! - appends `<binary> TAB <test> TAB <reason>` to the file named by
//!   `WARPFS_SKIP_LOG`, when set: `scripts/test.sh` counts those lines as
//!   skipped and subtracts them from the passes;
//! - panics instead, failing the test, when `WARPFS_NO_SKIP=1`
//!   (`scripts/test.sh` sets it when it runs as root with /dev/fuse: there
//!   every test is expected to run).
//!
//! A registry line that cannot be written fails the test too: a skip is
//! never counted as a pass.
//!
//! A test that can check something else where the machine lacks a part
//! (the portable path on a CPU without AVX-512) does so and calls [`note`]:
//! a `note:` line, no skip.

pub mod cases;
pub mod ctap2;
pub mod swtpm;
pub use cases::cases;

use std::collections::HashSet;
use std::fmt::Display;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Set to `1`: every skip is a failure.
pub const ENV_NO_SKIP: &str = "WARPFS_NO_SKIP";
/// The skip registry file (appended to; one line per skipped test).
pub const ENV_SKIP_LOG: &str = "WARPFS_SKIP_LOG";

/// Whether skips fail (`WARPFS_NO_SKIP=1`).
pub fn skips_are_failures() -> bool {
    std::env::var(ENV_NO_SKIP).is_ok_and(|v| v.trim() == "1")
}

/// The calling test cannot run here, because of `reason`: say so and
/// count it (see the module doc). The caller returns right after.
///
/// # Panics
/// With `WARPFS_NO_SKIP=1`, or when the registry cannot be written.
#[track_caller]
pub fn skip(reason: impl Display) {
    let log = std::env::var_os(ENV_SKIP_LOG).map(PathBuf::from);
    let at = Skip {
        binary: current_binary(),
        test: current_test(),
        reason: one_line(&reason.to_string()),
    };
    if let Err(e) = record(&at, skips_are_failures(), log.as_deref(), &mut std::io::stderr()) {
        panic!("{e}");
    }
}

/// [`skip`] with the reason from a check that returns `Some(reason)` when
/// the test cannot run; returns whether it skipped:
/// `if skip_if(fuse_unavailable()) { return; }`.
#[track_caller]
pub fn skip_if<R: Display>(why: Option<R>) -> bool {
    match why {
        Some(r) => {
            skip(r);
            true
        }
        None => false,
    }
}

/// The calling test runs, but on this machine checks something else than
/// it would elsewhere (e.g. the portable path where the CPU lacks an
/// instruction set): say so on the process's real standard error, once per
/// test, note and process, as `note: <binary>::<test>: <what>`. Neither a
/// skip nor a failure: the test passes or fails on what it did check.
#[track_caller]
pub fn note(what: impl Display) {
    let _ = write_note(
        &current_binary(),
        &current_test(),
        &one_line(&what.to_string()),
        &mut std::io::stderr(),
    );
}

/// [`note`]'s line to `out`, unless this test gave this note already.
fn write_note(binary: &str, test: &str, what: &str, out: &mut dyn Write) -> std::io::Result<()> {
    static SEEN: OnceLock<Mutex<HashSet<(String, String, String)>>> = OnceLock::new();
    let first = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((binary.to_string(), test.to_string(), what.to_string()));
    if !first {
        return Ok(());
    }
    // One write of the whole line: tests run in parallel threads.
    out.write_all(format!("note: {binary}::{test}: {what}\n").as_bytes())
}

/// One skip: which test and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// Test binary without cargo's hash (`io`, `warpfs_crypto`).
    pub binary: String,
    /// The test's path inside its binary (libtest's thread name).
    pub test: String,
    /// Why it cannot run, on one line.
    pub reason: String,
}

impl Skip {
    /// The registry line (with its newline).
    pub fn line(&self) -> String {
        format!("{}\t{}\t{}\n", self.binary, self.test, self.reason)
    }
}

/// Tell `out` and the registry `log` about `s` (once per test and process),
/// or fail when skips are failures. `Err` is the panic message.
pub fn record(s: &Skip, no_skip: bool, log: Option<&Path>, out: &mut dyn Write) -> Result<(), String> {
    if no_skip {
        return Err(format!(
            "{ENV_NO_SKIP}=1 and {}::{} cannot run here: {}",
            s.binary, s.test, s.reason
        ));
    }
    static SEEN: OnceLock<Mutex<HashSet<(String, String)>>> = OnceLock::new();
    let key = (s.binary.clone(), s.test.clone());
    let first = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key);
    if !first {
        return Ok(());
    }
    // One write of the whole line: tests run in parallel threads.
    let _ = out.write_all(format!("SKIPPED {}::{}: {}\n", s.binary, s.test, s.reason).as_bytes());
    if let Some(p) = log {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .and_then(|mut f| f.write_all(s.line().as_bytes()))
            .map_err(|e| {
                format!(
                    "cannot record the skip of {}::{} in {}: {e}",
                    s.binary,
                    s.test,
                    p.display()
                )
            })?;
    }
    Ok(())
}

/// The running test's name: libtest runs each test on a thread named
/// after it.
fn current_test() -> String {
    std::thread::current().name().unwrap_or("(unnamed thread)").to_string()
}

/// The test binary's name without cargo's `-<hash>` suffix.
fn current_binary() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(Path::file_stem)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "(unknown binary)".into());
    strip_hash(&stem).to_string()
}

fn strip_hash(stem: &str) -> &str {
    match stem.rsplit_once('-') {
        Some((name, h)) if h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()) => name,
        _ => stem,
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(test: &str) -> Skip {
        Skip {
            binary: "io".into(),
            test: test.into(),
            reason: "no /dev/fuse".into(),
        }
    }

    #[test]
    fn a_skip_is_printed_and_recorded_once_per_test() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips.txt");
        let mut out = Vec::new();
        for _ in 0..3 {
            record(&at("io::a"), false, Some(&log), &mut out).unwrap();
        }
        record(&at("io::b"), false, Some(&log), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SKIPPED io::io::a: no /dev/fuse\nSKIPPED io::io::b: no /dev/fuse\n"
        );
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "io\tio::a\tno /dev/fuse\nio\tio::b\tno /dev/fuse\n"
        );
    }

    #[test]
    fn a_note_is_printed_once_per_test_and_note_and_is_no_skip() {
        let mut out = Vec::new();
        for _ in 0..3 {
            write_note("crypto", "simd::n::a", "portable path", &mut out).unwrap();
        }
        write_note("crypto", "simd::n::a", "another", &mut out).unwrap();
        write_note("crypto", "simd::n::b", "portable path", &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "note: crypto::simd::n::a: portable path\nnote: crypto::simd::n::a: another\n\
             note: crypto::simd::n::b: portable path\n"
        );
    }

    #[test]
    fn no_skip_turns_a_skip_into_a_failure_and_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips.txt");
        let mut out = Vec::new();
        let e = record(&at("io::c"), true, Some(&log), &mut out).unwrap_err();
        assert!(
            e.contains("WARPFS_NO_SKIP=1") && e.contains("io::io::c") && e.contains("no /dev/fuse"),
            "{e}"
        );
        assert!(out.is_empty() && !log.exists());
    }

    #[test]
    fn an_unwritable_registry_fails_the_test() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("missing-dir").join("skips.txt");
        let e = record(&at("io::d"), false, Some(&log), &mut Vec::new()).unwrap_err();
        assert!(e.contains("cannot record the skip"), "{e}");
    }

    #[test]
    fn names_lose_the_hash_and_reasons_their_newlines() {
        assert_eq!(strip_hash("io-0123456789abcdef"), "io");
        assert_eq!(strip_hash("gpu_xts-0123456789abcdef"), "gpu_xts");
        assert_eq!(strip_hash("warpfs-bench"), "warpfs-bench");
        assert_eq!(one_line("a\n  b\tc "), "a b c");
        // libtest names the thread after the test.
        assert_eq!(current_test(), "tests::names_lose_the_hash_and_reasons_their_newlines");
        assert_eq!(current_binary(), "warpfs_testkit");
    }
}
