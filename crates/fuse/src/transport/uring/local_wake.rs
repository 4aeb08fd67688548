//! Keeping a woken caller on its CPU. A request is queued on the ring of
//! its caller's CPU, but the answer is committed while the ring thread
//! still runs there, so the scheduler wakes the caller on an idle CPU:
//! its next request then lands on the other queue, and every request pays
//! for waking an idle CPU (in a VM, a halted vCPU). That holds for a
//! caller waiting in the kernel for its answer (a lookup, a stat, a
//! create; the create/stat/unlink storm moved CPUs on every request) and
//! for a reader waiting on a page lock (every READ through the page
//! cache). A thread whose policy is SCHED_IDLE makes its CPU count as idle
//! to the scheduler, so a ring thread that commits such an answer as
//! SCHED_IDLE keeps the waiter here ([`Waiter`]); it takes its own policy
//! back before it waits for the next request, so it never waits for work
//! at idle priority. Where other tasks share the CPU, the waiter preempts
//! the thread before it takes its policy back and the thread then waits
//! behind them at idle weight: [`Governor`] notices the long way back and
//! stops committing at idle priority for a while. And it is done only
//! while another CPU was idle lately (`warpfs_engine::placement::idle`): otherwise the
//! waiter stays anyway. docs/decisions/0071-ring-readers-stay-on-their-cpu.md.

use std::sync::OnceLock;
use std::time::{Duration, Instant};
use warpfs_engine::placement::this_thread::{policy, set_policy as set};

/// A way back from SCHED_IDLE longer than this means the thread waited
/// behind other tasks of its CPU (the reader alone gives it back the CPU
/// when it blocks on its next request, within microseconds).
pub const SLOW_WAY_BACK: Duration = Duration::from_micros(250);
/// How long commits stay at normal priority after a slow way back.
pub const BACK_OFF: Duration = Duration::from_millis(50);

/// Whether a ring thread commits at idle priority now: not for
/// [`BACK_OFF`] after a way back slower than [`SLOW_WAY_BACK`].
#[derive(Debug, Default)]
pub struct Governor {
    paused_until: Option<Instant>,
    /// Slow ways back seen (each one started a back-off).
    pub backoffs: u64,
}

impl Governor {
    /// May the thread commit at idle priority at `now`?
    pub fn allows(&mut self, now: Instant) -> bool {
        match self.paused_until {
            Some(t) if now < t => false,
            _ => {
                self.paused_until = None;
                true
            }
        }
    }

    /// A commit at idle priority took `way_back` until the thread had its
    /// policy back; `now` is when it had.
    pub fn observe(&mut self, way_back: Duration, now: Instant) {
        if way_back > SLOW_WAY_BACK {
            self.paused_until = Some(now + BACK_OFF);
            self.backoffs += 1;
        }
    }
}

/// READ answers up to this many bytes are committed at idle priority: a
/// small random read. Larger ones (read-ahead of a sequential reader) are
/// better served while the reader runs on the other CPU.
pub const MAX_READ: usize = 32 * 1024;

/// Who waits for an answer, which a commit at idle priority keeps on the
/// ring thread's CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiter {
    /// Nobody: read-ahead (a READ answer over [`MAX_READ`]: the reader is
    /// better served while it runs on the other CPU), writeback (WRITE), a
    /// release.
    Nobody,
    /// A reader waiting on a page lock: a READ answer of up to [`MAX_READ`].
    Reader,
    /// A caller waiting in the kernel for the answer: any other request.
    Caller,
}

impl Waiter {
    /// The waiter of the answer to a request of `opcode` whose reply
    /// carries `len` bytes.
    pub fn of(opcode: u32, len: usize) -> Waiter {
        use super::abi::op;
        match opcode {
            op::READ if len <= MAX_READ => Waiter::Reader,
            op::READ | op::WRITE | op::RELEASE | op::RELEASEDIR => Waiter::Nobody,
            _ => Waiter::Caller,
        }
    }
}

/// Whether a thread made now can go to SCHED_IDLE and come back: the
/// daemon's policy is SCHED_OTHER or SCHED_BATCH, and leaving SCHED_IDLE is
/// allowed (root, CAP_SYS_NICE, or an RLIMIT_NICE that allows the thread's
/// nice value). Tried in a thread of its own, which ends stuck in SCHED_IDLE
/// when the way back is refused.
pub fn probe() -> bool {
    std::thread::Builder::new()
        .name("warpfs-ring-probe".into())
        .spawn(|| {
            let back = policy();
            if back != libc::SCHED_OTHER && back != libc::SCHED_BATCH {
                return false;
            }
            set(libc::SCHED_IDLE) && set(back) && policy() == back
        })
        .ok()
        .and_then(|h| h.join().ok())
        .unwrap_or(false)
}

/// [`probe`], once per process.
pub fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(probe)
}

/// The calling thread at idle priority until dropped.
pub struct Idle {
    back: i32,
}

/// The calling thread's policy when it is one [`probe`] vouches for
/// (SCHED_OTHER or SCHED_BATCH): read once when a ring thread starts, so
/// a commit at idle priority costs two policy changes, not a third call.
pub fn home() -> Option<i32> {
    let p = policy();
    (p == libc::SCHED_OTHER || p == libc::SCHED_BATCH).then_some(p)
}

impl Idle {
    /// Lower the calling thread, whose policy is `back` (from [`home`]),
    /// to SCHED_IDLE until dropped.
    pub fn enter_from(back: i32) -> Option<Idle> {
        set(libc::SCHED_IDLE).then_some(Idle { back })
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        if !set(self.back) {
            static SAID: OnceLock<()> = OnceLock::new();
            SAID.get_or_init(|| {
                tracing::error!(
                    "ring queue thread: cannot leave SCHED_IDLE: {}",
                    std::io::Error::last_os_error()
                );
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_by_request() {
        use super::super::abi::op;
        assert_eq!(Waiter::of(op::READ, 4096), Waiter::Reader);
        assert_eq!(Waiter::of(op::READ, MAX_READ), Waiter::Reader);
        assert_eq!(Waiter::of(op::READ, 0), Waiter::Reader, "a read at end of file");
        assert_eq!(Waiter::of(op::READ, MAX_READ + 1), Waiter::Nobody);
        for o in [op::WRITE, op::RELEASE, op::RELEASEDIR] {
            assert_eq!(Waiter::of(o, 0), Waiter::Nobody, "opcode {o}");
        }
        for o in [
            op::LOOKUP,
            op::GETATTR,
            op::SETATTR,
            op::CREATE,
            op::UNLINK,
            op::OPEN,
            op::OPENDIR,
            op::READDIRPLUS,
            op::GETXATTR,
            op::FSYNC,
        ] {
            assert_eq!(Waiter::of(o, 64), Waiter::Caller, "opcode {o}");
        }
    }

    #[test]
    fn a_slow_way_back_pauses_idle_commits_for_a_while() {
        let mut g = Governor::default();
        let t0 = Instant::now();
        assert!(g.allows(t0));
        g.observe(SLOW_WAY_BACK / 2, t0);
        assert!(g.allows(t0), "a fast way back changes nothing");
        g.observe(SLOW_WAY_BACK * 4, t0);
        assert_eq!(g.backoffs, 1);
        assert!(!g.allows(t0));
        assert!(!g.allows(t0 + BACK_OFF / 2));
        assert!(g.allows(t0 + BACK_OFF), "back after the pause");
        assert!(g.allows(t0 + BACK_OFF / 2), "the pause is over once seen over");
    }

    /// `struct __user_cap_header_struct` and `__user_cap_data_struct`.
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const CAP_V3: u32 = 0x2008_0522;
    const CAP_SYS_NICE: u32 = 23;

    /// Drop CAP_SYS_NICE from the calling thread's effective set.
    fn drop_sys_nice() {
        let mut h = CapHeader {
            version: CAP_V3,
            pid: 0,
        };
        let mut d = [CapData::default(); 2];
        // SAFETY: a v3 header and two data structs, as capget(2) wants.
        assert_eq!(unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) }, 0);
        d[0].effective &= !(1 << CAP_SYS_NICE);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::syscall(libc::SYS_capset, &h, d.as_ptr()) }, 0);
    }

    fn nice_limit() -> u64 {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid rlimit to fill.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut r) }, 0);
        r.rlim_cur
    }

    fn nice() -> i32 {
        // SAFETY: no pointer arguments.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn idle_is_left_again_on_drop() {
        std::thread::spawn(|| {
            let before = policy();
            let privileged = probe();
            if !privileged {
                // No way back here: entering would strand this thread,
                // which the probe exists to prevent.
                return;
            }
            let home = home().expect("a policy the probe vouched for");
            assert_eq!(home, before);
            {
                let _g = Idle::enter_from(home).expect("SCHED_IDLE");
                assert_eq!(policy(), libc::SCHED_IDLE);
            }
            assert_eq!(policy(), before, "policy put back");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn probe_says_no_without_a_way_back() {
        std::thread::spawn(|| {
            drop_sys_nice();
            // Leaving SCHED_IDLE needs 20 - nice <= RLIMIT_NICE.
            let allowed = (20 - i64::from(nice())) as u64 <= nice_limit();
            assert_eq!(probe(), allowed, "RLIMIT_NICE {}, nice {}", nice_limit(), nice());
            if !allowed {
                assert_ne!(policy(), libc::SCHED_IDLE, "the probe ran in its own thread");
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn real_time_threads_are_left_alone() {
        std::thread::spawn(|| {
            // SAFETY: plain integers, all zero a valid value (musl's has more fields).
            let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
            param.sched_priority = 1;
            // SAFETY: a valid sched_param.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                return; // not allowed here: nothing to check
            }
            assert!(home().is_none(), "no home policy to come back to");
            assert_eq!(policy(), libc::SCHED_FIFO);
        })
        .join()
        .unwrap();
    }
}
