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
//! `speculation_tests!` runs a suite's cases with it forced on and off
//! (`speculation`: a per-thread value over the variable).
//! `WARPFS_TEST_ENGINE=cpu|opencl|cuda|auto` likewise adds `--engine X`.
//!
//! One submodule per job, all re-exported here: `harness` (skipping,
//! `require_fuse!`, `mode_tests!`), `run` (running the binary, `args!`),
//! `mode` (content modes and layout arithmetic), `rng`, `mounts` (mount
//! table, daemons, unmounting), `volume` (the `Volume` fixture),
//! `foreground` (a `-f` mount, waiting with deadlines), `speculation`
//! (forced on or off per test, checked in `warpfs stats`), `sys` (system-call
//! wrappers), `files` (file helpers) and `tree` (tree snapshots).
#![allow(dead_code)]

use std::time::Duration;

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

// Modules that define macros come first: the others use them.
#[macro_use]
mod harness;
#[macro_use]
mod run;

mod files;
mod foreground;
mod mode;
mod mounts;
mod rng;
mod speculation;
mod sys;
mod tree;
mod volume;

// Everything is re-exported; a test binary uses only some of it.
#[allow(unused_imports)]
pub use {
    files::*, foreground::*, harness::*, mode::*, mounts::*, rng::*, run::*, speculation::*, sys::*, tree::*, volume::*,
};
