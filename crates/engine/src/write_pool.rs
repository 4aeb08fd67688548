//! The write pool (EncFS++ §5.1): one per mounted volume. Z contexts hold
//! masks for the next Z nonces of the epoch; `seal` calls from any thread
//! and any file consume them (a ready mask from the front, else the back,
//! which the workers reach last), and consumed contexts are
//! defined again for the next nonces (y + Z, ...) at the lowest priority, so
//! the pool stays nearly full of masks in the making or ready. They are
//! redefined [`REFILL_BATCH`] at a time (one lock of the engine's queue per
//! batch; half of Z for pools under 64), so the pool holds between Z - 32
//! and Z masks.
//!
//! Every nonce is drawn from the [`NonceSupply`] exactly once, under the
//! pool's lock, and handed to exactly one `seal`: no nonce is ever used
//! twice. Nonces whose masks were made but never consumed (the pool is
//! dropped at unmount) are simply never used.
//!
//! A pooled mask is used only while its nonce's epoch is live
//! ([`NonceSupply::live_epoch`], which checks the clocks). The pool holds
//! its nonces in the order they were drawn, so the masks of retired epochs
//! are always a prefix of it: each `seal` compares the front's epoch with
//! the live one, and when they differ every context of that prefix is
//! redefined at once for the next nonces (the workers start on the new
//! epoch's masks immediately). A process restored from a snapshot of its
//! memory therefore never uses a mask made before the snapshot once its
//! clocks have ended that epoch (docs/decisions/0073-epoch-bound-masks.md).
//! Z is at most half an epoch's nonces, so one redefinition never needs
//! more than the next epoch holds.

use crate::engine::KeyLease;
use crate::{Ctx, Defined, Engine, EngineError, KeyId, Priority, ReadWindow, PRIORITY_LOWEST, REFILL_BATCH};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use warpfs_crypto::{MaskLayout, Nonce, TagMask};
use warpfs_keystream::{epoch_of, BlockReader, Keystream, NonceSource};

/// Redefinitions of retired masks one `seal` tries before it makes its
/// mask for a nonce drawn on the spot (epochs ending faster than the pool
/// can be redefined: never with Z at most half an epoch).
const RENEWALS: usize = 3;

/// Where the pool's nonces come from.
pub trait NonceSupply: Send + Sync {
    /// The next nonce, never returned before.
    fn next_nonce(&self) -> Nonce;

    /// The next `out.len()` nonces, in order (a supply that reads clocks
    /// reads them once for all).
    fn next_nonces(&self, out: &mut [Nonce]) {
        for n in out {
            *n = self.next_nonce();
        }
    }

    /// The epoch (a nonce's first 8 bytes, [`epoch_of`]) whose nonces may
    /// still be used: a supply whose epochs end by time checks its clocks
    /// here and ends a due epoch before it answers. The pool drops a mask
    /// made for a nonce of any other epoch. Called once per `seal`: it
    /// must be cheap.
    fn live_epoch(&self) -> u64;

    /// Nonces in one epoch at most; the pool keeps at most half of them
    /// ahead.
    fn epoch_size(&self) -> u32 {
        u32::MAX
    }
}

impl NonceSupply for NonceSource {
    fn next_nonce(&self) -> Nonce {
        self.next()
    }
    fn next_nonces(&self, out: &mut [Nonce]) {
        self.next_many(out)
    }
    fn live_epoch(&self) -> u64 {
        NonceSource::live_epoch(self)
    }
    fn epoch_size(&self) -> u32 {
        self.policy().max_nonces
    }
}

impl<T: NonceSupply + ?Sized> NonceSupply for Arc<T> {
    fn next_nonce(&self) -> Nonce {
        (**self).next_nonce()
    }
    fn next_nonces(&self, out: &mut [Nonce]) {
        (**self).next_nonces(out)
    }
    fn live_epoch(&self) -> u64 {
        (**self).live_epoch()
    }
    fn epoch_size(&self) -> u32 {
        (**self).epoch_size()
    }
}

struct Ring {
    /// Defined contexts in nonce order: the workers make the front first.
    queue: VecDeque<(Ctx, Defined)>,
    /// Consumed contexts waiting to be redefined.
    free: Vec<Ctx>,
}

/// Masks ready ahead for the next Z writes; a [`Keystream`] that can replace
/// `warpfs_keystream::Direct`.
pub struct WritePool {
    engine: Arc<Engine>,
    key: KeyId,
    /// The key's mask layout (its contexts' length follows from it).
    layout: MaskLayout,
    nonces: Box<dyn NonceSupply>,
    /// Contexts kept ahead: the engine's Z (0 without speculation), at
    /// most half an epoch.
    z: usize,
    ring: Mutex<Ring>,
    /// With [`owning`](WritePool::owning): retires the key once the pool
    /// and its read windows are gone (after their masks: fields drop in
    /// order).
    lease: Option<Arc<KeyLease>>,
}

impl std::fmt::Debug for WritePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WritePool(key {}, Z={})", self.key.index(), self.z)
    }
}

impl WritePool {
    /// A pool for `key` with a fresh nonce epoch.
    pub fn new(engine: Arc<Engine>, key: KeyId) -> Result<Self, EngineError> {
        Self::with_nonces(engine, key, Box::new(NonceSource::new()))
    }

    /// A pool drawing nonces from `nonces`. With speculation on it defines
    /// its Z contexts at once (nearest nonce first in the queue); Z is cut
    /// to half of [`NonceSupply::epoch_size`].
    pub fn with_nonces(engine: Arc<Engine>, key: KeyId, nonces: Box<dyn NonceSupply>) -> Result<Self, EngineError> {
        let layout = engine.cipher(key)?.layout();
        let z = if engine.speculation() {
            let half = usize::try_from(nonces.epoch_size() / 2).unwrap_or(usize::MAX);
            engine.config().pool_size.min(half).max(1)
        } else {
            0
        };
        let pool = Self {
            engine,
            key,
            layout,
            nonces,
            z,
            ring: Mutex::new(Ring {
                queue: VecDeque::with_capacity(z),
                free: Vec::new(),
            }),
            lease: None,
        };
        let ctxs: Vec<Ctx> = (0..z).map(|_| pool.engine.block_context(layout)).collect();
        pool.define_next(&mut pool.ring(), ctxs)?;
        Ok(pool)
    }

    /// A pool that owns `key` (fresh nonce epoch): the key is retired
    /// ([`Engine::retire_key`]) when the pool and every read window it
    /// handed out have been dropped, with the masks they held. What a
    /// volume does for each key generation, so that an old generation's key
    /// leaves memory once no open file uses it.
    pub fn owning(engine: Arc<Engine>, key: KeyId) -> Result<Self, EngineError> {
        let lease = Arc::new(KeyLease::new(engine.clone(), key));
        let mut pool = Self::new(engine, key)?;
        pool.lease = Some(lease);
        Ok(pool)
    }

    /// The engine behind the pool.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Define `ctxs` for the next nonces, in order, at the lowest priority
    /// (one lock of the engine's queue), and queue them at the back.
    fn define_next(&self, r: &mut Ring, ctxs: Vec<Ctx>) -> Result<(), EngineError> {
        if ctxs.is_empty() {
            return Ok(());
        }
        let mut nonces = vec![[0u8; 12]; ctxs.len()];
        self.nonces.next_nonces(&mut nonces);
        let items: Vec<(&Ctx, KeyId, Nonce, Priority)> = ctxs
            .iter()
            .zip(&nonces)
            .map(|(c, n)| (c, self.key, *n, PRIORITY_LOWEST))
            .collect();
        let tickets = self.engine.define_batch(&items)?;
        drop(items);
        r.queue.extend(ctxs.into_iter().zip(tickets));
        Ok(())
    }

    /// Redefine the contexts whose nonces belong to a retired epoch (a
    /// prefix of the queue, which is in drawing order) for the next
    /// nonces, all at once. Returns the live epoch. One comparison when
    /// the front is live.
    fn renew_retired(&self, r: &mut Ring) -> u64 {
        let mut live = self.nonces.live_epoch();
        for _ in 0..RENEWALS {
            let stale = r.queue.iter().take_while(|(_, t)| epoch_of(t.nonce()) != live).count();
            if stale == 0 {
                break;
            }
            let ctxs: Vec<Ctx> = r.queue.drain(..stale).map(|(c, _)| c).collect();
            self.define_next(r, ctxs)
                .expect("a key is retired only once no pool or window uses it");
            // Drawing may have ended the epoch by count.
            live = self.nonces.live_epoch();
        }
        live
    }

    /// Take a (context, ticket): the pool's front when its mask is ready,
    /// else the back (the nonce the workers, which go front to back, would
    /// reach last: the caller makes that mask itself while they go on with
    /// the front, instead of racing them for the same one); when the pool
    /// is empty (speculation off), a context defined on demand for the next
    /// nonce. Never a context whose nonce's epoch has been retired.
    fn take(&self) -> (Ctx, Defined) {
        let mut r = self.ring();
        if !r.queue.is_empty() {
            let live = self.renew_retired(&mut r);
            let front_ready = r.queue.front().is_some_and(|(c, t)| self.engine.is_ready(c, t));
            let taken = if front_ready {
                r.queue.pop_front()
            } else {
                r.queue.pop_back()
            };
            if let Some((c, t)) = taken {
                if epoch_of(t.nonce()) == live {
                    return (c, t);
                }
                // Still of a retired epoch after RENEWALS: never used.
                r.free.push(c);
            }
        }
        let spare = r.free.pop().unwrap_or_else(|| self.engine.block_context(self.layout));
        let nonce = self.nonces.next_nonce();
        let t = self
            .engine
            .define_on_demand(&spare, self.key, &nonce)
            .expect("a key is retired only once no pool or window uses it");
        (spare, t)
    }

    /// Give a consumed context back. With speculation on, once
    /// [`REFILL_BATCH`] of them have gathered (or the pool ran dry) they are
    /// redefined together for the next nonces at the lowest priority, with
    /// one lock of the engine's queue.
    fn give_back(&self, ctx: Ctx) {
        let z = self.z;
        let mut r = self.ring();
        if !self.engine.speculation() {
            if r.free.len() < REFILL_BATCH {
                r.free.push(ctx);
            }
            return;
        }
        let want = z.saturating_sub(r.queue.len());
        if r.free.len() >= want {
            return; // the pool is full (extra contexts come from on-demand takes)
        }
        r.free.push(ctx);
        // A small pool refills in halves so that it never runs dry waiting
        // for a batch to gather.
        let batch = REFILL_BATCH.min(z.div_ceil(2)).max(1);
        if r.free.len() < batch && !r.queue.is_empty() {
            return;
        }
        let n = r.free.len().min(want);
        let ctxs: Vec<Ctx> = r.free.drain(..n).collect();
        self.define_next(&mut r, ctxs)
            .expect("a key is retired only once no pool or window uses it");
    }

    /// A second pool on the same engine and key holding the nonces this
    /// one holds now, in the same order, drawing further nonces from
    /// `nonces`: what a snapshot of the process's memory, restored or
    /// cloned beside the running one, holds (its masks are made again;
    /// they are the same bytes).
    #[cfg(test)]
    pub(crate) fn replica(&self, nonces: Box<dyn NonceSupply>) -> Self {
        let held: Vec<Nonce> = self.ring().queue.iter().map(|(_, t)| *t.nonce()).collect();
        let ctxs: Vec<Ctx> = held.iter().map(|_| self.engine.block_context(self.layout)).collect();
        let items: Vec<(&Ctx, KeyId, Nonce, Priority)> = ctxs
            .iter()
            .zip(&held)
            .map(|(c, n)| (c, self.key, *n, PRIORITY_LOWEST))
            .collect();
        let tickets = self.engine.define_batch(&items).expect("the key is live");
        drop(items);
        Self {
            engine: self.engine.clone(),
            key: self.key,
            layout: self.layout,
            nonces,
            z: self.z,
            ring: Mutex::new(Ring {
                queue: ctxs.into_iter().zip(tickets).collect(),
                free: Vec::new(),
            }),
            lease: None,
        }
    }
}

impl Keystream for WritePool {
    fn seal(&self, buf: &mut [u8]) -> (Nonce, TagMask) {
        let (ctx, t) = self.take();
        // The pool owns `ctx` exclusively, so the ticket cannot go stale; the
        // fallback only keeps this total.
        let ej0 = match self.engine.apply_block(&ctx, &t, buf) {
            Ok(e) => e,
            Err(_) => self
                .engine
                .open_direct(self.key, t.nonce(), buf)
                .expect("a key is retired only once no pool or window uses it"),
        };
        self.give_back(ctx);
        (*t.nonce(), ej0)
    }

    fn open(&self, nonce: &Nonce, buf: &mut [u8]) -> TagMask {
        // Reads of open files go through `reader()`'s window; this is for
        // the odd block (read-modify-write): compute on the caller's thread.
        self.engine
            .open_direct(self.key, nonce, buf)
            .expect("a key is retired only once no pool or window uses it")
    }

    fn tag_mask(&self, nonce: &Nonce) -> TagMask {
        self.engine
            .tag_mask_direct(self.key, nonce)
            .expect("a key is retired only once no pool or window uses it")
    }

    /// A [`ReadWindow`] on the pool's engine and key, one per open file.
    fn reader(self: Arc<Self>) -> Box<dyn BlockReader> {
        let w = ReadWindow::new(self.engine.clone(), self.key).expect("the pool's key lives while the pool does");
        Box::new(w.holding(self.lease.clone()))
    }
}

#[cfg(test)]
mod epochs;
