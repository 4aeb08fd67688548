//! Decrypt-ahead per open handle ([`AheadStream`]): while a handle is read
//! sequentially, the next `depth` requests (same stride, same size) are read
//! and decrypted on the engine's decrypt-ahead threads, which run on the
//! engine's CPUs, in chunks of [`CHUNK`] bytes. What is read is any
//! [`AheadSource`] (a cipher file; a reverse view's file, encrypted ahead);
//! the stream lives with the handle that owns it. A read that finds its
//! request planned takes back the chunks no thread has started and reads
//! them itself, waits only for the chunks being read, and hands the whole
//! buffer on (to the kernel, for a mount): the engine's `apply` rule (wait
//! for a mask being made, make one nobody has started) one step further, so
//! neither CPU idles while the other works.
//!
//! A result is used only if the file did not change since its chunks were
//! read ([`AheadSource::changes`]; for a cipher file every write, truncation,
//! punch or rekey step of any handle of the inode counts), so a read never
//! returns bytes older than a write that finished before it. Anything else
//! (a chunk failed, the file changed) and the request is read again inline,
//! which reports errors.

use crate::{Engine, AHEAD_STEAL_AFTER};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

mod buf;
use buf::Buf;

/// Content block size (for counting blocks in the engine stats).
const BLOCK: u64 = 4096;

/// Bytes one decrypt-ahead step reads: small enough that a read waits for
/// little, large enough that one lock round per chunk costs nothing.
pub const CHUNK: usize = 128 << 10;

/// Environment variable overriding [`AHEAD_STEAL_AFTER`], in microseconds
/// (tests set 0: every chunk still running is taken over at once).
pub const ENV_STEAL_US: &str = "WARPFS_AHEAD_STEAL_US";

/// [`AHEAD_STEAL_AFTER`], or [`ENV_STEAL_US`] when set to a number (read
/// once per process).
fn steal_after() -> Duration {
    static AFTER: OnceLock<Duration> = OnceLock::new();
    *AFTER.get_or_init(|| {
        std::env::var(ENV_STEAL_US)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .map_or(AHEAD_STEAL_AFTER, Duration::from_micros)
    })
}

/// A file decrypt-ahead reads: its bytes, its size and a count of its
/// changes. Safe to call from many threads at once.
pub trait AheadSource: Send + Sync + 'static {
    /// Why a read failed.
    type Error;

    /// Read up to `buf.len()` bytes at `off` for a decrypt-ahead chunk
    /// (short only at end of file): quietly (a failed chunk is read again
    /// inline, which reports the error) and without the look-ahead a
    /// sequential reader's own reads would get.
    fn read_ahead_at(&self, off: u64, buf: &mut [u8]) -> Result<usize, Self::Error>;

    /// Read up to `buf.len()` bytes at `off` for the reader itself (a
    /// request read inline once its decrypt-ahead result could not be
    /// used): errors reported, no look-ahead (the next requests are being
    /// decrypted ahead).
    fn read_direct_at(&self, off: u64, buf: &mut [u8]) -> Result<usize, Self::Error>;

    /// Changes to the file finished so far: equal values before a read and
    /// later mean the read's bytes are still the file's.
    fn changes(&self) -> u64;

    /// The file's size (no request is planned past it).
    fn size(&self) -> u64;
}

/// Buffers a stream keeps for reuse beyond its depth (a fresh buffer is
/// zeroed: 1 MiB of memset on the FUSE thread, or a fresh mmap, page
/// faults included).
const SPARE_BUFFERS: usize = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Nobody has started it.
    Queued,
    /// A decrypt-ahead thread is reading it.
    Running,
    /// Taken back by the read it is for.
    Taken,
    /// Read by a decrypt-ahead thread: `n` bytes as of `changes`; `ok`
    /// false when the read failed.
    Done { n: usize, changes: u64, ok: bool },
}

struct Slot {
    id: u64,
    off: u64,
    len: usize,
    buf: Arc<Buf>,
    chunks: Vec<Chunk>,
    /// The read it is for has taken it (it reads the unstarted chunks from
    /// the back, the job goes on from the front).
    claimed: bool,
}

impl Slot {
    fn done_blocks(&self) -> u64 {
        self.chunks
            .iter()
            .map(|c| match c {
                Chunk::Done { n, ok: true, .. } => blocks(*n),
                _ => 0,
            })
            .sum()
    }
}

#[derive(Default)]
struct State {
    /// Furthest end of the requests of a sequential run.
    next: Option<u64>,
    slots: VecDeque<Slot>,
    free: Vec<Arc<Buf>>,
    seq: u64,
    /// Reads waiting on the condvar for a chunk: a thread that ends a chunk
    /// wakes them only when there are some (a notify is a futex system
    /// call even when nobody waits).
    waiters: usize,
}

impl State {
    fn slot(&mut self, id: u64) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.id == id)
    }

    /// A buffer of at least `len` bytes: the smallest free one that fits
    /// (request sizes vary: the kernel's read-ahead grows from 128 KiB to
    /// 1 MiB every time a reader starts over), else a new one.
    fn buffer(&mut self, len: usize) -> Arc<Buf> {
        let fit = (0..self.free.len())
            .filter(|&i| self.free[i].cap >= len)
            .min_by_key(|&i| self.free[i].cap);
        match fit {
            Some(i) => self.free.swap_remove(i),
            None => Arc::new(Buf::new(len)),
        }
    }

    /// Keep `b` for reuse if the free list has room for `keep` buffers, or
    /// if it is larger than the smallest one kept (which it replaces).
    fn give_back(&mut self, b: Arc<Buf>, keep: usize) {
        if self.free.len() < keep {
            self.free.push(b);
        } else if let Some(i) = (0..self.free.len()).min_by_key(|&i| self.free[i].cap) {
            if self.free[i].cap < b.cap {
                self.free[i] = b;
            }
        }
    }
}

/// One open handle's decrypt-ahead state.
#[derive(Default)]
struct Stream {
    st: Mutex<State>,
    cv: Condvar,
}

impl Stream {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Blocks of `n` bytes.
fn blocks(n: usize) -> u64 {
    (n as u64).div_ceil(BLOCK)
}

/// What [`AheadStream::read`] found for a request.
pub enum Found<E> {
    /// The request's plaintext: reply with `buf[..n]`
    /// ([`Ready::bytes`]), then give it back with [`AheadStream::recycle`].
    Ready(Ready),
    /// Nothing planned: read inline; `direct` when the handle reads
    /// sequentially (its next requests are being decrypted ahead, so the
    /// read window should not make masks for them).
    Inline { direct: bool },
    /// The request failed (the inline re-read reported it).
    Failed(E),
}

/// A request's plaintext, read (mostly) ahead.
pub struct Ready {
    buf: Arc<Buf>,
    n: usize,
}

impl Ready {
    /// The bytes to reply with.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: a `Ready` exists only once every chunk is done and its
        // slot is gone: nobody writes the buffer any more.
        unsafe { self.buf.head(self.n) }
    }
}

/// Decrypt-ahead of one open handle: kept with the handle, dropped with
/// it (running jobs finish and find their slot gone; what they read ahead
/// for nobody is counted wasted).
pub struct AheadStream {
    engine: Arc<Engine>,
    depth: usize,
    /// How long a read waits for a running chunk before taking it over.
    steal_after: Duration,
    stream: Arc<Stream>,
}

impl AheadStream {
    /// Decrypt-ahead through `engine` for one handle, when the engine has
    /// decrypt-ahead threads.
    pub fn new(engine: &Arc<Engine>) -> Option<Self> {
        let depth = engine.read_ahead();
        (depth > 0).then(|| Self {
            engine: engine.clone(),
            depth,
            steal_after: steal_after(),
            stream: Arc::default(),
        })
    }

    /// A read of `size` bytes at `off` of file `f` (the handle's file,
    /// always the same one): its plaintext when the request was planned
    /// (chunks nobody started are read here), and the requests after it
    /// queued when the handle reads sequentially.
    pub fn read<F: AheadSource>(&self, f: &Arc<F>, off: u64, size: usize) -> Found<F::Error> {
        let stream = &self.stream;
        let mut st = stream.lock();
        let mut wasted = 0;
        let planned = st.slots.iter().position(|s| s.off == off && s.len == size);
        let sequential = planned.is_some() || self.near(st.next, off, size);
        let claim = planned.map(|i| {
            let s = &mut st.slots[i];
            s.claimed = true;
            (s.id, s.buf.clone())
        });
        wasted += self.plan_next(&mut st, stream, f, off, size, sequential);
        drop(st);
        let found = match claim {
            None => Found::Inline { direct: sequential },
            Some((id, buf)) => self.finish(stream, &**f, id, buf, off, size),
        };
        self.engine.count_ahead(0, wasted, None);
        found
    }

    /// Whether a request at `off` of `size` bytes continues the sequential
    /// run ending at `next`: the kernel's read-ahead sends several requests
    /// at once and FUSE threads take them in any order, so "near the end"
    /// counts.
    fn near(&self, next: Option<u64>, off: u64, size: usize) -> bool {
        let reach = (self.depth as u64 + 1).saturating_mul(size as u64);
        match next {
            None => off == 0,
            Some(n) => off <= n.saturating_add(reach) && off.saturating_add(size as u64).saturating_add(reach) >= n,
        }
    }

    /// Update the run, drop slots the reader left behind, queue the
    /// requests after this one; returns the blocks wasted.
    fn plan_next<F: AheadSource>(
        &self,
        st: &mut State,
        stream: &Arc<Stream>,
        f: &Arc<F>,
        off: u64,
        size: usize,
        sequential: bool,
    ) -> u64 {
        let end = off.saturating_add(size as u64);
        let reach = (self.depth as u64 + 1).saturating_mul(size as u64);
        // Requests before the furthest end seen were sent already.
        let seen = st.next.filter(|_| sequential).unwrap_or(0);
        st.next = Some(seen.max(end));
        let keep_from = if sequential {
            off.saturating_sub(reach)
        } else {
            u64::MAX
        };
        let mut wasted = 0;
        let mut kept = VecDeque::with_capacity(st.slots.len());
        for s in std::mem::take(&mut st.slots) {
            if s.off >= keep_from || s.claimed {
                kept.push_back(s);
            } else {
                wasted += s.done_blocks();
                // A chunk may still be running: the buffer comes back to
                // the free list only when no job holds it.
                if Arc::strong_count(&s.buf) == 1 {
                    st.give_back(s.buf, self.depth + SPARE_BUFFERS);
                }
            }
        }
        st.slots = kept;
        if !sequential || size == 0 {
            return wasted;
        }
        let file_size = f.size();
        for k in 1..=self.depth as u64 {
            let o = off.saturating_add(k * size as u64);
            if o >= file_size {
                break;
            }
            if o < seen || st.slots.iter().any(|s| s.off == o && s.len == size) {
                continue;
            }
            st.seq += 1;
            let id = st.seq;
            let buf = st.buffer(size);
            st.slots.push_back(Slot {
                id,
                off: o,
                len: size,
                buf,
                chunks: vec![Chunk::Queued; size.div_ceil(CHUNK)],
                claimed: false,
            });
            let (s, file) = (stream.clone(), f.clone());
            if !self.engine.run_ahead(Box::new(move || job(&s, &*file, id, o))) {
                // Refused (queue full or stopping): the read does it all.
                st.slots.retain(|s| s.id != id);
            }
        }
        wasted
    }

    /// Finish claimed slot `id`: read its unstarted chunks here, from the
    /// last one back while the decrypt-ahead thread goes on from the front,
    /// wait for the chunks being read (taking over those not done within
    /// [`AHEAD_STEAL_AFTER`]), check the result and hand it out.
    fn finish<F: AheadSource>(
        &self,
        stream: &Stream,
        f: &F,
        id: u64,
        mut buf: Arc<Buf>,
        off: u64,
        size: usize,
    ) -> Found<F::Error> {
        // (chunk, bytes, change count before, ok) of the chunks read here.
        let mut own: Vec<(usize, usize, u64, bool)> = Vec::new();
        loop {
            let k = {
                let mut st = stream.lock();
                let Some(s) = st.slot(id) else { break };
                let Some(k) = s.chunks.iter().rposition(|c| *c == Chunk::Queued) else {
                    break;
                };
                s.chunks[k] = Chunk::Taken;
                k
            };
            let changes = f.changes();
            // SAFETY: chunk k was Queued and this thread marked it Taken
            // under the lock: it is this thread's alone.
            let dst = unsafe { buf.chunk(k, size) };
            let r = f.read_ahead_at(off + (k * CHUNK) as u64, dst);
            own.push((k, *r.as_ref().unwrap_or(&0), changes, r.is_ok()));
        }
        let (mut st, waited, stolen, _) = wait_running(stream, id, self.steal_after);
        let Some(i) = st.slots.iter().position(|s| s.id == id) else {
            // Cannot happen (only its read removes a claimed slot); read inline.
            return Found::Inline { direct: true };
        };
        // Removed under the lock: a thread still in a taken-over chunk finds
        // no slot when it ends and drops its result.
        let slot = st.slots.remove(i).expect("position is in range");
        let fresh = (!stolen.is_empty()).then(|| st.buffer(size));
        drop(st);
        let mut chunks = slot.chunks;
        if let Some(nb) = fresh {
            // The old buffer's taken-over chunks are still being written:
            // move every other chunk to a fresh buffer and read those there.
            for k in (0..chunks.len()).filter(|k| !stolen.contains(k)) {
                // SAFETY: chunk k is done (by a thread, or here): nobody
                // writes it; `nb` is this thread's alone (not in any slot).
                unsafe { nb.chunk(k, size).copy_from_slice(buf.chunk(k, size)) };
            }
            for &k in &stolen {
                let changes = f.changes();
                // SAFETY: `nb` is this thread's alone.
                let r = f.read_ahead_at(off + (k * CHUNK) as u64, unsafe { nb.chunk(k, size) });
                own.push((k, *r.as_ref().unwrap_or(&0), changes, r.is_ok()));
            }
            buf = nb;
        }
        let mut own_blocks = 0;
        for &(k, n, changes, ok) in &own {
            chunks[k] = Chunk::Done { n, changes, ok };
            own_blocks += blocks(n);
        }
        // Every chunk is done (or was never a job's); the bytes hold if no
        // chunk failed, the file did not change since the first was read,
        // and only the last chunk is short.
        let now = f.changes();
        let mut n = 0;
        let mut valid = true;
        let mut ahead_blocks = 0;
        for (k, c) in chunks.iter().enumerate() {
            match *c {
                Chunk::Done { n: m, changes, ok } if ok && changes == now => {
                    let full = (size - k * CHUNK).min(CHUNK);
                    if m < full && k + 1 < chunks.len() && n + m < size {
                        // Short before the end: end of file, if the rest is too.
                        valid &= chunks[k + 1..].iter().all(|c| matches!(c, Chunk::Done { n: 0, .. }));
                    }
                    if !own.iter().any(|o| o.0 == k) {
                        ahead_blocks += blocks(m);
                    }
                    n += m;
                }
                // Read before the file changed: wasted if a thread read it.
                Chunk::Done { n: m, ok: true, .. } => {
                    valid = false;
                    if !own.iter().any(|o| o.0 == k) {
                        ahead_blocks += blocks(m);
                    }
                }
                _ => valid = false,
            }
        }
        if !valid {
            self.engine.count_ahead(0, ahead_blocks, waited);
            // SAFETY: the slot is gone and no job holds a chunk of `buf`
            // (none was Running, or `buf` is the fresh one): this thread
            // owns it; `chunk`-free access through one slice of the whole length.
            let whole = unsafe { buf.head_mut(size) };
            return match f.read_direct_at(off, whole) {
                Ok(n) => {
                    self.engine.count_ahead_inline(blocks(n), stolen.len() as u64);
                    Found::Ready(Ready { buf, n })
                }
                Err(e) => Found::Failed(e),
            };
        }
        self.engine.count_ahead(ahead_blocks, 0, waited);
        self.engine.count_ahead_inline(own_blocks, stolen.len() as u64);
        Found::Ready(Ready { buf, n })
    }

    /// Count a request of a sequential reader that was not planned and
    /// was read inline (`n` bytes).
    pub fn count_inline(&self, n: usize) {
        self.engine.count_ahead_inline(blocks(n), 0);
    }

    /// Requests planned for this handle whose every chunk a decrypt-ahead
    /// thread has read (a state to wait for in tests and diagnostics).
    pub fn read_ahead_done(&self) -> usize {
        let st = self.stream.lock();
        let done = |s: &&Slot| s.chunks.iter().all(|c| matches!(c, Chunk::Done { ok: true, .. }));
        st.slots.iter().filter(done).count()
    }

    /// Give back the buffer of a [`Found::Ready`].
    pub fn recycle(&self, r: Ready) {
        let mut st = self.stream.lock();
        if Arc::strong_count(&r.buf) == 1 {
            st.give_back(r.buf, self.depth + SPARE_BUFFERS);
        }
    }
}

impl Drop for AheadStream {
    /// The handle is gone: drop its state (running jobs finish and find
    /// their slot gone) and count what was read ahead for nobody.
    fn drop(&mut self) {
        let st = std::mem::take(&mut *self.stream.lock());
        let wasted = st.slots.iter().map(Slot::done_blocks).sum();
        self.engine.count_ahead(0, wasted, None);
    }
}

/// Drops a job's running chunk if the job ends without a result (it
/// panicked), so a read waiting for it reads inline instead of waiting
/// forever.
struct Unfinished<'a> {
    stream: &'a Stream,
    id: u64,
    chunk: usize,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        let failed = Chunk::Done {
            n: 0,
            changes: 0,
            ok: false,
        };
        end_chunk(self.stream, self.id, self.chunk, failed);
    }
}

/// What [`wait_running`] gives: the lock, how long it waited (ns; `None`:
/// no wait), the chunks it gave up on, and how many of its waits ended by
/// the clock rather than a wake-up.
type Waited<'a> = (MutexGuard<'a, State>, Option<u64>, Vec<usize>, u32);

/// Wait while slot `id` has chunks a thread is reading; after
/// `steal_after`, give up and list them (to be read by the caller).
fn wait_running(stream: &Stream, id: u64, steal_after: Duration) -> Waited<'_> {
    let mut st = stream.lock();
    let mut waited = None;
    let t0 = Instant::now();
    let mut stolen = Vec::new();
    let mut timeouts = 0;
    while let Some(s) = st.slot(id) {
        if !s.chunks.contains(&Chunk::Running) {
            break;
        }
        let left = steal_after.saturating_sub(t0.elapsed());
        if left.is_zero() {
            // The thread is not running (preempted): take its chunks.
            stolen.extend((0..s.chunks.len()).filter(|&k| s.chunks[k] == Chunk::Running));
            break;
        }
        st.waiters += 1;
        let timeout;
        (st, timeout) = stream.cv.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner());
        st.waiters -= 1;
        timeouts += u32::from(timeout.timed_out());
        waited = Some(t0.elapsed().as_nanos() as u64);
    }
    (st, waited, stolen, timeouts)
}

/// Mark chunk `k` of slot `id` (if the slot is still there) `c`, and wake
/// the reads waiting, if any.
fn end_chunk(stream: &Stream, id: u64, k: usize, c: Chunk) {
    let wake = {
        let mut st = stream.lock();
        if let Some(s) = st.slot(id) {
            s.chunks[k] = c;
        }
        st.waiters > 0
    };
    if wake {
        stream.cv.notify_all();
    }
}

/// The decrypt-ahead job of slot `id` (request at `off`): read its chunks
/// in order until none is left unstarted (the read it is for, once there,
/// takes them from the back).
fn job<F: AheadSource>(stream: &Stream, f: &F, id: u64, off: u64) {
    loop {
        let (k, buf, len) = {
            let mut st = stream.lock();
            let Some(s) = st.slot(id) else { return };
            let Some(k) = s.chunks.iter().position(|c| *c == Chunk::Queued) else {
                return;
            };
            s.chunks[k] = Chunk::Running;
            (k, s.buf.clone(), s.len)
        };
        let guard = Unfinished { stream, id, chunk: k };
        let changes = f.changes();
        // SAFETY: chunk k was Queued and this thread marked it Running under
        // the lock: it is this thread's alone until marked done.
        let r = f.read_ahead_at(off + (k * CHUNK) as u64, unsafe { buf.chunk(k, len) });
        std::mem::forget(guard);
        let done = Chunk::Done {
            n: *r.as_ref().unwrap_or(&0),
            changes,
            ok: r.is_ok(),
        };
        end_chunk(stream, id, k, done);
    }
}

#[cfg(test)]
mod tests;
