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

use crate::engine::KeyLease;
use crate::{Ctx, Defined, Engine, EngineError, KeyId, Priority, ReadWindow, PRIORITY_LOWEST, REFILL_BATCH};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use warpfs_crypto::gcm::J0_COUNTER;
use warpfs_crypto::Nonce;
use warpfs_keystream::{BlockReader, Keystream, NonceSource};

/// Where the pool's nonces come from.
pub trait NonceSupply: Send + Sync {
    /// The next nonce, never returned before.
    fn next_nonce(&self) -> Nonce;
}

impl NonceSupply for NonceSource {
    fn next_nonce(&self) -> Nonce {
        self.next()
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
    nonces: Box<dyn NonceSupply>,
    ring: Mutex<Ring>,
    /// With [`owning`](WritePool::owning): retires the key once the pool
    /// and its read windows are gone (after their masks: fields drop in
    /// order).
    lease: Option<Arc<KeyLease>>,
}

impl std::fmt::Debug for WritePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WritePool(key {}, Z={})",
            self.key.index(),
            self.engine.config().pool_size
        )
    }
}

impl WritePool {
    /// A pool for `key` with a fresh nonce epoch.
    pub fn new(engine: Arc<Engine>, key: KeyId) -> Result<Self, EngineError> {
        Self::with_nonces(engine, key, Box::new(NonceSource::new()))
    }

    /// A pool drawing nonces from `nonces`. With speculation on it defines
    /// its Z contexts at once (nearest nonce first in the queue).
    pub fn with_nonces(engine: Arc<Engine>, key: KeyId, nonces: Box<dyn NonceSupply>) -> Result<Self, EngineError> {
        engine.cipher(key)?;
        let z = if engine.speculation() {
            engine.config().pool_size
        } else {
            0
        };
        let mut queue = VecDeque::with_capacity(z);
        let ctxs: Vec<Ctx> = (0..z).map(|_| engine.context()).collect();
        let items: Vec<(&Ctx, KeyId, Nonce, Priority)> = ctxs
            .iter()
            .map(|c| (c, key, nonces.next_nonce(), PRIORITY_LOWEST))
            .collect();
        let tickets = engine.define_batch(&items)?;
        drop(items);
        queue.extend(ctxs.into_iter().zip(tickets));
        Ok(Self {
            engine,
            key,
            nonces,
            ring: Mutex::new(Ring {
                queue,
                free: Vec::new(),
            }),
            lease: None,
        })
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

    /// Take a (context, ticket): the pool's front when its mask is ready,
    /// else the back (the nonce the workers, which go front to back, would
    /// reach last: the caller makes that mask itself while they go on with
    /// the front, instead of racing them for the same one); when the pool
    /// is empty (speculation off), a context defined on demand for the next
    /// nonce.
    fn take(&self) -> (Ctx, Defined) {
        let mut r = self.ring();
        let front_ready = r.queue.front().is_some_and(|(c, t)| self.engine.is_ready(c, t));
        let taken = if front_ready {
            r.queue.pop_front()
        } else {
            r.queue.pop_back()
        };
        if let Some(t) = taken {
            return t;
        }
        let spare = r.free.pop().unwrap_or_else(|| self.engine.context());
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
        let z = self.engine.config().pool_size;
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
        let nonces: Vec<Nonce> = ctxs.iter().map(|_| self.nonces.next_nonce()).collect();
        let items: Vec<(&Ctx, KeyId, Nonce, Priority)> = ctxs
            .iter()
            .zip(&nonces)
            .map(|(c, n)| (c, self.key, *n, PRIORITY_LOWEST))
            .collect();
        let tickets = self
            .engine
            .define_batch(&items)
            .expect("a key is retired only once no pool or window uses it");
        drop(items);
        r.queue.extend(ctxs.into_iter().zip(tickets));
    }
}

impl Keystream for WritePool {
    fn seal(&self, buf: &mut [u8]) -> (Nonce, [u8; 16]) {
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

    fn open(&self, nonce: &Nonce, buf: &mut [u8]) -> [u8; 16] {
        // Reads of open files go through `reader()`'s window; this is for
        // the odd block (read-modify-write): compute on the caller's thread.
        self.engine
            .open_direct(self.key, nonce, buf)
            .expect("a key is retired only once no pool or window uses it")
    }

    fn tag_mask(&self, nonce: &Nonce) -> [u8; 16] {
        let mut m = [0u8; 16];
        self.engine
            .xor_direct(self.key, nonce, J0_COUNTER, 0, &mut m)
            .expect("a key is retired only once no pool or window uses it");
        m
    }

    /// A [`ReadWindow`] on the pool's engine and key, one per open file.
    fn reader(self: Arc<Self>) -> Box<dyn BlockReader> {
        let w = ReadWindow::new(self.engine.clone(), self.key).expect("the pool's key lives while the pool does");
        Box::new(w.holding(self.lease.clone()))
    }
}
