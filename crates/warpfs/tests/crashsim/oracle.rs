//! What a crash may leave of the plaintext, from the workload alone: every
//! version of every file, which steps made which bytes durable (fsync,
//! fdatasync) and which names durable (fsync of the directory), and the
//! blocks each step changed, read-modify-writes included. Asked about a
//! crash after `a` finished steps (step `a` possibly half done), it gives
//! the names a path may carry and, per file, the versions its blocks may
//! hold.

use super::workload::{Setup, Step, Workload, SLOTS};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const B: u64 = 4096;

pub type Obj = usize;

/// A path's history: (step, what it names from then on); `None` step: setup.
type Names = Vec<(Option<usize>, Option<Obj>)>;

#[derive(Debug, Default)]
struct Hist {
    dir: bool,
    /// Step that made it (`None`: before the workload, durable).
    created: Option<usize>,
    /// (step that made it, bytes); the first is the initial content.
    versions: Vec<(Option<usize>, Vec<u8>)>,
    syncs: Vec<usize>,
    /// (step, blocks it changed, whether it changed the size).
    touched: Vec<(usize, BTreeSet<u64>, bool)>,
}

pub struct Oracle {
    objs: Vec<Hist>,
    names: BTreeMap<String, Names>,
    dir_syncs: HashMap<String, Vec<usize>>,
    pub steps: usize,
}

/// What a file may read as.
pub struct FileExpect<'o> {
    /// Content made durable by the last acknowledged fsync (`None`: the
    /// file was never synced since it was made).
    pub durable: Option<&'o [u8]>,
    /// Every version the file may show (the durable one included).
    pub versions: Vec<&'o [u8]>,
    /// Blocks changed since the durable version.
    pub touched: BTreeSet<u64>,
    /// The size may be torn.
    pub size_changed: bool,
}

impl FileExpect<'_> {
    pub fn sizes(&self) -> (u64, u64) {
        let it = self.versions.iter().map(|v| v.len() as u64);
        (it.clone().min().unwrap_or(0), it.max().unwrap_or(0))
    }
}

pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or(".")
}

/// Blocks a write of `len` bytes at `off` changes in a file of `size`
/// bytes: those it covers, and the old partial last block when the write
/// goes past it (it is re-encrypted padded).
fn write_blocks(size: u64, off: u64, len: u64) -> BTreeSet<u64> {
    let mut s: BTreeSet<u64> = (off / B..(off + len).div_ceil(B)).collect();
    if off + len > size && !size.is_multiple_of(B) {
        s.insert(size / B);
    }
    s
}

/// Blocks a truncation from `old` to `new` changes (xts writes a new
/// partial last block).
fn truncate_blocks(old: u64, new: u64) -> (BTreeSet<u64>, bool) {
    let mut s = BTreeSet::new();
    if new < old {
        s.extend(new / B..old.div_ceil(B));
    } else if new > old {
        if !old.is_multiple_of(B) {
            s.insert(old / B);
        }
        if !new.is_multiple_of(B) {
            s.insert(new / B);
        }
    }
    (s, new != old)
}

impl Oracle {
    pub fn new(w: &Workload) -> Oracle {
        let mut o = Oracle {
            objs: Vec::new(),
            names: BTreeMap::new(),
            dir_syncs: HashMap::new(),
            steps: w.steps.len(),
        };
        let mut bound: HashMap<String, Obj> = HashMap::new();
        for s in &w.setup {
            let (path, hist) = match s {
                Setup::Dir(p) => (
                    p,
                    Hist {
                        dir: true,
                        ..Default::default()
                    },
                ),
                Setup::File(p, d) => (
                    p,
                    Hist {
                        versions: vec![(None, d.clone())],
                        ..Default::default()
                    },
                ),
            };
            o.objs.push(hist);
            o.names
                .entry(path.clone())
                .or_default()
                .push((None, Some(o.objs.len() - 1)));
            bound.insert(path.clone(), o.objs.len() - 1);
        }
        let mut slot: [Option<Obj>; SLOTS] = [None; SLOTS];
        for (i, s) in w.steps.iter().enumerate() {
            let name = |o: &mut Oracle, p: &str, x: Option<Obj>| {
                o.names.entry(p.to_string()).or_default().push((Some(i), x));
            };
            match s {
                Step::Open {
                    slot: k, path, create, ..
                } => {
                    let x = match bound.get(path) {
                        Some(&x) => x,
                        None => {
                            assert!(*create, "workload opens missing {path}");
                            o.objs.push(Hist {
                                created: Some(i),
                                versions: vec![(Some(i), Vec::new())],
                                ..Default::default()
                            });
                            let x = o.objs.len() - 1;
                            bound.insert(path.clone(), x);
                            name(&mut o, path, Some(x));
                            x
                        }
                    };
                    slot[*k] = Some(x);
                }
                Step::Close { .. } | Step::RekeyStart | Step::RekeyWait => {}
                Step::Pwrite { slot: k, .. } | Step::Append { slot: k, .. } | Step::Truncate { slot: k, .. } => {
                    let h = &mut o.objs[slot[*k].expect("write on a closed slot")];
                    let mut d = h.versions.last().unwrap().1.clone();
                    let size = d.len() as u64;
                    let (blocks, sized) = match s {
                        Step::Truncate { len, .. } => {
                            d.resize(*len as usize, 0);
                            truncate_blocks(size, *len)
                        }
                        Step::Pwrite { off, data, .. } => {
                            let end = *off as usize + data.len();
                            if d.len() < end {
                                d.resize(end, 0);
                            }
                            d[*off as usize..end].copy_from_slice(data);
                            (write_blocks(size, *off, data.len() as u64), end as u64 > size)
                        }
                        Step::Append { data, .. } => {
                            d.extend_from_slice(data);
                            (write_blocks(size, size, data.len() as u64), true)
                        }
                        _ => unreachable!(),
                    };
                    h.versions.push((Some(i), d));
                    h.touched.push((i, blocks, sized));
                }
                Step::Fsync { slot: k } | Step::Fdatasync { slot: k } => {
                    o.objs[slot[*k].expect("sync on a closed slot")].syncs.push(i);
                }
                Step::FsyncDir { path } => o.dir_syncs.entry(path.clone()).or_default().push(i),
                Step::Rename { from, to } => {
                    let x = bound.remove(from).expect("rename of a missing name");
                    assert!(!o.objs[x].dir, "renaming directories is not modelled");
                    bound.insert(to.clone(), x);
                    name(&mut o, from, None);
                    name(&mut o, to, Some(x));
                }
                Step::Unlink { path } => {
                    bound.remove(path).expect("unlink of a missing name");
                    name(&mut o, path, None);
                }
                Step::Mkdir { path } => {
                    o.objs.push(Hist {
                        dir: true,
                        created: Some(i),
                        ..Default::default()
                    });
                    bound.insert(path.clone(), o.objs.len() - 1);
                    let x = o.objs.len() - 1;
                    name(&mut o, path, Some(x));
                }
            }
        }
        o
    }

    /// Every path the workload ever named.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.names.keys().map(|s| s.as_str())
    }

    pub fn is_dir(&self, x: Obj) -> bool {
        self.objs[x].dir
    }

    /// What `path` may name after a crash with `a` steps finished.
    pub fn names_at(&self, path: &str, a: usize) -> Vec<Option<Obj>> {
        let hist = &self.names[path];
        let synced = self
            .dir_syncs
            .get(parent(path))
            .and_then(|v| v.iter().copied().filter(|&s| s < a).max());
        // The name as of the directory's last fsync (or before the workload).
        let base = hist
            .iter()
            .take_while(|(s, _)| match (s, synced) {
                (None, _) => true,
                (Some(s), Some(f)) => *s < f,
                (Some(_), None) => false,
            })
            .last()
            .map(|(_, x)| *x)
            .unwrap_or(None);
        let mut out = vec![base];
        for (s, x) in hist {
            if let Some(s) = s {
                if *s <= a && synced.is_none_or(|f| *s > f) && !out.contains(x) {
                    out.push(*x);
                }
            }
        }
        out
    }

    /// Whether a directory may fail to list: only while the step that
    /// made it may be half done.
    pub fn may_fail_list(&self, x: Obj, a: usize) -> bool {
        self.objs[x].created == Some(a)
    }

    pub fn file(&self, x: Obj, a: usize) -> FileExpect<'_> {
        let h = &self.objs[x];
        // The file's last acknowledged fsync; what came after it (up to
        // step `a`, which may be half done) may or may not be on disk.
        let synced = h.syncs.iter().copied().filter(|&s| s < a).max();
        let in_window = |s: usize| s <= a && synced.is_none_or(|f| s > f);
        let durable: Option<&[u8]> = match synced {
            Some(f) => h
                .versions
                .iter()
                .rev()
                .find(|(s, _)| s.is_none_or(|s| s < f))
                .map(|(_, d)| d.as_slice()),
            None if h.created.is_none() => Some(&h.versions[0].1),
            None => None,
        };
        let mut versions: Vec<&[u8]> = durable.into_iter().collect();
        for (s, d) in &h.versions {
            if s.is_some_and(in_window) {
                versions.push(d);
            }
        }
        let mut touched = BTreeSet::new();
        let mut size_changed = false;
        for (s, blocks, sized) in &h.touched {
            if in_window(*s) {
                touched.extend(blocks);
                size_changed |= sized;
            }
        }
        FileExpect {
            durable,
            versions,
            touched,
            size_changed,
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn durable_versions_touched_blocks_and_names() {
        let w = Workload {
            setup: vec![Setup::File("a".into(), vec![1; 5000])],
            steps: vec![
                Step::Open {
                    slot: 0,
                    path: "a".into(),
                    create: false,
                    append: false,
                },
                Step::Pwrite {
                    slot: 0,
                    off: 100,
                    data: vec![2; 10],
                },
                Step::Fsync { slot: 0 },
                Step::Pwrite {
                    slot: 0,
                    off: 3 * B,
                    data: vec![3; 10],
                },
                Step::Rename {
                    from: "a".into(),
                    to: "b".into(),
                },
                Step::FsyncDir { path: ".".into() },
            ],
        };
        let o = Oracle::new(&w);
        // Before the fsync finished: the setup content is durable.
        let x = o.file(0, 2);
        assert_eq!(x.durable.unwrap()[100], 1);
        assert_eq!(x.touched, [0].into());
        // After it: the write is durable; a write past the end touches its
        // block and the old partial last block (re-encrypted, padded).
        let x = o.file(0, 4);
        assert_eq!(x.durable.unwrap()[100], 2);
        assert_eq!(x.touched, [1, 3].into());
        assert!(x.size_changed);
        assert_eq!(x.sizes(), (5000, 3 * B + 10));
        // The rename is durable only once the directory's fsync finished.
        assert_eq!(o.names_at("b", 5), vec![None, Some(0)]);
        assert_eq!(o.names_at("a", 5), vec![Some(0), None]);
        assert_eq!(o.names_at("b", 6), vec![Some(0)]);
        assert_eq!(o.names_at("a", 6), vec![None]);
    }
}
