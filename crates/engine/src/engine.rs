//! The engine: keys, contexts, the priority queue and the worker threads.
//!
//! A context ([`Ctx`]) holds one mask. [`Engine::define`] gives it a
//! (key, nonce, initial counter) and a priority and returns at once with a
//! [`Defined`] ticket; a worker makes the mask later, highest priority first.
//! [`Engine::apply`] XORs the mask into a buffer: at once when it is ready,
//! after a wait when a worker is making it right now, and when nobody has
//! started it the caller makes it itself instead of queueing behind other
//! work.
//!
//! Wrong-nonce safety is by construction: every definition gets an
//! engine-wide unique generation number, the ticket carries it, and `apply`
//! checks it under the context's lock before touching the caller's buffer. A
//! ticket of an earlier definition (the context was redefined meanwhile, by
//! another thread or a moving read window) gets [`EngineError::Redefined`]
//! and the buffer is left alone.

use crate::ahead::{AheadJob, AheadPool};
use crate::backend::{Backend, CpuBackend, MaskJob};
use crate::stats::{Stats, StatsSnapshot};
use crate::{EngineConfig, EngineError, MaskCipher};
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;
use warpfs_crypto::{ContentKey, Nonce};

/// Mask priority: higher is made sooner; equal priorities in definition order.
pub type Priority = i32;
/// The most urgent priority.
pub const PRIORITY_HIGHEST: Priority = Priority::MAX;
/// The least urgent priority (what the write pool uses for refills).
pub const PRIORITY_LOWEST: Priority = Priority::MIN;

/// How long an `apply` waits for a mask a device is making before it makes
/// the bytes on its own thread (the hybrid policy of the GPU papers).
const DEVICE_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// How long engine shutdown waits for a device driver thread stuck in a launch.
const DEVICE_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(5);

/// How long an apply spins for a mask a cpu worker is making before it
/// makes the bytes itself: a worker makes one 4 KiB mask in ~0.3 us with
/// VAES, so taking longer means the worker lost its CPU, and waiting for it
/// (spinning in lockstep behind it, or sleeping until a wake-up crosses
/// CPUs) costs more than the mask. Measured on a 2-vCPU VM with a
/// competing thread on the workers' CPU: 20 us of spinning let the reader
/// fall into lockstep behind a descheduled worker (2 GB/s instead of 7-9).
const APPLY_SPIN: std::time::Duration = std::time::Duration::from_micros(1);

/// The most counter blocks one nonce has (32-bit counter).
const MAX_BLOCKS: u64 = 1 << 32;

/// A key registered with [`Engine::add_key`] / [`Engine::add_raw_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(u32);

impl KeyId {
    /// The key's index (what the C ABI hands out).
    pub fn index(self) -> u32 {
        self.0
    }
}

/// The ticket of one definition of a context: which key, nonce and initial
/// counter its mask is for. [`Engine::apply`] XORs only while the context
/// still holds this very definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defined {
    gen: u64,
    key: KeyId,
    nonce: Nonce,
    counter: u32,
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
    slot: Arc<Slot>,
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
pub(crate) struct SlotRef(Arc<Slot>);

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
/// table, which never moves or drops a key), so copying it out of the
/// slot touches no reference count shared between CPUs.
#[derive(Clone, Copy)]
struct SlotDef {
    key: KeyId,
    nonce: Nonce,
    counter: u32,
}

/// Keys per chunk of the key table, and chunks: 2^20 keys per engine.
const KEY_CHUNK: usize = 1024;
const KEY_CHUNKS: usize = 1024;

/// One chunk of the key table: `KEY_CHUNK` slots, each set once.
type KeyChunk = Box<[OnceLock<Arc<MaskCipher>>]>;

/// The engine's keys: append-only, each at a fixed address for the
/// engine's life, read without a lock or a reference count (the hot paths
/// look a key up per mask; an `RwLock<Vec<Arc<_>>>` made every lookup an
/// atomic write to lines shared by the FUSE threads and the workers).
struct KeyTable {
    chunks: Box<[OnceLock<KeyChunk>]>,
    len: std::sync::atomic::AtomicU32,
    push: Mutex<()>,
}

impl KeyTable {
    fn new() -> Self {
        Self {
            chunks: (0..KEY_CHUNKS).map(|_| OnceLock::new()).collect(),
            len: std::sync::atomic::AtomicU32::new(0),
            push: Mutex::new(()),
        }
    }

    fn get(&self, i: u32) -> Option<&Arc<MaskCipher>> {
        if i >= self.len.load(Ordering::Acquire) {
            return None;
        }
        let i = i as usize;
        self.chunks[i / KEY_CHUNK].get()?[i % KEY_CHUNK].get()
    }

    fn push(&self, c: MaskCipher) -> u32 {
        let _g = self.push.lock().unwrap_or_else(|e| e.into_inner());
        let i = self.len.load(Ordering::Relaxed) as usize;
        assert!(
            i < KEY_CHUNK * KEY_CHUNKS,
            "at most {} keys per engine",
            KEY_CHUNK * KEY_CHUNKS
        );
        let chunk = self.chunks[i / KEY_CHUNK].get_or_init(|| (0..KEY_CHUNK).map(|_| OnceLock::new()).collect());
        let _ = chunk[i % KEY_CHUNK].set(Arc::new(c));
        self.len.store(i as u32 + 1, Ordering::Release);
        i as u32
    }
}

/// A context's mask buffer.
type Mask = warpfs_crypto::LockedBytes;

struct SlotState {
    gen: u64,
    def: Option<SlotDef>,
    phase: CtxState,
    applied: bool,
    by_worker: bool,
    made_seq: u64,
    /// The made mask, on locked pages zeroed when dropped (a mask for a
    /// future nonce decides the plaintext a write will get).
    mask: Option<Mask>,
    /// Applies blocked on this context (only they need a wake-up call).
    waiters: usize,
    /// The definition went to the workers' queue. One that did not (defined
    /// on demand, or with speculation off) is never stored: an apply XORs
    /// its keystream straight into the caller's buffer, in one pass.
    queued: bool,
}

struct Slot {
    id: u64,
    len: usize,
    /// Mirror of `state.gen` so the queue can drop stale entries without locking.
    gen: AtomicU64,
    /// The generation whose mask is ready (0: none), so an apply can spin
    /// briefly for a mask being made instead of sleeping. On its own cache
    /// line: a reader spinning on it must not take the line holding the
    /// lock and state from the worker that is finishing the mask.
    ready: Padded<AtomicU64>,
    state: Mutex<SlotState>,
    cond: Condvar,
    stats: Arc<Stats>,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct QEntry {
    prio: Priority,
    seq: u64,
    gen: u64,
    slot: Arc<Slot>,
}

impl QEntry {
    fn live(&self) -> bool {
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

struct Sched {
    heap: BinaryHeap<QEntry>,
    seq: u64,
    paused: bool,
    shutdown: bool,
    busy: usize,
    /// Workers blocked waiting for work (only they need a wake-up call).
    sleeping: usize,
    /// Callers blocked in `quiesce`.
    quiescing: usize,
    compact_at: usize,
    /// Split requests (XTS), taken before masks.
    split: VecDeque<Arc<crate::split::SplitJob>>,
}

/// A value alone on its cache lines (two, as adjacent-line prefetch pairs
/// them): counters bumped by the reading threads and by the workers must
/// not share a line, or each bump moves it between CPUs.
#[derive(Default)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

struct Shared {
    cfg: EngineConfig,
    threads: usize,
    backend: Box<dyn Backend>,
    keys: KeyTable,
    sched: Mutex<Sched>,
    work_cv: Condvar,
    idle_cv: Condvar,
    stats: Arc<Stats>,
    next_gen: Padded<AtomicU64>,
    next_made: Padded<AtomicU64>,
    next_slot: Padded<AtomicU64>,
    /// Union of the workers' CPU affinity masks, as each worker found it
    /// after applying `cfg.cpus`.
    worker_cpus: Mutex<Vec<usize>>,
    /// Queue length, mirrored outside the lock for spinning workers.
    queued: Padded<std::sync::atomic::AtomicUsize>,
}

impl Shared {
    fn sched(&self) -> MutexGuard<'_, Sched> {
        self.sched.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The keystream engine (our WAESlib): share it in an `Arc`; dropping the
/// last handle stops and joins the workers.
pub struct Engine {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// Decrypt-ahead threads (speculation on and `read_ahead > 0`).
    ahead: Mutex<Option<AheadPool>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.shared.backend.name())
            .field("threads", &self.shared.threads)
            .field("config", &self.shared.cfg)
            .finish()
    }
}

/// What one `apply` found (for the stats).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Hit,
    Waited,
    Inline,
}

impl Engine {
    /// An engine on the cpu backend. `threads == 0` takes one worker per
    /// core; with `speculation` off no workers start. `software_aes` (or
    /// `WARPFS_NO_AESNI=1`) puts keys added with [`add_raw_key`](Self::add_raw_key)
    /// on the software AES.
    pub fn new(cfg: EngineConfig) -> std::io::Result<Arc<Self>> {
        Self::with_backend(cfg, Box::new(CpuBackend))
    }

    /// An engine whose workers drive `backend`.
    pub fn with_backend(mut cfg: EngineConfig, backend: Box<dyn Backend>) -> std::io::Result<Arc<Self>> {
        let threads = match (cfg.speculation, backend.driver_threads()) {
            (false, _) => 0,
            (true, Some(n)) => n.max(1),
            (true, None) => cfg.effective_threads(),
        };
        // A device backend takes whole launches per work unit.
        cfg.batch_max = cfg.batch_max.max(backend.chunk());
        cfg.threads = threads;
        cfg.software_aes = cfg.effective_software_aes();
        cfg.pool_size = cfg.pool_size.max(1);
        cfg.window_max = cfg.window_max.max(1);
        cfg.mask_len = cfg.mask_len.max(16);
        cfg.batch_max = cfg.batch_max.max(1);
        let shared = Arc::new(Shared {
            cfg,
            threads,
            backend,
            keys: KeyTable::new(),
            sched: Mutex::new(Sched {
                heap: BinaryHeap::new(),
                seq: 0,
                paused: false,
                shutdown: false,
                busy: 0,
                sleeping: 0,
                quiescing: 0,
                compact_at: 1024,
                split: VecDeque::new(),
            }),
            work_cv: Condvar::new(),
            idle_cv: Condvar::new(),
            stats: Arc::new(Stats::default()),
            next_gen: Padded(AtomicU64::new(1)),
            next_made: Padded(AtomicU64::new(1)),
            next_slot: Padded(AtomicU64::new(0)),
            worker_cpus: Mutex::new(Vec::new()),
            queued: Padded(std::sync::atomic::AtomicUsize::new(0)),
        });
        // Decrypt-ahead threads, placed like the workers: one per listed
        // CPU, or per worker without a list, at most 4; at AHEAD_NICE.
        let ahead = if threads > 0 && shared.cfg.read_ahead > 0 {
            let n = if shared.cfg.cpus.is_empty() {
                shared.cfg.effective_threads()
            } else {
                shared.cfg.cpus.len()
            };
            Some(AheadPool::new(
                n.clamp(1, 4),
                &shared.cfg.cpus,
                Some(crate::AHEAD_NICE),
            )?)
        } else {
            None
        };
        let engine = Arc::new(Self {
            shared: shared.clone(),
            workers: Mutex::new(Vec::new()),
            ahead: Mutex::new(ahead),
        });
        for i in 0..threads {
            let sh = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("warpfs-mask-{i}"))
                .spawn(move || {
                    if let Some(n) = sh.cfg.nice {
                        set_thread_nice(n);
                    }
                    if !sh.cfg.cpus.is_empty() {
                        if let Err(e) = set_thread_cpus(&sh.cfg.cpus) {
                            tracing::warn!(
                                "keystream worker {i}: cannot run on CPUs {} ({e}); it stays where the daemon runs",
                                crate::format_cpu_list(&sh.cfg.cpus)
                            );
                        }
                    }
                    {
                        let mut all = sh.worker_cpus.lock().unwrap_or_else(|e| e.into_inner());
                        all.extend(thread_cpus());
                        all.sort_unstable();
                        all.dedup();
                    }
                    worker(&sh)
                })?;
            engine.workers.lock().unwrap_or_else(|e| e.into_inner()).push(h);
        }
        Ok(engine)
    }

    /// The configuration in force (threads, software AES and limits resolved).
    pub fn config(&self) -> &EngineConfig {
        &self.shared.cfg
    }

    /// Whether masks are made ahead of need.
    pub fn speculation(&self) -> bool {
        self.shared.threads > 0
    }

    /// Decrypt-ahead depth (requests a sequential reader's data is read and
    /// decrypted ahead; `EngineConfig::read_ahead`), 0 without
    /// decrypt-ahead threads.
    pub fn read_ahead(&self) -> usize {
        match &*self.ahead.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(_) => self.shared.cfg.read_ahead,
            None => 0,
        }
    }

    /// Number of decrypt-ahead threads.
    pub fn ahead_threads(&self) -> usize {
        self.ahead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |p| p.threads())
    }

    /// Run `job` on a decrypt-ahead thread. `false` (the job dropped
    /// unrun) without decrypt-ahead threads, when their queue is full, or
    /// while the engine stops; a queued job may also be dropped unrun at
    /// shutdown.
    pub fn run_ahead(&self, job: AheadJob) -> bool {
        match &*self.ahead.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(p) => p.submit(job),
            None => false,
        }
    }

    /// Count decrypt-ahead outcomes: blocks served, blocks wasted, and one
    /// wait of `wait_ns` (when `waited`).
    pub fn count_ahead(&self, served: u64, wasted: u64, waited: Option<u64>) {
        let s = &self.shared.stats;
        Stats::add(&s.ahead_served, served);
        Stats::add(&s.ahead_wasted, wasted);
        if let Some(ns) = waited {
            Stats::add(&s.ahead_waits, 1);
            Stats::add(&s.ahead_wait_ns, ns);
        }
    }

    /// Count `blocks` of a sequential reader's requests that the reading
    /// thread decrypted itself, `stolen` of its chunks taken over from a
    /// stalled decrypt-ahead thread.
    pub fn count_ahead_inline(&self, blocks: u64, stolen: u64) {
        let s = &self.shared.stats;
        Stats::add(&s.ahead_inline, blocks);
        Stats::add(&s.ahead_stolen, stolen);
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Whether masks are made on a device (keys should then be added as
    /// raw bytes with [`add_raw_key`](Self::add_raw_key), see
    /// [`Backend::is_device`]).
    pub fn is_device(&self) -> bool {
        self.shared.backend.is_device()
    }

    /// Backend name.
    pub fn backend_name(&self) -> String {
        let name = self.shared.backend.name();
        if self.shared.cfg.software_aes {
            format!("{name}, software AES forced for raw keys")
        } else {
            name
        }
    }

    /// Register a content key (on the `aes` 0.9 path: AES-NI/VAES when the
    /// CPU has them). `software_aes` does not apply to it, because an
    /// expanded `ContentKey` cannot be moved to another AES implementation;
    /// use [`add_raw_key`](Self::add_raw_key) for that. The stats count keys
    /// of each kind so an experiment can check what it ran.
    pub fn add_key(&self, key: ContentKey) -> KeyId {
        self.push_key(MaskCipher::from_content_key(key))
    }

    /// Register a raw 16- or 32-byte key, on the software AES when the
    /// engine was configured for it.
    pub fn add_raw_key(&self, key: &[u8]) -> Result<KeyId, EngineError> {
        Ok(self.push_key(MaskCipher::new(key, self.shared.cfg.software_aes)?))
    }

    /// Register a raw key of `cipher` (AES: as [`add_raw_key`](Self::add_raw_key);
    /// Twofish: made on the cpu, see [`MaskCipher::with_cipher`]).
    pub fn add_raw_key_cipher(&self, cipher: warpfs_crypto::XtsCipher, key: &[u8]) -> Result<KeyId, EngineError> {
        Ok(self.push_key(MaskCipher::with_cipher(cipher, key, self.shared.cfg.software_aes)?))
    }

    fn push_key(&self, c: MaskCipher) -> KeyId {
        let st = &self.shared.stats;
        Stats::add(
            if c.cipher() == warpfs_crypto::XtsCipher::Twofish {
                &st.twofish_keys
            } else if c.is_software() {
                &st.software_keys
            } else {
                &st.hardware_keys
            },
            1,
        );
        KeyId(self.shared.keys.push(c))
    }

    /// The expanded key behind `key`.
    pub fn cipher(&self, key: KeyId) -> Result<Arc<MaskCipher>, EngineError> {
        self.key_ref(key).cloned()
    }

    /// The expanded key behind `key`, borrowed (no reference count touched).
    fn key_ref(&self, key: KeyId) -> Result<&Arc<MaskCipher>, EngineError> {
        self.shared.keys.get(key.0).ok_or(EngineError::UnknownKey(key.0))
    }

    /// A new context with the configured mask length.
    pub fn context(&self) -> Ctx {
        self.context_with_len(self.shared.cfg.mask_len)
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

    /// Define `ctx` for (`key`, `nonce`) with the warpfs layout (mask from
    /// counter 1: E(J0), then the data keystream) and queue its mask at
    /// `priority`. Returns at once. A previous definition is dropped (its
    /// tickets stop working).
    pub fn define(&self, ctx: &Ctx, key: KeyId, nonce: &Nonce, priority: Priority) -> Result<Defined, EngineError> {
        self.define_at(ctx, key, nonce, warpfs_crypto::gcm::J0_COUNTER, Some(priority))
    }

    /// Define `ctx` without queueing it: the first `apply` makes the mask on
    /// its own thread. What every define does with speculation off.
    pub fn define_on_demand(&self, ctx: &Ctx, key: KeyId, nonce: &Nonce) -> Result<Defined, EngineError> {
        self.define_at(ctx, key, nonce, warpfs_crypto::gcm::J0_COUNTER, None)
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
        let queue = priority.is_some() && self.speculation();
        let t = self.define_inner(ctx, key, nonce, counter, queue)?;
        if let (Some(prio), true) = (priority, queue) {
            self.enqueue(ctx.slot.clone(), t.gen, prio);
        }
        Ok(t)
    }

    /// Record a definition; `queued`: the caller puts it on the queue.
    fn define_inner(
        &self,
        ctx: &Ctx,
        key: KeyId,
        nonce: &Nonce,
        counter: u32,
        queued: bool,
    ) -> Result<Defined, EngineError> {
        self.key_ref(key)?;
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
        })
    }

    /// Define many contexts at once (warpfs layout, like
    /// [`define`](Self::define)) and queue them under one lock of the queue:
    /// what the write pool's refills and the read window's look-ahead use.
    /// Equal priorities are served in the order given. Fails before
    /// defining anything when a key is unknown.
    pub fn define_batch(&self, items: &[(&Ctx, KeyId, Nonce, Priority)]) -> Result<Vec<Defined>, EngineError> {
        for &(_, key, _, _) in items {
            self.key_ref(key)?;
        }
        let spec = self.speculation();
        let mut tickets = Vec::with_capacity(items.len());
        let mut queue = Vec::with_capacity(if spec { items.len() } else { 0 });
        for &(ctx, key, nonce, prio) in items {
            let t = self.define_inner(ctx, key, &nonce, warpfs_crypto::gcm::J0_COUNTER, spec)?;
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

    fn enqueue(&self, slot: Arc<Slot>, gen: u64, prio: Priority) {
        self.queue_batch(std::iter::once((slot, gen, prio)));
    }

    /// Push entries onto the queue under one lock, then wake a worker if needed.
    fn queue_batch(&self, entries: impl IntoIterator<Item = (Arc<Slot>, u64, Priority)>) {
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

    /// XOR mask bytes `[offset, offset + buf.len())` of the definition
    /// `ticket` into `buf`. Mask offset 0 is block counter
    /// `ticket.counter()` (with [`define`](Self::define): 0..16 = E(J0),
    /// 16.. = data keystream). Bytes past the context's mask length are
    /// computed directly. Fails without touching `buf` when the context no
    /// longer holds `ticket`'s definition.
    pub fn apply(&self, ctx: &Ctx, ticket: &Defined, buf: &mut [u8], offset: usize) -> Result<(), EngineError> {
        self.apply_parts(&ctx.slot, ticket, &mut [(offset, buf)])
    }

    /// Encrypt or decrypt one content block with the warpfs layout: `buf`
    /// gets mask bytes 16.. and the returned E(J0) is mask bytes 0..16.
    pub fn apply_block(&self, ctx: &Ctx, ticket: &Defined, buf: &mut [u8]) -> Result<[u8; 16], EngineError> {
        let mut ej0 = [0u8; 16];
        self.apply_parts(&ctx.slot, ticket, &mut [(0, &mut ej0[..]), (16, buf)])?;
        Ok(ej0)
    }

    /// [`apply_block`](Self::apply_block) through a shared handle.
    pub(crate) fn apply_block_shared(
        &self,
        r: &SlotRef,
        ticket: &Defined,
        buf: &mut [u8],
    ) -> Result<[u8; 16], EngineError> {
        let mut ej0 = [0u8; 16];
        self.apply_parts(&r.0, ticket, &mut [(0, &mut ej0[..]), (16, buf)])?;
        Ok(ej0)
    }

    fn apply_parts(&self, slot: &Slot, ticket: &Defined, parts: &mut [(usize, &mut [u8])]) -> Result<(), EngineError> {
        for (off, buf) in parts.iter() {
            let end = off.checked_add(buf.len()).ok_or(EngineError::OutOfRange)? as u64;
            if end.div_ceil(16) > MAX_BLOCKS {
                return Err(EngineError::OutOfRange);
            }
        }
        let stats = &self.shared.stats;
        let mut outcome = None;
        let mut device_deadline: Option<Instant> = None;
        let mut st = slot.lock();
        let def = loop {
            if st.gen != ticket.gen {
                return Err(EngineError::Redefined);
            }
            match st.phase {
                CtxState::Ready => {
                    let mask = st.mask.as_deref().expect("a ready context has its mask");
                    for (off, buf) in parts.iter_mut() {
                        if *off < mask.len() {
                            let n = buf.len().min(mask.len() - *off);
                            warpfs_crypto::aes_ctr::xor_in_place(&mut buf[..n], &mask[*off..*off + n]);
                        }
                    }
                    st.applied = true;
                    break st.def.expect("a ready context is defined");
                }
                CtxState::Making if self.shared.backend.is_device() && st.by_worker => {
                    // Hybrid policy: a device mask needed now waits at most
                    // DEVICE_WAIT, then this thread makes the bytes itself
                    // (the device's mask still lands in the context).
                    let t0 = Instant::now();
                    let deadline = *device_deadline.get_or_insert_with(|| t0 + DEVICE_WAIT);
                    if t0 >= deadline {
                        let def = st.def.expect("a context being made is defined");
                        drop(st);
                        let cipher = self.key_ref(def.key)?;
                        for (off, buf) in parts.iter_mut() {
                            cipher.xor_at(&def.nonce, def.counter, *off as u64, buf);
                        }
                        Stats::add(&stats.applies, 1);
                        Stats::add(&stats.inline, 1);
                        return Ok(());
                    }
                    outcome.get_or_insert(Outcome::Waited);
                    st.waiters += 1;
                    st = slot
                        .cond
                        .wait_timeout(st, deadline - t0)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    st.waiters -= 1;
                    Stats::add(&stats.wait_ns, t0.elapsed().as_nanos() as u64);
                }
                CtxState::Making => {
                    outcome.get_or_insert(Outcome::Waited);
                    let t0 = Instant::now();
                    // A cpu worker makes one mask per claim (~0.3 us with
                    // VAES): spin for it a moment (APPLY_SPIN), as sleeping
                    // costs a wake-up across CPUs (tens of microseconds).
                    let by_worker = st.by_worker;
                    drop(st);
                    // (A redefinition is seen after the spin, under the lock.)
                    while slot.ready.load(Ordering::Acquire) != ticket.gen && t0.elapsed() < APPLY_SPIN {
                        for _ in 0..32 {
                            std::hint::spin_loop();
                        }
                    }
                    st = slot.lock();
                    if st.phase != CtxState::Making || st.gen != ticket.gen {
                        Stats::add(&stats.wait_ns, t0.elapsed().as_nanos() as u64);
                        continue;
                    }
                    if by_worker && st.by_worker {
                        // Still not done: the worker was preempted (its core
                        // is busy with other work). Make the bytes here, as
                        // the device policy does, rather than sleep; the
                        // worker's mask still lands in the context.
                        drop(st);
                        let cipher = self.key_ref(ticket.key)?;
                        for (off, buf) in parts.iter_mut() {
                            cipher.xor_at(&ticket.nonce, ticket.counter, *off as u64, buf);
                        }
                        Stats::add(&stats.wait_ns, t0.elapsed().as_nanos() as u64);
                        Stats::add(&stats.applies, 1);
                        Stats::add(&stats.inline, 1);
                        return Ok(());
                    }
                    st.waiters += 1;
                    st = slot.cond.wait(st).unwrap_or_else(|e| e.into_inner());
                    st.waiters -= 1;
                    Stats::add(&stats.wait_ns, t0.elapsed().as_nanos() as u64);
                }
                CtxState::Pending if !st.queued => {
                    // Defined on demand: no worker will make it and nobody
                    // waits for it, so its keystream goes straight into the
                    // caller's buffer (one pass, no mask buffer), every time.
                    st.applied = true;
                    drop(st);
                    let cipher = self.key_ref(ticket.key)?;
                    for (off, buf) in parts.iter_mut() {
                        cipher.xor_at(&ticket.nonce, ticket.counter, *off as u64, buf);
                    }
                    Stats::add(&stats.applies, 1);
                    Stats::add(&stats.inline, 1);
                    return Ok(());
                }
                CtxState::Pending => {
                    // Nobody has started it: make it here rather than queue.
                    outcome = Some(Outcome::Inline);
                    let def = st.def.expect("a pending context is defined");
                    let mut buf = st.mask.take().unwrap_or_else(|| Mask::zeroed(slot.len));
                    st.phase = CtxState::Making;
                    st.by_worker = false;
                    drop(st);
                    self.key_ref(def.key)
                        .expect("keys are never removed")
                        .fill(&def.nonce, def.counter, &mut buf);
                    st = slot.lock();
                    publish(&self.shared, slot, &mut st, ticket.gen, buf, false);
                    if st.waiters > 0 {
                        slot.cond.notify_all();
                    }
                }
                CtxState::Undefined => return Err(EngineError::Redefined),
            }
        };
        drop(st);
        // Whatever lies past the mask is made directly, for the same definition.
        let mut direct = false;
        for (off, buf) in parts.iter_mut() {
            let start = (*off).max(slot.len);
            if start < *off + buf.len() {
                let skip = start - *off;
                self.key_ref(def.key)?
                    .xor_at(&def.nonce, def.counter, start as u64, &mut buf[skip..]);
                direct = true;
            }
        }
        if direct {
            Stats::add(&stats.direct, 1);
        }
        Stats::add(&stats.applies, 1);
        Stats::add(
            match outcome.unwrap_or(Outcome::Hit) {
                Outcome::Hit => &stats.ready_hits,
                Outcome::Waited => &stats.waits,
                Outcome::Inline => &stats.inline,
            },
            1,
        );
        Ok(())
    }

    /// XOR keystream bytes `[pos, pos + buf.len())` of (`key`, `nonce`) from
    /// block counter `counter` into `buf` on this thread, without a context.
    pub fn xor_direct(
        &self,
        key: KeyId,
        nonce: &Nonce,
        counter: u32,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<(), EngineError> {
        let end = pos.checked_add(buf.len() as u64).ok_or(EngineError::OutOfRange)?;
        if end.div_ceil(16) > MAX_BLOCKS {
            return Err(EngineError::OutOfRange);
        }
        self.key_ref(key)?.xor_at(nonce, counter, pos, buf);
        Stats::add(&self.shared.stats.direct, 1);
        Ok(())
    }

    /// Encrypt or decrypt one content block (warpfs layout) directly on
    /// this thread, without a context: `buf` gets the data keystream
    /// (counter 2 on), the result is E(J0) (counter 1).
    pub fn open_direct(&self, key: KeyId, nonce: &Nonce, buf: &mut [u8]) -> Result<[u8; 16], EngineError> {
        if (buf.len() as u64).div_ceil(16) + 1 > MAX_BLOCKS {
            return Err(EngineError::OutOfRange);
        }
        let cipher = self.key_ref(key)?;
        let mut ej0 = [0u8; 16];
        cipher.fill(nonce, warpfs_crypto::gcm::J0_COUNTER, &mut ej0);
        cipher.xor_at(nonce, warpfs_crypto::gcm::DATA_COUNTER, 0, buf);
        Stats::add(&self.shared.stats.direct, 1);
        Ok(ej0)
    }

    /// The current definition of `ctx`.
    pub fn defined(&self, ctx: &Ctx) -> Option<Defined> {
        let st = ctx.slot.lock();
        st.def.as_ref().map(|d| Defined {
            gen: st.gen,
            key: d.key,
            nonce: d.nonce,
            counter: d.counter,
        })
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
            }),
            state: st.phase,
            made_by_worker: st.by_worker,
            made_seq: st.made_seq,
            applied: st.applied,
            mask_len: ctx.slot.len,
        }
    }

    /// Stop workers from taking new work (what they hold they finish).
    pub fn pause(&self) {
        self.shared.sched().paused = true;
        self.shared.idle_cv.notify_all();
    }

    /// Let workers take work again.
    pub fn resume(&self) {
        self.shared.sched().paused = false;
        self.shared.work_cv.notify_all();
    }

    /// Wait until the queue is empty and no worker is busy. Returns at once
    /// when paused or without workers.
    pub fn quiesce(&self) {
        let mut s = self.shared.sched();
        while !s.paused && !s.shutdown && self.shared.threads > 0 && (!s.heap.is_empty() || s.busy > 0) {
            s.quiescing += 1;
            s = self.shared.idle_cv.wait(s).unwrap_or_else(|e| e.into_inner());
            s.quiescing -= 1;
        }
    }

    /// Queue length (including entries made stale by redefinitions).
    pub fn queued(&self) -> usize {
        self.shared.sched().heap.len()
    }

    /// A copy of the counters.
    pub fn stats(&self) -> StatsSnapshot {
        let mut s = self
            .shared
            .stats
            .snapshot(self.backend_name(), self.shared.threads, self.speculation());
        s.worker_cpus = self.worker_cpus();
        s.speculation_why = self.shared.cfg.speculation_why.clone();
        s
    }

    /// The CPUs the worker threads run on (union of their affinity masks,
    /// recorded by each worker as it starts), sorted; empty without workers.
    pub fn worker_cpus(&self) -> Vec<usize> {
        self.shared
            .worker_cpus
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn count_window(&self, resets: u64, reused: u64, defined: u64) {
        let s = &self.shared.stats;
        Stats::add(&s.window_resets, resets);
        Stats::add(&s.window_reused, reused);
        Stats::add(&s.window_defined, defined);
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

impl Drop for Engine {
    fn drop(&mut self) {
        // Decrypt-ahead jobs make their masks themselves: stop them first.
        drop(self.ahead.lock().unwrap_or_else(|e| e.into_inner()).take());
        self.shared.sched().shutdown = true;
        self.shared.work_cv.notify_all();
        self.shared.idle_cv.notify_all();
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|e| e.into_inner()));
        if self.shared.backend.is_device() {
            // A hung device must not hang unmount: give the driver threads
            // DEVICE_SHUTDOWN to finish their launch, then leave them.
            let deadline = Instant::now() + DEVICE_SHUTDOWN;
            for h in workers {
                while !h.is_finished() && Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                if h.is_finished() {
                    let _ = h.join();
                } else {
                    tracing::warn!("a device driver thread is stuck in a launch; shutting down without it");
                }
            }
            return;
        }
        for h in workers {
            let _ = h.join();
        }
    }
}

/// Set the calling thread's nice value (Linux: per thread). Refused
/// without privilege to lower it; then the thread keeps the inherited one.
pub(crate) fn set_thread_nice(n: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority have no memory-safety preconditions.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, n);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = n;
}

/// Restrict the calling thread to `cpus` (Linux `sched_setaffinity` on the
/// thread id; other systems: unsupported).
pub(crate) fn set_thread_cpus(cpus: &[usize]) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET is given
        // numbers below CPU_SETSIZE (parse_cpu_list checks MAX_CPUS); the
        // set outlives the call.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                if c < crate::MAX_CPUS {
                    libc::CPU_SET(c, &mut set);
                }
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpus;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "thread CPU affinity is only supported on Linux",
        ))
    }
}

/// The CPUs the calling thread may run on (Linux; empty elsewhere).
fn thread_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_getaffinity fills the zeroed set; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..crate::MAX_CPUS).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

/// Store a finished mask if its definition still stands; the caller
/// notifies the context's waiters.
fn publish(sh: &Shared, slot: &Slot, st: &mut SlotState, gen: u64, buf: Mask, by_worker: bool) {
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
    let buf = st.mask.take().unwrap_or_else(|| Mask::zeroed(e.slot.len));
    Some((st.def.expect("a pending context is defined"), buf))
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

fn worker(sh: &Shared) {
    let chunk = sh.backend.chunk().max(1);
    let spin = std::time::Duration::from_micros(u64::from(sh.cfg.spin_us));
    let mut s = sh.sched();
    // The split job this worker leaves alone (pinned to its caller's CPU).
    let mut skip = 0u64;
    let my_cpus = thread_cpus();
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
        for group in batch.chunks(chunk) {
            if chunk == 1 {
                // The cpu case: no per-mask allocation.
                let e = &group[0];
                let Some((d, mut buf)) = claim(e) else { continue };
                let cipher = sh.keys.get(d.key.0).expect("keys are never removed");
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
            let mut claimed: Vec<(&QEntry, SlotDef, Mask)> =
                group.iter().filter_map(|e| claim(e).map(|(d, b)| (e, d, b))).collect();
            if claimed.is_empty() {
                continue;
            }
            {
                let mut jobs: Vec<MaskJob<'_>> = claimed
                    .iter_mut()
                    .map(|(_, d, b)| MaskJob {
                        cipher: sh.keys.get(d.key.0).expect("keys are never removed"),
                        nonce: d.nonce,
                        counter: d.counter,
                        out: &mut b[..],
                    })
                    .collect();
                sh.backend.make(&mut jobs);
            }
            for (e, _, buf) in claimed {
                finish(sh, e, buf);
                made += 1;
            }
        }
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
