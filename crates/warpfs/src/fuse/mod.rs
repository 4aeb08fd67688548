//! warpfs layer 2: the FUSE frontend. Turns kernel requests into volume calls:
//! inode table, file handles, attribute/entry caching, errno mapping. No crypto.

mod ahead;
mod attr;
pub mod ctl;
mod fs;
mod handles;
mod mountinfo;
mod nodes;
mod session;
mod stop;

pub use fs::{RekeyHook, WarpFs, REKEY_XATTR, STATS_XATTR};
pub use session::{mount_config, tune_bdi, MountOptions};
pub use stop::stop_on_signals;
