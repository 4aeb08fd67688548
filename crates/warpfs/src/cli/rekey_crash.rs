//! A rekey cut short: putting back what an interrupted one was moving
//! (its undo journals, FORMAT.md 10.3) before a volume is used, and the
//! crash-test points (`WARPFS_REKEY_KILL`) that cut one short on purpose.
//! Used by `warpfs mount`, `warpfs rekey` and the volume-key rekey.

use super::exit::CliError;
use crate::fuse::RekeyHook;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use warpfs_volume::rekey::{self, Event};
use warpfs_volume::Volume;

/// Apply the undo journals an interrupted rekey left in `cipherdir`
/// (FORMAT.md 10.3), saying what was done; stop with exit `code` while a
/// journal is refused or waits for a decision (`warpfs fsck`).
pub fn recover_or_stop(vol: &Volume, cipherdir: &Path, code: i32) -> Result<(), CliError> {
    let r = rekey::recover(vol, rekey::Decisions::automatic()).map_err(|e| {
        CliError::new(
            code,
            format!("cannot apply the undo journal of an interrupted rekey: {e}"),
        )
    })?;
    if r.restored > 0 {
        eprintln!(
            "warpfs: put back {} segment(s) an interrupted rekey was moving; run warpfs rekey to finish it",
            r.restored
        );
    }
    if r.torn > 0 {
        eprintln!(
            "warpfs: removed {} torn rekey undo journal(s) (cut short while written: nothing to undo, nothing applied)",
            r.torn
        );
    }
    if r.kept.is_empty() {
        return Ok(());
    }
    Err(CliError::new(
        code,
        format!(
            "{}: rekey undo journal(s) not applied: {}; nothing was applied from them (warpfs fsck {} explains each and settles them)",
            cipherdir.display(),
            r.kept_message(),
            cipherdir.display()
        ),
    ))
}

fn die() {
    // SAFETY: kill and getpid have no preconditions.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

/// Crash-test hook: `WARPFS_REKEY_KILL=EVENT:N` SIGKILLs the process doing
/// the rekey (this one, or the mount daemon) at the Nth EVENT: `saved` (a
/// segment's undo record is durable), `data` (its new data is written, its
/// entries and header not yet), `segment` (a segment moved), `file` (a
/// file done); in a rekey to a new volume key also `name` (an entry has
/// its new name) and `dir` (a directory has its new IV). `config:0` stops
/// `warpfs rekey` right after the config records the target.
pub fn kill_hook() -> Option<RekeyHook> {
    let v = std::env::var("WARPFS_REKEY_KILL").ok()?;
    let (ev, n) = v.split_once(':')?;
    let n: u64 = n.parse().ok()?;
    let want = match ev {
        "saved" => Event::Saved,
        "data" => Event::DataWritten,
        "segment" => Event::Segment,
        "file" => Event::File,
        "name" => Event::Name,
        "dir" => Event::Directory,
        _ => return None,
    };
    let seen = AtomicU64::new(0);
    Some(Arc::new(move |e| {
        if e == want && seen.fetch_add(1, Ordering::SeqCst) + 1 == n {
            die();
        }
    }))
}

/// The crash-test stop at `point` (`WARPFS_REKEY_KILL=config:0`, see
/// [`kill_hook`]).
pub fn kill_point(point: &str) {
    if std::env::var("WARPFS_REKEY_KILL").as_deref() == Ok(point) {
        die();
    }
}
