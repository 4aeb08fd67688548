//! The versions a removal ends: a file unlinked or renamed over has its
//! last committed version told to the versions seen once it is gone, so
//! that an old copy put back in its place is refused.

use crate::Volume;
use std::os::unix::fs::MetadataExt;
use warpfs_backing::{Expect, Loc};
use warpfs_content::summary::Record;

/// A file's ID and the record it had on disk.
pub(crate) type Version = ([u8; 16], Record);

impl Volume {
    /// The version of the cipher file at `loc` that removing it would end:
    /// `None` unless versions are remembered and it is a regular file with
    /// one link and a summary.
    pub(crate) fn version_at(&self, loc: &Loc) -> Option<Version> {
        self.keys.witness()?;
        let f = warpfs_backing::open_file(loc, libc::O_RDONLY, 0, Expect::File).ok()?;
        if f.metadata().ok()?.nlink() != 1 {
            return None;
        }
        warpfs_content::summary::peek(&f)
    }

    /// `v` (from [`Volume::version_at`]) was removed.
    pub(crate) fn retire(&self, v: Option<Version>) {
        if let (Some((id, rec)), Some(w)) = (v, self.keys.witness()) {
            w.replaced(&id, &rec, None);
        }
    }
}
