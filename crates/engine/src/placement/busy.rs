//! The CPUs the process's keystream workers keep busy: each engine marks
//! its workers' CPUs for as long as it lives ([`mark_busy`]), and the FUSE
//! ring's threads stay off them ([`busy_cpus`]) without asking the file
//! system through the layers above.

use std::sync::Mutex;

/// Each live mark: its id and its CPUs.
static MARKS: Mutex<Vec<(u64, Vec<usize>)>> = Mutex::new(Vec::new());
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// CPUs marked busy until this is dropped.
#[derive(Debug)]
pub struct Busy(u64);

/// Mark `cpus` busy until the returned value is dropped.
pub fn mark_busy(cpus: &[usize]) -> Busy {
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    MARKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, cpus.to_vec()));
    Busy(id)
}

impl Drop for Busy {
    fn drop(&mut self) {
        MARKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| *id != self.0);
    }
}

/// Every CPU a live mark names, sorted, once each.
pub fn busy_cpus() -> Vec<usize> {
    let mut all: Vec<usize> = MARKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .flat_map(|(_, c)| c.iter().copied())
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_count_while_they_live() {
        // Other tests' engines may hold marks of their own: compare with
        // what was there before.
        let a = mark_busy(&[1001, 1003]);
        let b = mark_busy(&[1003, 1002]);
        let has = |c: usize| busy_cpus().contains(&c);
        assert!(has(1001) && has(1002) && has(1003));
        drop(a);
        assert!(!has(1001) && has(1003), "1003 is still b's");
        drop(b);
        assert!(!has(1002) && !has(1003));
    }
}
