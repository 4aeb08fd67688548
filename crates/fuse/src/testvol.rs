//! Test fixture: a forward file system over a fresh volume in a temporary
//! directory, served through the operations layer with no mount, no
//! /dev/fuse and no root.

use crate::fs::forward::WarpFs;
use crate::ops::{Ctx, ReadOut};
use crate::Served;
use std::path::PathBuf;
use warpfs_config::{Config, ContentMode, FeatureFlag, KdfParams};
use warpfs_volume::{Options, Volume};

/// A `WarpFs` (as a mount serves it, [`Served`]) over a new gcm
/// volume with bound seals; the directory lives as long as the value.
pub struct TestFs {
    pub fs: Served<WarpFs>,
    pub dir: tempfile::TempDir,
}

impl TestFs {
    pub fn new() -> TestFs {
        let dir = tempfile::tempdir().unwrap();
        let bound = [FeatureFlag::BoundSeals];
        let (cfg, master) =
            Config::create_with_features(dir.path(), b"pw", ContentMode::Gcm, 256, KdfParams::MIN, &bound).unwrap();
        Volume::init_root(&warpfs_backing::Root::open(dir.path()).unwrap()).unwrap();
        let vol = Volume::open(dir.path(), &cfg, &master, Options::default()).unwrap();
        let fs = Served::new(WarpFs::new(vol).unwrap(), None, None);
        TestFs { fs, dir }
    }

    /// Every file under the backing directory (relative paths).
    pub fn backing_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut todo = vec![self.dir.path().to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if std::fs::symlink_metadata(&p).unwrap().is_dir() {
                    todo.push(p.clone());
                }
                out.push(p.strip_prefix(self.dir.path()).unwrap().to_path_buf());
            }
        }
        out
    }
}

/// The caller of every request: the user running the tests.
pub fn me() -> Ctx {
    // SAFETY: getters with no arguments.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    Ctx {
        uid,
        gid,
        pid: std::process::id(),
    }
}

/// A read answer gathered into a vector.
#[derive(Default)]
pub struct Gather {
    pub data: Vec<u8>,
    buf: Vec<u8>,
}

impl ReadOut for Gather {
    fn buf(&mut self, size: usize) -> &mut [u8] {
        self.buf.resize(size, 0);
        &mut self.buf
    }
    fn filled(&mut self, n: usize) {
        self.data = self.buf[..n.min(self.buf.len())].to_vec();
    }
    fn bytes(&mut self, b: &[u8]) {
        self.data = b.to_vec();
    }
}
