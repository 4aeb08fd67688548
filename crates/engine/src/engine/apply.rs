//! Applying masks: XOR a context's mask into a caller's buffer when its
//! ticket still holds (waiting for a worker, or making the bytes on the
//! calling thread), and keystream without a context.

use super::context::{publish, Ctx, CtxState, Defined, Mask, Slot, SlotRef, SlotState};
use super::keys::KeyId;
use super::Engine;
use crate::stats::Stats;
use crate::EngineError;
use crossbeam_epoch as epoch;
use std::sync::atomic::Ordering;
use std::time::Instant;
use warpfs_crypto::{Nonce, TagMask, TAG_MASK_LEN};

/// How long an `apply` waits for a mask a device is making before it makes
/// the bytes on its own thread (the hybrid policy of the GPU papers).
const DEVICE_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// How long an apply spins for a mask a cpu worker is making before it
/// makes the bytes itself: a worker makes one 4 KiB mask in ~0.3 us with
/// VAES, so taking longer means the worker lost its CPU, and waiting for it
/// (spinning in lockstep behind it, or sleeping until a wake-up crosses
/// CPUs) costs more than the mask. Measured on a 2-vCPU VM with a
/// competing thread on the workers' CPU: 20 us of spinning let the reader
/// fall into lockstep behind a descheduled worker (2 GB/s instead of 7-9).
/// A slow cipher's worker needs one mask's time (`MaskCipher::mask_time`,
/// ~10 us for a 4 KiB Twofish mask): an apply waits up to that long, as
/// making the bytes itself would take as long and duplicate the work.
const APPLY_SPIN: std::time::Duration = std::time::Duration::from_micros(1);

/// The longest an apply spins for a slow cipher's worker.
const APPLY_SPIN_MAX: std::time::Duration = std::time::Duration::from_micros(100);

/// The most counter blocks one nonce has (32-bit counter).
const MAX_BLOCKS: u64 = 1 << 32;

/// What one `apply` found (for the stats).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Hit,
    Waited,
    Inline,
}

impl Engine {
    /// XOR mask bytes `[offset, offset + buf.len())` of the definition
    /// `ticket` into `buf`. Mask offset 0 is block counter
    /// `ticket.counter()` (with [`define`](Self::define): 0..16 = E(J0),
    /// 16.. = data keystream). Bytes past the context's mask length are
    /// computed directly. Fails without touching `buf` when the context no
    /// longer holds `ticket`'s definition.
    pub fn apply(&self, ctx: &Ctx, ticket: &Defined, buf: &mut [u8], offset: usize) -> Result<(), EngineError> {
        self.apply_parts(&ctx.slot, ticket, &mut [(offset, buf)])
    }

    /// Encrypt or decrypt one content block with the warpfs layout of the
    /// ticket's key ([`Defined::layout`]): `buf` gets the data keystream
    /// (mask bytes 16.., or 64.. for XChaCha20) and the returned tag mask
    /// is the mask's first bytes (E(J0), or the Poly1305 key).
    pub fn apply_block(&self, ctx: &Ctx, ticket: &Defined, buf: &mut [u8]) -> Result<TagMask, EngineError> {
        self.apply_block_in(&ctx.slot, ticket, buf)
    }

    /// [`apply_block`](Self::apply_block) through a shared handle.
    pub(crate) fn apply_block_shared(
        &self,
        r: &SlotRef,
        ticket: &Defined,
        buf: &mut [u8],
    ) -> Result<TagMask, EngineError> {
        self.apply_block_in(&r.0, ticket, buf)
    }

    fn apply_block_in(&self, slot: &Slot, ticket: &Defined, buf: &mut [u8]) -> Result<TagMask, EngineError> {
        let l = ticket.layout;
        let mut tm = [0u8; TAG_MASK_LEN];
        self.apply_parts(slot, ticket, &mut [(0, &mut tm[..l.tag_len]), (l.data_at, buf)])?;
        Ok(tm)
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
        let direct = loop {
            if st.gen != ticket.gen {
                return Err(EngineError::Redefined);
            }
            match st.phase {
                CtxState::Ready => {
                    let def = st.def.expect("a ready context is defined");
                    // A retired key's mask is never applied: it is dropped.
                    if let Err(e) = self.shared.keys.check(def.key.0) {
                        forget_mask(&mut st);
                        return Err(e);
                    }
                    // Whatever lies past the mask is made directly, for the
                    // same definition (the key is looked up before the mask
                    // touches the buffer, so a failure leaves it alone).
                    let past = parts.iter().any(|(off, buf)| off + buf.len() > slot.len);
                    let guard = past.then(epoch::pin);
                    let cipher = match &guard {
                        Some(g) => Some(self.key_ref(def.key, g)?),
                        None => None,
                    };
                    let mask = st.mask.as_deref().expect("a ready context has its mask");
                    for (off, buf) in parts.iter_mut() {
                        if *off < mask.len() {
                            let n = buf.len().min(mask.len() - *off);
                            warpfs_crypto::aes_ctr::xor_in_place(&mut buf[..n], &mask[*off..*off + n]);
                        }
                    }
                    st.applied = true;
                    drop(st);
                    if let Some(cipher) = cipher {
                        for (off, buf) in parts.iter_mut() {
                            let start = (*off).max(slot.len);
                            if start < *off + buf.len() {
                                let skip = start - *off;
                                cipher.xor_at(&def.nonce, def.counter, start as u64, &mut buf[skip..]);
                            }
                        }
                    }
                    break past;
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
                        let guard = epoch::pin();
                        let cipher = self.key_ref(def.key, &guard)?;
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
                    let spin = self.apply_spin(ticket.key);
                    // (A redefinition is seen after the spin, under the lock.)
                    while slot.ready.load(Ordering::Acquire) != ticket.gen && t0.elapsed() < spin {
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
                        let guard = epoch::pin();
                        let cipher = self.key_ref(ticket.key, &guard)?;
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
                    let guard = epoch::pin();
                    let cipher = self.key_ref(ticket.key, &guard)?;
                    st.applied = true;
                    drop(st);
                    for (off, buf) in parts.iter_mut() {
                        cipher.xor_at(&ticket.nonce, ticket.counter, *off as u64, buf);
                    }
                    Stats::add(&stats.applies, 1);
                    Stats::add(&stats.inline, 1);
                    return Ok(());
                }
                CtxState::Pending => {
                    // Nobody has started it: make it here rather than queue.
                    let def = st.def.expect("a pending context is defined");
                    let guard = epoch::pin();
                    let cipher = self.key_ref(def.key, &guard)?;
                    outcome = Some(Outcome::Inline);
                    let mut buf = st.mask.take().unwrap_or_else(|| Mask::zeroed(slot.len, &slot.stats));
                    st.phase = CtxState::Making;
                    st.by_worker = false;
                    drop(st);
                    cipher.fill(&def.nonce, def.counter, &mut buf);
                    drop(guard);
                    st = slot.lock();
                    publish(&self.shared, slot, &mut st, ticket.gen, buf, false);
                    if st.waiters > 0 {
                        slot.cond.notify_all();
                    }
                }
                CtxState::Undefined => return Err(EngineError::Redefined),
            }
        };
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

    /// How long an apply spins for a cpu worker making `key`'s mask:
    /// [`APPLY_SPIN`], or one mask's time for a slow cipher.
    fn apply_spin(&self, key: KeyId) -> std::time::Duration {
        let guard = epoch::pin();
        match self.key_ref(key, &guard) {
            Ok(c) if c.is_slow() => c.mask_time().clamp(APPLY_SPIN, APPLY_SPIN_MAX),
            _ => APPLY_SPIN,
        }
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
        let guard = epoch::pin();
        self.key_ref(key, &guard)?.xor_at(nonce, counter, pos, buf);
        Stats::add(&self.shared.stats.direct, 1);
        Ok(())
    }

    /// Encrypt or decrypt one content block (the key's warpfs layout)
    /// directly on this thread, without a context: `buf` gets the data
    /// keystream (counter 2 on; XChaCha20: block 1 on), the result is the
    /// tag mask (E(J0) at counter 1; the Poly1305 key of block 0).
    pub fn open_direct(&self, key: KeyId, nonce: &Nonce, buf: &mut [u8]) -> Result<TagMask, EngineError> {
        if (buf.len() as u64).div_ceil(16) + 4 > MAX_BLOCKS {
            return Err(EngineError::OutOfRange);
        }
        let guard = epoch::pin();
        let cipher = self.key_ref(key, &guard)?;
        let l = cipher.layout();
        let mut tm = [0u8; TAG_MASK_LEN];
        cipher.fill(nonce, l.first, &mut tm[..l.tag_len]);
        cipher.xor_at(nonce, l.first, l.data_at as u64, buf);
        Stats::add(&self.shared.stats.direct, 1);
        Ok(tm)
    }

    /// The tag mask of (`key`, `nonce`) alone, made on this thread.
    pub fn tag_mask_direct(&self, key: KeyId, nonce: &Nonce) -> Result<TagMask, EngineError> {
        let guard = epoch::pin();
        let cipher = self.key_ref(key, &guard)?;
        let l = cipher.layout();
        let mut tm = [0u8; TAG_MASK_LEN];
        cipher.fill(nonce, l.first, &mut tm[..l.tag_len]);
        Stats::add(&self.shared.stats.direct, 1);
        Ok(tm)
    }
}

/// Empty a context whose key was retired: its mask is dropped (zeroed) and
/// it stands pending without a queue entry, so every later apply looks the
/// key up itself and reports it retired.
pub(super) fn forget_mask(st: &mut SlotState) {
    st.mask = None;
    st.phase = CtxState::Pending;
    st.queued = false;
    st.by_worker = false;
}
