//! Content ciphers by key generation (FORMAT.md 2.2, 10), made from the
//! master key: what the volume needs to open files of any generation it
//! has and to start a rekey while mounted.

use std::sync::Arc;
use warpfs_content::{Cipher, Mode};
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::{ContentCipher, ContentKey, ControlKey, GcmTagger, JournalKey, XChaChaKey, XtsCipher};
use warpfs_engine::{Engine, WritePool};
use warpfs_keystream::{Direct, Keystream};

/// The master key and what the config says about content keys.
pub(crate) struct KeySource {
    /// Locked in memory and zeroized on drop.
    master: MasterKey,
    key_bits: u32,
    mode: Mode,
    /// The cipher (FORMAT.md 7, 11 and 15).
    cipher: ContentCipher,
}

impl KeySource {
    pub(crate) fn new(master: &MasterKey, key_bits: u32, mode: Mode, cipher: ContentCipher) -> Self {
        Self {
            master: master.clone(),
            key_bits,
            mode,
            cipher,
        }
    }

    /// The same, made from another master key (a rekey to a new volume key).
    pub(crate) fn with_master(&self, master: &MasterKey) -> Self {
        Self::new(master, self.key_bits, self.mode, self.cipher)
    }

    /// The content key size in bits.
    pub(crate) fn key_bits(&self) -> u32 {
        self.key_bits
    }

    /// The master key.
    pub(crate) fn master(&self) -> &MasterKey {
        &self.master
    }

    /// Whether files of this volume can have summaries (FORMAT.md 12: the
    /// `gcm` layout, with AES or XChaCha20).
    pub(crate) fn has_summaries(&self) -> bool {
        self.mode == Mode::Gcm && self.cipher != ContentCipher::Twofish
    }

    /// The cipher of key generation `g`: masks from `engine`'s write pool
    /// when one is given (not in `xts`, which has no masks), else made on
    /// the calling thread. A software-AES or device engine is given the raw
    /// key and expands it itself (a device uploads its round keys). A
    /// Twofish key (FORMAT.md 11: the same HKDF bytes as the AES content
    /// key, expanded as Twofish) goes to the engine as raw bytes, and so
    /// does an XChaCha20 key (FORMAT.md 15: the same 32 HKDF bytes).
    pub(crate) fn cipher(&self, engine: Option<&Arc<Engine>>, g: u32) -> Result<Arc<Cipher>, String> {
        if self.cipher == ContentCipher::XChaCha20 {
            return self.xchacha(engine, g);
        }
        let content = match self.cipher {
            ContentCipher::Twofish => {
                let raw = Subkeys::content_key_bytes_gen(&self.master, self.key_bits, g);
                ContentKey::with_cipher(XtsCipher::Twofish, &raw).map_err(|e| e.to_string())?
            }
            _ => Subkeys::derive_gen(&self.master, self.key_bits, g).content,
        };
        let tagger = GcmTagger::new(&content);
        let keystream: Arc<dyn Keystream> = match engine {
            Some(engine) if self.mode != Mode::Xts => {
                let key = if engine.config().software_aes || engine.is_device() || self.cipher != ContentCipher::Aes {
                    let raw = Subkeys::content_key_bytes_gen(&self.master, self.key_bits, g);
                    engine
                        .add_raw_key_cipher(self.cipher, &raw)
                        .map_err(|e| e.to_string())?
                } else {
                    engine.add_key(content)
                };
                // The pool owns the key: once the generation's cipher is
                // gone (a finished rekey dropped it and no open file or
                // read window still uses it) the engine retires the key.
                Arc::new(WritePool::owning(engine.clone(), key).map_err(|e| e.to_string())?)
            }
            _ => Arc::new(Direct::new(content)),
        };
        let c = match (self.mode == Mode::Xts).then(|| self.cipher.block_cipher()).flatten() {
            Some(x) => {
                let c = Cipher::new_xts(
                    Subkeys::xts_key_gen(&self.master, self.key_bits, x, g),
                    keystream,
                    tagger,
                );
                // Big XTS requests are spread over the engine's workers,
                // or run whole on its XTS device (`--engine opencl|cuda`),
                // which gets the raw XTS key and expands it itself.
                match engine {
                    Some(e) if e.has_xts_device() => {
                        let raw = Subkeys::xts_key_bytes_gen(&self.master, self.key_bits, g);
                        let c = c.with_splitter(e.clone());
                        match e.xts_offload(x, &raw) {
                            Some(d) => c.with_xts_device(d),
                            None => c,
                        }
                    }
                    Some(e) => c.with_splitter(e.clone()),
                    None => c,
                }
            }
            None => Cipher::new(self.mode, keystream, tagger),
        };
        Ok(Arc::new(c.with_generation(g)))
    }

    /// The XChaCha20 cipher of key generation `g` (FORMAT.md 15), its masks
    /// from `engine`'s write pool when one is given, else made on the
    /// calling thread.
    fn xchacha(&self, engine: Option<&Arc<Engine>>, g: u32) -> Result<Arc<Cipher>, String> {
        if self.mode == Mode::Xts {
            return Err("XChaCha20 has no XTS mode".into());
        }
        let raw = Subkeys::content_key_bytes_gen(&self.master, self.key_bits, g);
        let keystream: Arc<dyn Keystream> = match engine {
            Some(engine) => {
                let key = engine
                    .add_raw_key_cipher(ContentCipher::XChaCha20, &raw)
                    .map_err(|e| e.to_string())?;
                Arc::new(WritePool::owning(engine.clone(), key).map_err(|e| e.to_string())?)
            }
            None => Arc::new(Direct::xchacha(XChaChaKey::new(&raw).map_err(|e| e.to_string())?)),
        };
        Ok(Arc::new(Cipher::new_xchacha(self.mode, keystream).with_generation(g)))
    }

    /// The key that proves a control request comes from someone who
    /// unlocked the config (warpfs_crypto::control).
    pub(crate) fn control_key(&self) -> ControlKey {
        ControlKey::derive(&self.master)
    }

    /// The key that authenticates rekey undo journals (FORMAT.md 10.3).
    pub(crate) fn journal_key(&self) -> JournalKey {
        JournalKey::derive(&self.master)
    }

    /// The key that authenticates fsck's undo files (FORMAT.md 6b).
    pub(crate) fn undo_key(&self) -> warpfs_crypto::UndoKey {
        warpfs_crypto::UndoKey::derive(&self.master)
    }
}
