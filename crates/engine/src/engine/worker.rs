//! The worker threads: take batches off the queue (split requests first),
//! make their masks on the backend, and publish them to their contexts.

use super::context::{publish, CtxState, Mask, SlotDef};
use super::queue::QEntry;
use super::{Engine, Shared};
use crate::backend::MaskJob;
use crate::placement::this_thread;
use crate::stats::Stats;
use crate::MaskCipher;
use crossbeam_epoch as epoch;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Claim a queued context for a worker: only if its definition still stands
/// and nobody has started it.
fn claim(e: &QEntry) -> Option<(SlotDef, Mask)> {
    if !e.live() {
        return None;
    }
    let mut st = e.slot.lock();
    if st.gen != e.gen || st.phase != CtxState::Pending || !st.queued {
        return None;
    }
    st.phase = CtxState::Making;
    st.by_worker = true;
    let buf = st
        .mask
        .take()
        .unwrap_or_else(|| Mask::zeroed(e.slot.len, &e.slot.stats));
    Some((st.def.expect("a pending context is defined"), buf))
}

/// Give back a claimed context whose key was retired: its buffer is
/// dropped and any apply waiting for it finds the key retired.
fn unclaim(e: &QEntry, buf: Mask) {
    let mut st = e.slot.lock();
    if st.gen == e.gen && st.phase == CtxState::Making {
        super::apply::forget_mask(&mut st);
    }
    drop(buf);
    let wake = st.waiters > 0;
    drop(st);
    if wake {
        e.slot.cond.notify_all();
    }
}

/// Publish a worker's mask and wake whoever waits for it.
fn finish(sh: &Shared, e: &QEntry, buf: Mask) {
    let mut st = e.slot.lock();
    publish(sh, &e.slot, &mut st, e.gen, buf, true);
    let wake = st.waiters > 0;
    drop(st);
    if wake {
        e.slot.cond.notify_all();
    }
}

pub(super) fn worker(sh: &Shared) {
    let chunk = sh.backend.chunk().max(1);
    let spin = std::time::Duration::from_micros(u64::from(sh.cfg.spin_us));
    let mut s = sh.sched();
    // The split job this worker leaves alone (pinned to its caller's CPU).
    let mut skip = 0u64;
    let my_cpus = this_thread::cpus();
    loop {
        while !s.shutdown && (s.paused || (s.heap.is_empty() && s.split.front().is_none_or(|j| j.id == skip))) {
            if !spin.is_zero() && !s.paused {
                // Poll the queue a little before sleeping: a wake-up costs
                // the definer a futex call and the worker tens of
                // microseconds across CPUs, while the next batch of a
                // sequential reader or writer often follows at once.
                drop(s);
                let t0 = Instant::now();
                let mut found = false;
                'spin: while t0.elapsed() < spin {
                    for _ in 0..64 {
                        if sh.queued.load(Ordering::Relaxed) > 0 {
                            found = true;
                            break 'spin;
                        }
                        std::hint::spin_loop();
                    }
                }
                s = sh.sched();
                if found || !s.heap.is_empty() || s.shutdown {
                    continue;
                }
            }
            s.sleeping += 1;
            s = sh.work_cv.wait(s).unwrap_or_else(|e| e.into_inner());
            s.sleeping -= 1;
        }
        if s.shutdown {
            return;
        }
        // A split request first: its caller is waiting for it.
        if let Some(job) = s.split.front().cloned().filter(|j| j.id != skip) {
            if job.exhausted() {
                s.split.pop_front();
            } else if job.not_for(&my_cpus) {
                skip = job.id;
            } else {
                s.busy += 1;
                drop(s);
                job.work(&sh.stats.split_parts_workers);
                s = sh.sched();
                s.busy -= 1;
            }
            continue;
        }
        // Share the queue among the workers; one unit serves many contexts.
        let want = s.heap.len().div_ceil(sh.threads).clamp(1, sh.cfg.batch_max);
        let mut batch = Vec::with_capacity(want);
        while batch.len() < want {
            match s.heap.pop() {
                Some(e) if e.live() => batch.push(e),
                Some(_) => {}
                None => break,
            }
        }
        sh.queued.store(s.heap.len(), Ordering::Relaxed);
        s.busy += 1;
        drop(s);

        let mut made = 0usize;
        // Keys are borrowed from the table for the whole unit (see keys.rs).
        let guard = epoch::pin();
        for group in batch.chunks(chunk) {
            if chunk == 1 {
                // The cpu case: no per-mask allocation.
                let e = &group[0];
                let Some((d, mut buf)) = claim(e) else { continue };
                let Ok(cipher) = sh.keys.get(d.key.0, &guard) else {
                    unclaim(e, buf);
                    continue;
                };
                let mut job = MaskJob {
                    cipher,
                    nonce: d.nonce,
                    counter: d.counter,
                    out: &mut buf[..],
                };
                sh.backend.make(std::slice::from_mut(&mut job));
                finish(sh, e, buf);
                made += 1;
                continue;
            }
            let mut claimed: Vec<(&QEntry, SlotDef, Mask, &MaskCipher)> = Vec::with_capacity(group.len());
            for e in group {
                let Some((d, b)) = claim(e) else { continue };
                match sh.keys.get(d.key.0, &guard) {
                    Ok(c) => claimed.push((e, d, b, c)),
                    Err(_) => unclaim(e, b),
                }
            }
            if claimed.is_empty() {
                continue;
            }
            {
                let mut jobs: Vec<MaskJob<'_>> = claimed
                    .iter_mut()
                    .map(|(_, d, b, c)| MaskJob {
                        cipher: c,
                        nonce: d.nonce,
                        counter: d.counter,
                        out: &mut b[..],
                    })
                    .collect();
                sh.backend.make(&mut jobs);
            }
            for (e, _, buf, _) in claimed {
                finish(sh, e, buf);
                made += 1;
            }
        }
        drop(guard);
        if made > 0 {
            Stats::add(&sh.stats.made, made as u64);
            sh.stats.batch(made);
        }
        drop(batch);

        s = sh.sched();
        s.busy -= 1;
        if s.busy == 0 && s.heap.is_empty() && s.quiescing > 0 {
            sh.idle_cv.notify_all();
        }
    }
}

/// XTS requests split across the workers (module `split`); without
/// workers (speculation off) the caller does every part.
impl warpfs_keystream::Splitter for Engine {
    fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        let st = &self.shared.stats;
        if self.shared.threads == 0 || parts < 2 || self.shared.backend.is_device() {
            (0..parts).for_each(f);
            Stats::add(&st.split_parts_caller, parts as u64);
            return;
        }
        Stats::add(&st.split_requests, 1);
        // SAFETY: `wait` below returns only after every claimed part ran.
        let job = Arc::new(unsafe { crate::split::SplitJob::new(parts, f) });
        {
            let mut s = self.shared.sched();
            s.split.push_back(job.clone());
            if s.sleeping > 0 {
                self.shared.work_cv.notify_all();
            }
        }
        job.work(&st.split_parts_caller);
        job.wait();
        let mut s = self.shared.sched();
        if let Some(i) = s.split.iter().position(|j| Arc::ptr_eq(j, &job)) {
            s.split.remove(i);
        }
        // Workers that left this job alone sleep; the next one is theirs.
        if !s.split.is_empty() && s.sleeping > 0 {
            self.shared.work_cv.notify_all();
        }
    }

    fn helpers(&self) -> usize {
        if self.shared.backend.is_device() {
            0
        } else {
            self.shared.threads
        }
    }
}
