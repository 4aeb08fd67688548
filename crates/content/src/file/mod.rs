//! One open cipher file (FORMAT.md 3.6): reads, read–modify–write of
//! partial blocks, extension with holes, truncation and hole punching,
//! under a block range lock so reads of different blocks run together.
//! This module holds the shared state, opening and the per-request key
//! context; `read` (the read path), `write` (the write path), `size`
//! (truncation, hole punching), `sum` (the file summary and fsync) and
//! `seek` (SEEK_DATA / SEEK_HOLE) add the operations.

use crate::cipher::Cipher;
use crate::header::{self, Header};
use crate::keyring::{IntoKeyring, Keyring};
use crate::layout::{self, NNODE_BLOCKS, PAGE_BLOCKS};
use crate::rangelock::RangeLock;
use crate::summary::{self, SumState};
use crate::sysio;
use crate::{ContentError, Mode};
use std::fs::File;
use std::sync::atomic::{AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use warpfs_keystream::BlockReader;

/// Size and header; changed only while the whole file is held, except the
/// rekey watermark (`hdr.rekeyed`, see `rekeystep.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileState {
    pub(crate) size: u64,
    /// `None` while the backing file is empty (no header yet).
    pub(crate) hdr: Option<Header>,
}

/// What every handle of one inode shares: the keys, the read window, the
/// range lock with size and header.
pub(crate) struct Shared {
    pub(crate) keys: Arc<Keyring>,
    mode: Mode,
    /// This file's reads' masks (a read window with a speculative engine),
    /// made with the key of the generation it names.
    reader: RwLock<(u32, Arc<dyn BlockReader>)>,
    label: Mutex<String>,
    pub(crate) lock: RangeLock<FileState>,
    /// The file's summary (FORMAT.md 12), when the volume has summaries
    /// (set later when the file gets its summary while mounted, 12.6);
    /// `None` inside while the file has no header.
    pub(crate) sum: OnceLock<Summ>,
    /// Writable handles counted by [`CipherFile::writer`].
    writers: AtomicUsize,
    /// Every handle closed, the file kept only for a commit left to a
    /// mount's committer ([`CipherFile::set_parked`]).
    parked: std::sync::atomic::AtomicBool,
    /// A mount's open handles of the inode ([`CipherFile::handle_opened`]).
    handles: AtomicUsize,
}

/// A file's summary key and state.
pub(crate) struct Summ {
    /// Changed only by [`CipherFile::rekey_summary`] (a rekey to a new
    /// volume key), while no request is in flight.
    pub(crate) key: RwLock<Arc<warpfs_crypto::SummaryKey>>,
    pub(crate) st: Mutex<Option<SumState>>,
}

impl CipherFile {
    /// The file's summary key and state, when it has a summary.
    pub(crate) fn summ(&self) -> Option<&Summ> {
        self.sh.sum.get()
    }
}

impl Summ {
    /// The summary key.
    pub(crate) fn key(&self) -> Arc<warpfs_crypto::SummaryKey> {
        self.key.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// One open backing file. Handles of one inode share one; a read-only one
/// and a writable one of the same inode share their state (see
/// [`CipherFile::share`]).
pub struct CipherFile {
    pub(crate) file: File,
    pub(crate) read_only: bool,
    pub(crate) sh: Arc<Shared>,
    /// Whether this handle's backing file holds the writers' lock of a
    /// summary shared with other hosts (a [`Lease`] as a byte; `lease.rs`).
    pub(crate) lease: AtomicU8,
}

/// Where a writable handle stands with the hosts sharing its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Lease {
    /// Not writing: the next change reads the summary back first.
    None = 0,
    /// Writing under the whole-file marker, the writers' lock held shared.
    Held = 1,
    /// The backing store keeps no locks: not coordinated.
    Unsupported = 2,
}

/// What one request needs to encrypt and decrypt its blocks: the file ID,
/// the cipher of each block's key generation and the file's reader.
pub(crate) struct Ctx {
    pub(crate) id: [u8; 16],
    /// Blocks from `split` on.
    pub(crate) base: Arc<Cipher>,
    /// Blocks before `split` (mid-rekey; `None` when `split` is 0).
    pub(crate) next: Option<Arc<Cipher>>,
    pub(crate) split: u64,
    reader: Arc<dyn BlockReader>,
    reader_gen: u32,
    /// Every mask made on the calling thread, the read window untouched
    /// (decrypt-ahead reads: they run where masks would be made anyway).
    direct: bool,
}

impl Ctx {
    /// The cipher of block `x`'s key generation.
    pub(crate) fn cipher(&self, x: u64) -> &Cipher {
        match &self.next {
            Some(n) if x < self.split => n,
            _ => &self.base,
        }
    }

    /// Whether block `x`'s masks come from the file's read window (made
    /// for the block's key generation).
    fn windowed(&self, x: u64) -> bool {
        !self.direct && self.cipher(x).generation() == self.reader_gen
    }

    /// The reader that plans a request starting at block `x`.
    fn planner(&self, x: u64) -> &dyn BlockReader {
        if self.direct {
            self.cipher(x).on_demand()
        } else {
            &*self.reader
        }
    }

    /// The reader for block `x`: the file's read window when it was made
    /// for the block's key, else masks made on the calling thread.
    pub(crate) fn reader(&self, x: u64) -> &dyn BlockReader {
        if self.windowed(x) {
            &*self.reader
        } else {
            self.cipher(x).on_demand()
        }
    }
}

impl std::fmt::Debug for CipherFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CipherFile")
            .field("label", &self.label())
            .field("size", &self.size())
            .field("read_only", &self.read_only)
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

/// Whether the entry area of the segment holding block `n` exists in a file
/// whose blocks end at `n` (it does unless `n` starts a new segment).
fn page_of_exists(n: u64) -> bool {
    n < NNODE_BLOCKS || !(n - NNODE_BLOCKS).is_multiple_of(PAGE_BLOCKS)
}

fn efbig() -> ContentError {
    ContentError::errno_err(libc::EFBIG)
}

impl CipherFile {
    /// Take over an open backing file (O_RDWR, or O_RDONLY: writes then
    /// fail with `ReadOnly`), with the volume's keyring (or one cipher).
    /// Checks the header when the file is not empty (its key generations
    /// must be in the keyring); the size follows from the backing length.
    pub fn open(file: File, keys: impl IntoKeyring, label: String) -> Result<Self, ContentError> {
        let keys = keys.into_keyring();
        let read_only = sysio::is_read_only(&file)?;
        let mode = keys.mode();
        let len = file.metadata()?.len();
        let size = layout::plain_size(mode, len)?;
        let hdr = if len == 0 {
            None
        } else {
            let mut h = [0u8; header::LEN];
            sysio::read_exact_at(&file, &mut h, 0)?;
            let hdr = Header::parse(&h)?;
            if hdr.mode != mode {
                return Err(ContentError::corrupt(format!(
                    "cipher file mode {:?} differs from the volume's {:?}",
                    hdr.mode, mode
                )));
            }
            Some(hdr)
        };
        // A file keeps the key generations its header records (FORMAT.md 10).
        let gen = match hdr {
            Some(h) => {
                let missing = |g: u32| {
                    ContentError::corrupt(format!(
                        "cipher file uses key generation {g}, which this volume's config does not have"
                    ))
                };
                keys.get(h.generation).ok_or_else(|| missing(h.generation))?;
                if h.rekeyed != 0 {
                    keys.get(h.generation + 1).ok_or_else(|| missing(h.generation + 1))?;
                }
                h.generation
            }
            None => keys.write_generation(),
        };
        let sum = match (keys.summary(), hdr) {
            (None, Some(h)) if h.summary => {
                return Err(ContentError::corrupt(
                    "cipher file has a file summary (format 2) but the volume has none",
                ))
            }
            // While a mount gives its files their summaries (12.6), one
            // not converted yet is opened as it is; the upgrade converts it
            // through this open file.
            (Some(_), Some(h)) if !h.summary && keys.summaries_upgrading() => None,
            (Some(_), Some(h)) if !h.summary => {
                return Err(ContentError::corrupt(
                    "cipher file has no file summary (format 1), which this volume requires",
                ))
            }
            (Some(k), Some(h)) => {
                let mut c = summary::check(&file, &k, &h.file_id, size)?;
                if c.state.poisoned.is_none() {
                    if let Some(w) = keys.witness() {
                        c.state.poisoned = w.opened(&h.file_id, &c.state.rec).err();
                    }
                }
                if let Some(w) = &c.state.poisoned {
                    tracing::error!("{label}: {w}");
                }
                Some(Summ {
                    key: RwLock::new(k),
                    st: Mutex::new(Some(c.state)),
                })
            }
            (Some(k), None) => Some(Summ {
                key: RwLock::new(k),
                st: Mutex::new(None),
            }),
            (None, _) => None,
        };
        let reader: Arc<dyn BlockReader> = match keys.get(gen) {
            Some(c) => Arc::from(c.reader()),
            None => Arc::from(keys.write_cipher().reader()),
        };
        Ok(Self {
            file,
            read_only,
            sh: Arc::new(Shared {
                keys,
                mode,
                reader: RwLock::new((gen, reader)),
                label: Mutex::new(label),
                lock: RangeLock::new(FileState { size, hdr }),
                sum: sum.map_or_else(OnceLock::new, OnceLock::from),
                writers: AtomicUsize::new(0),
                parked: std::sync::atomic::AtomicBool::new(false),
                handles: AtomicUsize::new(0),
            }),
            lease: AtomicU8::new(Lease::None as u8),
        })
    }

    /// Another handle on the same inode (e.g. opened read-write where this
    /// one is read-only) sharing this one's size, header, keys, read window
    /// and range lock, so both see one file.
    pub fn share(&self, file: File) -> Result<Self, ContentError> {
        Ok(Self {
            read_only: sysio::is_read_only(&file)?,
            file,
            sh: self.sh.clone(),
            lease: AtomicU8::new(Lease::None as u8),
        })
    }

    /// Key generation of the content key this file's blocks use (from the
    /// rekey watermark on, mid-rekey); the write generation when empty.
    pub fn generation(&self) -> u32 {
        match self.sh.lock.state().hdr {
            Some(h) => h.generation,
            None => self.sh.keys.write_generation(),
        }
    }

    /// A mount opened a handle of the inode.
    pub fn handle_opened(&self) {
        self.sh.handles.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// A mount closed a handle of the inode: `true` when it was the last.
    pub fn handle_closed(&self) -> bool {
        self.sh.handles.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1
    }

    /// Every handle of the file closed and its commit was left to a mount's
    /// committer (`true`), or a handle opened it again (`false`).
    pub fn set_parked(&self, parked: bool) {
        self.sh.parked.store(parked, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether every handle of the file closed while a commit of it waits.
    pub fn parked(&self) -> bool {
        self.sh.parked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the backing file (of length `len`) still is what this open
    /// file holds: the length of its size and the header it read. It is,
    /// unless it was changed behind the mount's back.
    pub fn is_current(&self, len: u64) -> bool {
        let st = self.sh.lock.state();
        if layout::backing_len(self.mode(), st.size) != len {
            return false;
        }
        match st.hdr {
            None => len == 0,
            Some(h) => {
                let mut b = [0u8; header::LEN];
                sysio::read_exact_at(&self.file, &mut b, 0).is_ok() && Header::parse(&b).is_ok_and(|d| d == h)
            }
        }
    }

    /// Current plaintext size.
    pub fn size(&self) -> u64 {
        self.sh.lock.state().size
    }

    /// The plaintext path used in log lines (changes on rename).
    pub fn set_label(&self, label: String) {
        *self.sh.label.lock().unwrap_or_else(|e| e.into_inner()) = label;
    }

    /// The plaintext path used in log lines.
    pub fn label(&self) -> String {
        self.sh.label.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The backing file (for fstat/fchmod by the volume layer).
    pub fn backing(&self) -> &File {
        &self.file
    }

    pub(crate) fn mode(&self) -> Mode {
        self.sh.mode
    }

    /// The ciphers and reader for a request on a file with header `hdr`.
    pub(crate) fn ctx(&self, hdr: &Header) -> Result<Ctx, ContentError> {
        if let Some(w) = self.with_sum(|st| st.poisoned.clone()).flatten() {
            return Err(ContentError::corrupt(w));
        }
        let missing = |g: u32| {
            ContentError::corrupt(format!(
                "cipher file uses key generation {g}, which this volume's config does not have"
            ))
        };
        let base = self
            .sh
            .keys
            .get(hdr.generation)
            .ok_or_else(|| missing(hdr.generation))?;
        let (next, split) = if hdr.rekeyed == 0 {
            (None, 0)
        } else {
            let g = hdr.generation + 1;
            (
                Some(self.sh.keys.get(g).ok_or_else(|| missing(g))?),
                layout::segment_start(hdr.rekeyed),
            )
        };
        let (reader_gen, reader) = self.sh.reader.read().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(Ctx {
            id: hdr.file_id,
            base,
            next,
            split,
            reader,
            reader_gen,
            direct: false,
        })
    }

    /// Make the read window one for key generation `gen` (the file's
    /// generation changed). Only while the whole file is held.
    pub(crate) fn retune_reader(&self, gen: u32) {
        let mut r = self.sh.reader.write().unwrap_or_else(|e| e.into_inner());
        if r.0 != gen {
            if let Some(c) = self.sh.keys.get(gen) {
                *r = (gen, Arc::from(c.reader()));
            }
        }
    }

    fn log(&self, op: &str, e: ContentError) -> ContentError {
        match &e {
            ContentError::Corrupt { what } => tracing::error!("{}: {}", self.label(), what),
            ContentError::Io(_) => crate::faultlog::fault(op, &self.label(), e.errno()),
            _ => {}
        }
        e
    }
}

mod convert;
mod lease;
mod read;
mod seek;
mod size;
mod sum;
mod write;

pub use seek::{Seek, Writer};

#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod lease_tests;
#[cfg(test)]
mod seek_tests;
#[cfg(test)]
mod sum_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod witness_tests;
