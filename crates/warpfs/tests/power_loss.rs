//! Crash consistency against power loss, not only a killed process: the
//! daemon's every write, truncation, sync, rename, link and unlink in
//! CIPHERDIR is recorded during a workload, crash states are built from it
//! as a file system may leave them after a power loss (what was fsynced,
//! plus prefixes, reorderings and torn pages of what was not), and each
//! state is mounted with the real `warpfs mount` and checked: fsynced bytes
//! read back, nothing reads as wrong plaintext without EIO (gcm), no nonce
//! repeats, `warpfs fsck` names every EIO, an interrupted rekey recovers
//! through its journal and finishes (`crashsim/`, and
//! docs/decisions/0006-crash-state-testing.md for the model).
//!
//! Each case runs with speculation on and off (every mount of it, the
//! recorded one checked in `warpfs stats`; the `summaries` cases keep the
//! default). Each test checks `WARPFS_CRASH_STATES` distinct states (default 24);
//! `scripts/crash-states.sh` runs many more.

#[macro_use]
mod common;
mod crashsim;

use common::*;

// Over Twofish CI runs `writes` with speculation on (Twofish's default);
// scripts/twofish-matrix.sh runs the rest (a rekey case takes 15 s).
speculation_tests!(twofish_on: writes; all: rename, rekey);

/// The same workloads on gcm (and xchacha20-poly1305) volumes with file
/// summaries (FORMAT.md 12):
/// every crash state must verify (no fsynced byte reads as EIO because a
/// summary does not match).
mod summaries {
    use super::*;

    #[test]
    fn writes() {
        crashsim::run_with(Mode::Gcm, "writes", &["--file-summary", "on"])
    }

    #[test]
    fn rename() {
        crashsim::run_with(Mode::Gcm, "rename", &["--file-summary", "on"])
    }

    #[test]
    fn rekey() {
        crashsim::run_with(Mode::Gcm, "rekey", &["--file-summary", "on"])
    }

    /// XChaCha20-Poly1305 keeps summaries as gcm does (FORMAT.md 15).
    #[test]
    fn xchacha20_poly1305_writes() {
        crashsim::run_with(Mode::XChaCha20Poly1305, "writes", &["--file-summary", "on"])
    }

    #[test]
    fn xchacha20_poly1305_rename() {
        crashsim::run_with(Mode::XChaCha20Poly1305, "rename", &["--file-summary", "on"])
    }

    #[test]
    fn xchacha20_poly1305_rekey() {
        crashsim::run_with(Mode::XChaCha20Poly1305, "rekey", &["--file-summary", "on"])
    }
}

/// `warpfs upgrade` (FORMAT.md 12.6) of the frozen format 1 gcm volume
/// cut short by a power loss anywhere: run again, it finishes, and every
/// file reads back with its summary verified.
#[test]
fn upgrade() {
    crashsim::offline::upgrade("v1-gcm")
}

/// Sequential and random writes, appends, fsync and fdatasync, truncation.
fn writes(mode: Mode) {
    crashsim::run(mode, "writes")
}

/// The atomic-save pattern, long names, a new directory, an unlink.
fn rename(mode: Mode) {
    crashsim::run(mode, "rename")
}

/// An online rekey while files it moves are written and synced.
fn rekey(mode: Mode) {
    crashsim::run(mode, "rekey")
}
