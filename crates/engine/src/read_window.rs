//! The read window (EncFS++ §5.2): one per open file. It holds masks for
//! the W blocks from the one being read on, nearest first (priority falls
//! with distance). When a read moves the window, masks of blocks still
//! inside are kept (overlap reuse), the rest are dropped; a jump past the
//! whole window keeps nothing (a reset). W grows while reads are sequential
//! (doubling, up to `window_max`) and shrinks to the request size on a
//! random read, like the kernel's read-ahead.
//!
//! Masks are cached by block number *and nonce*: `open` applies a window
//! mask only when the nonce it was made for equals the nonce the caller
//! read from the nonce table now. A block rewritten since the prefetch has
//! a new nonce and is decrypted inline with that nonce instead.
//!
//! Use per read request: [`plan`](ReadWindow::plan) the request (updates
//! the access pattern, says which blocks the window wants nonces for),
//! [`prefetch`](ReadWindow::prefetch) with those blocks' nonces from the
//! nonce table, then [`open`](ReadWindow::open) each block of the request.

use crate::{Ctx, Defined, Engine, EngineError, KeyId, Priority};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use warpfs_crypto::Nonce;

/// Priority of the block being read now; each block further away gets one less.
pub const PRIORITY_READ_NEAR: Priority = 1 << 24;

struct Entry {
    ctx: Arc<Ctx>,
    ticket: Defined,
}

struct Win {
    /// First block of the window (the block being read).
    pos: u64,
    /// Current window size W in blocks.
    size: u64,
    /// Block after the last planned request, for sequential detection.
    next: Option<u64>,
    entries: HashMap<u64, Entry>,
    free: Vec<Ctx>,
}

/// A sliding window of read masks for one open file.
pub struct ReadWindow {
    engine: Arc<Engine>,
    key: KeyId,
    win: Mutex<Win>,
}

impl std::fmt::Debug for ReadWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = self.lock();
        write!(f, "ReadWindow(pos {}, W {}, {} masks)", w.pos, w.size, w.entries.len())
    }
}

impl ReadWindow {
    /// An empty window for a file encrypted under `key`.
    pub fn new(engine: Arc<Engine>, key: KeyId) -> Result<Self, EngineError> {
        engine.cipher(key)?;
        Ok(Self {
            engine,
            key,
            win: Mutex::new(Win {
                pos: 0,
                size: 0,
                next: None,
                entries: HashMap::new(),
                free: Vec::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Win> {
        self.win.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current window size W in blocks.
    pub fn size(&self) -> u64 {
        self.lock().size
    }

    /// Blocks currently holding a mask.
    pub fn cached_blocks(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.lock().entries.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// A read of blocks `[start, start + count)` is coming: update the
    /// access pattern and return the blocks the window wants nonces for
    /// (the request, plus the look-ahead when speculating).
    ///
    /// Sizing: the first read at block 0 starts at 4x the request (files
    /// are mostly read from the start); a read that begins where the last
    /// one ended doubles W; any other read sets W to the request size.
    pub fn plan(&self, start: u64, count: u64) -> Range<u64> {
        let count = count.max(1);
        let wmax = self.engine.config().window_max as u64;
        let mut w = self.lock();
        let sequential = w.next == Some(start);
        w.size = if !self.engine.speculation() {
            count.min(wmax)
        } else if w.next.is_none() && start == 0 {
            (count * 4).min(wmax)
        } else if sequential {
            (w.size * 2).max(count).min(wmax)
        } else {
            count.min(wmax)
        };
        w.next = Some(start.saturating_add(count));
        let ahead = if self.engine.speculation() {
            w.size.max(count)
        } else {
            count
        };
        start..start.saturating_add(ahead)
    }

    /// Move the window to `blocks[0].0` (the block being read now) and make
    /// sure each listed block within W of it has a mask in the making for
    /// its nonce. Holes (blocks never written) should be left out. Masks of
    /// blocks outside the new window are dropped; those inside with the
    /// same nonce are kept. Without a preceding [`plan`](Self::plan), W is
    /// the number of blocks given (at most `window_max`).
    pub fn prefetch(&self, blocks: &[(u64, Nonce)]) {
        let Some(&(pos, _)) = blocks.first() else { return };
        let wmax = self.engine.config().window_max as u64;
        let mut guard = self.lock();
        let w = &mut *guard;
        if w.size == 0 {
            w.size = (blocks.len() as u64).clamp(1, wmax);
        }
        let end = pos.saturating_add(w.size);
        let inside = |b: u64| b >= pos && b < end;
        // Evict what the new window does not cover.
        let before = w.entries.len();
        let mut evicted = Vec::new();
        w.entries.retain(|b, e| {
            if inside(*b) {
                true
            } else {
                evicted.push(e.ctx.clone());
                false
            }
        });
        let resets = u64::from(before > 0 && w.entries.is_empty());
        for ctx in evicted {
            if let Ok(ctx) = Arc::try_unwrap(ctx) {
                if w.free.len() < wmax as usize {
                    w.free.push(ctx);
                }
            }
        }
        let (mut reused, mut defined) = (0u64, 0u64);
        for &(b, nonce) in blocks {
            if !inside(b) {
                continue;
            }
            if let Some(e) = w.entries.get(&b) {
                if e.ticket.nonce() == &nonce {
                    reused += 1;
                    continue;
                }
            }
            let prio = PRIORITY_READ_NEAR.saturating_sub(i32::try_from(b - pos).unwrap_or(i32::MAX));
            // Reuse this block's own context when nobody else holds it.
            let ctx = match w.entries.remove(&b).map(|e| Arc::try_unwrap(e.ctx)) {
                Some(Ok(ctx)) => ctx,
                _ => w.free.pop().unwrap_or_else(|| self.engine.context()),
            };
            let ticket = if self.engine.speculation() {
                self.engine.define(&ctx, self.key, &nonce, prio)
            } else {
                self.engine.define_on_demand(&ctx, self.key, &nonce)
            }
            .expect("key checked at creation");
            w.entries.insert(
                b,
                Entry {
                    ctx: Arc::new(ctx),
                    ticket,
                },
            );
            defined += 1;
        }
        w.pos = pos;
        drop(guard);
        self.engine.count_window(resets, reused, defined);
    }

    /// Decrypt `buf` (one block of ciphertext) of block `block`, whose
    /// nonce is `nonce`; returns the tag mask E(J0). Uses the window's mask
    /// when it was made for this very nonce, else computes inline.
    pub fn open(&self, block: u64, nonce: &Nonce, buf: &mut [u8]) -> [u8; 16] {
        let hit = {
            let w = self.lock();
            w.entries
                .get(&block)
                .filter(|e| e.ticket.nonce() == nonce)
                .map(|e| (e.ctx.clone(), e.ticket))
        };
        if let Some((ctx, ticket)) = hit {
            // Fails (touching nothing) only if the window moved meanwhile.
            if let Ok(ej0) = self.engine.apply_block(&ctx, &ticket, buf) {
                return ej0;
            }
        }
        self.engine
            .open_direct(self.key, nonce, buf)
            .expect("key checked at creation")
    }

    /// Drop every mask (e.g. after truncate).
    pub fn clear(&self) {
        let mut w = self.lock();
        w.entries.clear();
        w.next = None;
    }
}
