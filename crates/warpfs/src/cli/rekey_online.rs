//! What both rekeys of a mounted volume share (to the next content key
//! generation, `rekey.rs`; to a new volume key, `volkey_mount.rs`): the
//! mount found and checked before the config changes, requests tagged
//! under the control key, and the daemon's status followed on a progress
//! bar until its run ends.

use super::exit::{CliError, ERROR};
use crate::fuse::REKEY_XATTR;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::time::Duration;
use warpfs_crypto::ControlKey;
use warpfs_volume::rekey::Request;

/// Where `cipherdir` is mounted (`None`: it is not), refused when the
/// mount is read-only or does not answer this user's control requests:
/// both before the config changes.
pub(super) fn mount_to_rekey(cipherdir: &Path) -> Result<Option<PathBuf>, CliError> {
    mount_to_change(cipherdir, "rekey")
}

/// [`mount_to_rekey`] for `verb` (`rekey`, `upgrade`): what the mount is
/// asked to do to every file.
pub(super) fn mount_to_change(cipherdir: &Path, verb: &str) -> Result<Option<PathBuf>, CliError> {
    let Some(m) = super::mounted::mount_of(cipherdir) else {
        return Ok(None);
    };
    if m.read_only {
        return Err(CliError::new(
            ERROR,
            format!(
                "{} is mounted read-only at {}: a {verb} writes every file; remount it read-write or unmount it",
                cipherdir.display(),
                m.at
            ),
        ));
    }
    let at = PathBuf::from(&m.at);
    if let Err(e) = super::ctl_client::get(&at, REKEY_XATTR) {
        let why = if e.raw_os_error() == Some(libc::EPERM) {
            format!("only root and the user the mount runs as may {verb} it while it is mounted")
        } else {
            e.to_string()
        };
        return Err(CliError::new(
            ERROR,
            format!(
                "{} is mounted at {}: {why}; or unmount it first",
                cipherdir.display(),
                m.at
            ),
        ));
    }
    Ok(Some(at))
}

/// Refuse, before the config changes, a mount at `at` (of `cipherdir`)
/// whose daemon does not name `cap` in its capabilities (a daemon of an
/// older warpfs): it `cannot` do what was asked while mounted.
pub(super) fn require_cap(cipherdir: &Path, at: &Path, cap: &str, cannot: &str) -> Result<(), CliError> {
    let caps = super::ctl_client::get(at, crate::fuse::CAPS_XATTR)
        .ok()
        .flatten()
        .unwrap_or_default();
    if String::from_utf8_lossy(&caps).split_whitespace().any(|c| c == cap) {
        return Ok(());
    }
    Err(CliError::new(
        ERROR,
        format!(
            "{} is mounted at {} by an older warpfs, which cannot {cannot} while mounted: \
             unmount it (or remount it with this warpfs) first; nothing was changed",
            cipherdir.display(),
            at.display()
        ),
    ))
}

/// Send control request `req` to the mount at `mnt`, proved with a tag
/// under `control`.
pub(super) fn send(mnt: &Path, control: &ControlKey, req: &Request) -> std::io::Result<()> {
    let v = req.encode();
    let tag = control.tag(REKEY_XATTR.as_bytes(), v.as_bytes());
    super::ctl_client::set(mnt, REKEY_XATTR, v.as_bytes(), Some(&tag))
}

/// Why the mount at `mnt` refused a request that failed with `e`: the
/// error its status names, else `e`.
pub(super) fn refusal(mnt: &Path, e: &std::io::Error) -> String {
    status(mnt)
        .and_then(|s| s["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| e.to_string())
}

/// The mount's rekey status, parsed; `None` when it has none or is gone.
pub(super) fn status(mnt: &Path) -> Option<serde_json::Value> {
    let b = super::ctl_client::get(mnt, REKEY_XATTR).ok()??;
    serde_json::from_slice(&b).ok()
}

/// How the mount's run ended when not done.
#[derive(Debug)]
pub(super) enum Stopped {
    /// The status is gone (the mount ended).
    Gone,
    /// The run stopped: its state and the reason it gives.
    Ended(String, String),
}

/// Follow the mount's run on `bar` (bytes moved of all) until it is done;
/// its last status.
pub(super) fn follow(mnt: &Path, bar: &ProgressBar) -> Result<serde_json::Value, Stopped> {
    loop {
        let s = status(mnt).ok_or(Stopped::Gone)?;
        let n = |k: &str| s[k].as_u64().unwrap_or(0);
        bar.set_length(n("bytes_total").max(1));
        bar.set_position(n("bytes"));
        match s["state"].as_str() {
            Some("running") => std::thread::sleep(Duration::from_millis(200)),
            Some("done") => return Ok(s),
            other => {
                bar.abandon();
                let why = s["error"].as_str().unwrap_or("no reason given").to_string();
                return Err(Stopped::Ended(other.unwrap_or("ended").to_string(), why));
            }
        }
    }
}
