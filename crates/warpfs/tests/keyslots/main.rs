//! Keyslots through the command line and real mounts (FORMAT.md 2.6,
//! 10.5): a volume mounts by each kind of slot, `warpfs key list/add/
//! remove`, a slot table edited without the volume key is refused, an
//! older config becomes a keyslot config, and `key remove --rekey`
//! revokes for good: a config copy from before, opened with the removed
//! password, gives keys that decrypt no block and no name of the volume
//! (checked here through the library), also after a rekey killed part way
//! and finished by `warpfs rekey`.
//! One test binary (`cargo test -p warpfs --test keyslots`): the shared
//! helpers here, `slots.rs` (kinds, listing, tampering, conversion) and
//! `revoke.rs` (`--rekey`, killed rekeys, `rekey --new-volume-key`),
//! `online.rs` (the same on a mounted volume, files open and busy),
//! `tpm2.rs` (TPM2 slots against a software TPM), `fido2.rs` (FIDO2
//! slots through libfido2 and a test CTAP2 authenticator),
//! `scenario.rs` (every kind on one volume, then one revoked) and
//! `modes.rs` (revocation offline and online in every content mode).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod fido2;
mod modes;
mod online;
mod revoke;
mod scenario;
mod slots;
mod tpm2;

use common::*;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use warpfs_config::{Config, Input};
use warpfs_crypto::keys::Subkeys;

pub(crate) const E_WRONG: i32 = 10;
pub(crate) const E_CONFIG: i32 = 11;
pub(crate) const E_UNFINISHED: i32 = 14;

/// A fresh volume (fast KDF) with `extra` init arguments; its recovery key.
pub(crate) fn fresh(extra: &[&str]) -> (Volume, String) {
    fresh_in(Mode::Gcm, extra)
}

/// [`fresh`] in content mode `mode` (its `--mode` and `--cipher`).
pub(crate) fn fresh_in(mode: Mode, extra: &[&str]) -> (Volume, String) {
    let v = Volume::blank(mode);
    let mut a = args![
        "init",
        "--passfile",
        &v.passfile,
        "--kdf-memory",
        "32768",
        "--kdf-iterations",
        "2"
    ];
    a.extend(mode.init_args().into_iter().map(OsString::from));
    a.extend(extra.iter().map(OsString::from));
    a.push(v.cipher.clone().into());
    let o = warpfs(a);
    o.expect_ok("init");
    let rk = o
        .stdout
        .split_whitespace()
        .find(|w| w.len() == 71 && w.matches('-').count() == 7)
        .unwrap_or_else(|| panic!("no recovery key printed:\n{o}"))
        .to_string();
    (v, rk)
}

pub(crate) fn file(v: &Volume, name: &str, body: &str) -> PathBuf {
    let p = v.root().join(name);
    fs::write(&p, body).unwrap();
    p
}

/// Run warpfs with `input` on standard input.
pub(crate) fn with_stdin(args: Vec<OsString>, input: &str) -> Out {
    let mut c = Command::new(BIN)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = c.stdin.take().unwrap().write_all(input.as_bytes());
    let o = c.wait_with_output().unwrap();
    Out {
        what: format!("{args:?}"),
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

pub(crate) fn mount_with(v: &Volume, key: &[&str]) -> Out {
    let mut a = args!["mount", "--log-file", &v.logfile];
    a.extend(key.iter().map(OsString::from));
    a.push(v.cipher.clone().into());
    a.push(v.mnt.clone().into());
    warpfs(a)
}

pub(crate) fn key_list(v: &Volume) -> serde_json::Value {
    let o = warpfs(args!["key", "list", "--json", &v.cipher]);
    o.expect_ok("key list --json");
    serde_json::from_str(o.stdout.trim()).unwrap()
}

pub(crate) fn kinds(v: &Volume) -> Vec<(u64, String)> {
    key_list(v)["keyslots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_u64().unwrap(), s["kind"].as_str().unwrap().to_string()))
        .collect()
}
