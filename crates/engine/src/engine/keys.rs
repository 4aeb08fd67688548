//! The engine's key table: expanded keys registered once and looked up by
//! [`KeyId`] on every mask, without a lock or a reference count.

use super::Engine;
use crate::stats::Stats;
use crate::{EngineError, MaskCipher};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
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

/// One chunk of the key table: `KEY_CHUNK` slots, each set once.
type KeyChunk = Box<[OnceLock<Arc<MaskCipher>>]>;

/// The engine's keys: append-only, each at a fixed address for the
/// engine's life, read without a lock or a reference count (the hot paths
/// look a key up per mask; an `RwLock<Vec<Arc<_>>>` made every lookup an
/// atomic write to lines shared by the FUSE threads and the workers).
pub(super) struct KeyTable {
    chunks: Box<[OnceLock<KeyChunk>]>,
    len: std::sync::atomic::AtomicU32,
    push: Mutex<()>,
}

impl KeyTable {
    pub(super) fn new() -> Self {
        Self {
            chunks: (0..KEY_CHUNKS).map(|_| OnceLock::new()).collect(),
            len: std::sync::atomic::AtomicU32::new(0),
            push: Mutex::new(()),
        }
    }

    pub(super) fn get(&self, i: u32) -> Option<&Arc<MaskCipher>> {
        if i >= self.len.load(Ordering::Acquire) {
            return None;
        }
        let i = i as usize;
        self.chunks[i / KEY_CHUNK].get()?[i % KEY_CHUNK].get()
    }

    pub(super) fn push(&self, c: MaskCipher) -> u32 {
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
    pub(super) fn key_ref(&self, key: KeyId) -> Result<&Arc<MaskCipher>, EngineError> {
        self.shared.keys.get(key.0).ok_or(EngineError::UnknownKey(key.0))
    }
}
