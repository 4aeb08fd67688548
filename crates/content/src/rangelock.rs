//! A block range lock (Mutex + Condvar over the active ranges): shared
//! ranges overlap freely, an exclusive range overlaps nothing. It also
//! guards a small state value (the file's size and ID) whose changes need
//! the whole file held exclusively. It counts the exclusive ranges
//! released (every change to the file's blocks, size or header holds one),
//! so a reader can tell whether anything changed since it looked.

use std::sync::{Condvar, Mutex, MutexGuard};

/// Half-open block range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Want {
    pub start: u64,
    pub end: u64,
    pub exclusive: bool,
}

impl Want {
    pub fn shared(start: u64, end: u64) -> Self {
        Self {
            start,
            end,
            exclusive: false,
        }
    }
    pub fn exclusive(start: u64, end: u64) -> Self {
        Self {
            start,
            end,
            exclusive: true,
        }
    }
    pub fn whole() -> Self {
        Self::exclusive(0, u64::MAX)
    }
    fn conflicts(&self, o: &Want) -> bool {
        (self.exclusive || o.exclusive) && self.start < o.end && o.start < self.end
    }
}

struct Inner<T> {
    state: T,
    active: Vec<(u64, Want)>,
    next_id: u64,
    /// Exclusive ranges released so far.
    changes: u64,
    /// Threads waiting on the condvar: a release wakes them only if there
    /// are any (std's `notify_all` is a futex system call even with no
    /// waiter, and every read and write releases a range).
    waiters: usize,
}

pub(crate) struct RangeLock<T> {
    inner: Mutex<Inner<T>>,
    cv: Condvar,
}

/// A held range; released on drop.
pub(crate) struct RangeGuard<'a, T> {
    lock: &'a RangeLock<T>,
    id: u64,
    whole: bool,
}

impl<T: Copy> RangeLock<T> {
    pub fn new(state: T) -> Self {
        Self {
            inner: Mutex::new(Inner {
                state,
                active: Vec::new(),
                next_id: 0,
                changes: 0,
                waiters: 0,
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current state (may change as soon as this returns unless a
    /// range is held).
    pub fn state(&self) -> T {
        self.lock().state
    }

    /// Exclusive ranges released so far. Equal values before and after a
    /// read of any range mean no change to the file finished in between
    /// (a change still in progress then held an exclusive range the read
    /// could not overlap).
    pub fn changes(&self) -> u64 {
        self.lock().changes
    }

    /// Wait for and take the range `want` picks from the current state
    /// (re-evaluated after each wake-up, since the state may change while
    /// waiting). `None` from `want`: nothing to lock. Returns the guard and
    /// the state, which stays fixed while the guard is held.
    pub fn acquire(&self, mut want: impl FnMut(&T) -> Option<Want>) -> (Option<RangeGuard<'_, T>>, T) {
        let mut g = self.lock();
        loop {
            let Some(w) = want(&g.state) else {
                return (None, g.state);
            };
            if !g.active.iter().any(|(_, a)| a.conflicts(&w)) {
                let id = g.next_id;
                g.next_id += 1;
                g.active.push((id, w));
                let guard = RangeGuard {
                    lock: self,
                    id,
                    whole: w == Want::whole(),
                };
                return (Some(guard), g.state);
            }
            g.waiters += 1;
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            g.waiters -= 1;
        }
    }
}

impl<T: Copy> RangeGuard<'_, T> {
    /// Replace the state; only a holder of the whole file may.
    pub fn set_state(&self, s: T) {
        debug_assert!(self.whole);
        self.lock.lock().state = s;
    }

    /// Change the state while holding only part of the file. Only for a
    /// change no holder of another range depends on: the rekey watermark,
    /// which moves over exactly the blocks this guard holds (rekeystep.rs).
    pub fn update(&self, f: impl FnOnce(&mut T)) {
        f(&mut self.lock.lock().state);
    }
}

impl<T> Drop for RangeGuard<'_, T> {
    fn drop(&mut self) {
        let mut g = self.lock.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = g.active.iter().position(|(id, _)| *id == self.id) {
            let (_, w) = g.active.swap_remove(i);
            if w.exclusive {
                g.changes += 1;
            }
        }
        let wake = g.waiters > 0;
        drop(g);
        if wake {
            self.lock.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn shared_ranges_overlap_exclusive_waits() {
        let l = Arc::new(RangeLock::new(0u64));
        let (a, _) = l.acquire(|_| Some(Want::shared(0, 10)));
        let (b, _) = l.acquire(|_| Some(Want::shared(5, 15)));
        let (c, _) = l.acquire(|_| Some(Want::exclusive(15, 20))); // disjoint from a, b
        assert!(a.is_some() && b.is_some() && c.is_some());
        drop(c);
        let done = Arc::new(AtomicBool::new(false));
        // Times the waiter looked at the ranges (its `want` runs under the
        // lock, at the first try and after each wake-up).
        let looks = Arc::new(AtomicUsize::new(0));
        let t = {
            let (l, done, looks) = (l.clone(), done.clone(), looks.clone());
            std::thread::spawn(move || {
                let (g, _) = l.acquire(|_| {
                    looks.fetch_add(1, Ordering::SeqCst);
                    Some(Want::whole())
                });
                g.as_ref().unwrap().set_state(42);
                done.store(true, Ordering::SeqCst);
            })
        };
        // Wait until the waiter has looked `n` times and sleeps again, or
        // has its range (a lock that wrongly let it in).
        let waits_after = |n: usize| {
            let t0 = std::time::Instant::now();
            loop {
                if done.load(Ordering::SeqCst) {
                    return;
                }
                {
                    let g = l.lock();
                    if g.waiters == 1 && looks.load(Ordering::SeqCst) >= n {
                        return;
                    }
                }
                assert!(t0.elapsed() < Duration::from_secs(30), "the waiter never waited");
                std::thread::yield_now();
            }
        };
        waits_after(1);
        assert!(!done.load(Ordering::SeqCst), "the whole file while a and b are held");
        drop(a); // wakes the waiter, which finds b and waits again
        waits_after(2);
        assert!(!done.load(Ordering::SeqCst), "the whole file while b is held");
        drop(b);
        t.join().unwrap();
        assert_eq!(l.state(), 42);
        let (none, s) = l.acquire(|_| None);
        assert!(none.is_none());
        assert_eq!(s, 42);
    }

    #[test]
    fn a_release_wakes_the_counted_waiters() {
        let l = Arc::new(RangeLock::new(()));
        let (g, _) = l.acquire(|_| Some(Want::whole()));
        let ts: Vec<_> = (0..2u64)
            .map(|i| {
                let l = l.clone();
                std::thread::spawn(move || drop(l.acquire(|_| Some(Want::shared(i, i + 1)))))
            })
            .collect();
        let t0 = std::time::Instant::now();
        while l.lock().waiters < 2 {
            assert!(t0.elapsed() < Duration::from_secs(10), "the readers never waited");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(g); // must wake both (a release without waiters skips the wake-up)
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(l.lock().waiters, 0);
        drop(l.acquire(|_| Some(Want::whole())));
    }

    #[test]
    fn changes_count_released_exclusive_ranges_only() {
        let l = RangeLock::new(());
        assert_eq!(l.changes(), 0);
        drop(l.acquire(|_| Some(Want::shared(0, 4))));
        assert_eq!(l.changes(), 0, "a read is not a change");
        let (g, _) = l.acquire(|_| Some(Want::exclusive(2, 3)));
        assert_eq!(l.changes(), 0, "counted when released");
        drop(g);
        assert_eq!(l.changes(), 1);
        drop(l.acquire(|_| Some(Want::whole())));
        assert_eq!(l.changes(), 2);
    }

    #[test]
    fn exclusive_is_mutually_exclusive() {
        let l = Arc::new(RangeLock::new(()));
        let inside = Arc::new(AtomicUsize::new(0));
        let ts: Vec<_> = (0..4)
            .map(|i| {
                let (l, inside) = (l.clone(), inside.clone());
                std::thread::spawn(move || {
                    for j in 0..200u64 {
                        let s = (i + j) % 5;
                        let (_g, _) = l.acquire(|_| Some(Want::exclusive(s, s + 3)));
                        // ranges [s,s+3) of different threads may be disjoint;
                        // count only the ones at the same start
                        if s == 0 {
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
    }
}
