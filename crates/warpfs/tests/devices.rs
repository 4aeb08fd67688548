//! A CIPHERDIR that spans two file systems (a tmpfs mounted on a backing
//! directory inside it, on a CIPHERDIR that is itself a tmpfs): both number
//! their inodes from 1, so equal backing inode numbers meet. The mount's
//! node ids include the device (`fuse/nodes.rs`): no two files share an
//! inode number through the mount, and reading one never returns the
//! other's bytes (an aliased node would serve the first file's cached
//! pages for the second).

#[macro_use]
mod common;

use common::*;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// tmpfs mounts made by the test, lazily unmounted on drop (innermost first).
struct Tmpfs(Vec<PathBuf>);

impl Tmpfs {
    fn mount(&mut self, at: &Path) {
        let mut c = Command::new("mount");
        c.args(["-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs"]).arg(at);
        run_cmd(c, Duration::from_secs(30)).expect_ok("mount a tmpfs");
        self.0.push(at.to_path_buf());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            let mut c = Command::new("umount");
            c.arg("-l").arg(p);
            run_cmd(c, Duration::from_secs(30));
        }
    }
}

fn data(tag: &str) -> Vec<u8> {
    format!("contents of {tag}\n").repeat(300).into_bytes()
}

#[test]
fn equal_inode_numbers_on_two_file_systems_never_alias() {
    require_fuse!();
    let mut tmpfs = Tmpfs(Vec::new());
    let mut v = Volume::init(Mode::Gcm);
    // CIPHERDIR on a tmpfs of its own.
    let aside = v.root().join("aside");
    fs::create_dir(&aside).unwrap();
    copy_tree(&v.cipher, &aside);
    tmpfs.mount(&v.cipher);
    copy_tree(&aside, &v.cipher);
    v.mount();
    fs::create_dir(v.p("sub")).unwrap();
    for i in 0..10 {
        write_file(&v.p(format!("r{i}")), &data(&format!("r{i}")));
    }
    v.unmount();
    // A second tmpfs on the backing directory of /sub, with its IV.
    let sub = v.root_backing_entries().into_iter().find(|p| p.is_dir()).unwrap();
    let iv = fs::read(sub.join("warpfs.diriv")).unwrap();
    tmpfs.mount(&sub);
    fs::write(sub.join("warpfs.diriv"), &iv).unwrap();
    v.mount();
    for i in 0..10 {
        write_file(&v.p(format!("sub/s{i}")), &data(&format!("s{i}")));
    }
    // Backing inode numbers meet across the two file systems.
    let backing_ino = |p: &Path| fs::symlink_metadata(p).unwrap().ino();
    let top: HashSet<u64> = v
        .root_backing_entries()
        .iter()
        .filter(|p| p.is_file())
        .map(|p| backing_ino(p))
        .collect();
    let inner: Vec<u64> = fs::read_dir(&sub)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "warpfs.diriv")
        .map(|p| backing_ino(&p))
        .collect();
    let shared = inner.iter().filter(|i| top.contains(i)).count();
    assert!(
        shared > 0,
        "no backing inode number on both file systems: the test proves nothing"
    );
    // Through the mount: distinct inode numbers, each file its own bytes,
    // read alternately so that an aliased node's cached pages would show.
    v.remount();
    let mut seen: HashMap<u64, String> = HashMap::new();
    for round in 0..2 {
        for i in 0..10 {
            for name in [format!("r{i}"), format!("sub/s{i}")] {
                let p = v.p(&name);
                let ino = fs::metadata(&p).unwrap().ino();
                if round == 0 {
                    if let Some(other) = seen.insert(ino, name.clone()) {
                        panic!("{name} and {other} share inode number {ino} through the mount");
                    }
                }
                assert_bytes_eq(&fs::read(&p).unwrap(), &data(name.trim_start_matches("sub/")), &name);
            }
        }
    }
    eprintln!("{shared} backing inode numbers on both file systems; 20 files, 20 inode numbers through the mount");
    v.unmount();
}
