//! Which CPUs were idle lately: a thread reads /proc/stat every [`PERIOD`]
//! and marks each CPU idle for at least [`IDLE_SHARE`] of that time. A
//! reader is moved away from a ring thread's CPU only when another CPU is
//! idle, so keeping it on a ring thread's CPU (`--uring-local-wake`) pays only then; when every
//! other CPU is busy it would have stayed anyway, and committing at idle
//! priority then only adds a preemption. A period without requests puts
//! the sampler to sleep until the next one (an idle mount does not wake
//! the machine ten times a second).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// How often /proc/stat is read.
pub const PERIOD: Duration = Duration::from_millis(100);
/// Idle share of a period from which a CPU counts as idle, in percent.
pub const IDLE_SHARE: u64 = 25;

/// Per CPU: (idle + iowait, total) jiffies from the `cpuN` lines of
/// /proc/stat. Lines it cannot read are left out.
pub fn parse(stat: &str) -> Vec<(usize, u64, u64)> {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let cpu: usize = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.map(|x| x.parse().ok()).collect::<Option<_>>()?;
            if v.len() < 5 {
                return None;
            }
            // user nice system idle iowait irq softirq steal (guest time
            // is already in user and nice).
            let total = v.iter().take(8).try_fold(0u64, |a, &x| a.checked_add(x))?;
            Some((cpu, v[3].checked_add(v[4])?, total))
        })
        .collect()
}

/// The flags the sampler keeps, shared with the queue threads.
#[derive(Debug)]
pub struct Flags {
    idle: Vec<AtomicBool>,
    stop: AtomicBool,
    /// A request was served since the sampler last looked.
    active: AtomicBool,
    /// The sampler sleeps until the next request.
    asleep: AtomicBool,
    sampler: OnceLock<Thread>,
}

impl Flags {
    fn new(cpus: usize) -> Flags {
        Flags {
            idle: (0..cpus).map(|_| AtomicBool::new(true)).collect(),
            stop: AtomicBool::new(false),
            active: AtomicBool::new(false),
            asleep: AtomicBool::new(false),
            sampler: OnceLock::new(),
        }
    }

    /// A queue thread served requests: wake the sampler if it sleeps.
    pub fn touch(&self) {
        if !self.active.load(Ordering::Relaxed) {
            self.active.store(true, Ordering::Relaxed);
        }
        if self.asleep.load(Ordering::Relaxed) && self.asleep.swap(false, Ordering::AcqRel) {
            if let Some(t) = self.sampler.get() {
                t.unpark();
            }
        }
    }

    /// Nothing known: every CPU counts as idle.
    fn forget(&self) {
        for f in &self.idle {
            f.store(true, Ordering::Relaxed);
        }
    }

    /// Whether some CPU other than `me` was idle in the last period (true
    /// before the first one: nothing known yet).
    pub fn another_idle(&self, me: usize) -> bool {
        self.idle
            .iter()
            .enumerate()
            .any(|(i, f)| i != me && f.load(Ordering::Relaxed))
    }

    /// Mark each CPU from two readings `before` and `after` of [`parse`].
    pub fn update(&self, before: &[(usize, u64, u64)], after: &[(usize, u64, u64)]) {
        for &(cpu, idle1, total1) in after {
            let Some(&(_, idle0, total0)) = before.iter().find(|e| e.0 == cpu) else {
                continue;
            };
            let (di, dt) = (idle1.saturating_sub(idle0), total1.saturating_sub(total0));
            if let (Some(f), true) = (self.idle.get(cpu), dt > 0) {
                f.store(di * 100 >= IDLE_SHARE * dt, Ordering::Relaxed);
            }
        }
    }
}

/// The sampler thread and its flags.
pub struct IdleCpus {
    pub flags: Arc<Flags>,
    thread: Option<JoinHandle<()>>,
}

impl IdleCpus {
    /// Start sampling `cpus` CPUs.
    pub fn start(cpus: usize) -> std::io::Result<IdleCpus> {
        let flags = Arc::new(Flags::new(cpus));
        let f = flags.clone();
        let thread = std::thread::Builder::new()
            .name("warpfs-idle-cpus".into())
            .spawn(move || {
                let read = || {
                    warpfs_backing::host::read_to_string("/proc/stat")
                        .map(|s| parse(&s))
                        .unwrap_or_default()
                };
                let mut before = read();
                while !f.stop.load(Ordering::Relaxed) {
                    std::thread::park_timeout(PERIOD);
                    let after = read();
                    f.update(&before, &after);
                    before = after;
                    if f.active.swap(false, Ordering::Relaxed) {
                        continue;
                    }
                    // A period without requests: sleep until the next.
                    f.forget();
                    f.asleep.store(true, Ordering::Release);
                    while f.asleep.load(Ordering::Acquire) && !f.stop.load(Ordering::Relaxed) {
                        std::thread::park();
                    }
                    before = read();
                }
            })?;
        let _ = flags.sampler.set(thread.thread().clone());
        Ok(IdleCpus {
            flags,
            thread: Some(thread),
        })
    }
}

impl Drop for IdleCpus {
    fn drop(&mut self) {
        self.flags.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "cpu  10 0 10 80 0 0 0 0 0 0\n\
                     cpu0 5 0 5 40 0 0 0 0 0 0\n\
                     cpu1 5 0 5 40 0 0 0 0 0 0\n\
                     intr 1 2 3\n";
    // CPU 0 busy for the whole period, CPU 1 idle for half of it.
    const B: &str = "cpu  30 0 10 85 0 0 0 0 0 0\n\
                     cpu0 15 0 5 40 0 0 0 0 0 0\n\
                     cpu1 10 0 5 45 0 0 0 0 0 0\n";

    fn flags(n: usize) -> Flags {
        Flags::new(n)
    }

    #[test]
    fn parses_the_cpu_lines_only() {
        assert_eq!(parse(A), vec![(0, 40, 50), (1, 40, 50)]);
        assert!(parse("cpu0 1 2\ncpuX 1 2 3 4 5\ncpu1 a b c d e\n").is_empty());
        let big = format!("cpu0 {} 1 1 1 1\n", u64::MAX);
        assert!(parse(&big).is_empty(), "an overflowing total is left out");
    }

    #[test]
    fn marks_idle_and_busy_cpus() {
        let f = flags(2);
        assert!(f.another_idle(0) && f.another_idle(1), "nothing known: idle");
        f.update(&parse(A), &parse(B));
        assert!(f.another_idle(0), "CPU 1 idle half the time");
        assert!(!f.another_idle(1), "CPU 0 busy the whole time");
        // No time passed: the flags stay as they were.
        f.update(&parse(B), &parse(B));
        assert!(f.another_idle(0) && !f.another_idle(1));
    }

    #[test]
    fn a_request_wakes_a_sleeping_sampler() {
        let s = IdleCpus::start(2).unwrap();
        let f = s.flags.clone();
        // No requests: the sampler goes to sleep after one period.
        let deadline = std::time::Instant::now() + PERIOD * 100;
        while !f.asleep.load(Ordering::Acquire) {
            assert!(std::time::Instant::now() < deadline, "the sampler never went to sleep");
            std::thread::sleep(PERIOD / 4);
        }
        assert!(f.another_idle(0) && f.another_idle(1), "asleep: nothing known");
        f.touch();
        assert!(!f.asleep.load(Ordering::Acquire), "woken");
        drop(s);
    }

    #[test]
    fn the_sampler_stops_on_drop() {
        let s = IdleCpus::start(2).unwrap();
        let f = s.flags.clone();
        drop(s);
        assert!(f.stop.load(Ordering::Relaxed));
        assert_eq!(Arc::strong_count(&f), 1, "the thread is gone");
    }
}
