//! Thread placement: the nice value and CPU affinity of the calling thread
//! (the keystream workers and the decrypt-ahead threads).

/// Set the calling thread's nice value (Linux: per thread). Refused
/// without privilege to lower it; then the thread keeps the inherited one.
pub(crate) fn set_thread_nice(n: i32) {
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
pub(crate) fn set_thread_cpus(cpus: &[usize]) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET is given
        // numbers below CPU_SETSIZE (parse_cpu_list checks MAX_CPUS); the
        // set outlives the call.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                if c < crate::MAX_CPUS {
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
pub(crate) fn thread_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_getaffinity fills the zeroed set; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..crate::MAX_CPUS).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}
