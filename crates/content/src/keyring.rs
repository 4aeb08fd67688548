//! The content ciphers of a volume by key generation (FORMAT.md 10): the
//! write generation and, while a rekey is under way, the one before it.
//! Shared by the volume and every open file; an online rekey changes it
//! while files are open.

use crate::cipher::Cipher;
use crate::Mode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

#[derive(Clone)]
struct Gens {
    /// New headers and rekeyed blocks use this one.
    write: Arc<Cipher>,
    /// The generation before `write`, while files may still use it.
    previous: Option<Arc<Cipher>>,
}

/// Ciphers by key generation.
pub struct Keyring {
    mode: Mode,
    gens: RwLock<Gens>,
    /// The volume's file-summary key (`gcm` with `file-summary`, FORMAT.md
    /// 12); a rekey to a new volume key changes it.
    summary: RwLock<Option<Arc<warpfs_crypto::SummaryKey>>>,
    /// What remembers the file versions seen (with summaries only).
    witness: RwLock<Option<Arc<dyn crate::Witness>>>,
    /// Other hosts may write the same cipher files at once (a mount of
    /// shared storage): summaries are coordinated between them (FORMAT.md
    /// 12.7).
    shared: AtomicBool,
    /// The volume is being given its summaries while mounted (FORMAT.md
    /// 12.6): a file without one still opens.
    upgrading: AtomicBool,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = self.read();
        f.debug_struct("Keyring")
            .field("mode", &self.mode)
            .field("write", &g.write.generation())
            .field("previous", &g.previous.as_ref().map(|c| c.generation()))
            .finish()
    }
}

/// What [`crate::CipherFile::open`] and [`crate::scan::scan`] take: a
/// keyring, or one cipher (a keyring of its generation alone).
pub trait IntoKeyring {
    /// The keyring.
    fn into_keyring(self) -> Arc<Keyring>;
}

impl IntoKeyring for Arc<Keyring> {
    fn into_keyring(self) -> Arc<Keyring> {
        self
    }
}

impl IntoKeyring for Arc<Cipher> {
    fn into_keyring(self) -> Arc<Keyring> {
        Arc::new(Keyring::new(self, None))
    }
}

impl Keyring {
    /// A keyring writing with `write`; `previous` (generation
    /// `write.generation() - 1`) stays readable. Panics if the modes or
    /// generations do not fit together (a programming error).
    pub fn new(write: Arc<Cipher>, previous: Option<Arc<Cipher>>) -> Self {
        if let Some(p) = &previous {
            assert_eq!(p.mode(), write.mode(), "keyring ciphers of different modes");
            assert_eq!(
                p.generation().checked_add(1),
                Some(write.generation()),
                "the previous generation must be the write generation minus one"
            );
        }
        Self {
            mode: write.mode(),
            gens: RwLock::new(Gens { write, previous }),
            summary: RwLock::new(None),
            witness: RwLock::new(None),
            shared: AtomicBool::new(false),
            upgrading: AtomicBool::new(false),
        }
    }

    /// This keyring with file summaries (FORMAT.md 12) under `key`: new
    /// files get one and every file must have one. `gcm` only.
    pub fn with_summary(mut self, key: Option<Arc<warpfs_crypto::SummaryKey>>) -> Self {
        assert!(key.is_none() || self.mode == Mode::Gcm, "file summaries are gcm only");
        self.summary = RwLock::new(key);
        self
    }

    /// The file-summary key, when the volume has file summaries.
    pub fn summary(&self) -> Option<Arc<warpfs_crypto::SummaryKey>> {
        self.summary.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Files opened from now on have their summaries under `key` (a rekey
    /// to a new volume key, once every summary was sealed again under it;
    /// open files follow through [`crate::CipherFile::rekey_summary`]).
    /// Does nothing on a keyring without summaries.
    pub fn set_summary(&self, key: Arc<warpfs_crypto::SummaryKey>) {
        let mut g = self.summary.write().unwrap_or_else(|e| e.into_inner());
        if g.is_some() {
            *g = Some(key);
        }
    }

    /// The volume gets file summaries while mounted (FORMAT.md 12.6): from
    /// now on new files get one under `key`, and files without one still
    /// open (until [`Keyring::end_summary_upgrade`]).
    pub fn begin_summary_upgrade(&self, key: Arc<warpfs_crypto::SummaryKey>) {
        self.upgrading.store(true, Ordering::Relaxed);
        *self.summary.write().unwrap_or_else(|e| e.into_inner()) = Some(key);
    }

    /// Every file has its summary: one without is refused again.
    pub fn end_summary_upgrade(&self) {
        self.upgrading.store(false, Ordering::Relaxed);
    }

    /// Whether files without a summary still open (an upgrade under way).
    pub fn summaries_upgrading(&self) -> bool {
        self.upgrading.load(Ordering::Relaxed)
    }

    /// Files opened from now on show their summary records to `w`, and
    /// their commits tell it the version they replaced.
    pub fn set_witness(&self, w: Option<Arc<dyn crate::Witness>>) {
        *self.witness.write().unwrap_or_else(|e| e.into_inner()) = w;
    }

    /// The witness of file versions, if one is set.
    pub fn witness(&self) -> Option<Arc<dyn crate::Witness>> {
        self.witness.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Other hosts may write the volume's files at once (a mount of shared
    /// storage): files written from now on coordinate their summaries with
    /// them through locks on the cipher file (FORMAT.md 12.7).
    pub fn set_shared_storage(&self, on: bool) {
        self.shared.store(on, Ordering::Relaxed);
    }

    /// Whether summaries are coordinated with other hosts.
    pub fn shared_storage(&self) -> bool {
        self.shared.load(Ordering::Relaxed)
    }

    fn read(&self) -> Gens {
        self.gens.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The content mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The cipher new headers and rekeyed blocks use.
    pub fn write_cipher(&self) -> Arc<Cipher> {
        self.read().write
    }

    /// Generation of [`Keyring::write_cipher`].
    pub fn write_generation(&self) -> u32 {
        self.read().write.generation()
    }

    /// Whether a generation before the write generation is still readable
    /// (a rekey is under way).
    pub fn rekeying(&self) -> bool {
        self.read().previous.is_some()
    }

    /// The cipher of generation `g`, if the volume has it.
    pub fn get(&self, g: u32) -> Option<Arc<Cipher>> {
        let gens = self.gens.read().unwrap_or_else(|e| e.into_inner());
        if gens.write.generation() == g {
            return Some(gens.write.clone());
        }
        gens.previous.as_ref().filter(|c| c.generation() == g).cloned()
    }

    /// Start a rekey: `target` (the write generation plus one) becomes the
    /// write cipher and the current one stays readable. Starting again
    /// with the current write generation changes nothing. Errors name what
    /// does not fit.
    pub fn begin_rekey(&self, target: Arc<Cipher>) -> Result<(), String> {
        let mut g = self.gens.write().unwrap_or_else(|e| e.into_inner());
        let cur = g.write.generation();
        if target.mode() != self.mode {
            return Err("the new key's mode differs from the volume's".into());
        }
        if target.generation() == cur && g.previous.is_some() {
            return Ok(());
        }
        if cur.checked_add(1) != Some(target.generation()) {
            return Err(format!(
                "cannot rekey from key generation {cur} to {}",
                target.generation()
            ));
        }
        let old = std::mem::replace(&mut g.write, target);
        g.previous = Some(old);
        Ok(())
    }

    /// End a rekey: only the write generation stays.
    pub fn end_rekey(&self) {
        self.gens.write().unwrap_or_else(|e| e.into_inner()).previous = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpfs_crypto::{ContentKey, GcmTagger};
    use warpfs_keystream::Direct;

    fn c(g: u32, byte: u8) -> Arc<Cipher> {
        let key = ContentKey::new(&[byte; 32]).unwrap();
        let t = GcmTagger::new(&key);
        Arc::new(Cipher::new(Mode::Gcm, Arc::new(Direct::new(key)), t).with_generation(g))
    }

    #[test]
    fn generations_come_and_go() {
        let k = Keyring::new(c(3, 1), None);
        assert_eq!(k.write_generation(), 3);
        assert!(k.get(3).is_some() && k.get(2).is_none() && k.get(4).is_none());
        assert!(!k.rekeying());
        assert!(k.begin_rekey(c(5, 2)).is_err());
        k.begin_rekey(c(4, 2)).unwrap();
        assert!(k.rekeying());
        assert_eq!(k.write_generation(), 4);
        assert!(k.get(3).is_some() && k.get(4).is_some());
        // Again with the same target: nothing changes.
        k.begin_rekey(c(4, 3)).unwrap();
        assert_eq!(k.get(3).unwrap().generation(), 3);
        k.end_rekey();
        assert!(k.get(3).is_none() && k.get(4).is_some());
        assert_eq!(Keyring::new(c(1, 1), Some(c(0, 2))).get(0).unwrap().generation(), 0);
    }

    #[test]
    #[should_panic]
    fn previous_must_be_one_before() {
        let _ = Keyring::new(c(3, 1), Some(c(1, 2)));
    }
}
