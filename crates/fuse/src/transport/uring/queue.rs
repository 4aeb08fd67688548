//! One ring queue thread: pinned to its CPU, its own io_uring (SQE128),
//! `depth` entries whose header and payload buffers are allocated once
//! (locked in RAM, wiped at the end: [`super::buf`]);
//! REGISTER each entry, then serve: every completion is a request, answered
//! and the next one fetched with one COMMIT_AND_FETCH. The thread ends when
//! the kernel tears the queue down (unmount, abort) or when woken through
//! its eventfd.

use super::abi::{self, Le, CMD_COMMIT_AND_FETCH, CMD_REGISTER, HEADER_SZ, IN_HEADER_SZ, OP_IN_OFF, OP_IN_SZ};
use super::buf::Buf;
use super::dispatch::{handle, Acl};
use super::local_wake::{self, Waiter};
use super::roam::{Batch, Roam};
use crate::ops::{Errno, Operations};
use crate::Served;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Instant;

/// user_data of the eventfd poll that ends the thread.
const WAKE: u64 = u64::MAX;

/// What one queue thread serves.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The queue (CPU) index.
    pub qid: u16,
    /// Pin the thread here.
    pub cpu: Option<usize>,
    /// Ring entries (requests in flight) of this thread.
    pub depth: usize,
    /// Bytes of each payload buffer (at least the kernel's max payload).
    pub payload: usize,
    /// Commit answers somebody waits for at idle priority ([`local_wake`]).
    pub local_wake: bool,
    /// Leave the CPU while serving large writes ([`super::roam`]).
    pub roam: bool,
    /// CPUs never to roam to (the file system's busy ones).
    pub busy: Arc<[usize]>,
    /// Which CPUs were idle lately (only with `local_wake`).
    pub idle: Option<Arc<warpfs_engine::placement::idle::Flags>>,
}

/// One ring entry: its buffers and the iovecs REGISTER hands over.
struct Slot {
    header: Buf,
    payload: Buf,
    iov: Box<[libc::iovec; 2]>,
    /// The command to submit again after -EINTR/-EAGAIN.
    last: u32,
    commit_id: u64,
    /// Who waits for the answer.
    waiter: Waiter,
    /// The size of the last answer's payload.
    answer: usize,
}

impl Slot {
    /// The opcode and payload size of the request the kernel just put in
    /// the entry ((0, 0) when the header does not parse; `serve` reports it).
    fn request_kind(&self) -> (u32, usize) {
        let hdr = self.header.bytes();
        let opcode = abi::InHeader::parse(&hdr[..IN_HEADER_SZ]).map_or(0, |h| h.opcode);
        let size = Le(hdr).u32(abi::PAYLOAD_SZ_OFF).map_or(0, |v| v as usize);
        (opcode, size)
    }

    fn new(payload: usize) -> std::io::Result<Slot> {
        let header = Buf::new(HEADER_SZ)?;
        let payload = Buf::new(payload)?;
        let iov = Box::new([
            libc::iovec {
                iov_base: header.ptr().cast(),
                iov_len: HEADER_SZ,
            },
            libc::iovec {
                iov_base: payload.ptr().cast(),
                iov_len: payload.len(),
            },
        ]);
        Ok(Slot {
            header,
            payload,
            iov,
            last: CMD_REGISTER,
            commit_id: 0,
            waiter: Waiter::Nobody,
            answer: 0,
        })
    }
}

/// The SQE of a fuse ring command on the registered /dev/fuse (fixed file
/// 0). `struct fuse_uring_cmd_req` (flags, commit_id, qid) goes in the
/// command area; REGISTER also passes the entry's two iovecs.
fn sqe(cmd_op: u32, qid: u16, commit_id: u64, iov: Option<&[libc::iovec; 2]>, user_data: u64) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_le_bytes());
    cmd[16..18].copy_from_slice(&qid.to_le_bytes());
    let mut b = opcode::UringCmd80::new(types::Fixed(0), cmd_op).cmd(cmd);
    if let Some(iov) = iov {
        b = b.addr(Some(iov.as_ptr() as u64));
    }
    let e = b.build().user_data(user_data);
    if iov.is_none() {
        return e;
    }
    // The kernel wants the iovec count in `sqe->len`, which the builder
    // does not set: patch the 64-byte SQE's `len` (offset 24).
    const _: () = assert!(std::mem::size_of::<squeue::Entry128>() == 128);
    // SAFETY: Entry128 is repr(C), 128 bytes of plain integers (two
    // io_uring SQE halves); any byte pattern is a valid value.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(e) };
    raw[24..28].copy_from_slice(&2u32.to_le_bytes());
    // SAFETY: as above.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

type Ring = IoUring<squeue::Entry128, cqueue::Entry>;

/// Completions taken from the ring: (user_data, result).
type Completions = Vec<(u64, i32)>;

/// Build the ring and the entries, and REGISTER them. `Err` when nothing
/// was registered (setup failed) or the kernel refused a registration.
/// Also returns the completions already there: a request can arrive on an
/// entry as soon as it is registered.
fn setup(dev: RawFd, wake: RawFd, spec: &Spec) -> std::io::Result<(Ring, Vec<Slot>, Completions)> {
    let n = u32::try_from(spec.depth + 1).map_err(std::io::Error::other)?;
    let mut ring: Ring = IoUring::builder()
        .setup_cqsize(2 * n)
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(n)?;
    ring.submitter().register_files(&[dev])?;
    let slots = (0..spec.depth)
        .map(|_| Slot::new(spec.payload))
        .collect::<std::io::Result<Vec<_>>>()?;
    {
        let mut sq = ring.submission();
        for (i, s) in slots.iter().enumerate() {
            let e = sqe(CMD_REGISTER, spec.qid, 0, Some(&s.iov), i as u64);
            // SAFETY: the iovecs and the buffers they name live in `slots`,
            // which outlive the ring (dropped after it, see `run`).
            unsafe { sq.push(&e) }.map_err(|_| std::io::Error::other("submission queue full"))?;
        }
        let poll = opcode::PollAdd::new(types::Fd(wake), libc::POLLIN as u32)
            .build()
            .user_data(WAKE);
        // SAFETY: the eventfd outlives the ring.
        unsafe { sq.push(&poll.into()) }.map_err(|_| std::io::Error::other("submission queue full"))?;
    }
    ring.submit()?;
    // A refused registration completes at once; anything else here is a
    // request already, served by the loop.
    let early: Completions = ring.completion().map(|c| (c.user_data(), c.result())).collect();
    if let Some(&(_, r)) = early.iter().find(|&&(ud, r)| ud != WAKE && r < 0) {
        return Err(std::io::Error::from_raw_os_error(-r));
    }
    Ok((ring, slots, early))
}

/// Serve one completed entry and queue its COMMIT_AND_FETCH.
fn serve<T: Operations>(ops: &Served<T>, acl: Acl, s: &mut Slot) -> Option<u32> {
    let hdr = s.header.bytes();
    let r = Le(hdr);
    let commit_id = r.u64(abi::COMMIT_ID_OFF).ok()?;
    let payload_sz = r.u32(abi::PAYLOAD_SZ_OFF).ok()? as usize;
    let inh = match abi::InHeader::parse(&hdr[..IN_HEADER_SZ]) {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!("{e}");
            return None;
        }
    };
    if commit_id == 0 {
        tracing::error!("ring request without a commit id: the queue entry is lost");
        return None;
    }
    let mut op_in = [0u8; OP_IN_SZ];
    op_in.copy_from_slice(&hdr[OP_IN_OFF..OP_IN_OFF + OP_IN_SZ]);
    let payload = s.payload.bytes();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handle(ops, acl, &inh, &op_in, payload, payload_sz)
    }))
    .unwrap_or_else(|_| {
        tracing::error!("request {} (opcode {}) panicked: answered EIO", inh.unique, inh.opcode);
        Err(Errno::EIO)
    });
    let (err, len) = match res {
        Ok(n) => (0, n),
        Err(e) => (-i32::from(e), 0),
    };
    abi::put_out_header(&mut hdr[..abi::OUT_HEADER_SZ], len, err, inh.unique).ok()?;
    hdr[abi::PAYLOAD_SZ_OFF..abi::PAYLOAD_SZ_OFF + 4].copy_from_slice(&(len as u32).to_le_bytes());
    s.commit_id = commit_id;
    s.last = CMD_COMMIT_AND_FETCH;
    s.waiter = Waiter::of(inh.opcode, len);
    s.answer = len;
    Some(CMD_COMMIT_AND_FETCH)
}

/// What the queue threads count, for the log line at unmount.
#[derive(Debug, Default)]
pub struct Counts {
    /// Requests served.
    pub served: AtomicU64,
    /// Small READ answers committed at idle priority.
    pub local: AtomicU64,
    /// Other answers a caller waited for, committed at idle priority.
    pub local_calls: AtomicU64,
    /// Pauses of idle-priority commits after a slow way back.
    pub backoffs: AtomicU64,
    /// Moves of a thread off its CPU for large writes.
    pub roams: AtomicU64,
}

/// Submit what is queued with the thread at idle priority, so the reader
/// or caller the commits wake stays on this CPU ([`local_wake`]); the policy is back before
/// the thread waits again.
fn submit_idle(ring: &mut Ring, home: i32) -> std::io::Result<usize> {
    let _idle = local_wake::Idle::enter_from(home);
    ring.submit()
}

/// The queue thread: set up, report, serve until torn down or woken.
pub fn run<T: Operations>(
    dev: RawFd,
    wake: RawFd,
    spec: Spec,
    ops: Arc<Served<T>>,
    acl: Acl,
    ready: Sender<Result<(), String>>,
    counts: Arc<Counts>,
) {
    let mut roam = spec.cpu.and_then(|c| Roam::pin(c, &spec.busy));
    let home = local_wake::home();
    let (mut ring, mut slots, early) = match setup(dev, wake, &spec) {
        Ok(r) => {
            let _ = ready.send(Ok(()));
            r
        }
        Err(e) => {
            let gone = matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED));
            let msg = if gone {
                super::GONE.to_string()
            } else {
                format!("queue {}: {e}", spec.qid)
            };
            let _ = ready.send(Err(msg));
            return;
        }
    };
    let mut live = slots.len();
    let mut done: Completions = early;
    done.reserve(spec.depth + 1);
    let mut first = true;
    let mut governor = local_wake::Governor::default();
    loop {
        if !std::mem::take(&mut first) {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    tracing::error!("ring queue {}: {e}", spec.qid);
                    break;
                }
            }
            done.clear();
            done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        }
        if let Some(f) = &spec.idle {
            f.touch();
        }
        let mut woken = false;
        let mut local = false;
        let mut batch = Batch::default();
        let another_idle = match (&spec.idle, spec.cpu) {
            (Some(f), Some(me)) => f.another_idle(me),
            _ => true,
        };
        let idle_ok = spec.local_wake && home.is_some() && another_idle && governor.allows(Instant::now());
        for &(ud, res) in &done {
            if ud == WAKE {
                woken = true;
                continue;
            }
            let Some(s) = slots.get_mut(ud as usize) else { continue };
            let cmd = match res {
                0 => {
                    counts.served.fetch_add(1, Ordering::Relaxed);
                    let (opcode, size) = s.request_kind();
                    let cmd = serve(&*ops, acl, s);
                    batch.note(opcode, size, s.answer);
                    cmd
                }
                r if r == -libc::EINTR || r == -libc::EAGAIN => Some(s.last),
                r => {
                    if r != -libc::ENOTCONN && r != -libc::ECONNABORTED {
                        tracing::warn!(
                            "ring queue {}: entry ended: {}",
                            spec.qid,
                            std::io::Error::from_raw_os_error(-r)
                        );
                    }
                    None
                }
            };
            let Some(cmd) = cmd else {
                live -= 1;
                continue;
            };
            if idle_ok && cmd == CMD_COMMIT_AND_FETCH && s.waiter != Waiter::Nobody {
                let c = if s.waiter == Waiter::Reader {
                    &counts.local
                } else {
                    &counts.local_calls
                };
                c.fetch_add(1, Ordering::Relaxed);
                local = true;
            }
            let iov = (cmd == CMD_REGISTER).then_some(&*s.iov);
            let e = sqe(cmd, spec.qid, s.commit_id, iov, ud);
            // SAFETY: the entry's buffers live in `slots`; at most one SQE
            // per entry is in flight, so the queue (depth + 1) has room.
            if unsafe { ring.submission().push(&e) }.is_err() {
                tracing::error!("ring queue {}: submission queue full", spec.qid);
                live -= 1;
            }
        }
        if woken || live == 0 {
            break;
        }
        if let Some(r) = roam.as_mut().filter(|_| spec.roam) {
            let before = r.roams;
            r.after(batch);
            if r.roams != before {
                counts.roams.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let (true, Some(home)) = (local, home) {
            let t0 = Instant::now();
            let r = submit_idle(&mut ring, home);
            let t1 = Instant::now();
            let before = governor.backoffs;
            governor.observe(t1 - t0, t1);
            if governor.backoffs != before {
                counts.backoffs.fetch_add(1, Ordering::Relaxed);
            }
            match r {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    tracing::error!("ring queue {}: {e}", spec.qid);
                    break;
                }
            }
        }
    }
    // The ring goes first: dropping it cancels what the kernel still holds
    // before the buffers are freed.
    drop(ring);
    drop(slots);
}

/// Make the kernel give up on the ring and serve through /dev/fuse: a
/// REGISTER it must refuse (a header buffer too short) turns the
/// connection's io_uring off and wakes the requests waiting for the ring.
pub fn refuse(dev: RawFd) -> std::io::Result<()> {
    let mut ring: Ring = IoUring::builder().build(2)?;
    ring.submitter().register_files(&[dev])?;
    let mut hdr = [0u8; 8];
    let iov = [
        libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: hdr.len(),
        },
    ];
    let e = sqe(CMD_REGISTER, 0, 0, Some(&iov), 1);
    // SAFETY: `iov` and `hdr` outlive the wait below.
    unsafe { ring.submission().push(&e) }.map_err(|_| std::io::Error::other("submission queue full"))?;
    ring.submit_and_wait(1)?;
    let res = ring.completion().next().map(|c| c.result());
    match res {
        Some(r) if r < 0 => Ok(()),
        _ => Err(std::io::Error::other("the kernel took a malformed registration")),
    }
}
