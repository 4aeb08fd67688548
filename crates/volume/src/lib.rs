//! warpfs layer 3: the volume. The whole file system over the backing
//! directory (name transform, create/open/read/write/truncate/rename/link/
//! unlink, symlinks, xattrs) without the kernel: everything here is callable
//! and testable without a mount. Directories are addressed by their backing
//! path relative to CIPHERDIR; entries by their plaintext name.

mod attr;
pub mod attr_ops;
mod bound;
pub mod committer;
mod dirfds;
mod diriv;
mod dirview;
mod error;
mod files;
pub mod fsck;
mod handle;
mod keysource;
mod names;
mod namespace;
mod pathnames;
pub mod rekey;
pub mod reverse;
pub mod seen;
mod synced;
pub mod upgrade;
mod upgrade_online;
mod volume;
mod xattr;

pub use attr::{Attr, Kind};
pub use attr_ops::{StatFs, TimeSpec};
pub use dirfds::DEFAULT_TTL as DIR_FD_TTL;
pub use error::{Error, Result};
pub use files::{Seek, Writer};
pub use handle::{OpenFile, ReadSink};
pub use names::decode_with as decode_backing_name;
pub use namespace::DirEntry;
pub use synced::{is_config_copy, UNDECRYPTABLE};
pub use volume::{content_mode as content_layout, Caller, Options, Volume};
pub use warpfs_content::faultlog;
