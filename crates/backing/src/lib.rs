//! warpfs bottom layer: the one door to the backing store. Every open,
//! create, read of a small file, rename, unlink, xattr call and directory
//! walk on CIPHERDIR goes through this crate, so its rules hold in one
//! place:
//!
//! - relative to a directory descriptor reached beneath CIPHERDIR
//!   ([`Root`], [`Dir`], [`Loc`]), never by an absolute path;
//! - no symlink followed anywhere (`openat2` with `RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, or an `O_NOFOLLOW` walk
//!   where `openat2` is missing; `AT_SYMLINK_NOFOLLOW` on every `*at` call);
//! - `O_NONBLOCK | O_CLOEXEC` on every open, and nothing opened unless it
//!   is the regular file or directory expected, looked at before and after
//!   opening ([`open_file`], [`Expect`]); reserved names are refused with
//!   a second link.
//!
//! Paths that are the user's own (a passfile, a keyfile, a log file, a
//! container image, the mount table) are opened through [`host`], which
//! says so by its name. CI refuses `std::fs` opens and the path-taking
//! libc calls in every other crate (`scripts/door-check.sh`).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod beneath;
mod dir;
mod errno;
pub mod host;
mod open;
mod ops;
mod root;
#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests;
mod xattr;

pub use beneath::is_plain;
pub use dir::{fstat, Dir, Loc, RawEntry};
pub use errno::{Errno, Result};
pub use open::{check_type, create_file, open_file, read_small, set_noatime, Expect};
pub use ops::{
    access, chmod, euid, futimens, lchown, link, lstat, mkdir, mknod, nlink, readlink, rename, rmdir, symlink, unlink,
    utimens, TimeSpec,
};
pub use root::{is_plain_name, split_user_path, Root};
pub use xattr::{lgetxattr, llistxattr, lremovexattr, lsetxattr};
