//! The storm: writers, each owning its own files and keeping an exact
//! model of them, race a slow online rekey (`--max-rate`, `--jobs 2`):
//! writes at random offsets (across 4 KiB blocks, past the end), truncates
//! that shrink and grow, unlink and recreate, renames within the set and
//! into and out of a subdirectory, fsyncs, and reads checked against the
//! model. Each writer's sequence of operations is fixed by its seed; the
//! interleaving with the rekey is not, and no assertion depends on it.

use super::*;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mode_tests!(online_rekey_storm);

const WRITERS: u64 = 3;
/// Operations each writer does at least, however quick the rekey.
const MIN_OPS: u64 = 60;
/// Directories the writers' files live in (renames move between them).
const DIRS: [&str; 2] = ["", "sub/"];

/// One writer: its files (path → contents) and how it names new ones.
struct Writer {
    id: u64,
    mnt: PathBuf,
    rng: Rng,
    model: Model,
    /// Files only renamed and read, never written: only the rekey moves
    /// them (a write moves a file to the new generation by itself).
    cold: Model,
    next: u64,
    ops: u64,
}

impl Writer {
    fn p(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// A fresh name of this writer's, in a random directory.
    fn fresh_name(&mut self) -> String {
        self.next += 1;
        let dir = DIRS[self.rng.below(DIRS.len() as u64) as usize];
        format!("{dir}w{}-{}", self.id, self.next)
    }

    fn pick(&mut self) -> String {
        let n = self.rng.below(self.model.len() as u64) as usize;
        self.model.keys().nth(n).unwrap().clone()
    }

    fn create(&mut self, name: String) {
        let len = self.rng.range(0, 2_000_000) as usize;
        let d = self.rng.bytes(len);
        write_file(&self.p(&name), &d);
        self.model.insert(name, d);
    }

    /// Read `name` whole and compare it with the model.
    fn check(&self, name: &str, what: &str) {
        let got = fs::read(self.p(name)).unwrap_or_else(|e| panic!("w{}: read {name} after {what}: {e}", self.id));
        let want = self.model.get(name).or(self.cold.get(name)).unwrap();
        assert_bytes_eq(&got, want, &format!("w{}: {name} after {what}", self.id));
    }

    /// Rename a cold file to a fresh name (maybe in the other directory),
    /// or read one.
    fn cold_step(&mut self) {
        let n = self.rng.below(self.cold.len() as u64) as usize;
        let from = self.cold.keys().nth(n).unwrap().clone();
        if self.rng.chance(50) {
            return self.check(&from, "other operations");
        }
        let to = self.fresh_name();
        fs::rename(self.p(&from), self.p(&to)).unwrap_or_else(|e| panic!("w{}: rename {from} → {to}: {e}", self.id));
        let d = self.cold.remove(&from).unwrap();
        self.cold.insert(to.clone(), d);
        self.check(&to, "rename");
    }

    /// A write at a random offset: one across a 4 KiB boundary, one that
    /// extends the file (perhaps past a hole), or anywhere; read back.
    fn write(&mut self) {
        let name = self.pick();
        let size = self.model[&name].len() as u64;
        let (off, len) = match self.rng.below(3) {
            0 => {
                let k = self.rng.range(1, size / BLOCK + 1);
                (
                    k * BLOCK - self.rng.range(1, 2000).min(k * BLOCK),
                    self.rng.range(100, 9000),
                )
            }
            1 => (
                size - self.rng.below(size.min(3000) + 1) + self.rng.below(2) * self.rng.below(20_000),
                self.rng.range(1, 50_000),
            ),
            _ => (self.rng.below(size + 10_000), self.rng.range(1, 40_000)),
        };
        let (off, len) = (off as usize, len as usize);
        let d = self.rng.bytes(len);
        let f = OpenOptions::new().read(true).write(true).open(self.p(&name)).unwrap();
        f.write_all_at(&d, off as u64)
            .unwrap_or_else(|e| panic!("w{}: write {name} at {off}: {e}", self.id));
        let m = self.model.get_mut(&name).unwrap();
        if off + len > m.len() {
            m.resize(off + len, 0);
        }
        m[off..off + len].copy_from_slice(&d);
        let back = read_at(&f, off as u64, len + 100).unwrap();
        let end = m.len().min(off + len + 100);
        assert_bytes_eq(&back, &m[off..end], &format!("w{}: {name} read back at {off}", self.id));
    }

    fn truncate(&mut self) {
        let name = self.pick();
        let size = self.model[&name].len() as u64;
        let to = if self.rng.chance(50) {
            size / 2 + self.rng.below(size - size / 2 + 1)
        } else {
            size + self.rng.range(1, 200_000)
        };
        let f = OpenOptions::new().write(true).open(self.p(&name)).unwrap();
        f.set_len(to)
            .unwrap_or_else(|e| panic!("w{}: truncate {name} to {to}: {e}", self.id));
        drop(f);
        self.model.get_mut(&name).unwrap().resize(to as usize, 0);
        self.check(&name, "truncate");
    }

    fn unlink_and_recreate(&mut self) {
        let name = self.pick();
        fs::remove_file(self.p(&name)).unwrap_or_else(|e| panic!("w{}: unlink {name}: {e}", self.id));
        self.model.remove(&name);
        let to = if self.rng.chance(50) { name } else { self.fresh_name() };
        self.create(to.clone());
        self.check(&to, "recreate");
    }

    /// Rename to a fresh name (maybe in the other directory) or over
    /// another file of this writer's.
    fn rename(&mut self) {
        let from = self.pick();
        let to = if self.model.len() > 2 && self.rng.chance(25) {
            self.pick()
        } else {
            self.fresh_name()
        };
        if to == from {
            return;
        }
        fs::rename(self.p(&from), self.p(&to)).unwrap_or_else(|e| panic!("w{}: rename {from} → {to}: {e}", self.id));
        let d = self.model.remove(&from).unwrap();
        self.model.insert(to.clone(), d);
        assert!(
            !self.p(&from).exists(),
            "w{}: {from} still there after its rename",
            self.id
        );
        self.check(&to, "rename");
    }

    fn fsync(&mut self) {
        let name = self.pick();
        let f = OpenOptions::new().write(true).open(self.p(&name)).unwrap();
        f.sync_all()
            .unwrap_or_else(|e| panic!("w{}: fsync {name}: {e}", self.id));
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            _ if self.model.len() < 2 => {
                let n = self.fresh_name();
                self.create(n);
            }
            0..=44 => self.write(),
            45..=54 => self.truncate(),
            55..=57 => self.unlink_and_recreate(),
            58..=69 => self.rename(),
            70..=75 => self.fsync(),
            76..=87 => self.cold_step(),
            _ => {
                let n = self.pick();
                self.check(&n, "other operations");
            }
        }
        self.ops += 1;
        // A pause, so that the files live long enough for the rekey to
        // move some of them between writes (no assertion depends on it).
        std::thread::sleep(Duration::from_millis(self.rng.range(5, 25)));
    }
}

/// Several writers race an online rekey slowed down to last seconds; then
/// every file reads back as its model, before and after a remount, every
/// backing file is at generation 1, no journal is left, the config is
/// final and fsck is clean.
fn online_rekey_storm(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let mut seeds = Rng::for_test(&format!("rekey-storm-{}", mode.name()));
    fs::create_dir(v.p("sub")).unwrap();
    // Files no writer touches: read only at the end.
    let mut still = Model::new();
    for (i, len) in [(0, 1_500_000), (1, 70_000)] {
        let d = seeds.bytes(len);
        let name = format!("{}still{i}", DIRS[i]);
        write_file(&v.p(&name), &d);
        still.insert(name, d);
    }
    let mut writers: Vec<Writer> = (0..WRITERS)
        .map(|id| Writer {
            id,
            mnt: v.mnt.clone(),
            rng: Rng::new(seeds.next_u64()),
            model: Model::new(),
            cold: Model::new(),
            next: 0,
            ops: 0,
        })
        .collect();
    for w in &mut writers {
        for _ in 0..4 {
            let n = w.fresh_name();
            w.create(n);
        }
        for _ in 0..2 {
            let n = w.fresh_name();
            w.create(n.clone());
            let d = w.model.remove(&n).unwrap();
            w.cold.insert(n, d);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = writers
        .into_iter()
        .map(|mut w| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !(stop.load(Ordering::Relaxed) && w.ops >= MIN_OPS) {
                    w.step();
                }
                w
            })
        })
        .collect();
    let o = rekey_with(&v, &["--max-rate", "1.5", "--jobs", "2"]);
    stop.store(true, Ordering::Relaxed);
    let mut model = still.clone();
    let mut ops = Vec::new();
    for t in threads {
        let w = t.join().expect("a writer failed");
        ops.push(w.ops);
        model.extend(w.model);
        model.extend(w.cold);
    }
    o.expect_ok("online rekey under the storm");
    assert!(
        o.stdout.contains("to key generation 1") && o.stdout.contains("online"),
        "{o}"
    );
    eprintln!("{mode:?}: writers did {ops:?} operations; {}", o.stdout.trim());
    // Still mounted: all moved, no journal, config final, all as modelled.
    assert_all_at_generation(&v, 1, "after the online rekey");
    assert!(leftovers(&v).is_empty(), "{:?}", leftovers(&v));
    assert_config_final(&v, 1);
    assert_model(&v, &model, "after the online rekey");
    v.remount();
    assert_model(&v, &model, "after a remount");
    assert!(!v.log().contains("panicked"), "the daemon panicked:\n{}", v.log());
    v.unmount();
    assert_all_at_generation(&v, 1, "after unmounting");
    fsck(&v).expect_ok("fsck after the storm");
}
