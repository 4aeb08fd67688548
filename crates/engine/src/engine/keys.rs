//! The engine's key table: expanded keys registered once, looked up by
//! [`KeyId`] on every mask without a lock or a shared reference count, and
//! retired when their owner is done with them ([`Engine::retire_key`]).
//!
//! Each slot is a `crossbeam_epoch::Atomic` pointer. A lookup pins the
//! calling thread (a write to that thread's own epoch record, no line shared
//! with other threads) and borrows the key for as long as it stays pinned. A
//! retire swaps the slot to null and defers the drop of the expanded key
//! until every thread pinned before the swap has unpinned, then flushes the
//! deferred drop so it runs within microseconds
//! (docs/decisions/0059-retiring-engine-keys.md). Ids are never reused.

use super::Engine;
use crate::stats::Stats;
use crate::{EngineError, MaskCipher};
use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use warpfs_crypto::ContentKey;

/// A key registered with [`Engine::add_key`] / [`Engine::add_raw_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub(super) u32);

impl KeyId {
    /// The key's index (what the C ABI hands out).
    pub fn index(self) -> u32 {
        self.0
    }
}

/// Keys per chunk of the key table, and chunks: 2^20 keys per engine.
const KEY_CHUNK: usize = 1024;
const KEY_CHUNKS: usize = 1024;

/// How long [`Engine::retire_key`] helps the epoch along before it leaves
/// the drop to the next collection: a thread stays pinned for one mask or
/// one device launch, so this is only reached when one is stuck.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// One chunk of the key table: `KEY_CHUNK` slots, null when never set or retired.
type KeyChunk = Box<[Atomic<Arc<MaskCipher>>]>;

/// The engine's keys, each slot at a fixed address for the engine's life.
pub(super) struct KeyTable {
    chunks: Box<[OnceLock<KeyChunk>]>,
    len: AtomicU32,
    push: Mutex<()>,
}

impl KeyTable {
    pub(super) fn new() -> Self {
        Self {
            chunks: (0..KEY_CHUNKS).map(|_| OnceLock::new()).collect(),
            len: AtomicU32::new(0),
            push: Mutex::new(()),
        }
    }

    fn slot(&self, i: u32) -> Option<&Atomic<Arc<MaskCipher>>> {
        if i >= self.len.load(Ordering::Acquire) {
            return None;
        }
        let i = i as usize;
        self.chunks[i / KEY_CHUNK].get().map(|c| &c[i % KEY_CHUNK])
    }

    /// The key at `i`, borrowed while `guard` pins this thread.
    pub(super) fn get<'g>(&'g self, i: u32, guard: &'g Guard) -> Result<&'g Arc<MaskCipher>, EngineError> {
        let p = self
            .slot(i)
            .ok_or(EngineError::UnknownKey(i))?
            .load(Ordering::Acquire, guard);
        // SAFETY: `p` was loaded while `guard` pins this thread, and a
        // retired key is only dropped through `defer_unchecked` after every
        // thread pinned before its slot was cleared has unpinned; a live
        // key is dropped only with the table (`&self` outlives `'g`).
        unsafe { p.as_ref() }.ok_or(EngineError::RetiredKey(i))
    }

    /// Whether `i` names a key that can still be looked up (no pin: the
    /// pointer is compared with null, never followed).
    pub(super) fn check(&self, i: u32) -> Result<(), EngineError> {
        let slot = self.slot(i).ok_or(EngineError::UnknownKey(i))?;
        // SAFETY: the loaded pointer is only compared with null, never
        // dereferenced, so no pin is needed to keep it alive.
        let p = slot.load(Ordering::Acquire, unsafe { epoch::unprotected() });
        if p.is_null() {
            Err(EngineError::RetiredKey(i))
        } else {
            Ok(())
        }
    }

    pub(super) fn push(&self, c: MaskCipher) -> u32 {
        let _g = self.push.lock().unwrap_or_else(|e| e.into_inner());
        let i = self.len.load(Ordering::Relaxed) as usize;
        assert!(
            i < KEY_CHUNK * KEY_CHUNKS,
            "at most {} keys per engine",
            KEY_CHUNK * KEY_CHUNKS
        );
        let chunk = self.chunks[i / KEY_CHUNK].get_or_init(|| (0..KEY_CHUNK).map(|_| Atomic::null()).collect());
        chunk[i % KEY_CHUNK].store(Owned::new(Arc::new(c)), Ordering::Release);
        self.len.store(i as u32 + 1, Ordering::Release);
        i as u32
    }

    /// Clear slot `i` and defer the drop of its key until no thread that
    /// may have loaded it is still pinned; `released` is set (and
    /// `keys_released` counted) once it was dropped.
    fn retire(&self, i: u32, stats: &Arc<Stats>, released: Arc<AtomicBool>) -> Result<(), EngineError> {
        let slot = self.slot(i).ok_or(EngineError::UnknownKey(i))?;
        let guard = epoch::pin();
        let old = slot.swap(Shared::null(), Ordering::AcqRel, &guard);
        if old.is_null() {
            return Err(EngineError::RetiredKey(i));
        }
        Stats::add(&stats.keys_retired, 1);
        let stats = stats.clone();
        // SAFETY: the slot no longer points at `old`, so no lookup pinned
        // after the swap can reach it; the epoch runs this only after every
        // thread pinned before the swap has unpinned, and it runs once.
        unsafe {
            guard.defer_unchecked(move || {
                drop(old.into_owned());
                Stats::add(&stats.keys_released, 1);
                released.store(true, Ordering::Release);
            });
        }
        guard.flush();
        Ok(())
    }
}

impl Drop for KeyTable {
    fn drop(&mut self) {
        for chunk in self.chunks.iter().filter_map(OnceLock::get) {
            for slot in chunk.iter() {
                // SAFETY: `&mut self`: no thread can look a key up any more
                // (the workers hold the table through `Shared`, so they are
                // gone), and retired slots are null (their keys belong to
                // the deferred drops).
                let p = slot.swap(Shared::null(), Ordering::Relaxed, unsafe { epoch::unprotected() });
                if !p.is_null() {
                    // SAFETY: as above; each live key is owned by its slot alone.
                    drop(unsafe { p.into_owned() });
                }
            }
        }
    }
}

impl Engine {
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
    /// Twofish and XChaCha20: see [`MaskCipher::with_cipher`]).
    pub fn add_raw_key_cipher(
        &self,
        cipher: impl Into<warpfs_crypto::ContentCipher>,
        key: &[u8],
    ) -> Result<KeyId, EngineError> {
        Ok(self.push_key(MaskCipher::with_cipher(cipher, key, self.shared.cfg.software_aes)?))
    }

    fn push_key(&self, c: MaskCipher) -> KeyId {
        let st = &self.shared.stats;
        Stats::add(
            if c.cipher() == warpfs_crypto::ContentCipher::Twofish {
                &st.twofish_keys
            } else if c.cipher() == warpfs_crypto::ContentCipher::XChaCha20 {
                &st.xchacha_keys
            } else if c.is_software() {
                &st.software_keys
            } else {
                &st.hardware_keys
            },
            1,
        );
        KeyId(self.shared.keys.push(c))
    }

    /// Retire `key`: from now on every use of it fails with
    /// [`EngineError::RetiredKey`] (defining a context, making or applying
    /// a mask, even one made before), queued masks for it are dropped
    /// unmade, and its expanded key (zeroized on drop) is dropped as soon as
    /// no thread still uses it, normally before this returns. Masks already
    /// made for it go with the contexts that hold them (the owner's write
    /// pool and read windows); a context found holding one is emptied on
    /// its next use. Retire a key only once no write pool or read window
    /// uses it (they panic on a retired key, as on any broken invariant);
    /// [`WritePool::owning`](crate::WritePool::owning) retires its key by
    /// itself once the pool and its read windows are gone.
    pub fn retire_key(&self, key: KeyId) -> Result<(), EngineError> {
        let released = Arc::new(AtomicBool::new(false));
        self.shared.keys.retire(key.0, &self.shared.stats, released.clone())?;
        self.purge_queued(key);
        // Help the epoch along: each pin-and-flush advances it once no
        // thread is pinned in an older one, and the drop runs two epochs
        // after the swap. A thread pinned itself would hold it back.
        let t0 = Instant::now();
        while !released.load(Ordering::Acquire) && !epoch::is_pinned() && t0.elapsed() < RELEASE_WAIT {
            epoch::pin().flush();
            std::thread::yield_now();
        }
        Ok(())
    }

    /// The expanded key behind `key`.
    pub fn cipher(&self, key: KeyId) -> Result<Arc<MaskCipher>, EngineError> {
        let guard = epoch::pin();
        self.key_ref(key, &guard).cloned()
    }

    /// The expanded key behind `key`, borrowed while `guard` pins this
    /// thread (no reference count touched).
    pub(super) fn key_ref<'g>(&'g self, key: KeyId, guard: &'g Guard) -> Result<&'g Arc<MaskCipher>, EngineError> {
        self.shared.keys.get(key.0, guard)
    }
}

/// A key retired when its last holder drops it: what a write pool that
/// owns its key shares with the read windows it hands out.
pub(crate) struct KeyLease {
    engine: Arc<Engine>,
    key: KeyId,
}

impl KeyLease {
    pub(crate) fn new(engine: Arc<Engine>, key: KeyId) -> Self {
        Self { engine, key }
    }
}

impl Drop for KeyLease {
    fn drop(&mut self) {
        if let Err(e) = self.engine.retire_key(self.key) {
            tracing::warn!("retiring engine key {}: {e}", self.key.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cipher(b: u8) -> MaskCipher {
        MaskCipher::new(&[b; 16], false).unwrap()
    }

    #[test]
    fn the_table_refuses_unknown_and_retired_ids_and_drops_what_it_holds() {
        let t = KeyTable::new();
        let stats = Arc::new(Stats::default());
        assert_eq!(t.check(0), Err(EngineError::UnknownKey(0)));
        let (a, b) = (t.push(cipher(1)), t.push(cipher(2)));
        assert_eq!((a, b), (0, 1));
        let guard = epoch::pin();
        let weak_a = Arc::downgrade(t.get(a, &guard).unwrap());
        let weak_b = Arc::downgrade(t.get(b, &guard).unwrap());
        drop(guard);
        let released = Arc::new(AtomicBool::new(false));
        t.retire(a, &stats, released.clone()).unwrap();
        assert_eq!(t.check(a), Err(EngineError::RetiredKey(a)));
        assert_eq!(t.get(a, &epoch::pin()).map(|_| ()), Err(EngineError::RetiredKey(a)));
        assert_eq!(
            t.retire(a, &stats, Arc::new(AtomicBool::new(false))),
            Err(EngineError::RetiredKey(a))
        );
        assert_eq!(
            t.retire(7, &stats, Arc::new(AtomicBool::new(false))),
            Err(EngineError::UnknownKey(7))
        );
        assert!(t.check(b).is_ok());
        // The deferred drop runs once the epoch has moved on twice.
        while !released.load(Ordering::Acquire) {
            epoch::pin().flush();
        }
        assert!(weak_a.upgrade().is_none());
        assert_eq!(stats.keys_released.load(Ordering::Relaxed), 1);
        // Dropping the table drops the keys still in it.
        assert!(weak_b.upgrade().is_some());
        drop(t);
        assert!(weak_b.upgrade().is_none());
    }
}
