//! `warpfs stats MOUNTPOINT`: the live mount's keystream engine counters.
//!
//! The mount daemon answers a read of the virtual attribute
//! `trusted.warpfs.stats` of the mount root with the counters as JSON
//! (docs/decisions/0050), through the root's control ioctl
//! (`cli::ctl_client`): it works for a daemonized mount and under `--no-xattr`,
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
    let why = match super::ctl_client::get(mountpoint, STATS_XATTR) {
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
    let unreadable =
        |e: serde_json::Error| CliError::new(ERROR, format!("{}: unreadable stats: {e}", a.mountpoint.display()));
    let s = StatsSnapshot::from_json(&raw).map_err(unreadable)?;
    // The daemon adds the transport serving the mount (`uring`, `dev`) and
    // why it was chosen.
    let daemon = serde_json::from_str::<serde_json::Value>(&raw).ok();
    let field = |k: &str| {
        daemon
            .as_ref()
            .and_then(|v| v.get(k).and_then(|t| t.as_str()).map(str::to_string))
    };
    let (transport, why) = (field("transport"), field("transport_why"));
    if a.json {
        let mut v: serde_json::Value = serde_json::from_str(&s.to_json()).map_err(unreadable)?;
        if let Some(o) = v.as_object_mut() {
            for (k, val) in [("transport", &transport), ("transport_why", &why)] {
                if let Some(val) = val {
                    o.insert(k.into(), val.clone().into());
                }
            }
        }
        println!("{v}");
    } else {
        println!("{s}");
        match (transport, why) {
            (Some(t), Some(w)) => println!("transport: {t} ({w})"),
            (Some(t), None) => println!("transport: {t}"),
            _ => {}
        }
    }
    Ok(())
}
