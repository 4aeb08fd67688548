//! Which crash states to check, in what order: crash points right after
//! each barrier and each workload step (CrashMonkey's persistence points)
//! with only the forced units, with every unit (the prefix of the trace),
//! and with random dependency-closed subsets (reorderings and torn
//! multi-page writes, ALICE-style); then random subsets at random crash
//! points. Plans come round-robin from these four sources so that any
//! budget samples all of them; the caller drops duplicate states.

use super::persist::Model;
use crate::common::Rng;

/// One crash state to build: crash before op `c`, units `set` on disk.
pub struct Plan {
    pub c: usize,
    pub set: Vec<bool>,
    /// How it was chosen (for messages).
    pub how: &'static str,
}

pub struct Planner<'m> {
    model: &'m Model,
    rng: Rng,
    /// Crash points after a barrier or a marker, and the end, shuffled.
    points: Vec<usize>,
    next: [usize; 3],
    turn: usize,
}

impl<'m> Planner<'m> {
    pub fn new(model: &'m Model, seed: u64) -> Self {
        let n = model.ops.len();
        let mut points: Vec<usize> = model
            .barriers
            .iter()
            .map(|(i, _)| i + 1)
            .chain(model.markers.iter().map(|(i, _)| i + 1))
            .chain([n])
            .collect();
        points.sort_unstable();
        points.dedup();
        let mut rng = Rng::new(seed);
        for i in (1..points.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            points.swap(i, j);
        }
        Self {
            model,
            rng,
            points,
            next: [0; 3],
            turn: 0,
        }
    }

    /// A random closed subset of what may be on disk at `c`: each op's
    /// optional units in or out together with probability `density`, and
    /// one op in two torn (each of its units in or out on its own).
    fn random(&mut self, c: usize) -> Vec<bool> {
        let mut set = self.model.forced(c);
        let opt = self.model.optional(c, &set);
        let density = [20, 50, 80][self.rng.below(3) as usize];
        let mut k = 0;
        while k < opt.len() {
            let op = self.model.units[opt[k] as usize].op;
            let mut e = k;
            while e < opt.len() && self.model.units[opt[e] as usize].op == op {
                e += 1;
            }
            if self.rng.chance(density) {
                let torn = e - k > 1 && self.rng.chance(50);
                for &u in &opt[k..e] {
                    if !torn || self.rng.chance(50) {
                        set[u as usize] = true;
                    }
                }
            }
            k = e;
        }
        self.model.close(&mut set);
        set
    }
}

impl Iterator for Planner<'_> {
    type Item = Plan;

    fn next(&mut self) -> Option<Plan> {
        let n = self.model.ops.len();
        for _ in 0..4 {
            let kind = self.turn % 4;
            self.turn += 1;
            if kind == 3 {
                let c = self.rng.range(1, n.max(1) as u64) as usize;
                let set = self.random(c);
                return Some(Plan {
                    c,
                    set,
                    how: "random subset at a random point",
                });
            }
            let Some(&c) = self.points.get(self.next[kind]) else {
                continue;
            };
            self.next[kind] += 1;
            let (set, how) = match kind {
                0 => (self.model.forced(c), "only what was synced"),
                1 => {
                    let mut s = self.model.forced(c);
                    for u in self.model.optional(c, &s) {
                        s[u as usize] = true;
                    }
                    self.model.close(&mut s);
                    (s, "everything before the point")
                }
                _ => (self.random(c), "random subset after a barrier"),
            };
            return Some(Plan { c, set, how });
        }
        // Only the random source is left.
        let c = self.rng.range(1, n.max(1) as u64) as usize;
        let set = self.random(c);
        Some(Plan {
            c,
            set,
            how: "random subset at a random point",
        })
    }
}
