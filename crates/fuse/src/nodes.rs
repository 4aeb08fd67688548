//! The inode table: FUSE node id → where the entry lives in the backing tree.
//! Node ids are backing inode numbers (the backing root is node 1), so hard
//! links share one node. A node keeps every (parent, name) it is known by;
//! an unlinked-but-open file keeps a node with no links.
//!
//! CIPHERDIR may span several file systems (a tmpfs or bind mount inside
//! it), whose inode numbers overlap: an entry on a device other than the
//! root's, and an entry on the root's device whose number is `2^63` or more
//! (NFS, GlusterFS and overlayfs with xino hand those out), gets a node id
//! of its own from `2^63` up, remembered by (device, inode) until the kernel
//! forgets it. Inode numbers are kept as node ids only below `2^63`, so two
//! backing inodes never share a node id while both are known
//! (docs/decisions/0074-node-ids-never-alias.md).
//!
//! The backing file system reuses an inode number as soon as its file is
//! gone, often before the kernel has sent FORGET for the old node. FUSE
//! wants (node id, generation) unique until forgotten, so every newly made
//! entry (create, mkdir, mknod, symlink) whose number is still known here
//! gets a new generation: the kernel then retires its old inode instead of
//! sharing it (with its stale link count) with the new file.
//!
//! A symlink with a bound target is made anew when it moves (a rename, a
//! volume-key rekey), so its backing number changes under a kernel inode
//! that still stands for it, and the old number may go to another new
//! entry at once. The moved entry keeps its node id (as a rename keeps an
//! inode number): its new (device, inode) is an alias of that id, and a
//! new entry given the held number gets a table id, until the kernel
//! forgets the moved node (docs/decisions/0095-moved-entries-keep-their-node-id.md).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

/// One name of an entry: (parent node, backing name, plaintext name).
pub type NameRef<'a> = (u64, &'a str, &'a OsStr);

/// The FUSE root node id.
pub const ROOT: u64 = 1;

#[derive(Debug, Clone)]
struct Link {
    parent: u64,
    cname: String,
    pname: OsString,
}

#[derive(Debug, Default)]
struct Node {
    links: Vec<Link>,
    nlookup: u64,
    generation: u64,
}

/// Node ids from the table of (device, inode) pairs start here; below it a
/// node id is an inode number of the root's device.
pub const OTHER_DEVICE_BASE: u64 = 1 << 63;

/// Node id ↔ backing location.
pub struct Nodes {
    map: RwLock<Tables>,
    root_backing_ino: u64,
    root_dev: u64,
    other: Mutex<OtherDevices>,
    /// Set once a node was rebacked ([`Nodes::rebacked`]): until then a
    /// number of the root's device below `2^63` is its node id without
    /// a look at the table.
    any_rebacked: AtomicBool,
}

/// Node ids given to (device, inode) pairs that cannot keep their number:
/// off the root's device, `2^63` and above on it, or a number held by a
/// moved entry; and the moved entries' aliases.
#[derive(Default)]
struct OtherDevices {
    ids: HashMap<(u64, u64), u64>,
    keys: HashMap<u64, (u64, u64)>,
    next: u64,
    /// The new (device, inode) of an entry made anew for a move → the node
    /// id it keeps.
    moved: HashMap<(u64, u64), u64>,
    /// A node id below `2^63` whose entry now lives in another backing
    /// inode → that inode; its own number is not its node id meanwhile.
    held: HashMap<u64, (u64, u64)>,
}

impl OtherDevices {
    /// The node id of (device, inode): the one it has, or the next free one
    /// at or above [`OTHER_DEVICE_BASE`].
    fn id(&mut self, key: (u64, u64)) -> u64 {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = loop {
            let id = OTHER_DEVICE_BASE | (self.next & !OTHER_DEVICE_BASE);
            self.next = self.next.wrapping_add(1);
            // Only after 2^63 ids were handed out can one still be in use.
            if !self.keys.contains_key(&id) {
                break id;
            }
        };
        self.ids.insert(key, id);
        self.keys.insert(id, key);
        id
    }
}

#[derive(Default)]
struct Tables {
    nodes: HashMap<u64, Node>,
    /// (parent, backing name) → node
    names: HashMap<(u64, String), u64>,
    /// The last generation handed out.
    generation: u64,
}

impl Tables {
    /// Forget every name of node `ino` (the node itself stays).
    fn drop_all_links(&mut self, ino: u64) {
        let links = self.nodes.get_mut(&ino).map(|n| std::mem::take(&mut n.links));
        for l in links.unwrap_or_default() {
            if self.names.get(&(l.parent, l.cname.clone())) == Some(&ino) {
                self.names.remove(&(l.parent, l.cname));
            }
        }
    }

    fn drop_link(&mut self, parent: u64, cname: &str) -> Option<u64> {
        let ino = self.names.remove(&(parent, cname.to_string()))?;
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.links.retain(|l| !(l.parent == parent && l.cname == cname));
        }
        Some(ino)
    }
}

/// A node's location: backing path relative to CIPHERDIR, and plaintext
/// path (for log lines).
pub struct Location {
    /// Backing path relative to CIPHERDIR ("" for the root).
    pub backing: PathBuf,
    /// Plaintext path from the mount root, starting with '/'.
    pub plain: String,
}

impl Nodes {
    /// A table whose root is the backing directory with inode
    /// `root_backing_ino` on device `root_dev`.
    pub fn new(root_dev: u64, root_backing_ino: u64) -> Self {
        let mut t = Tables::default();
        t.nodes.insert(
            ROOT,
            Node {
                links: Vec::new(),
                nlookup: 1,
                generation: 0,
            },
        );
        Self {
            map: RwLock::new(t),
            root_backing_ino,
            root_dev,
            other: Mutex::default(),
            any_rebacked: AtomicBool::new(false),
        }
    }

    fn others(&self) -> std::sync::MutexGuard<'_, OtherDevices> {
        self.other.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Node id of the backing inode `backing_ino` on device `dev`: the id
    /// of the moved entry it now is, if any; else on the root's device and
    /// below `2^63` its number (the root's swapped with 1) unless a moved
    /// entry holds that number; otherwise a number of its own from the
    /// table.
    pub fn node_id(&self, dev: u64, backing_ino: u64) -> u64 {
        let plain = self.plain_id(dev, backing_ino);
        if !self.any_rebacked.load(Ordering::Acquire) {
            if let Some(p) = plain {
                return p;
            }
            return self.others().id((dev, backing_ino));
        }
        let mut o = self.others();
        let key = (dev, backing_ino);
        if let Some(&id) = o.moved.get(&key).or_else(|| o.ids.get(&key)) {
            return id;
        }
        match plain {
            Some(p) if !o.held.contains_key(&p) => p,
            _ => o.id(key),
        }
    }

    /// The node id a backing inode has by its number alone, if it may.
    fn plain_id(&self, dev: u64, backing_ino: u64) -> Option<u64> {
        if dev != self.root_dev {
            return None;
        }
        if backing_ino == self.root_backing_ino {
            return Some(ROOT);
        }
        if backing_ino == ROOT && self.root_backing_ino < OTHER_DEVICE_BASE {
            return Some(self.root_backing_ino);
        }
        // Number 1 is taken by the root: when the root's own number
        // cannot stand in for it, inode 1 goes to the table like 0.
        (backing_ino != ROOT && backing_ino != 0 && backing_ino < OTHER_DEVICE_BASE).then_some(backing_ino)
    }

    /// (device, backing inode number) of a node id (inverse of `node_id`);
    /// `None` for an id from the table that is no longer (or never was)
    /// handed out.
    pub fn backing(&self, node: u64) -> Option<(u64, u64)> {
        if node >= OTHER_DEVICE_BASE {
            return self.others().keys.get(&node).copied();
        }
        if self.any_rebacked.load(Ordering::Acquire) {
            if let Some(&k) = self.others().held.get(&node) {
                return Some(k);
            }
        }
        let ino = if node == ROOT {
            self.root_backing_ino
        } else if node == self.root_backing_ino {
            ROOT
        } else {
            node
        };
        Some((self.root_dev, ino))
    }

    /// Entries were made anew and now live in other backing inodes (bound
    /// symlinks moved by a rename or a volume-key rekey): each (node,
    /// device, inode) keeps its node id, since the kernel's inode still
    /// stands for it, and the new inode is that id from now on. A node the
    /// new inode's number named before, outside `moves`, is an earlier
    /// entry's, gone since: it loses its names and gets a new generation
    /// (see [`Nodes::renew`]). One call for entries moved together, so
    /// that one taking another's old number is not taken for stale.
    pub fn rebacked(&self, moves: &[(u64, u64, u64)]) {
        if moves.is_empty() {
            return;
        }
        self.any_rebacked.store(true, Ordering::Release);
        let moving: Vec<u64> = moves.iter().map(|m| m.0).collect();
        let mut stale = Vec::new();
        {
            let mut o = self.others();
            for &(node, dev, ino) in moves.iter().filter(|m| m.0 != ROOT) {
                let key = (dev, ino);
                let before = o
                    .moved
                    .get(&key)
                    .or_else(|| o.ids.get(&key))
                    .copied()
                    .or_else(|| self.plain_id(dev, ino).filter(|p| !o.held.contains_key(p)));
                if before == Some(node) {
                    continue;
                }
                if node >= OTHER_DEVICE_BASE {
                    if let Some(old) = o.keys.insert(node, key) {
                        if o.ids.get(&old) == Some(&node) {
                            o.ids.remove(&old);
                        }
                    }
                    o.ids.insert(key, node);
                } else {
                    if let Some(old) = o.held.insert(node, key) {
                        if o.moved.get(&old) == Some(&node) {
                            o.moved.remove(&old);
                        }
                    }
                    o.moved.insert(key, node);
                }
                stale.extend(before.filter(|b| !moving.contains(b)));
            }
        }
        for s in stale {
            self.renew(s);
        }
    }

    /// Record that the kernel was told `name` (backing `cname`) in `parent`
    /// is node `ino`; returns the generation to tell it. `fresh` says the
    /// entry was just made, so a node already known by this number is an
    /// earlier file whose number the backing file system reused: it gets a
    /// new generation and loses its stale names (its lookup count stays, the
    /// kernel's FORGET for the old inode will take it back).
    pub fn remember(&self, ino: u64, parent: u64, cname: &str, pname: &OsStr, fresh: bool) -> u64 {
        let mut t = self.map.write().unwrap_or_else(|e| e.into_inner());
        let key = (parent, cname.to_string());
        if let Some(&old) = t.names.get(&key) {
            if old != ino {
                t.drop_link(parent, cname);
            }
        }
        let known = t.nodes.contains_key(&ino);
        let reused = fresh && known && ino != ROOT;
        if reused {
            t.drop_all_links(ino);
        }
        let new_generation = reused || !known;
        if new_generation {
            t.generation += 1;
        }
        let generation = t.generation;
        t.names.insert(key, ino);
        let n = t.nodes.entry(ino).or_default();
        if new_generation {
            n.generation = generation;
        }
        n.nlookup += 1;
        if !n.links.iter().any(|l| l.parent == parent && l.cname == cname) {
            n.links.insert(
                0,
                Link {
                    parent,
                    cname: cname.to_string(),
                    pname: pname.to_os_string(),
                },
            );
        }
        n.generation
    }

    /// The backing file system gave number `ino` to an entry the daemon
    /// made that the kernel has not looked up yet (a bound symlink made
    /// anew by a rename). A node still known by that number is an earlier
    /// entry's, gone since: it gets a new generation and loses its names,
    /// so that the next lookup makes the kernel retire its old inode
    /// (with the old entry's cached symlink target) instead of sharing it.
    pub fn renew(&self, ino: u64) {
        if ino == ROOT {
            return;
        }
        let mut t = self.map.write().unwrap_or_else(|e| e.into_inner());
        if !t.nodes.contains_key(&ino) {
            return;
        }
        t.drop_all_links(ino);
        t.generation += 1;
        let g = t.generation;
        if let Some(n) = t.nodes.get_mut(&ino) {
            n.generation = g;
        }
    }

    /// The kernel forgets `n` lookups of `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let mut t = self.map.write().unwrap_or_else(|e| e.into_inner());
        let gone = match t.nodes.get_mut(&ino) {
            Some(node) => {
                node.nlookup = node.nlookup.saturating_sub(n);
                node.nlookup == 0
            }
            None => false,
        };
        if gone {
            t.drop_all_links(ino);
            t.nodes.remove(&ino);
            if ino >= OTHER_DEVICE_BASE || self.any_rebacked.load(Ordering::Acquire) {
                let mut o = self.others();
                let key = o.keys.remove(&ino).or_else(|| o.held.remove(&ino));
                if let Some(k) = key {
                    if o.ids.get(&k) == Some(&ino) {
                        o.ids.remove(&k);
                    }
                    if o.moved.get(&k) == Some(&ino) {
                        o.moved.remove(&k);
                    }
                }
            }
        }
    }

    /// `cname` in `parent` was removed.
    pub fn unlinked(&self, parent: u64, cname: &str) {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .drop_link(parent, cname);
    }

    /// An entry moved (or two were exchanged). Each side is
    /// (parent node, backing name, plaintext name). Returns the moved node
    /// and the one the new name had (now at the old name if exchanged).
    pub fn renamed(&self, old: NameRef<'_>, new: NameRef<'_>, exchange: bool) -> (Option<u64>, Option<u64>) {
        let ((parent, from, oldname), (newparent, to, newname)) = (old, new);
        let mut t = self.map.write().unwrap_or_else(|e| e.into_inner());
        let moved = t.drop_link(parent, from);
        let displaced = t.drop_link(newparent, to);
        if let Some(ino) = moved {
            t.names.insert((newparent, to.to_string()), ino);
            if let Some(n) = t.nodes.get_mut(&ino) {
                n.links.insert(
                    0,
                    Link {
                        parent: newparent,
                        cname: to.to_string(),
                        pname: newname.to_os_string(),
                    },
                );
            }
        }
        if exchange {
            if let Some(ino) = displaced {
                t.names.insert((parent, from.to_string()), ino);
                if let Some(n) = t.nodes.get_mut(&ino) {
                    n.links.insert(
                        0,
                        Link {
                            parent,
                            cname: from.to_string(),
                            pname: oldname.to_os_string(),
                        },
                    );
                }
            }
        }
        (moved, displaced)
    }

    /// Every backing name changed (a rekey to a new volume key moved the
    /// names in place; node ids stay, see [`Nodes::rebacked`]): each
    /// name of each node is made again, from the root down, by
    /// `name(parent's new backing path, plaintext name)`; a name it cannot
    /// make is dropped (the next lookup finds the entry again).
    pub fn relink(&self, mut name: impl FnMut(&std::path::Path, &OsStr) -> Option<String>) {
        let mut t = self.map.write().unwrap_or_else(|e| e.into_inner());
        let mut children: HashMap<u64, Vec<u64>> = HashMap::new();
        for (&ino, n) in &t.nodes {
            for l in &n.links {
                let c = children.entry(l.parent).or_default();
                if !c.contains(&ino) {
                    c.push(ino);
                }
            }
        }
        let mut paths: HashMap<u64, PathBuf> = HashMap::from([(ROOT, PathBuf::new())]);
        let mut made: HashMap<u64, Vec<Option<String>>> = HashMap::new();
        let mut queue = std::collections::VecDeque::from([ROOT]);
        while let Some(p) = queue.pop_front() {
            let pp = paths[&p].clone();
            for c in children.get(&p).into_iter().flatten() {
                let Some(node) = t.nodes.get(c) else { continue };
                for (i, l) in node.links.iter().enumerate().filter(|(_, l)| l.parent == p) {
                    let new = name(&pp, &l.pname);
                    made.entry(*c).or_insert_with(|| vec![None; node.links.len()])[i] = new.clone();
                    if let Some(new) = new {
                        if !paths.contains_key(c) {
                            paths.insert(*c, pp.join(new));
                            queue.push_back(*c);
                        }
                    }
                }
            }
        }
        let mut names = HashMap::new();
        for (&ino, node) in t.nodes.iter_mut() {
            let new = made.remove(&ino).unwrap_or_default();
            let old = std::mem::take(&mut node.links);
            node.links = old
                .into_iter()
                .enumerate()
                .filter_map(|(i, mut l)| {
                    l.cname = new.get(i)?.clone()?;
                    Some(l)
                })
                .collect();
            for l in &node.links {
                names.insert((l.parent, l.cname.clone()), ino);
            }
        }
        t.names = names;
    }

    /// Every node id the kernel holds (the root included).
    pub fn known(&self) -> Vec<u64> {
        let t = self.map.read().unwrap_or_else(|e| e.into_inner());
        t.nodes.keys().copied().collect()
    }

    /// Where node `ino` lives now; `None` if it has no name left (unlinked) or is unknown.
    pub fn locate(&self, ino: u64) -> Option<Location> {
        if ino == ROOT {
            return Some(Location {
                backing: PathBuf::new(),
                plain: "/".into(),
            });
        }
        let t = self.map.read().unwrap_or_else(|e| e.into_inner());
        let mut parts: Vec<(&str, &OsStr)> = Vec::new();
        let mut cur = ino;
        while cur != ROOT {
            let l = t.nodes.get(&cur)?.links.first()?;
            parts.push((&l.cname, &l.pname));
            cur = l.parent;
            if parts.len() > 4096 {
                return None;
            }
        }
        let mut backing = PathBuf::new();
        let mut plain = String::new();
        for (c, p) in parts.iter().rev() {
            backing.push(c);
            plain.push('/');
            plain.push_str(&p.to_string_lossy());
        }
        Some(Location { backing, plain })
    }
}

#[cfg(test)]
#[path = "nodes_tests.rs"]
mod tests;
