//! Fixtures for the door's unit tests.

use crate::{Dir, Loc, Root};
use std::ffi::OsStr;
use std::path::PathBuf;

/// A tree deeper than PATH_MAX under a new temporary directory: (the
/// directory, a [`Root`] on it, the deepest directory's path relative to it).
pub(crate) fn deep_root() -> (tempfile::TempDir, Root, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = Root::open(t.path()).unwrap();
    let name = OsStr::new("d").to_owned();
    let name = name.to_string_lossy().repeat(200);
    let mut rel = PathBuf::new();
    let mut d: Dir = root.top().share();
    while rel.as_os_str().len() < 2 * libc::PATH_MAX as usize {
        crate::mkdir(&d.entry(OsStr::new(&name)), 0o755).unwrap();
        d = d.child(OsStr::new(&name)).unwrap();
        rel.push(&name);
    }
    (t, root, rel)
}

/// Make an empty regular file at `l`.
pub(crate) fn new_file(l: &Loc) {
    crate::create_file(l, 0o600, b"", false).unwrap();
}
