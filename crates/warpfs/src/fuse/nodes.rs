//! The inode table: FUSE node id → where the entry lives in the backing tree.
//! Node ids are backing inode numbers (the backing root is node 1), so hard
//! links share one node. A node keeps every (parent, name) it is known by;
//! an unlinked-but-open file keeps a node with no links.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::RwLock;

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
}

/// Node id ↔ backing location.
pub struct Nodes {
    map: RwLock<Tables>,
    root_backing_ino: u64,
}

#[derive(Default)]
struct Tables {
    nodes: HashMap<u64, Node>,
    /// (parent, backing name) → node
    names: HashMap<(u64, String), u64>,
}

impl Tables {
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
    /// A table whose root is the backing directory with inode `root_backing_ino`.
    pub fn new(root_backing_ino: u64) -> Self {
        let mut t = Tables::default();
        t.nodes.insert(
            ROOT,
            Node {
                links: Vec::new(),
                nlookup: 1,
            },
        );
        Self {
            map: RwLock::new(t),
            root_backing_ino,
        }
    }

    /// Node id of a backing inode number (swap the root's number with 1).
    pub fn node_id(&self, backing_ino: u64) -> u64 {
        if backing_ino == self.root_backing_ino {
            ROOT
        } else if backing_ino == ROOT {
            self.root_backing_ino
        } else {
            backing_ino
        }
    }

    /// Backing inode number of a node id (inverse of `node_id`).
    pub fn backing_ino(&self, node: u64) -> u64 {
        if node == ROOT {
            self.root_backing_ino
        } else if node == self.root_backing_ino {
            ROOT
        } else {
            node
        }
    }

    /// Record a lookup of `name` (backing `cname`) in `parent` that found node `ino`.
    pub fn remember(&self, ino: u64, parent: u64, cname: &str, pname: &OsStr) {
        let mut t = self.map.write().unwrap_or_else(|e| e.into_inner());
        let key = (parent, cname.to_string());
        if let Some(&old) = t.names.get(&key) {
            if old != ino {
                t.drop_link(parent, cname);
            }
        }
        t.names.insert(key, ino);
        let n = t.nodes.entry(ino).or_default();
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
            if let Some(node) = t.nodes.remove(&ino) {
                for l in node.links {
                    if t.names.get(&(l.parent, l.cname.clone())) == Some(&ino) {
                        t.names.remove(&(l.parent, l.cname));
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
    /// (parent node, backing name, plaintext name).
    pub fn renamed(&self, old: NameRef<'_>, new: NameRef<'_>, exchange: bool) {
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
mod tests {
    use super::*;

    #[test]
    fn locate_follows_parents_and_renames() {
        let n = Nodes::new(500);
        n.remember(10, ROOT, "cA", OsStr::new("a"));
        n.remember(11, 10, "cB", OsStr::new("b"));
        let l = n.locate(11).unwrap();
        assert_eq!(l.backing, PathBuf::from("cA/cB"));
        assert_eq!(l.plain, "/a/b");
        n.renamed((10, "cB", OsStr::new("b")), (ROOT, "cC", OsStr::new("c")), false);
        assert_eq!(n.locate(11).unwrap().backing, PathBuf::from("cC"));
    }

    #[test]
    fn hard_link_survives_unlink_of_one_name() {
        let n = Nodes::new(500);
        n.remember(20, ROOT, "x", OsStr::new("x"));
        n.remember(20, ROOT, "y", OsStr::new("y"));
        n.unlinked(ROOT, "y");
        assert_eq!(n.locate(20).unwrap().backing, PathBuf::from("x"));
        n.unlinked(ROOT, "x");
        assert!(n.locate(20).is_none());
    }

    #[test]
    fn exchange_swaps_names_and_forget_drops() {
        let n = Nodes::new(500);
        n.remember(30, ROOT, "p", OsStr::new("p"));
        n.remember(31, ROOT, "q", OsStr::new("q"));
        n.renamed((ROOT, "p", OsStr::new("p")), (ROOT, "q", OsStr::new("q")), true);
        assert_eq!(n.locate(30).unwrap().backing, PathBuf::from("q"));
        assert_eq!(n.locate(31).unwrap().backing, PathBuf::from("p"));
        n.forget(30, 1);
        assert!(n.locate(30).is_none());
    }

    #[test]
    fn root_number_swap_is_a_bijection() {
        let n = Nodes::new(500);
        assert_eq!(n.node_id(500), ROOT);
        assert_eq!(n.node_id(1), 500);
        assert_eq!(n.node_id(77), 77);
        for b in [500, 1, 77] {
            assert_eq!(n.backing_ino(n.node_id(b)), b);
        }
    }
}
