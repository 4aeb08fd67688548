//! Names and metadata through a real mount: rename (incl. renameat2 flags),
//! hard links, unlink of open files, symlinks, mkdir/rmdir, fifos,
//! chmod/chown/utimens, statfs, xattrs, fallocate, long and odd names, and
//! persistence of a whole tree across remounts; backing inode numbers reused
//! under concurrent create/unlink; a sync tool's copies of IV files and
//! names; directory streams. One test binary (`cargo test -p warpfs
//! --test namespace`): shared helpers here, one module per subject.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod attrs;
mod concurrent;
mod conflicts;
mod links;
mod listing;
mod naming;
mod nodes;
mod renames;

use common::*;
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

fn names(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn set(xs: &[&str]) -> BTreeSet<String> {
    xs.iter().map(|s| s.to_string()).collect()
}
