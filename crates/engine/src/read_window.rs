//! The read window (EncFS++ §5.2): one per open file. It holds masks for
//! the blocks of the requests being read and, while reads are sequential,
//! the W blocks after each (the look-ahead), nearest first (priority falls
//! with distance from the request's first block). When a read moves the
//! window, masks of blocks still inside are kept (overlap reuse, raised to
//! their new priority), the rest are dropped; a jump past the whole window
//! keeps nothing (a reset). W grows while reads are sequential (doubling,
//! up to `window_max`) and shrinks to the request size on a random read,
//! which gets no look-ahead, like the kernel's read-ahead. A random read of
//! fewer than [`SMALL_RANDOM_READ`] blocks does not touch the window at all:
//! its masks are made on the reading thread (a queue hand-off to a worker
//! costs more than the ~0.4 us a 4 KiB mask takes with AES-NI).
//!
//! Several requests of one file can be in flight at once (the kernel sends
//! read-ahead requests in parallel and they reach the FUSE threads in any
//! order), so the window is the union of the planned windows of the
//! requests in flight (from [`plan`](ReadWindow::plan) to
//! [`finish`](ReadWindow::finish)) and of the look-ahead of the last few
//! requests near them: a request never evicts the masks of another that is
//! still being served, nor the look-ahead another just made, and a request
//! that begins where any recent one ended counts as sequential. A mask is released once applied
//! (the kernel's page cache serves re-reads), so an idle window holds at
//! most the unread look-ahead plus `window_max` spare contexts.
//!
//! Masks are cached by block number *and nonce*: `open` applies a window
//! mask only when the nonce it was made for equals the nonce the caller
//! read from the nonce table now. A block rewritten since the prefetch has
//! a new nonce and is decrypted inline with that nonce instead.
//!
//! Use per read request: [`plan`](ReadWindow::plan) the request (updates
//! the access pattern, says which blocks the window wants nonces for),
//! [`prefetch`](ReadWindow::prefetch) with those blocks' nonces from the
//! nonce table, [`open`](ReadWindow::open) each block of the request, then
//! [`finish`](ReadWindow::finish). The same calls make it a
//! [`warpfs_keystream::BlockReader`], which is how the content layer drives
//! it (`WritePool::reader` hands one out per open file).

use crate::engine::KeyLease;
use crate::{Ctx, Defined, Engine, EngineError, KeyId, Priority, SMALL_RANDOM_READ};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use warpfs_crypto::{MaskLayout, Nonce, TagMask};
use warpfs_keystream::BlockReader;

/// Priority of the block being read now; each block further away gets one less.
pub const PRIORITY_READ_NEAR: Priority = 1 << 24;

/// Requests remembered as in flight at most (a caller that never calls
/// `finish` only makes the window wider, never unbounded).
const MAX_IN_FLIGHT: usize = 32;
/// Ends of recent requests remembered for sequential detection.
const RECENT_ENDS: usize = 8;

struct Entry {
    ctx: Ctx,
    ticket: Defined,
}

/// Spare contexts a window keeps, per `window_max`: a window holds up to
/// about two requests in flight plus their look-ahead, so a smaller cap
/// dropped contexts (and their 4 KiB mask buffers) only to allocate them
/// again a request later.
const SPARE_PER_WMAX: usize = 4;

/// Hasher for block numbers (the window's map keys): one multiply instead
/// of SipHash on each of the four map operations a block costs. Block
/// numbers are offsets in the reader's own file: a reader choosing colliding
/// offsets only slows its own reads.
#[derive(Default, Clone, Copy)]
struct BlockHasher(u64);

impl Hasher for BlockHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the high bits, which hashbrown uses, mix all of n.
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The window's masks by block number.
type BlockMap<V> = HashMap<u64, V, BuildHasherDefault<BlockHasher>>;

/// One planned request: its blocks and its planned window.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Planned {
    request: (u64, u64),
    window: (u64, u64),
    /// A small random read: its masks are made on the reading thread and
    /// the window is left as it is.
    direct: bool,
}

struct Win {
    /// First block of the last prefetch (the block being read).
    pos: u64,
    /// Current look-ahead size W in blocks.
    size: u64,
    /// Requests between `plan` and `finish`.
    in_flight: VecDeque<Planned>,
    /// Recent requests' ends and look-ahead ends: a read starting at one of
    /// the ends is sequential, and masks in a recent look-ahead are kept.
    ends: VecDeque<(u64, u64)>,
    entries: BlockMap<Entry>,
    free: Vec<Ctx>,
    /// Lowest start and highest end of the last prefetch's spans.
    last_span: (u64, u64),
}

/// A sliding window of read masks for one open file.
pub struct ReadWindow {
    engine: Arc<Engine>,
    key: KeyId,
    /// The key's mask layout (its contexts' length follows from it).
    layout: MaskLayout,
    win: Mutex<Win>,
    /// The owning write pool's key lease (dropped after the masks).
    lease: Option<Arc<KeyLease>>,
}

impl std::fmt::Debug for ReadWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = self.lock();
        write!(
            f,
            "ReadWindow(pos {}, W {}, {} in flight, {} masks)",
            w.pos,
            w.size,
            w.in_flight.len(),
            w.entries.len()
        )
    }
}

impl ReadWindow {
    /// An empty window for a file encrypted under `key`.
    pub fn new(engine: Arc<Engine>, key: KeyId) -> Result<Self, EngineError> {
        let layout = engine.cipher(key)?.layout();
        Ok(Self {
            engine,
            key,
            layout,
            win: Mutex::new(Win {
                pos: 0,
                size: 0,
                in_flight: VecDeque::new(),
                ends: VecDeque::new(),
                entries: BlockMap::default(),
                free: Vec::new(),
                last_span: (0, 0),
            }),
            lease: None,
        })
    }

    /// This window, keeping `lease` (its key) alive while it exists.
    pub(crate) fn holding(mut self, lease: Option<Arc<KeyLease>>) -> Self {
        self.lease = lease;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Win> {
        self.win.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current look-ahead size W in blocks.
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
    /// access pattern, record the request as in flight (until
    /// [`finish`](Self::finish)) and return the blocks the window wants
    /// nonces for: the request, plus W blocks of look-ahead when speculating
    /// and the read is sequential.
    ///
    /// Sizing: the first read at block 0 starts with W = 4x the request
    /// (files are mostly read from the start); a read that begins where a
    /// recent one ended doubles W; any other read sets W to the request size
    /// and looks no further than the request. W never exceeds `window_max`.
    pub fn plan(&self, start: u64, count: u64) -> Range<u64> {
        let count = count.max(1);
        let wmax = self.engine.config().window_max as u64;
        let spec = self.engine.speculation();
        let mut w = self.lock();
        let sequential = w.ends.iter().any(|&(e, _)| e == start);
        let first = w.ends.is_empty() && start == 0;
        w.size = if !spec {
            count.min(wmax)
        } else if first {
            (count * 4).min(wmax)
        } else if sequential {
            (w.size * 2).max(count).min(wmax)
        } else {
            count.min(wmax)
        };
        let end = start.saturating_add(count);
        let direct = !first && !sequential && count < SMALL_RANDOM_READ;
        let ahead = if spec && (first || sequential) { w.size } else { 0 };
        let wend = end.saturating_add(ahead);
        if w.ends.len() == RECENT_ENDS {
            w.ends.pop_front();
        }
        w.ends.push_back((end, wend));
        if w.in_flight.len() == MAX_IN_FLIGHT {
            w.in_flight.pop_front();
        }
        w.in_flight.push_back(Planned {
            request: (start, count),
            window: (start, wend),
            direct,
        });
        start..wend
    }

    /// The request `[start, start + count)` that was planned is done (or
    /// failed): its window no longer holds masks in place.
    pub fn finish(&self, start: u64, count: u64) {
        let count = count.max(1);
        let mut w = self.lock();
        if let Some(i) = w.in_flight.iter().position(|p| p.request == (start, count)) {
            w.in_flight.remove(i);
        }
    }

    /// Move the window to `blocks[0].0` (the block being read now) and make
    /// sure each listed block inside the window has a mask in the making for
    /// its nonce. The window is the union of the planned windows of the
    /// requests in flight and of the look-ahead of recent requests near them
    /// (within twice a window's length), or,
    /// without a preceding [`plan`](Self::plan), the blocks given (at most
    /// `window_max` from the first). Holes (blocks
    /// never written) should be left out. Masks of blocks outside the window
    /// are dropped; those inside with the same nonce are kept (and re-queued
    /// at their new priority if nobody has started them).
    pub fn prefetch(&self, blocks: &[(u64, Nonce)]) {
        let Some(&(pos, _)) = blocks.first() else { return };
        let wmax = self.engine.config().window_max as u64;
        let mut guard = self.lock();
        let w = &mut *guard;
        if w.in_flight.iter().any(|p| p.direct && p.request.0 == pos) {
            // A small random read: `open` computes its masks on this thread
            // (queueing them would only add a hand-off), and the window
            // keeps what it holds for the sequential reader, if any.
            return;
        }
        let spans: Vec<(u64, u64)> = if w.in_flight.is_empty() {
            if w.size == 0 {
                w.size = (blocks.len() as u64).clamp(1, wmax);
            }
            vec![(pos, pos.saturating_add(w.size))]
        } else {
            // Recent look-ahead counts when near the requests in flight
            // (read-ahead requests arriving out of order), not after a jump.
            let reach = w
                .in_flight
                .iter()
                .map(|p| 2 * (p.window.1 - p.window.0))
                .max()
                .unwrap_or(0);
            let near = |&(e, we): &(u64, u64)| {
                w.in_flight
                    .iter()
                    .any(|p| e <= p.window.1.saturating_add(reach) && we.saturating_add(reach) >= p.window.0)
            };
            let recent = w.ends.iter().copied().filter(|x| x.0 < x.1 && near(x));
            w.in_flight.iter().map(|p| p.window).chain(recent).collect()
        };
        let inside = |b: u64| spans.iter().any(|&(s, e)| b >= s && b < e);
        let spare_max = SPARE_PER_WMAX * wmax as usize;
        // Evict what the window does not cover. Blocks are released as they
        // are read, so while the window slides (its spans overlap the last
        // ones) and holds no more than they cover, nothing can be outside:
        // the walk over every entry is left for jumps (before the new masks
        // are defined, so they reuse the evicted contexts) and leftovers
        // (after, when the map holds more than the spans cover).
        let lo = spans.iter().map(|s| s.0).min().unwrap_or(pos);
        let hi = spans.iter().map(|s| s.1).max().unwrap_or(pos);
        let slid = lo <= w.last_span.1 && w.last_span.0 <= hi;
        w.last_span = (lo, hi);
        let covered: u64 = spans.iter().map(|&(s, e)| e.saturating_sub(s)).sum();
        let evict = |w: &mut Win| {
            let out: Vec<u64> = w.entries.keys().copied().filter(|&b| !inside(b)).collect();
            for b in out {
                if let Some(e) = w.entries.remove(&b) {
                    if w.free.len() < spare_max {
                        w.free.push(e.ctx);
                    }
                }
            }
        };
        let before = w.entries.len();
        if !slid {
            evict(w);
        }
        let resets = u64::from(before > 0 && w.entries.is_empty());
        let (mut reused, mut defined) = (0u64, 0u64);
        let mut fresh: Vec<(u64, Ctx, Nonce, Priority)> = Vec::new();
        for &(b, nonce) in blocks {
            if !inside(b) || b < pos {
                continue;
            }
            let prio = PRIORITY_READ_NEAR.saturating_sub(i32::try_from(b - pos).unwrap_or(i32::MAX));
            if let Some(e) = w.entries.get(&b) {
                if e.ticket.nonce() == &nonce {
                    reused += 1;
                    // Made ahead at a lower priority: it is nearer now.
                    self.engine.reprioritize(&e.ctx, &e.ticket, prio);
                    continue;
                }
            }
            // Reuse this block's own context (a reader still applying its old
            // definition through a shared handle is refused by the ticket).
            let ctx = match w.entries.remove(&b) {
                Some(e) => e.ctx,
                None => w.free.pop().unwrap_or_else(|| self.engine.block_context(self.layout)),
            };
            fresh.push((b, ctx, nonce, prio));
        }
        // All new look-ahead masks go to the queue under one lock.
        let tickets = if self.engine.speculation() {
            let items: Vec<(&Ctx, KeyId, Nonce, Priority)> =
                fresh.iter().map(|(_, c, n, p)| (c, self.key, *n, *p)).collect();
            self.engine.define_batch(&items)
        } else {
            fresh
                .iter()
                .map(|(_, c, n, _)| self.engine.define_on_demand(c, self.key, n))
                .collect()
        }
        .expect("a key is retired only once no pool or window uses it");
        for ((b, ctx, _, _), ticket) in fresh.into_iter().zip(tickets) {
            w.entries.insert(b, Entry { ctx, ticket });
            defined += 1;
        }
        if w.entries.len() as u64 > covered {
            evict(w);
        }
        w.pos = pos;
        drop(guard);
        self.engine.count_window(resets, reused, defined);
    }

    /// Decrypt `buf` (one block of ciphertext) of block `block`, whose
    /// nonce is `nonce`; returns the tag mask. Uses the window's mask
    /// when it was made for this very nonce (and then releases it), else
    /// computes inline.
    pub fn open(&self, block: u64, nonce: &Nonce, buf: &mut [u8]) -> TagMask {
        let hit = {
            let w = self.lock();
            w.entries
                .get(&block)
                .filter(|e| e.ticket.nonce() == nonce)
                .map(|e| (e.ctx.share(), e.ticket))
        };
        if let Some((slot, ticket)) = hit {
            // Fails (touching nothing) only if the window moved meanwhile.
            if let Ok(ej0) = self.engine.apply_block_shared(&slot, &ticket, buf) {
                drop(slot);
                self.release(block, &ticket);
                return ej0;
            }
        }
        self.engine
            .open_direct(self.key, nonce, buf)
            .expect("a key is retired only once no pool or window uses it")
    }

    /// Forget the applied mask of `block` (if the window still holds that
    /// definition) and keep its context as a spare.
    fn release(&self, block: u64, ticket: &Defined) {
        let spare_max = SPARE_PER_WMAX * self.engine.config().window_max;
        let mut w = self.lock();
        if w.entries
            .get(&block)
            .is_some_and(|e| e.ticket.generation() == ticket.generation())
        {
            if let Some(e) = w.entries.remove(&block) {
                if w.free.len() < spare_max {
                    w.free.push(e.ctx);
                }
            }
        }
    }

    /// Drop every mask and forget the access pattern (e.g. after truncate).
    /// Requests in flight stay recorded until they finish.
    pub fn clear(&self) {
        let mut w = self.lock();
        w.entries.clear();
        w.ends.clear();
    }
}

impl BlockReader for ReadWindow {
    fn plan(&self, start: u64, count: u64) -> Range<u64> {
        ReadWindow::plan(self, start, count)
    }

    fn prefetch(&self, blocks: &[(u64, Nonce)]) {
        ReadWindow::prefetch(self, blocks);
    }

    fn open(&self, block: u64, nonce: &Nonce, buf: &mut [u8]) -> TagMask {
        ReadWindow::open(self, block, nonce, buf)
    }

    fn finish(&self, start: u64, count: u64) {
        ReadWindow::finish(self, start, count);
    }

    fn clear(&self) {
        ReadWindow::clear(self);
    }
}
