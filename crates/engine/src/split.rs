//! Requests split across the workers ([`warpfs_keystream::Splitter`]): a
//! [`SplitJob`] sits at the front of the workers' queue, ahead of masks;
//! each idle worker and the caller claim parts by an atomic counter until
//! none is left, and the caller waits only for parts a worker is still
//! running. The job borrows the caller's closure: it is called only for a
//! claimed part `< parts`, and the caller returns only after every claimed
//! part has finished, so no call outlives the borrow.
//!
//! A worker pinned to the caller's CPU alone takes no part: the workers run
//! at a lower nice value than the FUSE threads, so waking one there
//! preempts the caller, which then waits while that worker does every part
//! (seen in `warpfs stats`: over FUSE over io_uring, where requests are
//! served on the issuing CPU, workers ran 10,206 of 10,324 parts). It goes
//! back to sleep and leaves the CPU to the caller. A worker that may run
//! elsewhere helps.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// The caller's closure with its lifetime erased (see the module docs).
type PartFn = *const (dyn Fn(usize) + Sync + 'static);

/// One split request.
pub(crate) struct SplitJob {
    /// Unique per job (never reused, unlike an address).
    pub(crate) id: u64,
    f: PartFn,
    /// The CPU the caller ran on when it queued the job (-1: unknown).
    caller_cpu: i32,
    parts: usize,
    next: AtomicUsize,
    done: Mutex<usize>,
    all_done: Condvar,
    panicked: AtomicBool,
}

// SAFETY: `f` points to a `Sync` closure that outlives every call made
// through it (module docs); the rest is atomics and a mutex.
unsafe impl Send for SplitJob {}
// SAFETY: as above.
unsafe impl Sync for SplitJob {}

impl SplitJob {
    /// A job over `f` for `0..parts`.
    ///
    /// # Safety
    /// The caller must keep `f` alive until [`wait`](Self::wait) returns.
    pub(crate) unsafe fn new(parts: usize, f: &(dyn Fn(usize) + Sync)) -> Self {
        // SAFETY: only the lifetime changes; see the function's contract.
        let f: PartFn = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(f) };
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            f,
            caller_cpu: current_cpu(),
            parts,
            next: AtomicUsize::new(0),
            done: Mutex::new(0),
            all_done: Condvar::new(),
            panicked: AtomicBool::new(false),
        }
    }

    /// Whether a worker allowed on `cpus` (its affinity) should leave this
    /// job alone: it may run only on the caller's CPU.
    pub(crate) fn not_for(&self, cpus: &[usize]) -> bool {
        self.caller_cpu >= 0 && cpus.len() == 1 && cpus[0] as i32 == self.caller_cpu
    }

    /// Whether every part has been claimed.
    pub(crate) fn exhausted(&self) -> bool {
        self.next.load(Ordering::Relaxed) >= self.parts
    }

    /// Claim and run parts until none is left, counting each in `ran_by`
    /// before it is marked done.
    pub(crate) fn work(&self, ran_by: &AtomicU64) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.parts {
                return;
            }
            // SAFETY: part i < parts was claimed, so the caller is still in
            // `wait` (it returns only once this part is counted done).
            let f = unsafe { &*self.f };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            ran_by.fetch_add(1, Ordering::Relaxed);
            let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
            *d += 1;
            if *d == self.parts {
                self.all_done.notify_all();
            }
        }
    }

    /// Wait until every part has finished; resume a part's panic.
    pub(crate) fn wait(&self) {
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while *d < self.parts {
            d = self.all_done.wait(d).unwrap_or_else(|e| e.into_inner());
        }
        drop(d);
        if self.panicked.load(Ordering::Relaxed) {
            panic!("a part of a split request panicked");
        }
    }
}

/// The CPU the calling thread runs on (-1 where unknown).
fn current_cpu() -> i32 {
    crate::placement::this_thread::cpu().map_or(-1, |c| c as i32)
}

#[cfg(test)]
mod tests {
    use crate::{Engine, EngineConfig};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;
    use warpfs_keystream::Splitter;

    fn engine(threads: usize, speculation: bool) -> std::sync::Arc<Engine> {
        Engine::new(EngineConfig {
            threads,
            speculation,
            ..EngineConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn every_part_runs_once_and_a_worker_takes_a_share() {
        let e = engine(2, true);
        assert_eq!(e.helpers(), 2);
        let ran: Vec<AtomicUsize> = (0..40).map(|_| AtomicUsize::new(0)).collect();
        let caller = std::thread::current().id();
        // Part 0 (the caller claims it first) waits until another thread
        // has run some part: only a worker can.
        let other = (Mutex::new(false), Condvar::new());
        e.run(40, &|i| {
            ran[i].fetch_add(1, Ordering::Relaxed);
            if std::thread::current().id() != caller {
                *other.0.lock().unwrap() = true;
                other.1.notify_all();
            } else if i == 0 {
                let g = other.0.lock().unwrap();
                let (g, t) = other
                    .1
                    .wait_timeout_while(g, Duration::from_secs(20), |seen| !*seen)
                    .unwrap();
                assert!(*g && !t.timed_out(), "no worker took a part");
            }
        });
        assert!(ran.iter().all(|r| r.load(Ordering::Relaxed) == 1));
        let s = e.stats();
        assert_eq!(s.split_requests, 1);
        assert_eq!(s.split_parts_workers + s.split_parts_caller, 40);
        assert!(s.split_parts_workers >= 1, "{s}");
        assert!(s.to_string().contains("xts split: 1 request(s)"), "{s}");
    }

    #[test]
    fn a_worker_on_the_callers_cpu_leaves_the_parts_to_it() {
        // One worker, pinned to CPU 0; the caller pinned there too.
        let e = Engine::new(EngineConfig {
            threads: 1,
            cpus: vec![0],
            ..EngineConfig::default()
        })
        .unwrap();
        let caller = std::thread::spawn(move || {
            crate::placement::this_thread::pin(&[0]).unwrap();
            // Parts of ~50 µs of work each: long enough for a woken worker
            // on this CPU to get it and claim parts, were it allowed to.
            for _ in 0..20 {
                e.run(16, &|_| {
                    let t = std::time::Instant::now();
                    while t.elapsed() < Duration::from_micros(50) {
                        std::hint::spin_loop();
                    }
                });
            }
            e.stats()
        });
        let s = caller.join().unwrap();
        assert_eq!(s.split_parts_caller, 20 * 16, "{s}");
        assert_eq!(s.split_parts_workers, 0, "{s}");
    }

    #[test]
    fn without_workers_the_caller_runs_everything() {
        let e = engine(0, false);
        assert_eq!(e.helpers(), 0);
        let n = AtomicUsize::new(0);
        e.run(7, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 7);
        let s = e.stats();
        assert_eq!(
            (s.split_requests, s.split_parts_workers, s.split_parts_caller),
            (0, 0, 7)
        );
    }

    #[test]
    fn a_panicking_part_reaches_the_caller_after_the_others_finish() {
        let e = engine(2, true);
        let n = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            e.run(16, &|i| {
                n.fetch_add(1, Ordering::Relaxed);
                assert_ne!(i, 5, "part 5 fails");
            })
        }));
        assert!(r.is_err());
        assert_eq!(n.load(Ordering::Relaxed), 16);
        // The engine still works.
        let m = AtomicUsize::new(0);
        e.run(3, &|_| {
            m.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(m.load(Ordering::Relaxed), 3);
    }
}
