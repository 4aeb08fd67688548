//! An in-memory copy of a backing directory tree: directories, files with
//! their bytes, symlinks, FIFOs and hard links (inodes by number). Loaded
//! from disk as the snapshot before a workload, changed by the recorded
//! operations, written back to disk as one crash state, and compared with
//! the real directory after the workload (the recorder's self-check).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::fs;
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Inode number inside a model (not the backing file system's).
pub type Ino = u32;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    File(Vec<u8>),
    Dir(BTreeMap<Vec<u8>, Ino>),
    Symlink(Vec<u8>),
    Fifo,
}

#[derive(Debug, Clone)]
pub struct FsModel {
    /// Indexed by inode number; `None`: no such inode (yet).
    nodes: Vec<Option<(Node, u32)>>,
    pub root: Ino,
}

impl FsModel {
    /// Read the tree at `root` (hard links share one inode).
    pub fn load(root: &Path) -> FsModel {
        let mut m = FsModel {
            nodes: vec![Some((Node::Dir(BTreeMap::new()), 0o755))],
            root: 0,
        };
        let mut seen: HashMap<(u64, u64), Ino> = HashMap::new();
        m.load_dir(root, 0, &mut seen);
        m
    }

    fn load_dir(&mut self, dir: &Path, ino: Ino, seen: &mut HashMap<(u64, u64), Ino>) {
        let mut list: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        list.sort_by_key(|e| e.file_name());
        for e in list {
            let md = fs::symlink_metadata(e.path()).unwrap();
            let name = e.file_name().as_bytes().to_vec();
            if let Some(&i) = seen.get(&(md.dev(), md.ino())) {
                self.dir_mut(ino).insert(name, i);
                continue;
            }
            let ft = md.file_type();
            let node = if ft.is_dir() {
                Node::Dir(BTreeMap::new())
            } else if ft.is_file() {
                Node::File(fs::read(e.path()).unwrap())
            } else if ft.is_symlink() {
                Node::Symlink(fs::read_link(e.path()).unwrap().as_os_str().as_bytes().to_vec())
            } else {
                Node::Fifo
            };
            let i = self.fresh();
            self.put(i, node, md.mode() & 0o7777);
            seen.insert((md.dev(), md.ino()), i);
            self.dir_mut(ino).insert(name, i);
            if ft.is_dir() {
                self.load_dir(&e.path(), i, seen);
            }
        }
    }

    /// A number no inode of this model uses.
    pub fn fresh(&self) -> Ino {
        self.nodes.len() as Ino
    }

    pub fn put(&mut self, ino: Ino, node: Node, mode: u32) {
        let i = ino as usize;
        if self.nodes.len() <= i {
            self.nodes.resize(i + 1, None);
        }
        self.nodes[i] = Some((node, mode));
    }

    pub fn get(&self, ino: Ino) -> Option<&Node> {
        self.nodes.get(ino as usize)?.as_ref().map(|(n, _)| n)
    }

    fn node_mut(&mut self, ino: Ino) -> &mut Node {
        // Content for an inode whose creation did not persist: keep it
        // detached (unreachable) so a later hard link still finds it.
        if self.get(ino).is_none() {
            self.put(ino, Node::File(Vec::new()), 0o644);
        }
        &mut self.nodes[ino as usize].as_mut().unwrap().0
    }

    fn dir_mut(&mut self, ino: Ino) -> &mut BTreeMap<Vec<u8>, Ino> {
        match self.node_mut(ino) {
            Node::Dir(d) => d,
            n => panic!("model: inode {ino} is not a directory: {}", kind(n)),
        }
    }

    pub fn dir(&self, ino: Ino) -> Option<&BTreeMap<Vec<u8>, Ino>> {
        match self.get(ino)? {
            Node::Dir(d) => Some(d),
            _ => None,
        }
    }

    /// The inode at `rel` (components separated by `/`; empty: the root).
    pub fn lookup(&self, rel: &[u8]) -> Option<Ino> {
        let mut cur = self.root;
        for c in rel.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            cur = *self.dir(cur)?.get(c)?;
        }
        Some(cur)
    }

    /// Size of a file (0 for anything else or a missing inode).
    pub fn size(&self, ino: Ino) -> u64 {
        match self.get(ino) {
            Some(Node::File(d)) => d.len() as u64,
            _ => 0,
        }
    }

    fn data_mut(&mut self, ino: Ino) -> &mut Vec<u8> {
        match self.node_mut(ino) {
            Node::File(d) => d,
            n => panic!("model: inode {ino} is not a file: {}", kind(n)),
        }
    }

    /// Write `data` at `off`, extending the file.
    pub fn write(&mut self, ino: Ino, off: u64, data: &[u8]) {
        let d = self.data_mut(ino);
        let end = off as usize + data.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off as usize..end].copy_from_slice(data);
    }

    /// Write `data` at `off`, dropping what falls past the current size.
    pub fn write_clipped(&mut self, ino: Ino, off: u64, data: &[u8]) {
        let d = self.data_mut(ino);
        let (s, e) = ((off as usize).min(d.len()), (off as usize + data.len()).min(d.len()));
        if s < e {
            d[s..e].copy_from_slice(&data[..e - s]);
        }
    }

    /// Zero `[off, off + len)`, clipped to the current size.
    pub fn zero(&mut self, ino: Ino, off: u64, len: u64) {
        let d = self.data_mut(ino);
        let (s, e) = ((off as usize).min(d.len()), ((off + len) as usize).min(d.len()));
        d[s..e].fill(0);
    }

    pub fn set_len(&mut self, ino: Ino, len: u64) {
        self.data_mut(ino).resize(len as usize, 0);
    }

    /// Enter `name -> ino` in directory `dir`, returning what it replaced.
    pub fn link(&mut self, dir: Ino, name: &[u8], ino: Ino) -> Option<Ino> {
        self.dir_mut(dir).insert(name.to_vec(), ino)
    }

    pub fn unlink(&mut self, dir: Ino, name: &[u8]) -> Option<Ino> {
        self.dir_mut(dir).remove(name)
    }

    /// Write the reachable tree into the empty directory `to`.
    pub fn materialize(&self, to: &Path) {
        let mut done: HashMap<Ino, std::path::PathBuf> = HashMap::new();
        self.materialize_dir(self.root, to, &mut done);
        let mode = self.nodes[self.root as usize].as_ref().unwrap().1;
        fs::set_permissions(to, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn materialize_dir(&self, dir: Ino, to: &Path, done: &mut HashMap<Ino, std::path::PathBuf>) {
        for (name, &ino) in self.dir(dir).unwrap() {
            let p = to.join(OsStr::from_bytes(name));
            if let Some(first) = done.get(&ino) {
                fs::hard_link(first, &p).unwrap();
                continue;
            }
            let (node, mode) = self.nodes[ino as usize].as_ref().unwrap();
            match node {
                Node::File(d) => {
                    let mut f = fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&p)
                        .unwrap();
                    std::io::Write::write_all(&mut f, d).unwrap();
                    f.set_permissions(fs::Permissions::from_mode(*mode)).unwrap();
                    done.insert(ino, p);
                }
                Node::Dir(_) => {
                    fs::create_dir(&p).unwrap();
                    self.materialize_dir(ino, &p, done);
                    fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).unwrap();
                }
                Node::Symlink(t) => std::os::unix::fs::symlink(OsStr::from_bytes(t), &p).unwrap(),
                Node::Fifo => {
                    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), *mode) }, 0, "mkfifo {}", p.display());
                }
            }
        }
    }

    /// Every reachable path with what is there (hard links named by the
    /// first path that reaches their inode), in path order.
    pub fn listing(&self) -> Vec<(Vec<u8>, String)> {
        let mut out = Vec::new();
        let mut first: HashMap<Ino, Vec<u8>> = HashMap::new();
        self.list_dir(self.root, b"", &mut out, &mut first);
        out
    }

    fn list_dir(&self, dir: Ino, at: &[u8], out: &mut Vec<(Vec<u8>, String)>, first: &mut HashMap<Ino, Vec<u8>>) {
        for (name, &ino) in self.dir(dir).unwrap() {
            let mut p = at.to_vec();
            p.push(b'/');
            p.extend_from_slice(name);
            if let Some(f) = first.get(&ino) {
                out.push((p, format!("link to {}", String::from_utf8_lossy(f))));
                continue;
            }
            first.insert(ino, p.clone());
            let node = self.get(ino).unwrap();
            let what = match node {
                Node::File(d) => {
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    d.hash(&mut h);
                    format!("file of {} bytes, hash {:016x}", d.len(), h.finish())
                }
                n => kind(n).to_string(),
            };
            out.push((p.clone(), what));
            if matches!(node, Node::Dir(_)) {
                self.list_dir(ino, &p, out, first);
            }
        }
    }

    /// A digest of the reachable tree (names, kinds, links, bytes).
    pub fn digest(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.listing().hash(&mut h);
        h.finish()
    }

    /// The first difference between the reachable trees, if any.
    pub fn diff(&self, other: &FsModel) -> Option<String> {
        let (a, b) = (self.listing(), other.listing());
        let (ma, mb): (BTreeMap<_, _>, BTreeMap<_, _>) = (a.into_iter().collect(), b.into_iter().collect());
        for (p, w) in &ma {
            match mb.get(p) {
                None => return Some(format!("{} ({w}) only in the first", String::from_utf8_lossy(p))),
                Some(x) if x != w => return Some(format!("{}: {w} vs {x}", String::from_utf8_lossy(p))),
                _ => {}
            }
        }
        mb.keys()
            .find(|p| !ma.contains_key(*p))
            .map(|p| format!("{} only in the second", String::from_utf8_lossy(p)))
    }
}

pub fn kind(n: &Node) -> &'static str {
    match n {
        Node::File(_) => "file",
        Node::Dir(_) => "directory",
        Node::Symlink(_) => "symlink",
        Node::Fifo => "fifo",
    }
}
