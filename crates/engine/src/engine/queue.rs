//! The workers' priority queue: entries ordered by priority, then by
//! definition order, dropped when their context was redefined.

use super::context::{Ctx, CtxState, Defined, Slot};
use super::keys::KeyId;
use super::Engine;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Mask priority: higher is made sooner; equal priorities in definition order.
pub type Priority = i32;
/// The most urgent priority.
pub const PRIORITY_HIGHEST: Priority = Priority::MAX;
/// The least urgent priority (what the write pool uses for refills).
pub const PRIORITY_LOWEST: Priority = Priority::MIN;

pub(super) struct QEntry {
    pub(super) prio: Priority,
    pub(super) seq: u64,
    pub(super) gen: u64,
    pub(super) slot: Arc<Slot>,
}

impl QEntry {
    pub(super) fn live(&self) -> bool {
        self.slot.gen.load(Ordering::Acquire) == self.gen
    }
}

impl PartialEq for QEntry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == CmpOrdering::Equal
    }
}
impl Eq for QEntry {}
impl PartialOrd for QEntry {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for QEntry {
    /// Max-heap order: higher priority first, then the older definition.
    fn cmp(&self, o: &Self) -> CmpOrdering {
        self.prio.cmp(&o.prio).then_with(|| o.seq.cmp(&self.seq))
    }
}

pub(super) struct Sched {
    pub(super) heap: BinaryHeap<QEntry>,
    pub(super) seq: u64,
    pub(super) paused: bool,
    pub(super) shutdown: bool,
    pub(super) busy: usize,
    /// Workers blocked waiting for work (only they need a wake-up call).
    pub(super) sleeping: usize,
    /// Callers blocked in `quiesce`.
    pub(super) quiescing: usize,
    pub(super) compact_at: usize,
    /// Split requests (XTS), taken before masks.
    pub(super) split: VecDeque<Arc<crate::split::SplitJob>>,
}

impl Engine {
    pub(super) fn enqueue(&self, slot: Arc<Slot>, gen: u64, prio: Priority) {
        self.queue_batch(std::iter::once((slot, gen, prio)));
    }

    /// Push entries onto the queue under one lock, then wake a worker if needed.
    pub(super) fn queue_batch(&self, entries: impl IntoIterator<Item = (Arc<Slot>, u64, Priority)>) {
        let mut s = self.shared.sched();
        for (slot, gen, prio) in entries {
            s.seq += 1;
            let seq = s.seq;
            s.heap.push(QEntry { prio, seq, gen, slot });
        }
        if s.heap.len() >= s.compact_at {
            // Redefinitions leave stale entries behind; drop them in bulk.
            let heap = std::mem::take(&mut s.heap);
            s.heap = heap.into_iter().filter(QEntry::live).collect();
            s.compact_at = (s.heap.len() * 2).max(1024);
        }
        // A trickle is left to a worker that is already running (it comes
        // back for more without a wake-up, which costs tens of microseconds
        // across CPUs); sleepers are woken when nobody runs or a backlog of
        // a full batch builds up.
        let wake = s.sleeping > 0 && !s.paused && (s.busy == 0 || s.heap.len() >= self.shared.cfg.batch_max);
        self.shared.queued.store(s.heap.len(), Ordering::Relaxed);
        drop(s);
        if wake {
            self.shared.work_cv.notify_one();
        }
    }

    /// Take the entries of contexts defined with `key` (just retired) off
    /// the queue, so that no worker makes their masks; their buffers are
    /// dropped (see `apply::forget_mask`). Stale entries go too.
    pub(super) fn purge_queued(&self, key: KeyId) {
        let mut s = self.shared.sched();
        let heap = std::mem::take(&mut s.heap);
        s.heap = heap
            .into_iter()
            .filter(|e| {
                if !e.live() {
                    return false;
                }
                let mut st = e.slot.lock();
                if st.gen != e.gen || st.def.is_none_or(|d| d.key != key) {
                    return true;
                }
                if st.phase == CtxState::Pending {
                    super::apply::forget_mask(&mut st);
                }
                false
            })
            .collect();
        self.shared.queued.store(s.heap.len(), Ordering::Relaxed);
    }

    /// Raise (or lower) the priority of a pending definition, e.g. when a
    /// read window moves closer to it. Harmless when the mask is already
    /// being made or ready, or the ticket is stale.
    pub fn reprioritize(&self, ctx: &Ctx, ticket: &Defined, priority: Priority) {
        if !self.speculation() {
            return;
        }
        // A short queue is served within microseconds whatever the
        // priorities; checking the context would only move its cache line.
        if self.shared.queued.load(Ordering::Relaxed) <= self.shared.cfg.batch_max {
            return;
        }
        let pending = {
            let st = ctx.slot.lock();
            st.gen == ticket.gen && st.phase == CtxState::Pending && st.queued
        };
        if pending {
            self.enqueue(ctx.slot.clone(), ticket.gen, priority);
        }
    }
}
