//! A CPU set as `sched_setaffinity` takes it, for threads that move
//! between sets often (the FUSE ring's queue threads, home and roaming):
//! built once, applied with one call.

/// A set of CPUs (Linux `cpu_set_t`).
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

/// CPUs a `cpu_set_t` holds.
const BITS: usize = 8 * std::mem::size_of::<libc::cpu_set_t>();

impl CpuSet {
    /// The CPUs the calling thread may run on now.
    pub fn of_this_thread() -> Option<CpuSet> {
        // SAFETY: a zeroed cpu_set_t is valid; the call fills it.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut s) == 0).then_some(CpuSet(s))
        }
    }

    /// The CPUs of `cpus` a set can hold (others are left out).
    pub fn of(cpus: &[usize]) -> CpuSet {
        // SAFETY: a zeroed cpu_set_t is valid; CPU_SET on indices checked
        // against its size.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus.iter().filter(|&&c| c < BITS) {
                libc::CPU_SET(c, &mut s);
            }
            CpuSet(s)
        }
    }

    /// CPU `cpu` alone; `None` past what a set holds.
    pub fn one(cpu: usize) -> Option<CpuSet> {
        (cpu < BITS).then(|| CpuSet::of(&[cpu]))
    }

    pub fn contains(&self, cpu: usize) -> bool {
        // SAFETY: CPU_ISSET on an index checked against the set's size.
        cpu < BITS && unsafe { libc::CPU_ISSET(cpu, &self.0) }
    }

    /// This set less `cpus`.
    pub fn without(mut self, cpus: &[usize]) -> CpuSet {
        for &c in cpus {
            if self.contains(c) {
                // SAFETY: `contains` checked the index against the set's size.
                unsafe { libc::CPU_CLR(c, &mut self.0) };
            }
        }
        self
    }

    /// The set's CPUs, in order.
    pub fn cpus(&self) -> Vec<usize> {
        (0..BITS).filter(|&c| self.contains(c)).collect()
    }

    /// Restrict the calling thread to this set; `false` when refused.
    pub fn pin_this_thread(&self) -> bool {
        // SAFETY: a valid cpu_set_t of the size passed.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) == 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_hold_what_they_are_given() {
        let s = CpuSet::of(&[0, 2, 3, BITS, 1 << 20]);
        assert_eq!(s.cpus(), [0, 2, 3], "CPUs past the set are left out");
        assert_eq!(s.without(&[2, 7]).cpus(), [0, 3]);
        assert!(CpuSet::one(BITS).is_none());
        assert_eq!(CpuSet::one(5).unwrap().cpus(), [5]);
        let me = CpuSet::of_this_thread().unwrap();
        assert!(!me.cpus().is_empty());
    }
}
