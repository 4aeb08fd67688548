//! Errors of the volume layer: an errno for the kernel (details are logged
//! where they happen); the same type as the backing store's, so an errno
//! from the door passes up unchanged.

pub use warpfs_backing::Errno as Error;

/// Result of a volume operation.
pub type Result<T> = std::result::Result<T, Error>;
