//! The persistence model (docs/decisions/0006-crash-state-testing.md):
//! each recorded operation becomes units that reach the disk on their own
//! (a 4 KiB page of a write, a size change, one namespace operation), with
//! the orderings every Linux file system keeps between them as
//! dependencies, and each fsync/fdatasync/sync as a barrier that forces the
//! units it covers. A crash state is the snapshot plus a dependency-closed
//! set of units, applied in trace order.

use super::fsmodel::{FsModel, Ino, Node};
use super::ops::{apply, BOp};
use std::collections::HashMap;

/// Page size of the model: a write lands (or not) per 4 KiB page.
pub const PAGE: u64 = 4096;

#[derive(Debug, Clone)]
pub enum Eff {
    /// Bytes `[a, b)` of write op `op` at file offset `off`.
    Data { ino: Ino, off: u64, a: usize, b: usize },
    /// Zeros over `[off, off + len)` (truncation tail, punched hole).
    Zero { ino: Ino, off: u64, len: u64 },
    /// The file's size becomes `len`.
    Size { ino: Ino, len: u64 },
    /// The whole namespace operation.
    Ns,
}

#[derive(Debug, Clone)]
pub struct Unit {
    pub op: usize,
    pub eff: Eff,
    /// Units that must be on disk for this one to be (all earlier).
    pub deps: Vec<u32>,
    /// May reach the disk on its own; a unit that is not free persists
    /// only when a later unit depends on it.
    pub free: bool,
}

pub struct Model {
    pub ops: Vec<BOp>,
    pub units: Vec<Unit>,
    /// (index of the sync op, units it forces).
    pub barriers: Vec<(usize, Vec<u32>)>,
    /// (op index, workload step) of every marker.
    pub markers: Vec<(usize, usize)>,
}

/// Bookkeeping while units are made.
#[derive(Default)]
struct Build {
    units: Vec<Unit>,
    last_page: HashMap<(Ino, u64), u32>,
    last_size: HashMap<Ino, u32>,
    content: HashMap<Ino, Vec<u32>>,
    last_entry: HashMap<(Ino, Vec<u8>), u32>,
    creator: HashMap<Ino, u32>,
    in_dir: HashMap<Ino, Vec<u32>>,
}

impl Build {
    fn push(&mut self, op: usize, eff: Eff, deps: Vec<Option<u32>>, free: bool) -> u32 {
        let id = self.units.len() as u32;
        let mut deps: Vec<u32> = deps.into_iter().flatten().collect();
        deps.sort_unstable();
        deps.dedup();
        match &eff {
            Eff::Data { ino, .. } | Eff::Zero { ino, .. } | Eff::Size { ino, .. } => {
                self.content.entry(*ino).or_default().push(id)
            }
            Eff::Ns => {}
        }
        self.units.push(Unit { op, eff, deps, free });
        id
    }

    fn page(&mut self, op: usize, ino: Ino, eff: Eff, page: u64, extra: Option<u32>, free: bool) {
        let prev = self.last_page.get(&(ino, page)).copied();
        let id = self.push(op, eff, vec![prev, extra], free);
        self.last_page.insert((ino, page), id);
    }

    fn size(&mut self, op: usize, ino: Ino, len: u64) -> u32 {
        let prev = self.last_size.get(&ino).copied();
        let id = self.push(op, Eff::Size { ino, len }, vec![prev], true);
        self.last_size.insert(ino, id);
        id
    }

    /// A namespace unit touching `entries`, depending on their last
    /// units and on the creation of `uses` (parents, linked inodes) and,
    /// for `emptied` (a removed directory), on every change inside it.
    fn ns(&mut self, op: usize, entries: &[(Ino, &[u8])], uses: &[Ino], emptied: Option<Ino>) -> u32 {
        let mut deps: Vec<Option<u32>> = entries
            .iter()
            .map(|(d, n)| self.last_entry.get(&(*d, n.to_vec())).copied())
            .collect();
        deps.extend(uses.iter().map(|i| self.creator.get(i).copied()));
        if let Some(d) = emptied {
            deps.extend(self.in_dir.get(&d).into_iter().flatten().map(|&u| Some(u)));
        }
        let id = self.push(op, Eff::Ns, deps, true);
        for (d, n) in entries {
            self.last_entry.insert((*d, n.to_vec()), id);
            self.in_dir.entry(*d).or_default().push(id);
        }
        id
    }
}

impl Model {
    /// Units and barriers of `ops` applied to `snap`.
    pub fn build(snap: &FsModel, ops: Vec<BOp>) -> Model {
        let mut b = Build::default();
        let mut live = snap.clone();
        let mut barriers = Vec::new();
        let mut markers = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                BOp::Write { ino, off, data } => {
                    let mut size = live.size(*ino);
                    let end = off + data.len() as u64;
                    let mut at = *off;
                    while at < end {
                        let page = at / PAGE;
                        let to = ((page + 1) * PAGE).min(end);
                        let grow = (to > size).then(|| {
                            size = to;
                            b.size(i, *ino, to)
                        });
                        let (a, z) = ((at - off) as usize, (to - off) as usize);
                        let eff = Eff::Data {
                            ino: *ino,
                            off: at,
                            a,
                            b: z,
                        };
                        b.page(i, *ino, eff, page, grow, true);
                        at = to;
                    }
                }
                BOp::SetLen { ino, len } => {
                    let old = live.size(*ino);
                    b.size(i, *ino, *len);
                    // Pages past a shrink: the partial one may be written
                    // back zeroed on its own; whole ones are dropped and come
                    // back zeroed only under a later write to the page.
                    let mut at = *len;
                    while at < old {
                        let page = at / PAGE;
                        let to = ((page + 1) * PAGE).min(old);
                        let free = at % PAGE != 0;
                        let eff = Eff::Zero {
                            ino: *ino,
                            off: at,
                            len: to - at,
                        };
                        b.page(i, *ino, eff, page, None, free);
                        at = to;
                    }
                }
                BOp::Zero { ino, off, len } => {
                    let end = off + len;
                    let mut at = *off;
                    while at < end {
                        let page = at / PAGE;
                        let to = ((page + 1) * PAGE).min(end);
                        let eff = Eff::Zero {
                            ino: *ino,
                            off: at,
                            len: to - at,
                        };
                        b.page(i, *ino, eff, page, None, true);
                        at = to;
                    }
                }
                BOp::Create { parent, name, ino, .. } => {
                    b.ns(i, &[(*parent, name)], &[*parent], None);
                    let last = b.units.len() as u32 - 1;
                    b.creator.insert(*ino, last);
                }
                BOp::Link { parent, name, ino } => {
                    b.ns(i, &[(*parent, name)], &[*parent, *ino], None);
                }
                BOp::Remove { parent, name, ino } => {
                    let dir = matches!(live.get(*ino), Some(Node::Dir(_))).then_some(*ino);
                    b.ns(i, &[(*parent, name)], &[], dir);
                }
                BOp::Rename { sp, sn, dp, dn, .. } => {
                    b.ns(i, &[(*sp, sn), (*dp, dn)], &[*sp, *dp], None);
                }
                BOp::Sync { ino, covers } => {
                    let forced: Vec<u32> = match ino {
                        None => (0..b.units.len() as u32).collect(),
                        Some(x) if matches!(live.get(*x), Some(Node::Dir(_))) => {
                            b.in_dir.get(x).cloned().unwrap_or_default()
                        }
                        Some(x) => b.content.get(x).cloned().unwrap_or_default(),
                    };
                    let forced = forced
                        .into_iter()
                        .filter(|&u| b.units[u as usize].op < *covers)
                        .collect();
                    barriers.push((i, forced));
                }
                BOp::Marker(step) => markers.push((i, *step)),
            }
            apply(&mut live, op);
        }
        Model {
            ops,
            units: b.units,
            barriers,
            markers,
        }
    }

    /// Add every dependency of the units in `set`.
    pub fn close(&self, set: &mut [bool]) {
        for u in (0..self.units.len()).rev() {
            if set[u] {
                for &d in &self.units[u].deps {
                    set[d as usize] = true;
                }
            }
        }
    }

    /// The units on disk at a crash before op `c` whatever else happened:
    /// those of the barriers finished before `c`, with their dependencies.
    pub fn forced(&self, c: usize) -> Vec<bool> {
        let mut set = vec![false; self.units.len()];
        for (i, f) in &self.barriers {
            if *i < c {
                for &u in f {
                    set[u as usize] = true;
                }
            }
        }
        self.close(&mut set);
        set
    }

    /// Units of ops before `c` that may or may not be on disk.
    pub fn optional(&self, c: usize, forced: &[bool]) -> Vec<u32> {
        (0..self.units.len() as u32)
            .filter(|&u| {
                let x = &self.units[u as usize];
                x.op < c && x.free && !forced[u as usize]
            })
            .collect()
    }

    /// Workload steps finished (their markers seen) before op `c`.
    pub fn acked(&self, c: usize) -> usize {
        self.markers.iter().filter(|(i, _)| *i < c).count()
    }

    /// The crash state made of the units in `set` (closed) on `snap`.
    pub fn state(&self, snap: &FsModel, set: &[bool]) -> FsModel {
        let mut m = snap.clone();
        for (u, unit) in self.units.iter().enumerate() {
            if !set[u] {
                continue;
            }
            match &unit.eff {
                Eff::Data { ino, off, a, b } => {
                    let BOp::Write { data, .. } = &self.ops[unit.op] else {
                        unreachable!()
                    };
                    m.write_clipped(*ino, *off, &data[*a..*b]);
                }
                Eff::Zero { ino, off, len } => m.zero(*ino, *off, *len),
                Eff::Size { ino, len } => m.set_len(*ino, *len),
                Eff::Ns => apply(&mut m, &self.ops[unit.op]),
            }
        }
        m
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    /// root/f created, written over two pages, fsynced; root fsynced.
    fn model() -> (FsModel, Model) {
        let d = tempfile::tempdir().unwrap();
        let snap = FsModel::load(d.path());
        let ino = snap.fresh();
        let ops = vec![
            BOp::Create {
                parent: snap.root,
                name: b"f".to_vec(),
                ino,
                node: Node::File(Vec::new()),
                mode: 0o644,
            },
            BOp::Write {
                ino,
                off: 4000,
                data: vec![7; 200],
            },
            BOp::Write {
                ino,
                off: 4090,
                data: vec![8; 4],
            },
            BOp::Sync {
                ino: Some(ino),
                covers: 3,
            },
            BOp::Sync {
                ino: Some(snap.root),
                covers: 4,
            },
        ];
        let m = Model::build(&snap, ops);
        (snap, m)
    }

    #[test]
    fn pages_sizes_names_and_barriers() {
        let (snap, m) = model();
        // create; write: size 4096, page 0, size 4200, page 1; write: page 0.
        assert_eq!(m.units.len(), 6);
        assert!(matches!(m.units[0].eff, Eff::Ns));
        // Page 1 of the first write needs its size and the first size.
        let mut set = vec![false; 6];
        set[4] = true;
        m.close(&mut set);
        assert_eq!(set, [false, true, false, true, true, false]);
        // The second write to page 0 needs the first one.
        let mut set = vec![false; 6];
        set[5] = true;
        m.close(&mut set);
        assert!(set[2] && set[1] && !set[4]);
        // The file's fsync forces its content, not its name; the
        // directory's fsync forces the name.
        assert_eq!(m.forced(4), [false, true, true, true, true, true]);
        assert!(m.forced(5).iter().all(|&x| x));
        let st = m.state(&snap, &m.forced(4));
        assert!(st.lookup(b"f").is_none());
        let st = m.state(&snap, &m.forced(5));
        let f = st.lookup(b"f").unwrap();
        assert_eq!(st.size(f), 4200);
        // A size without its data reads zeros.
        let mut set = vec![false; 6];
        set[0] = true;
        set[3] = true;
        m.close(&mut set);
        let st = m.state(&snap, &set);
        let Some(Node::File(d)) = st.get(st.lookup(b"f").unwrap()) else {
            panic!()
        };
        assert_eq!(d.len(), 4200);
        assert!(d.iter().all(|&x| x == 0));
        assert_eq!(m.optional(4, &m.forced(4)), vec![0]);
    }
}
