//! The `Volume`: an unlocked CIPHERDIR with its keys, ready for operations.

use crate::dirfds::DirFds;
use crate::dirview::cache::DirCache;
use crate::error::{Error, Result};
use crate::files::FileTable;
use crate::keysource::KeySource;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use warpfs_backing::{Dir, Expect, Loc, Root};
use warpfs_config::{Config, ContentMode};
use warpfs_content::{Cipher, Keyring, Mode};
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::names::NameCipher;
use warpfs_crypto::seal::Sealer;
use warpfs_engine::{Engine, StatsSnapshot};

/// Mount-time options of a volume.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Refuse every modification with EROFS.
    pub read_only: bool,
}

/// An unlocked volume.
pub struct Volume {
    /// CIPHERDIR, held open: every backing entry is reached beneath it.
    pub(crate) root: Root,
    /// The name and seal keys: a rekey to a new volume key on a mount
    /// changes them (while [`Volume::serving`] holds every request off).
    naming: RwLock<Arc<Naming>>,
    pub(crate) ivs: DirCache,
    /// Backing directories kept open for `*at` calls.
    pub(crate) dirfds: DirFds,
    /// The content ciphers by key generation (FORMAT.md 10), shared with
    /// every open file; an online rekey adds the next generation.
    pub(crate) keys: Arc<Keyring>,
    pub(crate) mode: Mode,
    /// Makes the ciphers of further key generations (an online rekey);
    /// a rekey to a new volume key on a mount changes it at its start.
    keysource: RwLock<Arc<KeySource>>,
    /// Every request through the mount holds it shared
    /// ([`Volume::serving`]); the name part of a rekey to a new volume key
    /// on a mount holds it alone.
    gate: RwLock<()>,
    /// The rekey to a new volume key under way on this mount, if any.
    pub(crate) handover: std::sync::Mutex<Option<crate::rekey::Handover>>,
    /// The speculative engine every mask comes from, once attached.
    engine: Option<Arc<Engine>>,
    pub(crate) files: Arc<FileTable>,
    pub(crate) opts: Options,
    /// The daemon runs as root: new entries are given to the caller.
    pub(crate) chown_new: bool,
    /// The online rekey's state (FORMAT.md 10, `warpfs rekey` on a mount).
    pub(crate) online: crate::rekey::Online,
    /// Held shared by every rename; an online rekey's last look over
    /// CIPHERDIR holds it alone, so no file moves out of its sight.
    pub(crate) renames: Arc<std::sync::RwLock<()>>,
    /// The versions seen, when the mount remembers them (FORMAT.md 16).
    seen: std::sync::OnceLock<Arc<crate::seen::Seen>>,
    /// Commits the summaries of files closed (a mount's, with summaries).
    committer: std::sync::OnceLock<Arc<crate::committer::Committer>>,
    /// Symlink targets and xattr values are bound to their entry
    /// (`bound-seals`, FORMAT.md 5).
    pub(crate) bound_seals: bool,
}

/// The keys of names, symlink targets and xattrs (FORMAT.md 4, 5).
pub(crate) struct Naming {
    pub(crate) names: NameCipher,
    pub(crate) sealer: Sealer,
}

/// Who asks for an operation (for ownership of new entries).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

impl Volume {
    /// Open CIPHERDIR with its loaded config and unlocked master key. Masks
    /// are made on the calling thread until [`Volume::use_engine`]. Mid-rekey
    /// (the config has a rekey target) files of the old key generation stay
    /// readable. A volume whose rekey to a new volume key is unfinished is
    /// refused: its names are under two keys until `warpfs rekey` finishes
    /// it (FORMAT.md 10.5); so is one mid-upgrade to file summaries, unless
    /// read-only (its files are of both versions until `warpfs upgrade`
    /// finishes, FORMAT.md 12.6).
    pub fn open(
        cipherdir: &Path,
        config: &Config,
        master: &MasterKey,
        opts: Options,
    ) -> std::result::Result<Volume, String> {
        if config.volume_rekey_under_way() {
            return Err(format!(
                "{}: {}",
                cipherdir.display(),
                crate::rekey::VOLUME_REKEY_UNFINISHED
            ));
        }
        if config.summary_upgrade_under_way() && !opts.read_only {
            return Err(format!(
                "{}: {}",
                cipherdir.display(),
                crate::upgrade::UPGRADE_UNFINISHED
            ));
        }
        Self::open_keys(cipherdir, config, master, None, opts)
    }

    /// [`Volume::open`] with the generation before the write generation
    /// made from `previous` instead of `master` (a rekey to a new volume
    /// key, whose previous generation is of the old volume key), and the
    /// file summaries under `previous`'s key until they are sealed again.
    pub(crate) fn open_keys(
        cipherdir: &Path,
        config: &Config,
        master: &MasterKey,
        previous: Option<&MasterKey>,
        opts: Options,
    ) -> std::result::Result<Volume, String> {
        let root = Root::open(cipherdir).map_err(|e| format!("{}: {e}", cipherdir.display()))?;
        crate::diriv::read(root.top()).map_err(|e| {
            format!(
                "{}: missing or corrupt {} ({e})",
                root.path().display(),
                crate::diriv::DIRIV_NAME
            )
        })?;
        let write = config.write_generation();
        let subkeys = Subkeys::derive_gen(master, config.key_bits(), write);
        let mode = content_mode(config.content_mode());
        let keysource = KeySource::new(master, config.key_bits(), mode, config.content_mode().cipher());
        let old = previous.map(|p| KeySource::new(p, config.key_bits(), mode, config.content_mode().cipher()));
        let previous_gen = match config.rekey_target() {
            Some(_) => Some(
                old.as_ref()
                    .unwrap_or(&keysource)
                    .cipher(None, config.key_generation())?,
            ),
            None => None,
        };
        let summary = config
            .has_feature(warpfs_config::FeatureFlag::FileSummary)
            .then(|| Arc::new(warpfs_crypto::SummaryKey::derive(previous.unwrap_or(master))));
        let keys = Arc::new(Keyring::new(keysource.cipher(None, write)?, previous_gen).with_summary(summary));
        Ok(Volume {
            root,
            naming: RwLock::new(Arc::new(Naming {
                names: subkeys.names,
                sealer: subkeys.seal,
            })),
            ivs: DirCache::default(),
            dirfds: DirFds::default(),
            keys,
            mode,
            keysource: RwLock::new(Arc::new(keysource)),
            gate: RwLock::new(()),
            handover: std::sync::Mutex::new(None),
            engine: None,
            files: Arc::new(FileTable::default()),
            opts,
            chown_new: warpfs_backing::euid() == 0,
            online: crate::rekey::Online::new(config.rekey_id()),
            renames: Arc::default(),
            bound_seals: config.has_feature(warpfs_config::FeatureFlag::BoundSeals),
            seen: std::sync::OnceLock::new(),
            committer: std::sync::OnceLock::new(),
        })
    }

    /// The cipher of key generation `g`, with masks from the engine once
    /// one is attached.
    pub(crate) fn make_cipher(&self, g: u32) -> std::result::Result<Arc<Cipher>, String> {
        self.keysource().cipher(self.engine.as_ref(), g)
    }

    /// What makes the content ciphers and the journal, undo and control
    /// keys.
    pub(crate) fn keysource(&self) -> Arc<KeySource> {
        self.keysource.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Make content ciphers and keys from `k` from now on.
    pub(crate) fn set_keysource(&self, k: KeySource) {
        *self.keysource.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(k);
    }

    /// The name and seal keys.
    pub(crate) fn naming(&self) -> Arc<Naming> {
        self.naming.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Name and seal with `n` from now on.
    pub(crate) fn set_naming(&self, n: Naming) {
        *self.naming.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(n);
    }

    /// Held by every request through the mount for as long as it runs
    /// (shared): the name part of a rekey to a new volume key takes it
    /// alone ([`Volume::hold_requests`]), so no request sees the names
    /// half moved. Take it once per request, never nested.
    pub fn serving(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for every request in flight, and hold off new ones until the
    /// guard is dropped.
    pub(crate) fn hold_requests(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.gate.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Take every mask from the speculative `engine`
    /// (docs/decisions/0038-keystream-seam.md): one [`WritePool`] for the volume replaces the
    /// keystream backend, so every write's mask comes from the pool, and
    /// each file opened from now on reads through its own read window. Call
    /// it before any file is opened (at mount). When the engine forces
    /// software AES (`WARPFS_NO_AESNI=1`) or makes masks on a device (GPU
    /// backends) it is given the raw content key and expands it itself (a
    /// device backend uploads its round keys). Files of the previous key
    /// generation (mid-rekey) keep masks made on the calling thread.
    pub fn use_engine(&mut self, engine: Arc<Engine>) -> std::result::Result<(), String> {
        self.engine = Some(engine);
        // XTS has no keystream to make ahead; its ciphers take the engine
        // as the splitter of big requests.
        let write = self.make_cipher(self.keys.write_generation())?;
        let previous = self
            .keys
            .get(write.generation().wrapping_sub(1))
            .filter(|_| self.keys.rekeying());
        let (summary, witness) = (self.keys.summary(), self.keys.witness());
        let shared = self.keys.shared_storage();
        self.keys = Arc::new(Keyring::new(write, previous).with_summary(summary));
        self.keys.set_witness(witness);
        self.keys.set_shared_storage(shared);
        Ok(())
    }

    /// Remember the versions of files seen in `seen` (FORMAT.md 16): each
    /// file opened from now on is refused when it is a version `seen`
    /// names as replaced, and each commit tells it the version it
    /// replaced. Needs file summaries: without them only the config is
    /// checked (by the caller, [`crate::seen::Seen::check_config`]).
    pub fn remember_versions(&self, seen: Arc<crate::seen::Seen>) {
        if self.keys.summary().is_some() {
            self.keys.set_witness(Some(seen.clone()));
        }
        let _ = self.seen.set(seen);
    }

    /// Commit the summaries of files whose last writable handle closed
    /// on a thread of the volume's, several files under one pair of syncs
    /// (a mount does this; without it each file commits as it closes).
    /// Nothing changes on a volume without file summaries.
    pub fn commit_after_close(&self) {
        if self.keys.summary().is_some() {
            let _ = self.committer.set(crate::committer::Committer::new());
        }
    }

    /// The committer of closed files, if the volume has one.
    pub(crate) fn committer(&self) -> Option<&Arc<crate::committer::Committer>> {
        self.committer.get()
    }

    /// Commit every closed file's summary now and commit inline from now
    /// on (at unmount).
    pub fn finish_commits(&self) {
        if let Some(c) = self.committer.get() {
            c.finish();
        }
    }

    /// Write the versions seen now (at unmount), if they are remembered.
    pub fn flush_versions_seen(&self) {
        if let Some(s) = self.seen.get() {
            if let Err(e) = s.flush() {
                tracing::warn!("versions seen not written: {e}");
            }
        }
    }

    /// The key that authenticates this volume's rekey undo journals.
    pub(crate) fn journal_key(&self) -> warpfs_crypto::JournalKey {
        self.keysource().journal_key()
    }

    /// The key that authenticates this volume's fsck undo files.
    pub(crate) fn undo_key(&self) -> warpfs_crypto::UndoKey {
        self.keysource().undo_key()
    }

    /// The attached engine, if any.
    pub fn engine(&self) -> Option<&Arc<Engine>> {
        self.engine.as_ref()
    }

    /// The engine's counters, when an engine is attached.
    pub fn engine_stats(&self) -> Option<StatsSnapshot> {
        self.engine.as_ref().map(|e| e.stats())
    }

    /// Whether `tag` proves that control request `name` with `value` (an
    /// online rekey's start or finish) comes from someone who unlocked the
    /// config: its HMAC under the control key of this volume's master key
    /// (`warpfs_crypto::ControlKey`), checked in constant time.
    /// During a rekey to a new volume key on this mount the old key's
    /// control key proves requests too (the one that started it).
    pub fn control_proof_ok(&self, name: &[u8], value: &[u8], tag: &[u8]) -> bool {
        self.keysource().control_key().verify(name, value, tag)
            || self
                .handover
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|h| h.old_control().verify(name, value, tag))
    }

    /// Set up a freshly initialised CIPHERDIR (writes the root directory IV).
    pub fn init_root(cipherdir: &Root) -> std::io::Result<()> {
        crate::diriv::create(cipherdir.top())
            .map(|_| ())
            .map_err(|e| std::io::Error::from_raw_os_error(e.0))
    }

    /// The backing root's canonical path (for messages and the mount
    /// table; never used to reach a backing file).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// CIPHERDIR, held open (the door every backing entry is reached
    /// through).
    pub fn backing(&self) -> &Root {
        &self.root
    }

    /// A backing path relative to CIPHERDIR as a path for messages.
    pub(crate) fn shown(&self, rel: &Path) -> PathBuf {
        self.root.shown(rel)
    }

    /// Keep backing directories open for `ttl` after they were opened, and
    /// name their entries relative to them (docs/decisions/
    /// 0070-backing-directory-descriptors.md); zero (the default) keeps
    /// none. A mount of shared storage keeps none.
    pub fn keep_dirs_open(&mut self, ttl: std::time::Duration) {
        self.dirfds.set_ttl(ttl);
    }

    /// The backing directory at `rel`.
    pub(crate) fn dir(&self, rel: &Path) -> Result<Dir> {
        self.dirfds.get(rel, || self.root.dir(rel))
    }

    /// The backing entry at `rel`, as its directory and its name (use
    /// `dir.entry(&name)`).
    pub(crate) fn at(&self, rel: &Path) -> Result<(Dir, OsString)> {
        if let (Some(p), Some(n)) = (rel.parent(), rel.file_name()) {
            if warpfs_backing::is_plain(rel.as_os_str().as_encoded_bytes()) {
                return Ok((self.dir(p)?, n.to_owned()));
            }
        }
        // The root: the entry `.` of itself (anything else is refused).
        self.root.entry(rel)
    }

    /// Open the backing cipher file at `rel` with open(2) `flags`.
    pub(crate) fn open_backing(&self, rel: &Path, flags: i32) -> std::io::Result<std::fs::File> {
        let (d, n) = self.at(rel).map_err(io)?;
        warpfs_backing::open_file(&d.entry(&n), flags, 0, Expect::File).map_err(io)
    }

    /// Remove the backing non-directory at `rel`.
    pub(crate) fn unlink_backing(&self, rel: &Path) -> std::io::Result<()> {
        let (d, n) = self.at(rel).map_err(io)?;
        warpfs_backing::unlink(&d.entry(&n)).map_err(io)
    }

    pub(crate) fn writable(&self) -> Result<()> {
        if self.opts.read_only {
            Err(Error::EROFS)
        } else {
            Ok(())
        }
    }

    /// Give a new backing entry to the caller (when running as root), with the
    /// group of a set-group-ID parent directory (`pst`: the parent's
    /// `lstat`, taken before the entry was made).
    pub(crate) fn own(&self, entry: &Loc, pst: &libc::stat, who: Caller) -> Result<()> {
        if !self.chown_new {
            return Ok(());
        }
        let gid = if pst.st_mode & libc::S_ISGID != 0 {
            pst.st_gid
        } else {
            who.gid
        };
        warpfs_backing::lchown(entry, Some(who.uid), Some(gid))
    }

    /// [`own`](Self::own) a new regular file or node made with `mode`: a
    /// chown clears the set-user-ID and set-group-ID bits of a
    /// non-directory (also for root), so the ones the caller asked for
    /// (the kernel already dropped those it may not set) are put back.
    pub(crate) fn own_file(&self, entry: &Loc, pst: &libc::stat, who: Caller, mode: u32) -> Result<()> {
        self.own(entry, pst, who)?;
        if self.chown_new && mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
            warpfs_backing::chmod(entry, mode & 0o7777)?;
        }
        Ok(())
    }
}

fn io(e: Error) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.0)
}

/// The content layout (FORMAT.md 3, 7, 11, 15) of a config's mode:
/// every cipher's ctr, authenticated and xts modes share one each.
pub fn content_mode(m: ContentMode) -> Mode {
    match m {
        ContentMode::Ctr | ContentMode::CtrTwofish | ContentMode::CtrXChaCha20 => Mode::Ctr,
        ContentMode::Gcm | ContentMode::GcmTwofish | ContentMode::XChaCha20Poly1305 => Mode::Gcm,
        ContentMode::Xts | ContentMode::XtsTwofish => Mode::Xts,
    }
}

impl Volume {
    /// The volume's content ciphers by key generation.
    pub fn keys(&self) -> &Arc<Keyring> {
        &self.keys
    }

    /// The content mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether content is XTS (`xts`, `xts-twofish`: no masks, the data
    /// itself goes to a device engine's XTS kernels).
    pub fn is_xts(&self) -> bool {
        self.mode == Mode::Xts
    }

    /// The key generation new files get.
    pub fn generation(&self) -> u32 {
        self.keys.write_generation()
    }

    /// The open file of backing inode `backing_ino` on device `dev`, if
    /// any handle has it open (serves unlinked or replaced files); a view
    /// that is no handle's, so without decrypt-ahead.
    pub fn open_file_of(&self, dev: u64, backing_ino: u64) -> Option<crate::OpenFile> {
        self.files.get(dev, backing_ino).map(crate::OpenFile::shared)
    }

    /// Whether the volume was opened read-only.
    pub fn read_only(&self) -> bool {
        self.opts.read_only
    }
}
