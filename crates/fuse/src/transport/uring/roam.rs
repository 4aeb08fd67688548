//! Letting a ring thread leave its CPU while it serves large transfers.
//! The kernel queues a request on the ring of the CPU it was made on; for
//! writes that is the writeback worker's CPU, which the writer and the
//! worker keep busy, and for a sequential reader's read-ahead it is the
//! reader's, so a queue thread pinned there shares that CPU while the
//! other idles. Large WRITEs and large READs (read-ahead) have no caller
//! waiting on this CPU for that very answer, so after serving one the
//! thread may run anywhere its process may ([`Roam::after`]); the next
//! answer somebody waits for (a small READ, a lookup, an open) pins it
//! home again, where that answer is best made (its reader or caller waits
//! on this CPU: `super::local_wake`). It never roams onto the
//! CPUs of speculation's keystream workers (the file system's busy CPUs):
//! masks are made ahead of need only on cores the FUSE work leaves idle,
//! so with workers on every other CPU the thread stays home.
//! docs/decisions/0072-ring-threads-roam.md.

use warpfs_engine::placement::CpuSet;

/// WRITE requests of at least this many bytes let the thread roam: the
/// writeback of a sequential writer (small random writes stay home, where
/// a move would cost more than it saves).
pub const BIG_WRITE: usize = 64 * 1024;

/// What a batch of served requests held.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// A WRITE of at least [`BIG_WRITE`] bytes.
    pub big_write: bool,
    /// An answer a reader or caller waits for on this CPU
    /// (`super::local_wake::Waiter`).
    pub waited: bool,
    /// A READ answer larger than [`super::local_wake::MAX_READ`].
    pub big_read: bool,
}

impl Batch {
    /// Note one served request: its opcode, its payload size (a WRITE's
    /// data) and its answer's size (a READ's data).
    pub fn note(&mut self, opcode: u32, payload: usize, answer: usize) {
        match opcode {
            super::abi::op::READ if answer > super::local_wake::MAX_READ => self.big_read = true,
            super::abi::op::WRITE if payload >= BIG_WRITE => self.big_write = true,
            _ => {}
        }
        if super::local_wake::Waiter::of(opcode, answer) != super::local_wake::Waiter::Nobody {
            self.waited = true;
        }
    }
}

/// Where the thread should be after a batch: `Some(true)` home,
/// `Some(false)` anywhere, `None` where it is. An answer somebody waits
/// for wins over large transfers.
pub fn decide(home_now: bool, b: Batch) -> Option<bool> {
    if b.waited && !home_now {
        Some(true)
    } else if (b.big_write || b.big_read) && !b.waited && home_now {
        Some(false)
    } else {
        None
    }
}

/// Where a thread at home on `home` may roam from `set`: less `busy`,
/// `None` when that leaves no CPU but home.
fn roam_set(set: CpuSet, home: usize, busy: &[usize]) -> Option<CpuSet> {
    let wide = set.without(busy);
    wide.cpus().iter().any(|&c| c != home).then_some(wide)
}

/// A queue thread's CPU: home (pinned) or roaming over the CPUs its
/// process may use, less the busy ones.
pub struct Roam {
    home: CpuSet,
    /// `None`: nowhere to go but home.
    wide: Option<CpuSet>,
    at_home: bool,
    /// Times the thread left home.
    pub roams: u64,
}

impl Roam {
    /// Pin the calling thread to `cpu`, remembering the CPUs it may use
    /// now, less `busy`, as where it may roam. `None` when it cannot be
    /// pinned (the thread is left where it is).
    pub fn pin(cpu: usize, busy: &[usize]) -> Option<Roam> {
        let wide = roam_set(CpuSet::of_this_thread()?, cpu, busy);
        let home = CpuSet::one(cpu)?;
        if !home.pin_this_thread() {
            tracing::debug!(
                "ring queue thread: cannot pin to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
            return None;
        }
        Some(Roam {
            home,
            wide,
            at_home: true,
            roams: 0,
        })
    }

    /// Whether there is anywhere to roam to.
    #[cfg(test)]
    pub fn can_roam(&self) -> bool {
        self.wide.is_some()
    }

    /// Whether the thread is pinned home.
    #[cfg(test)]
    pub fn at_home(&self) -> bool {
        self.at_home
    }

    /// Move the thread as [`decide`] says after a batch.
    pub fn after(&mut self, b: Batch) {
        match decide(self.at_home, b) {
            Some(true) if self.home.pin_this_thread() => self.at_home = true,
            Some(false) if self.wide.is_some_and(|w| w.pin_this_thread()) => {
                self.at_home = false;
                self.roams += 1;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::uring::abi::op;
    use crate::transport::uring::local_wake::MAX_READ;

    fn batch(ops: &[(u32, usize)]) -> Batch {
        let mut b = Batch::default();
        for &(o, n) in ops {
            b.note(o, n, n);
        }
        b
    }

    #[test]
    fn big_transfers_send_the_thread_out_and_waited_answers_bring_it_home() {
        let big = batch(&[(op::WRITE, BIG_WRITE)]);
        let small = batch(&[(op::WRITE, BIG_WRITE - 1)]);
        let read = batch(&[(op::READ, 0)]);
        let ahead = batch(&[(op::READ, MAX_READ + 1)]);
        let page = batch(&[(op::READ, MAX_READ)]);
        let mixed = batch(&[(op::READ, 1 << 20), (op::READ, 4096)]);
        assert_eq!(decide(true, ahead), Some(false), "read-ahead leaves home");
        assert_eq!(decide(false, ahead), None);
        assert_eq!(decide(false, page), Some(true), "a small read comes home");
        assert_eq!(decide(true, mixed), None, "a small read keeps it home");
        let both = batch(&[(op::WRITE, 1 << 20), (op::READ, 4096)]);
        let other = batch(&[(op::GETATTR, 0), (op::LOOKUP, 0)]);
        assert_eq!(decide(true, big), Some(false));
        assert_eq!(decide(false, big), None);
        assert_eq!(decide(true, small), None);
        assert_eq!(decide(false, read), Some(true));
        assert_eq!(decide(true, read), None);
        assert_eq!(decide(true, both), None, "a read keeps it home");
        assert_eq!(decide(false, both), Some(true));
        assert_eq!(decide(true, other), None);
        assert_eq!(decide(false, other), Some(true), "a caller waits for a stat");
        let release = batch(&[(op::RELEASE, 0), (op::RELEASEDIR, 0)]);
        assert_eq!(decide(false, release), None, "nobody waits for a release");
        let open_and_write = batch(&[(op::WRITE, 1 << 20), (op::OPEN, 32)]);
        assert_eq!(decide(true, open_and_write), None, "an open keeps it home");
    }

    fn allowed() -> String {
        std::fs::read_to_string("/proc/thread-self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:").map(|v| v.trim().to_string()))
            .unwrap()
    }

    #[test]
    fn the_thread_really_moves() {
        std::thread::spawn(|| {
            let wide = allowed();
            let home = CpuSet::of_this_thread().unwrap().cpus()[0];
            let mut r = Roam::pin(home, &[]).expect("an allowed CPU");
            assert_eq!(allowed(), home.to_string());
            r.after(batch(&[(op::WRITE, 1 << 20)]));
            // A process allowed one CPU has nowhere to go.
            let moved = u64::from(wide != home.to_string());
            assert_eq!((r.at_home(), allowed(), r.roams), (moved == 0, wide.clone(), moved));
            r.after(batch(&[(op::READ, 4096)]));
            assert!(r.at_home());
            assert_eq!((allowed(), r.roams), (home.to_string(), moved));
        })
        .join()
        .unwrap();
    }

    fn set(cpus: &[usize]) -> CpuSet {
        CpuSet::of(cpus)
    }

    fn cpus(s: Option<CpuSet>) -> Option<Vec<usize>> {
        s.map(|s| s.cpus())
    }

    #[test]
    fn the_busy_cpus_are_no_place_to_roam() {
        let all = set(&[0, 1, 2, 3]);
        assert_eq!(cpus(roam_set(all, 0, &[])), Some(vec![0, 1, 2, 3]));
        assert_eq!(cpus(roam_set(all, 0, &[2, 3])), Some(vec![0, 1]));
        assert_eq!(cpus(roam_set(all, 0, &[1, 2, 3])), None, "only home is left");
        assert_eq!(cpus(roam_set(all, 1, &[0, 1, 2, 3])), None, "workers everywhere");
        assert_eq!(cpus(roam_set(all, 0, &[0])), Some(vec![1, 2, 3]), "off a busy home");
        // A process kept to CPU 1 (taskset) with its workers there: a
        // thread at home on CPU 0 stays there.
        assert_eq!(cpus(roam_set(set(&[1]), 0, &[1])), None);
        assert_eq!(cpus(roam_set(set(&[1]), 0, &[])), Some(vec![1]));
        assert_eq!(
            cpus(roam_set(all, 0, &[7, 99, 1 << 20])),
            Some(vec![0, 1, 2, 3]),
            "unknown CPUs"
        );
    }

    #[test]
    fn a_thread_with_nowhere_to_go_stays_home() {
        std::thread::spawn(|| {
            let home = CpuSet::of_this_thread().unwrap().cpus()[0];
            let busy: Vec<usize> = (0..1024).filter(|&c| c != home).collect();
            let mut r = Roam::pin(home, &busy).expect("an allowed CPU");
            assert!(!r.can_roam());
            r.after(batch(&[(op::WRITE, 1 << 20)]));
            assert!(r.at_home());
            assert_eq!((allowed(), r.roams), (home.to_string(), 0));
        })
        .join()
        .unwrap();
    }
}
