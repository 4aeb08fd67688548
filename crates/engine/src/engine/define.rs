//! Defining contexts: give a context a (key, nonce, counter), a fresh
//! generation, and queue its mask (one at a time or in batches).

use super::context::{Ctx, CtxState, Defined, SlotDef};
use super::keys::KeyId;
use super::queue::Priority;
use super::Engine;
use crate::stats::Stats;
use crate::EngineError;
use std::sync::atomic::Ordering;
use warpfs_crypto::Nonce;

impl Engine {
    /// Define `ctx` for (`key`, `nonce`) with the warpfs layout of the
    /// key's cipher (`MaskCipher::layout`: for AES and Twofish the mask from
    /// counter 1, E(J0) then the data keystream; for XChaCha20 from block 0,
    /// the Poly1305 key then the data at byte 64) and queue its mask at
    /// `priority`. Returns at once. A previous definition is dropped (its
    /// tickets stop working).
    pub fn define(&self, ctx: &Ctx, key: KeyId, nonce: &Nonce, priority: Priority) -> Result<Defined, EngineError> {
        self.define_with(ctx, key, nonce, None, Some(priority))
    }

    /// Define `ctx` without queueing it: the first `apply` makes the mask on
    /// its own thread. What every define does with speculation off.
    pub fn define_on_demand(&self, ctx: &Ctx, key: KeyId, nonce: &Nonce) -> Result<Defined, EngineError> {
        self.define_with(ctx, key, nonce, None, None)
    }

    /// The general define: mask offset 0 is counter block `counter`;
    /// `priority` `None` means on demand (not queued).
    pub fn define_at(
        &self,
        ctx: &Ctx,
        key: KeyId,
        nonce: &Nonce,
        counter: u32,
        priority: Option<Priority>,
    ) -> Result<Defined, EngineError> {
        self.define_with(ctx, key, nonce, Some(counter), priority)
    }

    /// Define at `counter`, or (`None`) at the start of the key's layout.
    fn define_with(
        &self,
        ctx: &Ctx,
        key: KeyId,
        nonce: &Nonce,
        counter: Option<u32>,
        priority: Option<Priority>,
    ) -> Result<Defined, EngineError> {
        let queue = priority.is_some() && self.speculation();
        let t = self.define_inner(ctx, key, nonce, counter, queue)?;
        if let (Some(prio), true) = (priority, queue) {
            self.enqueue(ctx.slot.clone(), t.gen, prio);
        }
        Ok(t)
    }

    /// Record a definition at `counter` (`None`: where the key's layout
    /// starts); `queued`: the caller puts it on the queue.
    fn define_inner(
        &self,
        ctx: &Ctx,
        key: KeyId,
        nonce: &Nonce,
        counter: Option<u32>,
        queued: bool,
    ) -> Result<Defined, EngineError> {
        let layout = {
            let guard = crossbeam_epoch::pin();
            self.key_ref(key, &guard)?.layout()
        };
        let counter = counter.unwrap_or(layout.first);
        let slot = &ctx.slot;
        let gen = self.shared.next_gen.fetch_add(1, Ordering::Relaxed);
        let mut st = slot.lock();
        if st.phase == CtxState::Ready && !st.applied {
            Stats::add(&self.shared.stats.wasted, 1);
        }
        let wake = st.phase == CtxState::Making && st.waiters > 0;
        st.gen = gen;
        slot.gen.store(gen, Ordering::Release);
        st.def = Some(SlotDef {
            key,
            nonce: *nonce,
            counter,
            layout,
        });
        st.phase = CtxState::Pending;
        st.applied = false;
        st.by_worker = false;
        st.made_seq = 0;
        st.queued = queued;
        drop(st);
        if wake {
            // Waiters holding the old ticket must wake up and give up.
            slot.cond.notify_all();
        }
        Stats::add(&self.shared.stats.defines, 1);
        Ok(Defined {
            gen,
            key,
            nonce: *nonce,
            counter,
            layout,
        })
    }

    /// Define many contexts at once (the key's warpfs layout, like
    /// [`define`](Self::define)) and queue them under one lock of the queue:
    /// what the write pool's refills and the read window's look-ahead use.
    /// Equal priorities are served in the order given. Fails before
    /// defining anything when a key is unknown.
    pub fn define_batch(&self, items: &[(&Ctx, KeyId, Nonce, Priority)]) -> Result<Vec<Defined>, EngineError> {
        for &(_, key, _, _) in items {
            self.shared.keys.check(key.0)?;
        }
        let spec = self.speculation();
        let mut tickets = Vec::with_capacity(items.len());
        let mut queue = Vec::with_capacity(if spec { items.len() } else { 0 });
        for &(ctx, key, nonce, prio) in items {
            let t = self.define_inner(ctx, key, &nonce, None, spec)?;
            if spec {
                queue.push((ctx.slot.clone(), t.gen, prio));
            }
            tickets.push(t);
        }
        if spec {
            self.queue_batch(queue);
        }
        Ok(tickets)
    }
}
