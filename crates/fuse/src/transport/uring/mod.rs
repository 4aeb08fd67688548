//! FUSE over io_uring (Linux 6.14+, `fs/fuse/dev_uring.c`): after the INIT
//! handshake on /dev/fuse took `FUSE_OVER_IO_URING`, the kernel waits until
//! every possible CPU has a ring queue with an entry, then queues each
//! request on the queue of the CPU its caller runs on. Here: one thread per
//! queue, pinned to its CPU, with its own io_uring and `depth` entries
//! ([`queue`]); requests are parsed ([`request`]), served by the operations
//! layer ([`dispatch`]) and answered ([`reply`]) in place, in the entry's
//! buffers. FORGET and INTERRUPT stay on /dev/fuse (fuser serves them).
//! docs/decisions/0007-fuse-over-io-uring.md.

mod abi;
mod buf;
mod dispatch;
mod local_wake;
mod queue;
mod roam;

pub use dispatch::Acl;

use crate::ops::Operations;
use crate::Served;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use warpfs_engine::placement;

/// Ring entries per queue thread when not told otherwise (measured:
/// docs/decisions/0007-fuse-over-io-uring.md).
pub const DEFAULT_DEPTH: usize = 2;
/// Queue threads per CPU when not told otherwise: two, so a queue that
/// receives a file's writeback can encrypt one WRITE while its second
/// thread takes the next (measured:
/// docs/decisions/0113-two-threads-per-ring-queue.md).
pub const DEFAULT_THREADS: usize = 2;
/// Bytes of each entry's payload buffer: the largest request or reply the
/// mount negotiates (`max_write` and `max_pages` of 1 MiB).
pub const PAYLOAD: usize = 1 << 20;

/// How the ring is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingOptions {
    /// Entries per thread.
    pub depth: usize,
    /// Threads per queue (each with its own entries): a request that blocks
    /// holds up only its thread.
    pub threads: usize,
    /// Keep a reader woken by a small READ answer, or a caller woken by
    /// its answer, on its CPU ([`local_wake`]), where the threads can leave idle
    /// priority again.
    pub local_wake: bool,
    /// Let a thread leave its CPU while it serves large writes ([`roam`]).
    pub roam: bool,
    /// `-o uring_enable`: turn the kernel's `enable_uring` on for this
    /// mount, and back at its end (`crate::transport::enable`).
    pub enable_param: bool,
}

impl Default for RingOptions {
    fn default() -> Self {
        Self {
            depth: DEFAULT_DEPTH,
            threads: DEFAULT_THREADS,
            local_wake: true,
            roam: true,
            enable_param: false,
        }
    }
}

/// The running ring: its queue threads.
pub struct Ring {
    threads: Vec<JoinHandle<()>>,
    wakes: Vec<OwnedFd>,
    _dev: OwnedFd,
    /// What the queue threads counted.
    counts: Arc<queue::Counts>,
    /// Which CPUs were idle lately (with `local_wake`).
    idle: Option<placement::idle::IdleCpus>,
    /// Queues (possible CPUs).
    pub queues: usize,
    pub options: RingOptions,
}

/// The message of a ring that did not start because the mount was
/// already gone.
pub const GONE: &str = "the connection ended before the ring started";

fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd has no pointer arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether this process can make an io_uring with 128-byte SQEs at all
/// (`kernel.io_uring_disabled`, seccomp, old kernels say no).
pub fn usable() -> Result<(), String> {
    io_uring::IoUring::<io_uring::squeue::Entry128, io_uring::cqueue::Entry>::builder()
        .build(2)
        .map(drop)
        .map_err(|e| format!("cannot create an io_uring: {e}"))
}

impl Ring {
    /// Start the queues on the session's /dev/fuse `dev` and register every
    /// entry. On failure the kernel is told to fall back to /dev/fuse
    /// (nothing waits for a ring that will never be ready) and the error
    /// says why; [`GONE`] when the connection ended first (unmounted right
    /// away), which is no error.
    pub fn start<T: Operations>(
        dev: BorrowedFd<'_>,
        ops: Arc<Served<T>>,
        acl: Acl,
        options: RingOptions,
    ) -> Result<Ring, String> {
        let dev = dev
            .try_clone_to_owned()
            .map_err(|e| format!("cannot duplicate /dev/fuse: {e}"))?;
        let queues = placement::possible_cpus();
        let (tx, rx) = mpsc::channel();
        let mut ring = Ring {
            threads: Vec::new(),
            wakes: Vec::new(),
            _dev: dev,
            counts: Arc::default(),
            idle: None,
            queues,
            options,
        };
        let fail = |ring: Ring, why: String| -> Result<Ring, String> {
            if let Err(e) = queue::refuse(ring._dev.as_raw_fd()) {
                tracing::error!("cannot make the kernel fall back to /dev/fuse: {e}");
            }
            ring.stop();
            Err(why)
        };
        if ring.options.local_wake && !local_wake::available() {
            tracing::info!(
                "io_uring: a reader woken by a read answer may move to another CPU: the ring threads \
                 cannot leave SCHED_IDLE again (needs root, CAP_SYS_NICE or RLIMIT_NICE 20)"
            );
            ring.options.local_wake = false;
        }
        if ring.options.local_wake {
            match placement::idle::IdleCpus::start(queues) {
                Ok(s) => ring.idle = Some(s),
                Err(e) => {
                    tracing::warn!("io_uring: cannot start the idle-CPU sampler ({e}): readers kept local always")
                }
            }
        }
        let busy: Arc<[usize]> = placement::busy_cpus().into();
        if ring.options.roam && !busy.is_empty() {
            tracing::info!(
                "io_uring: ring threads never roam onto the keystream workers' CPUs ({})",
                placement::format_cpu_list(&busy)
            );
        }
        for qid in 0..queues {
            for t in 0..options.threads.max(1) {
                let wake = match eventfd() {
                    Ok(w) => w,
                    Err(e) => return fail(ring, format!("eventfd: {e}")),
                };
                let spec = queue::Spec {
                    qid: qid as u16,
                    cpu: Some(qid),
                    depth: options.depth.max(1),
                    payload: PAYLOAD,
                    local_wake: ring.options.local_wake,
                    roam: ring.options.roam,
                    busy: busy.clone(),
                    idle: ring.idle.as_ref().map(|s| s.flags.clone()),
                };
                let (devfd, wakefd, ops, tx) = (ring._dev.as_raw_fd(), wake.as_raw_fd(), ops.clone(), tx.clone());
                let counts = ring.counts.clone();
                ring.wakes.push(wake);
                let spawned = std::thread::Builder::new()
                    .name(format!("warpfs-ring-{qid}.{t}"))
                    .spawn(move || queue::run(devfd, wakefd, spec, ops, acl, tx, counts));
                match spawned {
                    Ok(h) => ring.threads.push(h),
                    Err(e) => return fail(ring, format!("cannot start a ring thread: {e}")),
                }
            }
        }
        drop(tx);
        for _ in 0..ring.threads.len() {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return fail(ring, e),
                Err(_) => return fail(ring, "a ring thread died during setup".into()),
            }
        }
        Ok(ring)
    }

    /// Wake every queue thread and wait for it (after the session ended, the
    /// kernel has torn the queues down already; this is for the rest).
    pub fn stop(mut self) {
        for w in &self.wakes {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writing 8 bytes from a live buffer to an eventfd.
            unsafe { libc::write(w.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        tracing::info!(
            "at unmount: {} request(s) served through io_uring",
            self.counts.served.load(Ordering::Relaxed)
        );
        if self.options.roam {
            tracing::info!(
                "at unmount: {} move(s) of a ring thread off its CPU for large writes",
                self.counts.roams.load(Ordering::Relaxed)
            );
        }
        if self.options.local_wake {
            tracing::info!(
                "at unmount: {} small read answer(s) committed with the reader kept on its CPU",
                self.counts.local.load(Ordering::Relaxed)
            );
            tracing::info!(
                "at unmount: {} other answer(s) committed with the caller waiting for it kept on its CPU",
                self.counts.local_calls.load(Ordering::Relaxed)
            );
            tracing::info!(
                "at unmount: {} pause(s) of that while other tasks shared a ring thread's CPU",
                self.counts.backoffs.load(Ordering::Relaxed)
            );
        }
    }

    /// "N queue(s) × T thread(s) × D entries, readers kept on their CPU".
    pub fn describe(&self) -> String {
        format!(
            "{} queue(s) x {} thread(s) x {} entries{}",
            self.queues,
            self.options.threads,
            self.options.depth,
            if self.options.local_wake {
                ", readers kept on their CPU"
            } else {
                ""
            }
        )
    }
}
