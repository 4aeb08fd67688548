//! The command-line contract: init / mount / passwd / info, exit codes
//! (0 ok, 1 error, 2 usage, 10 wrong password, 11 bad config, 12 CIPHERDIR
//! not empty, 13 mount failed), daemon and foreground mounts, read-only,
//! mounts run as another user (`setuid=`).
//! One test binary (`cargo test -p warpfs --test cli`): the exit codes and
//! shared helpers here, one module per command or subject.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod config;
mod init;
mod mount;
mod password;
mod setuid;
mod signals;

use common::*;
use std::fs::{self, File};
use std::time::{Duration, Instant};

const E_USAGE: i32 = 2;
const E_PASSWORD: i32 = 10;
const E_CONFIG: i32 = 11;
const E_NOT_EMPTY: i32 = 12;
const E_MOUNT: i32 = 13;

fn sorted_names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
