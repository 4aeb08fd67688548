//! The `Volume`: an unlocked CIPHERDIR with its keys, ready for operations.

use crate::diriv::DirIvCache;
use crate::error::{Error, Result};
use crate::files::FileTable;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use warpfs_config::{Config, ContentMode};
use warpfs_content::{Cipher, Mode};
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::names::NameCipher;
use warpfs_crypto::seal::Sealer;
use warpfs_crypto::{ContentKey, GcmTagger, XtsKey};
use warpfs_engine::{Engine, StatsSnapshot, WritePool};
use warpfs_keystream::{Direct, Keystream};

/// Mount-time options of a volume.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Refuse every modification with EROFS.
    pub read_only: bool,
}

/// An unlocked volume.
pub struct Volume {
    pub(crate) root: PathBuf,
    pub(crate) names: NameCipher,
    pub(crate) ivs: DirIvCache,
    pub(crate) sealer: Sealer,
    pub(crate) cipher: Arc<Cipher>,
    pub(crate) mode: Mode,
    /// The content key (for [`Volume::use_engine`] and GHASH).
    content_key: ContentKey,
    /// Its key generation (FORMAT.md 10): the one new files get.
    generation: u32,
    /// Ciphers of the older generation files may still use while a rekey
    /// is under way.
    older: Vec<Arc<Cipher>>,
    /// The speculative engine every mask comes from, once attached.
    engine: Option<Arc<Engine>>,
    pub(crate) files: FileTable,
    pub(crate) opts: Options,
    /// The daemon runs as root: new entries are given to the caller.
    pub(crate) chown_new: bool,
    /// Device of the backing root.
    pub(crate) root_dev: u64,
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
    /// Open CIPHERDIR with its loaded config and unlocked master key, using
    /// the direct keystream backend.
    pub fn open(
        cipherdir: &Path,
        config: &Config,
        master: &MasterKey,
        opts: Options,
    ) -> std::result::Result<Volume, String> {
        let generation = config.write_generation();
        let keys = Subkeys::derive_gen(master, config.key_bits(), generation);
        let keystream: Arc<dyn Keystream> = Arc::new(Direct::new(keys.content.clone()));
        let xts = config
            .content_mode()
            .xts_cipher()
            .map(|c| Subkeys::xts_key_gen(master, config.key_bits(), c, generation));
        // Mid-rekey, files not yet moved still use the old generation.
        let older = match config.rekey_target() {
            Some(_) => {
                let g = config.key_generation();
                let k = Subkeys::derive_gen(master, config.key_bits(), g).content;
                let tagger = GcmTagger::new(&k);
                let ks: Arc<dyn Keystream> = Arc::new(Direct::new(k));
                let c = match config.content_mode().xts_cipher() {
                    Some(x) => Cipher::new_xts(Subkeys::xts_key_gen(master, config.key_bits(), x, g), ks, tagger),
                    None => Cipher::new(content_mode(config.content_mode()), ks, tagger),
                };
                vec![Arc::new(c.with_generation(g, Vec::new()))]
            }
            None => Vec::new(),
        };
        Self::build(cipherdir, config, keys, keystream, xts, (generation, older), opts)
    }

    /// Open with a given keystream backend (not for `xts` volumes, whose
    /// key comes from the master key: use [`Volume::open`]).
    pub fn with_keystream(
        cipherdir: &Path,
        config: &Config,
        keys: Subkeys,
        keystream: Arc<dyn Keystream>,
        opts: Options,
    ) -> std::result::Result<Volume, String> {
        Self::build(cipherdir, config, keys, keystream, None, (0, Vec::new()), opts)
    }

    fn build(
        cipherdir: &Path,
        config: &Config,
        keys: Subkeys,
        keystream: Arc<dyn Keystream>,
        xts: Option<XtsKey>,
        (generation, older): (u32, Vec<Arc<Cipher>>),
        opts: Options,
    ) -> std::result::Result<Volume, String> {
        let root = std::fs::canonicalize(cipherdir).map_err(|e| format!("{}: {e}", cipherdir.display()))?;
        crate::diriv::read(&root)
            .map_err(|_| format!("{}: missing or corrupt {}", root.display(), crate::diriv::DIRIV_NAME))?;
        let mode = content_mode(config.content_mode());
        let tagger = GcmTagger::new(&keys.content);
        let cipher = Arc::new(
            match (mode, xts) {
                (Mode::Xts, Some(x)) => Cipher::new_xts(x, keystream, tagger),
                (Mode::Xts, None) => return Err("an xts volume is opened with Volume::open".into()),
                (m, _) => Cipher::new(m, keystream, tagger),
            }
            .with_generation(generation, older.clone()),
        );
        let content_key = keys.content;
        let root_dev = crate::sys::lstat(&root).map(|s| s.st_dev).unwrap_or(0);
        Ok(Volume {
            root,
            names: keys.names,
            ivs: DirIvCache::default(),
            sealer: keys.seal,
            cipher,
            mode,
            content_key,
            generation,
            older,
            engine: None,
            files: FileTable::default(),
            opts,
            chown_new: crate::sys::euid() == 0,
            root_dev,
        })
    }

    /// Take every mask from the speculative `engine` (DESIGN.md
    /// "Speculation"): one [`WritePool`] for the volume replaces the
    /// keystream backend, so every write's mask comes from the pool, and
    /// each file opened from now on reads through its own read window. Call
    /// it before any file is opened (at mount). `master` is needed only when
    /// the engine forces software AES (`WARPFS_NO_AESNI=1`) or makes masks
    /// on a device (GPU backends): the engine then expands the raw content
    /// key itself (a device backend uploads its round keys).
    pub fn use_engine(&mut self, engine: Arc<Engine>, master: &MasterKey) -> std::result::Result<(), String> {
        if self.mode == Mode::Xts {
            // XTS has no keystream to make ahead; the engine stays idle.
            self.engine = Some(engine);
            return Ok(());
        }
        let key = if engine.config().software_aes || engine.is_device() {
            let raw = Subkeys::content_key_bytes_gen(master, self.content_key.bits(), self.generation);
            engine.add_raw_key(&raw).map_err(|e| e.to_string())?
        } else {
            engine.add_key(self.content_key.clone())
        };
        let pool: Arc<dyn Keystream> = Arc::new(WritePool::new(engine.clone(), key).map_err(|e| e.to_string())?);
        self.cipher = Arc::new(
            Cipher::new(self.mode, pool, GcmTagger::new(&self.content_key))
                .with_generation(self.generation, self.older.clone()),
        );
        self.engine = Some(engine);
        Ok(())
    }

    /// The attached engine, if any.
    pub fn engine(&self) -> Option<&Arc<Engine>> {
        self.engine.as_ref()
    }

    /// The engine's counters, when an engine is attached.
    pub fn engine_stats(&self) -> Option<StatsSnapshot> {
        self.engine.as_ref().map(|e| e.stats())
    }

    /// Set up a freshly initialised CIPHERDIR (writes the root directory IV).
    pub fn init_root(cipherdir: &Path) -> std::io::Result<()> {
        crate::diriv::create(cipherdir)
            .map(|_| ())
            .map_err(|e| std::io::Error::from_raw_os_error(e.0))
    }

    /// The backing root (canonical CIPHERDIR).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Absolute backing path of a relative one.
    pub(crate) fn abs(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    pub(crate) fn writable(&self) -> Result<()> {
        if self.opts.read_only {
            Err(Error::EROFS)
        } else {
            Ok(())
        }
    }

    /// Give a new backing entry to the caller (when running as root), with the
    /// group of a set-group-ID parent directory.
    pub(crate) fn own(&self, path: &Path, parent: &Path, who: Caller) -> Result<()> {
        if !self.chown_new {
            return Ok(());
        }
        let pst = crate::sys::lstat(parent)?;
        let gid = if pst.st_mode & libc::S_ISGID != 0 {
            pst.st_gid
        } else {
            who.gid
        };
        crate::sys::lchown(path, Some(who.uid), Some(gid))
    }
}

fn content_mode(m: ContentMode) -> Mode {
    match m {
        ContentMode::Ctr => Mode::Ctr,
        ContentMode::Gcm => Mode::Gcm,
        ContentMode::Xts | ContentMode::XtsTwofish => Mode::Xts,
    }
}

impl Volume {
    /// The volume's cipher: the current key generation's, able to open
    /// files of an older one mid-rekey (for `warpfs rekey`).
    pub fn cipher(&self) -> &Arc<Cipher> {
        &self.cipher
    }

    /// The key generation new files get.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The open file of a backing inode on the root's device, if any handle
    /// has it open (serves unlinked or replaced files).
    pub fn open_file_of(&self, backing_ino: u64) -> Option<crate::files::OpenFile> {
        self.files.get(self.root_dev, backing_ino)
    }

    /// Whether the volume was opened read-only.
    pub fn read_only(&self) -> bool {
        self.opts.read_only
    }
}
