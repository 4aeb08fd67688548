//! Contexts and their slots: a [`Ctx`] holds one mask, its [`Defined`]
//! tickets say which definition the mask is for, and [`CtxInfo`] shows
//! where it stands.

use super::keys::KeyId;
use super::{Engine, Padded, Shared};
use crate::stats::Stats;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use warpfs_crypto::{MaskLayout, Nonce};

/// The ticket of one definition of a context: which key, nonce and initial
/// counter its mask is for. [`Engine::apply`] XORs only while the context
/// still holds this very definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defined {
    pub(super) gen: u64,
    pub(super) key: KeyId,
    pub(super) nonce: Nonce,
    pub(super) counter: u32,
    pub(super) layout: MaskLayout,
}

impl Defined {
    /// The key.
    pub fn key(&self) -> KeyId {
        self.key
    }
    /// The nonce the mask is for.
    pub fn nonce(&self) -> &Nonce {
        &self.nonce
    }
    /// The block counter at mask offset 0.
    pub fn counter(&self) -> u32 {
        self.counter
    }
    /// The engine-wide unique generation of this definition.
    pub fn generation(&self) -> u64 {
        self.gen
    }
    /// Where the key's cipher puts a block's tag mask and data in a mask.
    pub fn layout(&self) -> MaskLayout {
        self.layout
    }
}

/// Where a context's mask stands (see [`Engine::ctx_info`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtxState {
    /// Never defined (or dropped).
    Undefined,
    /// Defined, nobody has started the mask.
    Pending,
    /// A worker or a caller is making the mask now.
    Making,
    /// The mask is ready.
    Ready,
}

/// A snapshot of one context, for tests and debugging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtxInfo {
    /// The current definition, if any.
    pub defined: Option<Defined>,
    /// Where the mask stands.
    pub state: CtxState,
    /// The ready mask was made by a worker (not inline by a caller).
    pub made_by_worker: bool,
    /// Engine-wide completion order of the ready mask (1 = first).
    pub made_seq: u64,
    /// The current mask has been applied at least once.
    pub applied: bool,
    /// Mask length in bytes.
    pub mask_len: usize,
}

/// A context: one mask slot. Dropping it discards its mask (counted as
/// wasted when it was made but never applied).
pub struct Ctx {
    pub(super) slot: Arc<Slot>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ctx#{}", self.slot.id)
    }
}

impl Ctx {
    /// A shared handle on this context's slot: lets a holder apply the mask
    /// without owning the context (the owner may redefine it meanwhile; the
    /// ticket check then refuses the apply).
    pub(crate) fn share(&self) -> SlotRef {
        SlotRef(self.slot.clone())
    }
}

/// See [`Ctx::share`].
pub(crate) struct SlotRef(pub(super) Arc<Slot>);

impl Drop for Ctx {
    fn drop(&mut self) {
        let mut st = self.slot.lock();
        if st.phase == CtxState::Ready && !st.applied {
            Stats::add(&self.slot.stats.wasted, 1);
        }
        st.gen = 0;
        self.slot.gen.store(0, Ordering::Release);
        st.def = None;
        st.phase = CtxState::Undefined;
        st.mask = None;
        let wake = st.waiters > 0;
        drop(st);
        if wake {
            self.slot.cond.notify_all();
        }
    }
}

/// A definition: plain data (the key is looked up in the engine's key
/// table under an epoch pin), so copying it out of the slot touches no
/// reference count shared between CPUs.
#[derive(Clone, Copy)]
pub(super) struct SlotDef {
    pub(super) key: KeyId,
    pub(super) nonce: Nonce,
    pub(super) counter: u32,
    pub(super) layout: MaskLayout,
}

/// A context's mask buffer: on locked pages, zeroed when dropped, and
/// counted in the stats' `masks_held` while it exists.
pub(super) struct Mask {
    buf: warpfs_crypto::LockedBytes,
    stats: Arc<Stats>,
}

impl Mask {
    pub(super) fn zeroed(len: usize, stats: &Arc<Stats>) -> Self {
        Stats::add(&stats.masks_held, 1);
        Self {
            buf: warpfs_crypto::LockedBytes::zeroed(len),
            stats: stats.clone(),
        }
    }
}

impl std::ops::Deref for Mask {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl std::ops::DerefMut for Mask {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for Mask {
    fn drop(&mut self) {
        self.stats.masks_held.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(super) struct SlotState {
    pub(super) gen: u64,
    pub(super) def: Option<SlotDef>,
    pub(super) phase: CtxState,
    pub(super) applied: bool,
    pub(super) by_worker: bool,
    pub(super) made_seq: u64,
    /// The made mask, on locked pages zeroed when dropped (a mask for a
    /// future nonce decides the plaintext a write will get).
    pub(super) mask: Option<Mask>,
    /// Applies blocked on this context (only they need a wake-up call).
    pub(super) waiters: usize,
    /// The definition went to the workers' queue. One that did not (defined
    /// on demand, or with speculation off) is never stored: an apply XORs
    /// its keystream straight into the caller's buffer, in one pass.
    pub(super) queued: bool,
}

pub(super) struct Slot {
    pub(super) id: u64,
    pub(super) len: usize,
    /// Mirror of `state.gen` so the queue can drop stale entries without locking.
    pub(super) gen: AtomicU64,
    /// The generation whose mask is ready (0: none), so an apply can spin
    /// briefly for a mask being made instead of sleeping. On its own cache
    /// line: a reader spinning on it must not take the line holding the
    /// lock and state from the worker that is finishing the mask.
    pub(super) ready: Padded<AtomicU64>,
    pub(super) state: Mutex<SlotState>,
    pub(super) cond: Condvar,
    pub(super) stats: Arc<Stats>,
}

impl Slot {
    pub(super) fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Engine {
    /// A new context with the configured mask length.
    pub fn context(&self) -> Ctx {
        self.context_with_len(self.shared.cfg.mask_len)
    }

    /// A new context for the masks of one content block of a key with
    /// `layout` (the configured mask length holds E(J0) and one block; a
    /// layout whose data starts later gets the bytes it needs more).
    pub fn block_context(&self, layout: MaskLayout) -> Ctx {
        let data = self.shared.cfg.mask_len.saturating_sub(MaskLayout::BLOCK.data_at);
        self.context_with_len(layout.len_for(data))
    }

    /// A new context whose mask is `len` bytes (at least 1).
    pub fn context_with_len(&self, len: usize) -> Ctx {
        Ctx {
            slot: Arc::new(Slot {
                id: self.shared.next_slot.fetch_add(1, Ordering::Relaxed),
                len: len.max(1),
                gen: AtomicU64::new(0),
                ready: Padded(AtomicU64::new(0)),
                state: Mutex::new(SlotState {
                    gen: 0,
                    def: None,
                    phase: CtxState::Undefined,
                    applied: false,
                    by_worker: false,
                    made_seq: 0,
                    mask: None,
                    waiters: 0,
                    queued: false,
                }),
                cond: Condvar::new(),
                stats: self.shared.stats.clone(),
            }),
        }
    }

    /// The current definition of `ctx`.
    pub fn defined(&self, ctx: &Ctx) -> Option<Defined> {
        let st = ctx.slot.lock();
        st.def.as_ref().map(|d| Defined {
            gen: st.gen,
            key: d.key,
            nonce: d.nonce,
            counter: d.counter,
            layout: d.layout,
        })
    }

    /// Whether `ctx`'s mask for `ticket` is ready (one atomic load, no lock).
    pub fn is_ready(&self, ctx: &Ctx, ticket: &Defined) -> bool {
        ctx.slot.ready.load(Ordering::Acquire) == ticket.gen
    }

    /// Where `ctx` stands.
    pub fn ctx_info(&self, ctx: &Ctx) -> CtxInfo {
        let st = ctx.slot.lock();
        CtxInfo {
            defined: st.def.as_ref().map(|d| Defined {
                gen: st.gen,
                key: d.key,
                nonce: d.nonce,
                counter: d.counter,
                layout: d.layout,
            }),
            state: st.phase,
            made_by_worker: st.by_worker,
            made_seq: st.made_seq,
            applied: st.applied,
            mask_len: ctx.slot.len,
        }
    }
}

/// Store a finished mask if its definition still stands; the caller
/// notifies the context's waiters.
pub(super) fn publish(sh: &Shared, slot: &Slot, st: &mut SlotState, gen: u64, buf: Mask, by_worker: bool) {
    if st.gen == gen {
        st.mask = Some(buf);
        st.phase = CtxState::Ready;
        st.by_worker = by_worker;
        st.made_seq = sh.next_made.fetch_add(1, Ordering::Relaxed);
        slot.ready.store(gen, Ordering::Release);
    } else {
        // Redefined (or dropped) while being made: the work is lost.
        Stats::add(&slot.stats.wasted, 1);
        if by_worker {
            Stats::add(&slot.stats.stale, 1);
        }
        if st.mask.is_none() && st.phase != CtxState::Undefined {
            st.mask = Some(buf);
        }
    }
}
