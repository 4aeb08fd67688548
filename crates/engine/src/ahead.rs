//! Decrypt-ahead: speculation one step past the mask. A read window makes
//! the masks of the blocks a sequential reader will want next; the
//! decrypt-ahead threads go on and apply them, so the next request's
//! plaintext is ready before the request arrives and the reading thread only
//! hands it on (docs/decisions/0042-decrypt-ahead.md). What to read ahead,
//! and whether a result may still be used, is decided per open handle
//! ([`crate::AheadStream`], kept by the handle); this module runs the jobs
//! on the engine's CPUs (`EngineConfig::cpus`) at nice [`AHEAD_NICE`](crate::AHEAD_NICE).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// One decrypt-ahead job.
pub type AheadJob = Box<dyn FnOnce() + Send + 'static>;

/// Most jobs queued at once: past this a submit is refused (the reader then
/// reads inline), so a stalled pool cannot grow without bound.
const MAX_QUEUED: usize = 256;

struct Queue {
    jobs: VecDeque<AheadJob>,
    shutdown: bool,
    /// Threads waiting for a job: a submit wakes one only when there are
    /// some (a notify is a futex system call even when nobody waits; busy
    /// threads come back for the next job by themselves).
    idle: usize,
}

struct Inner {
    q: Mutex<Queue>,
    cv: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The threads that run decrypt-ahead jobs, oldest job first.
pub(crate) struct AheadPool {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl AheadPool {
    /// `n` threads, each placed on `cpus` (empty: inherit) at nice `nice`.
    pub(crate) fn new(n: usize, cpus: &[usize], nice: Option<i32>) -> std::io::Result<Self> {
        let inner = Arc::new(Inner {
            q: Mutex::new(Queue {
                jobs: VecDeque::new(),
                shutdown: false,
                idle: 0,
            }),
            cv: Condvar::new(),
        });
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (job_inner, cpus) = (inner.clone(), cpus.to_vec());
            let h = std::thread::Builder::new()
                .name(format!("warpfs-ahead-{i}"))
                .spawn(move || {
                    if let Some(v) = nice {
                        crate::placement::this_thread::set_nice(v);
                    }
                    if !cpus.is_empty() {
                        if let Err(e) = crate::placement::this_thread::pin(&cpus) {
                            tracing::warn!("decrypt-ahead thread {i}: cannot run on the engine's CPUs ({e})");
                        }
                    }
                    run(&job_inner)
                });
            match h {
                Ok(h) => threads.push(h),
                Err(e) => {
                    let pool = Self { inner, threads };
                    drop(pool);
                    return Err(e);
                }
            }
        }
        Ok(Self { inner, threads })
    }

    /// Queue `job`; `false` (job dropped unrun) when the queue is full or
    /// the pool is stopping.
    pub(crate) fn submit(&self, job: AheadJob) -> bool {
        let mut q = self.inner.lock();
        if q.shutdown || q.jobs.len() >= MAX_QUEUED {
            return false;
        }
        q.jobs.push_back(job);
        let wake = q.idle > 0;
        drop(q);
        if wake {
            self.inner.cv.notify_one();
        }
        true
    }

    /// Number of threads.
    pub(crate) fn threads(&self) -> usize {
        self.threads.len()
    }
}

fn run(inner: &Inner) {
    loop {
        let job = {
            let mut q = inner.lock();
            loop {
                if let Some(j) = q.jobs.pop_front() {
                    break j;
                }
                if q.shutdown {
                    return;
                }
                q.idle += 1;
                q = inner.cv.wait(q).unwrap_or_else(|e| e.into_inner());
                q.idle -= 1;
            }
        };
        // A panicking job must not take the thread (and every later job)
        // with it; the submitter sees its result never arrive and reads
        // inline.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
            tracing::error!("a decrypt-ahead job panicked; the read it was for is served inline");
        }
    }
}

impl AheadPool {
    /// Stop taking jobs and drop the queued ones unrun (their owners treat
    /// a job that never ran like one that was not started); jobs running
    /// now finish. The threads exit once idle.
    pub(crate) fn stop(&self) {
        {
            let mut q = self.inner.lock();
            q.shutdown = true;
            q.jobs.clear();
        }
        self.inner.cv.notify_all();
    }
}

impl Drop for AheadPool {
    fn drop(&mut self) {
        self.stop();
        let me = std::thread::current().id();
        for h in self.threads.drain(..) {
            // A job may hold the last handle on the engine (through the
            // file it reads): the pool is then dropped on its own thread,
            // which must not wait for itself. It exits once the job returns.
            if h.thread().id() == me {
                continue;
            }
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    #[test]
    fn runs_every_job_and_survives_a_panic() {
        let pool = AheadPool::new(2, &[], None).unwrap();
        assert_eq!(pool.threads(), 2);
        let done = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        assert!(pool.submit(Box::new(|| panic!("job panics on purpose"))));
        for i in 0..50 {
            let (done, tx) = (done.clone(), tx.clone());
            assert!(pool.submit(Box::new(move || {
                done.fetch_add(1, Ordering::SeqCst);
                tx.send(i).unwrap();
            })));
        }
        let mut got: Vec<i32> = (0..50).map(|_| rx.recv().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
        assert_eq!(done.load(Ordering::SeqCst), 50);
    }

    #[test]
    fn a_full_queue_refuses_and_drop_discards_queued_jobs() {
        let pool = AheadPool::new(1, &[], None).unwrap();
        // Block the only thread until released.
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        assert!(pool.submit(Box::new(move || {
            started_tx.send(()).unwrap();
            let _ = go_rx.recv();
        })));
        started_rx.recv().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let mut accepted = 0;
        for _ in 0..MAX_QUEUED + 10 {
            let ran = ran.clone();
            if pool.submit(Box::new(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })) {
                accepted += 1;
            }
        }
        assert_eq!(accepted, MAX_QUEUED);
        // Stop while the queue is full, then release the running job.
        pool.stop();
        assert!(!pool.submit(Box::new(|| {})), "a stopped pool takes no job");
        go_tx.send(()).unwrap();
        drop(pool);
        assert_eq!(ran.load(Ordering::SeqCst), 0, "queued jobs are dropped at shutdown");
    }

    #[test]
    fn idle_threads_are_counted_and_woken_for_new_jobs() {
        let pool = AheadPool::new(2, &[], None).unwrap();
        let idle = || pool.inner.lock().idle;
        // Both threads go to sleep, counted.
        while idle() < 2 {
            std::thread::yield_now();
        }
        // Every round of jobs submitted to sleeping threads runs (a submit
        // that did not wake a counted sleeper would hang here), and the
        // threads are counted again once back asleep.
        for round in 0..20 {
            let (tx, rx) = mpsc::channel();
            for i in 0..3 {
                let tx = tx.clone();
                assert!(pool.submit(Box::new(move || tx.send(i).unwrap())));
            }
            let mut got: Vec<i32> = (0..3)
                .map(|_| {
                    rx.recv_timeout(std::time::Duration::from_secs(20))
                        .expect("a job did not run: its submit woke no sleeping thread")
                })
                .collect();
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2], "round {round}");
            while idle() < 2 {
                std::thread::yield_now();
            }
        }
        assert!(pool.inner.lock().jobs.is_empty());
    }
}
