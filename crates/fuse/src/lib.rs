//! warpfs layer 2 (`warpfs-fuse`): the FUSE frontend. Turns kernel requests
//! into volume calls: inode table, file handles, attribute/entry caching,
//! errno mapping. No crypto. The file systems ([`fs`]: forward and reverse)
//! answer through the operations layer ([`ops`]); two transports carry the
//! requests ([`transport`]: fuser over /dev/fuse and FUSE over io_uring);
//! [`serve`] runs a mount on either. `crates/warpfs` holds the command line.

pub mod ctl;
pub mod fs;
mod handles;
pub mod idle;
pub mod mountinfo;
mod nodes;
pub mod ops;
pub mod remount;
mod serve;
mod served;
mod session;
mod stop;
#[cfg(test)]
mod testvol;
pub mod transport;
mod unmount;

pub use fs::forward::cache::{self, Caches};
pub use fs::forward::{RekeyHook, WarpFs, CAPS, CAPS_XATTR, CAP_UPGRADE, CAP_VOLUME_KEY, REKEY_XATTR, STATS_XATTR};
pub use serve::{serve, Mounted};
pub use served::Served;
pub use session::{mount_config, tune_bdi, MountConfig, MountOption, MountOptions};
pub use stop::stop_on_signals;
pub use transport::Transport;
