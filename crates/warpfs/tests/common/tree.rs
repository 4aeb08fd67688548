//! Tree snapshots and states, to compare what a mount shows or prove
//! that a command wrote nothing.

use super::walk;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(Vec<u8>),
    Dir,
    Symlink(PathBuf),
    Fifo,
    Other(String),
}

/// Every entry under `root`, keyed by relative path, with its content.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut m = BTreeMap::new();
    snap(root, Path::new(""), &mut m);
    m
}

fn snap(root: &Path, rel: &Path, m: &mut BTreeMap<PathBuf, Node>) {
    let dir = root.join(rel);
    for e in fs::read_dir(&dir).unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display())) {
        let e = e.unwrap();
        let r = rel.join(e.file_name());
        let p = root.join(&r);
        let md = fs::symlink_metadata(&p).unwrap();
        let ft = md.file_type();
        let node = if ft.is_dir() {
            Node::Dir
        } else if ft.is_symlink() {
            Node::Symlink(fs::read_link(&p).unwrap())
        } else if ft.is_file() {
            Node::File(fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())))
        } else if ft.is_fifo() {
            Node::Fifo
        } else {
            Node::Other(format!("{:o}", md.mode()))
        };
        let is_dir = node == Node::Dir;
        m.insert(r.clone(), node);
        if is_dir {
            snap(root, &r, m);
        }
    }
}

/// Compare two snapshots with a readable message.
#[track_caller]
pub fn assert_snapshots_eq(got: &BTreeMap<PathBuf, Node>, want: &BTreeMap<PathBuf, Node>, ctx: &str) {
    let mut problems = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => problems.push(format!("missing: {}", k.display())),
            Some(g) if g != v => problems.push(format!("differs: {} ({})", k.display(), short_node(g, v))),
            _ => {}
        }
    }
    for k in got.keys() {
        if !want.contains_key(k) {
            problems.push(format!("unexpected: {}", k.display()));
        }
    }
    assert!(problems.is_empty(), "{ctx}: trees differ:\n  {}", problems.join("\n  "));
}

fn short_node(got: &Node, want: &Node) -> String {
    match (got, want) {
        (Node::File(g), Node::File(w)) => {
            let first = g.iter().zip(w).position(|(a, b)| a != b);
            format!("file len got {} want {}, first diff at {first:?}", g.len(), w.len())
        }
        _ => format!("got {got:?} want {want:?}"),
    }
}

/// State of every path under `dir`: (kind, len, mode, mtime ns, ctime ns);
/// used to prove a command wrote nothing.
pub fn dir_state(dir: &Path) -> BTreeMap<PathBuf, (u32, u64, u32, i128, i128)> {
    let mut paths = vec![dir.to_path_buf()];
    walk(dir, &mut paths);
    paths
        .into_iter()
        .map(|p| {
            let md = fs::symlink_metadata(&p).unwrap();
            let st = (
                md.mode() & libc::S_IFMT,
                md.len(),
                md.mode(),
                md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128,
                md.ctime() as i128 * 1_000_000_000 + md.ctime_nsec() as i128,
            );
            (p, st)
        })
        .collect()
}
