//! The mount daemon's start, in the foreground or after the fork: the
//! mount made (as the `--setuid` user where asked, who then becomes the
//! daemon's user for good, before any thread that serves requests starts),
//! the mount's read-ahead, signal handling, the ring and the idle watcher.

use super::daily::MountExtra;
use crate::cli::exit::{CliError, ERROR, MOUNT_FAILED};
use crate::fuse::transport::uring::RingOptions;
use crate::fuse::{serve, stop_on_signals, tune_bdi, Mounted, Transport, WarpFs};
use std::path::Path;

/// Mount `fs` at `mountpoint` and bring the mount to life (see the module
/// doc). On an error the mount is gone again (and enable_uring put back).
pub fn go_live(
    fs: WarpFs,
    mountpoint: &Path,
    extra: &MountExtra,
    config: &crate::fuse::MountConfig,
    (transport, ring): (Transport, RingOptions),
    cipherdir: &Path,
) -> Result<Mounted<WarpFs>, CliError> {
    let failed = |e: String| CliError::new(MOUNT_FAILED, e);
    let notifier = fs.notifier_slot();
    let (fs, activity) = extra.served(fs);
    let user = extra.setuid.as_ref();
    let mut config = config.clone();
    if let Some(u) = user {
        // Each FUSE thread would open /dev/fuse again once the daemon is
        // the user, who may not (it is often 0600): they share the one.
        config.clone_fd = false;
        crate::cli::setuid::mount_as(u).map_err(failed)?;
    }
    let mut mounting = serve(fs, mountpoint, &config, transport, ring).map_err(failed)?;
    let _ = notifier.set(mounting.notifier());
    tune_bdi(mountpoint);
    if let Some(u) = user {
        crate::cli::setuid::become_user(u).map_err(failed)?;
    }
    // SIGTERM (a shutdown, `kill`) unmounts cleanly, as a daemon too.
    stop_on_signals(mountpoint, mounting.unmount_callable())
        .map_err(|e| CliError::new(ERROR, format!("cannot take SIGINT/SIGTERM: {e}")))?;
    let session = mounting.start().map_err(failed)?;
    tracing::info!(
        "mounted {} on {} (transport: {})",
        cipherdir.display(),
        mountpoint.display(),
        session.describe()
    );
    extra
        .watch_idle(mountpoint, activity)
        .map_err(|e| CliError::new(ERROR, e))?;
    Ok(session)
}
