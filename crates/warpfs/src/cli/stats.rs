//! `warpfs stats MOUNTPOINT`: the live mount's keystream engine counters.
//!
//! The mount daemon answers a getxattr of the virtual attribute
//! `trusted.warpfs.stats` on the mount root with the counters as JSON
//! (ARCHITECTURE.md, "Engine stats"): it works for a daemonized mount,
//! needs no socket or file, and ends with the mount. The kernel lets only
//! CAP_SYS_ADMIN (root) read `trusted.*` attributes.

use super::exit::{CliError, ERROR};
use crate::fuse::STATS_XATTR;
use clap::Args;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
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
    let path = CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| CliError::new(ERROR, "mountpoint contains a NUL byte"))?;
    let name = CString::new(STATS_XATTR).expect("no NUL in the name");
    // One call with a buffer far larger than the value (a size probe
    // followed by a read could race with the counters growing).
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: valid C strings; buf is writable for buf.len() bytes.
    let n = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        let why = match e.raw_os_error() {
            // SAFETY: geteuid has no preconditions.
            Some(libc::ENODATA) if unsafe { libc::geteuid() } != 0 => {
                "reading the stats needs root (trusted.* attributes need CAP_SYS_ADMIN)".to_string()
            }
            Some(libc::ENODATA) | Some(libc::EOPNOTSUPP) => "not a warpfs mount".to_string(),
            _ => e.to_string(),
        };
        return Err(CliError::new(ERROR, format!("{}: {why}", mountpoint.display())));
    }
    buf.truncate(n as usize);
    String::from_utf8(buf).map_err(|_| CliError::new(ERROR, "the mount answered with something that is not text"))
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
