//! A rekey to a new volume key on a mounted volume (FORMAT.md 10.5,
//! decision record 0092): the requests that hand the mount the new key,
//! follow the content as it moves, have the names moved while requests
//! wait, and end it once the config records the end. Also how either run
//! goes (`RunArgs`) and its progress bar, which the offline run shares.

use super::exit::{CliError, REKEY_UNFINISHED};
use super::rekey_online::{follow, refusal, send, status, Stopped};
use crate::fuse::CAP_VOLUME_KEY;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;
use warpfs_config::Config;
use warpfs_crypto::ControlKey;
use warpfs_volume::rekey::Request;

/// Where `cipherdir` is mounted read-write and answers this user's control
/// requests with a daemon that takes a new volume key; `None` when it is
/// not mounted.
pub(super) fn mounted(cipherdir: &Path) -> Result<Option<PathBuf>, CliError> {
    let Some(at) = super::rekey_online::mount_to_rekey(cipherdir)? else {
        return Ok(None);
    };
    // A daemon of an older warpfs cannot take the new key: say so before
    // the config changes.
    super::rekey_online::require_cap(cipherdir, &at, CAP_VOLUME_KEY, "rekey to a new volume key")?;
    Ok(Some(at))
}

/// Send control request `req` to the mount at `mnt`, proved with `control`.
fn request(mnt: &Path, control: &ControlKey, req: &Request) -> Result<(), CliError> {
    send(mnt, control, req).map_err(|e| {
        let why = if e.raw_os_error() == Some(libc::EPERM) {
            "it takes one from root, or from the user it runs as with proof of the password (a mount of an older \
             warpfs takes no rekey to a new volume key: unmount it)"
                .to_string()
        } else {
            refusal(mnt, &e)
        };
        CliError::new(
            REKEY_UNFINISHED,
            format!(
                "{}: the mount refused the rekey: {why}\nwarpfs: run warpfs rekey to finish it (unmounted, or \
                 on this mount)",
                mnt.display()
            ),
        )
    })
}

/// The rekey to a new volume key recorded in `cfg` (at `path`), on the
/// volume mounted at `mnt`: the mount is handed the new key `new` and
/// moves the content while it serves, then the names while requests
/// wait; then the config records the end and the mount drops the old key.
pub(super) fn finish_online(
    mnt: &Path,
    path: &Path,
    cfg: &Config,
    new: &warpfs_crypto::MasterKey,
    used: Option<u32>,
    run: &RunArgs,
) -> Result<(), CliError> {
    let unfinished = |m: String| CliError::new(REKEY_UNFINISHED, m);
    let old = cfg
        .previous_key(new)?
        .ok_or_else(|| unfinished("no rekey to a new volume key is under way".into()))?;
    let (target, id) = match (cfg.rekey_target(), cfg.rekey_id()) {
        (Some(t), Some(id)) => (t, id),
        _ => return Err(unfinished("the config names no rekey target and ID".into())),
    };
    let (old_control, new_control) = (ControlKey::derive(&old), ControlKey::derive(new));
    drop(old);
    let start = Instant::now();
    request(
        mnt,
        &old_control,
        &Request::Volkey {
            target,
            jobs: run.jobs,
            max_rate: run.max_rate,
            rekey_id: id,
            key: old_control.seal_key(new),
        },
    )?;
    let bar = bar();
    bar.set_message("content");
    let last = follow(mnt, &bar).map_err(|stop| {
        unfinished(match stop {
            Stopped::Gone => format!(
                "{}: the mount's rekey status is gone (the mount ended?): run warpfs rekey to finish",
                mnt.display()
            ),
            Stopped::Ended(state, why) => format!(
                "the mount's rekey {state}: {why}\nwarpfs: what was moved keeps its new key; run warpfs rekey to finish"
            ),
        })
    })?;
    bar.finish_and_clear();
    eprintln!(
        "warpfs: the content has moved; now every name moves (requests to the mount at {} wait until it ends)",
        mnt.display()
    );
    request(mnt, &new_control, &Request::Names)?;
    let after = status(mnt).unwrap_or(last.clone());
    cfg.finish_volume_rekey(new, used)?.save_at(path)?;
    if let Err(e) = request(mnt, &new_control, &Request::Finish) {
        // The config is final; the mount only keeps the old key in memory
        // until it unmounts.
        eprintln!("warpfs: warning: the mount did not drop the old key: {}", e.msg);
    }
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
    if n(&last, "unreadable_blocks") > 0 {
        eprintln!(
            "warpfs: {} block(s) could not be decrypted and were left as they were (they read as errors)",
            n(&last, "unreadable_blocks")
        );
    }
    println!(
        "rekeyed {} file(s), {} name(s) and {} directory IV(s) to a new volume key (key generation {target}) in {:.2} s, \
         online",
        n(&last, "files_moved"),
        n(&after, "names"),
        n(&after, "dirs"),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// How the walk runs.
#[derive(Debug, Clone, Copy)]
pub struct RunArgs {
    /// Files re-encrypted at once.
    pub jobs: usize,
    /// Bytes per second at most.
    pub max_rate: Option<u64>,
}

/// The progress bar of a volume-key rekey (hidden off a terminal).
pub(super) fn bar() -> ProgressBar {
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("volume key rekey ({msg}) {bar:40} {percent}% eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
