//! The calling thread: its nice value, the CPUs it may run on, the CPU it
//! runs on now, its scheduling policy.

/// Set the calling thread's nice value (Linux: per thread). Refused
/// without privilege to lower it; then the thread keeps the inherited one.
pub fn set_nice(n: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority have no memory-safety preconditions.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, n);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = n;
}

/// Restrict the calling thread to `cpus` (Linux `sched_setaffinity` on the
/// thread id; other systems: unsupported).
pub fn pin(cpus: &[usize]) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET is given
        // numbers below CPU_SETSIZE (parse_cpu_list checks MAX_CPUS); the
        // set outlives the call.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                if c < super::MAX_CPUS {
                    libc::CPU_SET(c, &mut set);
                }
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpus;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "thread CPU affinity is only supported on Linux",
        ))
    }
}

/// The CPUs the calling thread may run on (Linux; empty elsewhere).
pub fn cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_getaffinity fills the zeroed set; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..super::MAX_CPUS).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

/// The CPU the calling thread runs on (`None` where unknown).
pub fn cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    #[cfg(not(target_os = "linux"))]
    let c = -1;
    usize::try_from(c).ok()
}

/// The calling thread's scheduling policy (`SCHED_OTHER`, `SCHED_IDLE`,
/// ...; -1 where unknown).
pub fn policy() -> i32 {
    #[cfg(target_os = "linux")]
    // SAFETY: no pointer arguments.
    return unsafe { libc::sched_getscheduler(0) };
    #[cfg(not(target_os = "linux"))]
    -1
}

/// Put the calling thread in scheduling `policy` at priority 0 (as
/// `SCHED_OTHER`, `SCHED_BATCH` and `SCHED_IDLE` take); `false` when
/// refused.
pub fn set_policy(policy: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_param is plain integers (musl's has more fields than
        // glibc's), all zero a valid value: priority 0.
        let param: libc::sched_param = unsafe { std::mem::zeroed() };
        // SAFETY: `param` is a valid sched_param for the call.
        unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = policy;
        false
    }
}
