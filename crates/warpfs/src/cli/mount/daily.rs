//! The `warpfs mount` options for daily use: `--idle`, `--force-owner`,
//! `--nonempty`, `--fsname`, `--setuid` and `--drop-privileges` (each also
//! an `-o` option: `idle=10m`, `setuid=alice`, ...); what `--idle` and
//! `--force-owner` put in front of the file system.

use crate::fuse::idle::{self, Activity};
use crate::fuse::{Served, WarpFs};
use clap::Args;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A user and group for `--force-owner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Options of `warpfs mount` for daily use.
#[derive(Args, Debug, Default)]
pub struct MountExtra {
    /// Unmount after DURATION with no request, no open file and no process
    /// with its working directory inside (e.g. 30s, 10m, 1h; -o idle=10m).
    /// A mount still in use stays; the daemon exits once unmounted.
    #[arg(long, value_name = "DURATION", value_parser = idle::parse_duration)]
    pub idle: Option<Duration>,
    /// Report every file and directory as owned by this numeric user and
    /// group, as gocryptfs's -force_owner (-o force_owner=1000:1000). Only
    /// what is shown changes: files are created and checked as before.
    #[arg(long, value_name = "UID:GID", value_parser = parse_owner)]
    pub force_owner: Option<Owner>,
    /// Mount over a directory that is not empty (its files are hidden while
    /// the volume is mounted).
    #[arg(long)]
    pub nonempty: bool,
    /// The mount's source as mount(8), df and /proc/mounts show it
    /// [default: the cipher directory].
    #[arg(long, value_name = "NAME")]
    pub fsname: Option<String>,
    /// Run the daemon and the --extpass program as USER (a name, or a
    /// number the password database knows; -o setuid=USER), for a mount
    /// made by root: the mount belongs to USER (only USER gets in, unless
    /// allow_other), then the daemon takes USER's groups, gid and uid and
    /// keeps no capability; it reads and writes CIPHERDIR as USER, and
    /// unmounts itself (SIGTERM, --idle) through fusermount3. Passfile,
    /// keyfile and config are read before, as root. Not with --reverse.
    #[arg(long, value_name = "USER", value_parser = crate::cli::setuid::parse_user, conflicts_with = "reverse")]
    pub setuid: Option<crate::cli::setuid::User>,
    /// Accepted with --setuid, which already gives up every privilege once
    /// the mount is made (-o drop_privileges, as mount.fuse3's); refused
    /// alone: a daemon that kept uid 0 without capabilities could not
    /// unmount itself.
    #[arg(long, requires = "setuid")]
    pub drop_privileges: bool,
}

/// `UID:GID`, both numbers.
pub fn parse_owner(s: &str) -> Result<Owner, String> {
    let bad = || format!("'{s}' is not UID:GID (two numbers, e.g. 1000:1000)");
    let (u, g) = s.split_once(':').ok_or_else(bad)?;
    Ok(Owner {
        uid: u.parse().map_err(|_| bad())?,
        gid: g.parse().map_err(|_| bad())?,
    })
}

impl MountExtra {
    /// The file system as it is mounted: requests counted (with `--idle`)
    /// and owners replaced (`--force-owner`).
    pub fn served(&self, fs: WarpFs) -> (Served<WarpFs>, Option<Arc<Activity>>) {
        let act = self.idle.map(|_| Arc::new(Activity::new()));
        let owner = self.force_owner.map(|o| (o.uid, o.gid));
        (Served::new(fs, act.clone(), owner), act)
    }

    /// Start the idle watcher when `--idle` asks for one (the mount is live).
    pub fn watch_idle(&self, mountpoint: &Path, act: Option<Arc<Activity>>) -> Result<(), String> {
        let (Some(d), Some(act)) = (self.idle, act) else {
            return Ok(());
        };
        tracing::info!("unmounting after {d:?} without use (--idle)");
        idle::watch(mountpoint, d, act).map_err(|e| format!("cannot start the idle watcher: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_is_two_numbers() {
        assert_eq!(parse_owner("1000:100").unwrap(), Owner { uid: 1000, gid: 100 });
        for bad in ["1000", "a:b", "1000:", ":1", "1:2:3", "-1:0"] {
            assert!(parse_owner(bad).is_err(), "{bad}");
        }
    }
}
