//! `warpfs stats MOUNTPOINT`: the live mount's keystream engine counters.
//!
//! The mount daemon answers a read of the virtual attribute
//! `trusted.warpfs.stats` of the mount root with the counters as JSON
//! (ARCHITECTURE.md, "Engine stats"), through the root's control ioctl
//! (`cli::virt`): it works for a daemonized mount and under `--no-xattr`,
//! needs no socket or file, and ends with the mount. Root and the user the
//! daemon runs as may read it.

use super::exit::{CliError, ERROR};
use crate::fuse::STATS_XATTR;
use clap::Args;
use std::path::PathBuf;
use warpfs_engine::StatsSnapshot;

/// Arguments of `warpfs stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Print the counters as one line of JSON.
    #[arg(long)]
    json: bool,
    /// Where the volume is mounted.
    mountpoint: PathBuf,
}

/// The raw JSON the daemon at `mountpoint` reports.
fn read_stats(mountpoint: &std::path::Path) -> Result<String, CliError> {
    let why = match super::virt::get(mountpoint, STATS_XATTR) {
        Ok(Some(buf)) => {
            return String::from_utf8(buf)
                .map_err(|_| CliError::new(ERROR, "the mount answered with something that is not text"))
        }
        Ok(None) => "not a warpfs mount".to_string(),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            "only root and the user the mount runs as may read its stats".to_string()
        }
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => "not a warpfs mount".to_string(),
        Err(e) => e.to_string(),
    };
    Err(CliError::new(ERROR, format!("{}: {why}", mountpoint.display())))
}

pub fn run(a: StatsArgs) -> Result<(), CliError> {
    let raw = read_stats(&a.mountpoint)?;
    let s = StatsSnapshot::from_json(&raw)
        .map_err(|e| CliError::new(ERROR, format!("{}: unreadable stats: {e}", a.mountpoint.display())))?;
    if a.json {
        println!("{}", s.to_json());
    } else {
        println!("{s}");
    }
    Ok(())
}
