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
//! another thread or a moving read window) gets [`EngineError::Redefined`](crate::EngineError::Redefined)
//! and the buffer is left alone.

//!
//! The parts, one module each: the key table (`keys`), contexts and their
//! slots (`context`), the priority queue (`queue`), defining (`define`),
//! applying (`apply`) and the worker threads (`worker`); this module holds
//! the state they share and the engine's life (start, pause, stop).

mod apply;
mod context;
mod define;
mod keys;
mod queue;
mod worker;

pub use context::{Ctx, CtxInfo, CtxState, Defined};
pub use keys::KeyId;
pub(crate) use keys::KeyLease;
pub use queue::{Priority, PRIORITY_HIGHEST, PRIORITY_LOWEST};

use crate::ahead::{AheadJob, AheadPool};
use crate::backend::{Backend, CpuBackend};
use crate::placement::this_thread;
use crate::stats::{Stats, StatsSnapshot};
use crate::xts_device::XtsDevicePort;
use crate::EngineConfig;
use keys::KeyTable;
use queue::Sched;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;
use warpfs_crypto::MaskLayout;

/// How long engine shutdown waits for a device driver thread stuck in a launch.
const DEVICE_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// Decrypt-ahead threads (speculation on or `ahead_without_speculation`,
    /// and `read_ahead > 0`).
    ahead: Mutex<Option<AheadPool>>,
    /// See [`Engine::mask_cpus`].
    mask_cpus: Vec<usize>,
    /// `mask_cpus`, marked busy for the process's other threads
    /// ([`crate::placement::busy_cpus`]).
    _busy: crate::placement::Busy,
    /// The device whole XTS requests go to (`attach_xts_device`).
    xts: std::sync::OnceLock<Arc<dyn XtsDevicePort>>,
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
        // Where cpu workers will make masks: their list, else wherever this
        // (the mounting) thread may run. A device's driver threads mostly wait.
        let mask_cpus = match (threads, backend.driver_threads(), cfg.cpus.is_empty()) {
            (0, _, _) | (_, Some(_), _) => Vec::new(),
            (_, None, true) => this_thread::cpus(),
            (_, None, false) => cfg.cpus.clone(),
        };
        // A device backend takes whole launches per work unit.
        cfg.batch_max = cfg.batch_max.max(backend.chunk());
        cfg.threads = threads;
        cfg.software_aes = cfg.effective_software_aes();
        cfg.pool_size = cfg.pool_size.max(1);
        cfg.window_max = cfg.window_max.max(1);
        cfg.mask_len = cfg.mask_len.max(MaskLayout::BLOCK.data_at);
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
        // CPU, or per worker (per core with speculation off) without a
        // list, at most 4; at AHEAD_NICE.
        let wanted = threads > 0 || shared.cfg.ahead_without_speculation;
        let ahead = if wanted && shared.cfg.read_ahead > 0 {
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
            _busy: crate::placement::mark_busy(&mask_cpus),
            mask_cpus,
            xts: std::sync::OnceLock::new(),
        });
        for i in 0..threads {
            let sh = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("warpfs-mask-{i}"))
                .spawn(move || {
                    if let Some(n) = sh.cfg.nice {
                        this_thread::set_nice(n);
                    }
                    if !sh.cfg.cpus.is_empty() {
                        if let Err(e) = this_thread::pin(&sh.cfg.cpus) {
                            tracing::warn!(
                                "keystream worker {i}: cannot run on CPUs {} ({e}); it stays where the daemon runs",
                                crate::placement::format_cpu_list(&sh.cfg.cpus)
                            );
                        }
                    }
                    {
                        let mut all = sh.worker_cpus.lock().unwrap_or_else(|e| e.into_inner());
                        all.extend(this_thread::cpus());
                        all.sort_unstable();
                        all.dedup();
                    }
                    worker::worker(&sh)
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

    /// The CPUs this engine's workers make masks on, known when it starts
    /// (`--engine-cpus`, else the CPUs the starting thread may use); empty
    /// without cpu workers (speculation off, or a device backend). FUSE
    /// work should leave them to the workers: that is where speculation pays.
    pub fn mask_cpus(&self) -> &[usize] {
        &self.mask_cpus
    }

    /// Whether masks are made on a device (keys should then be added as
    /// raw bytes with [`add_raw_key`](Self::add_raw_key), see
    /// [`Backend::is_device`]).
    pub fn is_device(&self) -> bool {
        self.shared.backend.is_device()
    }

    /// Send whole XTS requests of at least the device's threshold to
    /// `dev` (once, before any XTS cipher is made: at mount). Returns
    /// false when one is attached already.
    pub fn attach_xts_device(&self, dev: Arc<dyn XtsDevicePort>) -> bool {
        self.xts.set(dev).is_ok()
    }

    /// Whether an XTS device is attached.
    pub fn has_xts_device(&self) -> bool {
        self.xts.get().is_some()
    }

    /// The attached XTS device's handle for `raw` (Key1 ‖ Key2) of
    /// `cipher`; `None` without a device, or when it cannot take the key
    /// (logged; that key's requests stay on the CPU).
    pub fn xts_offload(
        &self,
        cipher: warpfs_crypto::XtsCipher,
        raw: &[u8],
    ) -> Option<Arc<dyn warpfs_keystream::XtsOffload>> {
        let dev = self.xts.get()?;
        dev.key(cipher, raw)
            .map_err(|e| tracing::warn!("XTS device {}: {e}; this key's XTS stays on the cpu", dev.name()))
            .ok()
    }

    /// Backend name. The cpu backend's own name says which AES it runs;
    /// an engine that holds only Twofish or XChaCha20 keys names those
    /// instead (a volume of that cipher never touches AES).
    pub fn backend_name(&self) -> String {
        let mut name = self.shared.backend.name();
        let st = &self.shared.stats;
        let n = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let (aes, twofish, xchacha) = (
            n(&st.hardware_keys) + n(&st.software_keys),
            n(&st.twofish_keys),
            n(&st.xchacha_keys),
        );
        if !self.is_device() && aes == 0 && twofish + xchacha > 0 {
            let mut parts = Vec::new();
            if xchacha > 0 {
                parts.push(format!("xchacha20: {}", warpfs_crypto::xchacha::backend()));
            }
            if twofish > 0 {
                parts.push("twofish".to_string());
            }
            name = format!("cpu ({})", parts.join("; "));
        }
        if self.shared.cfg.software_aes {
            format!("{name}, software AES forced for raw keys")
        } else {
            name
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
        s.ahead_threads = self.ahead_threads();
        s.read_ahead = self.read_ahead();
        if let Some(d) = self.shared.backend.device_counts() {
            (s.device_launches, s.device_masks, s.device_cpu_masks) = (d.launches, d.device_masks, d.cpu_masks);
        }
        if let Some(x) = self.xts.get() {
            let c = x.counts();
            s.xts_device = x.name();
            (s.xts_device_requests, s.xts_device_bytes, s.xts_device_fallbacks) = (c.requests, c.bytes, c.fallbacks);
        }
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
