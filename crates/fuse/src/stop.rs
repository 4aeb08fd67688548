//! Stopping a mount on SIGINT or SIGTERM: unmount; a mount still in use is
//! detached instead (as `umount -l`), and the daemon serves the files still
//! open on it until the last is closed; a second signal ends it at once
//! (docs/decisions/0047-stopping-on-signals.md).

use fuser::SessionUnmounter;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io;
use std::path::Path;

/// Exit status of a daemon ended by a second signal while files were
/// still open on its detached mount.
pub(crate) const FORCED_EXIT: i32 = 1;

/// Take SIGINT and SIGTERM from now on (call once the mount is live): the
/// first unmounts `mountpoint` (or detaches it), the next exits the process
/// with [`FORCED_EXIT`].
pub fn stop_on_signals(mountpoint: &Path, mut unmounter: SessionUnmounter) -> io::Result<()> {
    let mp = warpfs_backing::host::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    let dev = super::mountinfo::read().and_then(|info| super::mountinfo::device_at(&info, &mp));
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("warpfs-signals".into())
        .spawn(move || {
            let mut it = signals.forever();
            let Some(sig) = it.next() else { return };
            tracing::info!("{} received, unmounting", name(sig));
            stop(&mp, dev.as_deref(), &mut unmounter);
            if let Some(sig) = it.next() {
                tracing::warn!(
                    "{} received again: stopping now; files still open on the detached mount lose their connection",
                    name(sig)
                );
                // `exit` runs no destructor: put enable_uring back here.
                super::transport::restore();
                std::process::exit(FORCED_EXIT);
            }
        })?;
    Ok(())
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Unmount, and detach what the unmount left (it was busy). Once the mount
/// is gone from the namespace the session ends by itself: at once, or when
/// the last file open on a detached mount is closed.
fn stop(mp: &Path, dev: Option<&str>, unmounter: &mut SessionUnmounter) {
    if !still_mounted(mp, dev) {
        return;
    }
    // As root umount2(UMOUNT_NOFOLLOW), an error when busy; otherwise
    // fuser's `fusermount3 -u -z` (which never follows a symlink either),
    // whose failure it does not report. So look.
    // SAFETY: geteuid has no preconditions.
    let tried = if unsafe { libc::geteuid() } == 0 {
        super::unmount::unmount(mp, false)
    } else {
        unmounter.unmount()
    };
    if !still_mounted(mp, dev) {
        return;
    }
    match tried {
        Err(e) => tracing::warn!("cannot unmount {}: {e}", mp.display()),
        Ok(()) => tracing::warn!("cannot unmount {}: fusermount3 -u failed", mp.display()),
    }
    match super::unmount::unmount(mp, true) {
        Ok(()) if !still_mounted(mp, dev) => tracing::warn!(
            "{} is busy: detached it; files open on it are served until the last is closed, then the daemon exits (signal again to stop it now)",
            mp.display()
        ),
        Ok(()) => tracing::error!("{} is still mounted after a lazy unmount; signal again to stop the daemon", mp.display()),
        Err(e) => tracing::error!("cannot detach {}: {e}; signal again to stop the daemon", mp.display()),
    }
}

/// Whether our device is still mounted at `mp` (unknown device: whether
/// anything FUSE-made by us could be; an unreadable mountinfo says no, so
/// nothing is detached blindly).
pub(super) fn still_mounted(mp: &Path, dev: Option<&str>) -> bool {
    match (super::mountinfo::read(), dev) {
        (Some(info), Some(dev)) => super::mountinfo::is_mounted(&info, mp, dev),
        (Some(info), None) => super::mountinfo::device_at(&info, mp).is_some(),
        (None, _) => false,
    }
}
