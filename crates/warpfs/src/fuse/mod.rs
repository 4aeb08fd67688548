//! warpfs layer 2: the FUSE frontend. Turns kernel requests into volume calls:
//! inode table, file handles, attribute/entry caching, errno mapping. No crypto.
//! The file systems answer through the operations layer ([`ops`]); two
//! transports carry the requests: fuser over /dev/fuse ([`devfuse`]) and
//! FUSE over io_uring ([`uring`]); [`serve`] runs a mount on either.

mod ahead;
pub mod ctl;
pub mod devfuse;
mod front;
mod handles;
pub mod idle;
pub(crate) mod mountinfo;
mod nodes;
pub mod ops;
pub mod remount;
pub mod reverse;
mod serve;
mod session;
mod stop;
pub mod transport;
mod unmount;
pub mod uring;
mod warp;

pub use front::Front;
pub use serve::{serve, Mounted};
pub use session::{mount_config, tune_bdi, MountOptions};
pub use stop::stop_on_signals;
pub use transport::Transport;
pub use warp::cache::{self, Caches};
pub use warp::{RekeyHook, WarpFs, CAPS, CAPS_XATTR, REKEY_XATTR, STATS_XATTR};
