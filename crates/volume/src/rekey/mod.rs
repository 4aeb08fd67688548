//! Rekey (FORMAT.md 10): move every cipher file of the volume to the
//! keyring's write generation in place, segment by segment, each segment
//! protected by an undo journal. The same walk serves `warpfs rekey` on an
//! unmounted volume and, inside the daemon, on a mounted one while reads
//! and writes go on (`online.rs`).

mod handover;
mod journal;
mod online;
mod renames;
mod volkey;

pub use handover::Handover;
pub use journal::{inspect, recover, Decisions, Found, Recovered, State, JOURNAL_PREFIX};
pub use online::{Online, Request};
pub use renames::PENDING_DIRIV;
pub use volkey::{open_volume_rekey, run_volume_rekey, survey, Survey, VOLUME_REKEY_UNFINISHED};
pub use warpfs_content::plain_size_of;

use crate::files::FileTable;
use crate::Volume;
use journal::JournalIo;
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warpfs_backing::{Expect, Root};
use warpfs_content::header::{self, Header};
use warpfs_content::rekeystep::{Stage, Step};
use warpfs_content::{Keyring, Mode};
use warpfs_crypto::JournalKey;

/// Prefix of the temporary copies an earlier, copy-and-rename rekey wrote
/// (reserved names, FORMAT.md 4.4); leftovers are removed.
pub const OLD_TMP_PREFIX: &str = "warpfs.rekey.tmp-";

/// Points of a rekey, for progress and crash tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A segment's undo record is durable (nothing of it touched yet).
    Saved,
    /// A segment's new data is written (entries and header not yet).
    DataWritten,
    /// A segment is moved and durable.
    Segment,
    /// A file is at the target generation.
    File,
    /// An entry has its name under the new volume key (FORMAT.md 10.5).
    Name,
    /// A directory has its new IV, every name in it moved.
    Directory,
}

/// How a rekey runs.
#[derive(Clone, Default)]
pub struct RekeyOptions {
    /// Files moved at once (at least 1).
    pub jobs: usize,
    /// Most plaintext bytes per second over the run (`None`: no limit).
    pub max_rate: Option<u64>,
    /// Told of every [`Event`] (crash tests stop the process here).
    pub on_event: Option<Arc<dyn Fn(Event) + Send + Sync>>,
    /// The rekey's ID from the config (FORMAT.md 10.1), which an online
    /// rekey's start request carries; `None` keeps the one the volume has.
    pub rekey_id: Option<[u8; 16]>,
}

/// Counters of a rekey run, shared with whoever shows progress.
#[derive(Debug, Default)]
pub struct Progress {
    /// Content files of the volume.
    pub files_total: AtomicU64,
    /// Files checked (moved, or already at the target).
    pub files_done: AtomicU64,
    /// Files re-encrypted by this run.
    pub files_moved: AtomicU64,
    /// Plaintext bytes of all content files (backing lengths at the start).
    pub bytes_total: AtomicU64,
    /// Plaintext bytes re-encrypted by this run.
    pub bytes_done: AtomicU64,
    /// Blocks that could not be decrypted and were left as they were.
    pub unreadable: AtomicU64,
    /// A volume-key rekey: backing names to move (counted before).
    pub names_total: AtomicU64,
    /// Names moved to the new volume key by this run.
    pub names_done: AtomicU64,
    /// Names that open under neither key (left as they are).
    pub names_left: AtomicU64,
    /// Directories given their new IV by this run.
    pub dirs_done: AtomicU64,
    /// File summaries sealed again under the new key.
    pub summaries: AtomicU64,
}

/// What a rekey walk needs of a volume; shareable with a daemon thread.
#[derive(Clone)]
pub(crate) struct Walk {
    pub(crate) root: Root,
    pub(crate) files: Arc<FileTable>,
    pub(crate) keys: Arc<Keyring>,
    pub(crate) mode: Mode,
    /// Authenticates the undo journals.
    pub(crate) journal_key: Arc<JournalKey>,
    /// The rekey's ID, which its journal records carry (none: a rekey an
    /// earlier warpfs started).
    pub(crate) rekey_id: Option<[u8; 16]>,
    /// The volume's rename lock ([`Volume`]'s `renames`).
    renames: Arc<std::sync::RwLock<()>>,
}

impl Walk {
    pub(crate) fn of(vol: &Volume) -> Self {
        Self {
            root: vol.root.clone(),
            files: vol.files.clone(),
            keys: vol.keys.clone(),
            mode: vol.mode,
            journal_key: Arc::new(vol.journal_key()),
            rekey_id: vol.online.rekey_id(),
            renames: vol.renames.clone(),
        }
    }
}

/// Every backing regular file of `root` that holds file contents (reserved
/// `warpfs.*` names excluded, long-name entries included), relative to
/// `root`, in walk order. Foreign names (a sync tool's or the system's
/// own files and folders, FORMAT.md 13.3) are never user data and are
/// left alone. Leftover temporary copies of the older copy-and-rename
/// rekey are removed.
pub fn content_files(root: &Root) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut dirs = vec![PathBuf::new()];
    let io = |e: crate::Error| io::Error::from_raw_os_error(e.0);
    while let Some(d) = dirs.pop() {
        let dir = root.dir(&d).map_err(io)?;
        for e in dir.list().map_err(io)? {
            let name = e.name.to_string_lossy();
            if crate::synced::is_foreign(e.name.as_encoded_bytes()) {
                continue;
            }
            let kind = match e.d_type {
                libc::DT_UNKNOWN => {
                    match warpfs_backing::lstat(&dir.entry(&e.name)).map_err(io)?.st_mode & libc::S_IFMT {
                        libc::S_IFDIR => libc::DT_DIR,
                        libc::S_IFREG => libc::DT_REG,
                        _ => libc::DT_UNKNOWN,
                    }
                }
                t => t,
            };
            let rel = d.join(&e.name);
            if kind == libc::DT_DIR {
                dirs.push(rel);
            } else if kind == libc::DT_REG {
                if name.starts_with(OLD_TMP_PREFIX) {
                    warpfs_backing::unlink(&dir.entry(&e.name)).map_err(io)?;
                } else if !name.starts_with("warpfs.") || (name.starts_with("warpfs.long.") && !name.ends_with(".name"))
                {
                    out.push(rel);
                }
            }
        }
    }
    Ok(out)
}

/// The key generation a cipher file's header records and its rekey
/// watermark; `None` for an empty file (no header, no key).
pub fn file_generation(f: &std::fs::File) -> io::Result<Option<(u32, u32)>> {
    if f.metadata()?.len() == 0 {
        return Ok(None);
    }
    let mut h = [0u8; header::LEN];
    f.read_exact_at(&mut h, 0)?;
    let hdr = Header::parse(&h).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    Ok(Some((hdr.generation, hdr.rekeyed)))
}

/// Move every content file of `vol` to its keyring's write generation
/// (the keyring must be mid-rekey, see [`Keyring::begin_rekey`]). Journals
/// of an interrupted run must have been applied first ([`recover`]).
/// Stops at the first error (files already moved keep their new key) or
/// when `stop` is set; `Ok(false)` when stopped.
pub fn run(vol: &Volume, opts: &RekeyOptions, progress: &Progress, stop: &AtomicBool) -> Result<bool, String> {
    run_walk(&Walk::of(vol), opts, progress, stop)
}

/// How many walks a rekey makes before it gives up on files that keep
/// moving (each walk after the first finds the files renamed during the
/// one before).
const MAX_WALKS: usize = 16;

pub(crate) fn run_walk(w: &Walk, opts: &RekeyOptions, progress: &Progress, stop: &AtomicBool) -> Result<bool, String> {
    if !w.keys.rekeying() {
        return Err("no rekey under way".into());
    }
    let e = |e: io::Error| format!("{}: {e}", w.root.path().display());
    let files = content_files(&w.root).map_err(e)?;
    let total: u64 = files
        .iter()
        .filter_map(|p| w.root.lstat(p).ok())
        .map(|m| plain_size_of(w.mode, m.st_size as u64))
        .sum();
    progress.files_total.store(files.len() as u64, Ordering::Relaxed);
    progress.bytes_total.store(total, Ordering::Relaxed);
    let started = Instant::now();
    walk_once(w, &files, &Links::count(&w.root, &files), opts, progress, stop, started)?;
    // A file renamed after the listing was not found under its old name:
    // walk again until a walk finds every file at the target generation,
    // so no file is left at a generation the finished rekey drops.
    for _ in 1..MAX_WALKS {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let behind = behind_settled(w, w.keys.write_generation()).map_err(e)?;
        if behind.is_empty() {
            return Ok(true);
        }
        tracing::info!("rekey: {} file(s) moved during the walk; walking again", behind.len());
        progress.files_total.fetch_add(behind.len() as u64, Ordering::Relaxed);
        let all = content_files(&w.root).map_err(e)?;
        walk_once(w, &behind, &Links::count(&w.root, &all), opts, progress, stop, started)?;
    }
    if stop.load(Ordering::Relaxed) {
        return Ok(false);
    }
    let behind = behind_settled(w, w.keys.write_generation()).map_err(e)?;
    if behind.is_empty() {
        return Ok(true);
    }
    Err(format!(
        "{} file(s) still not at the new key after {MAX_WALKS} walks (they keep being renamed, e.g. {}); \
         the old key is kept: run `warpfs rekey` again",
        behind.len(),
        behind[0].display()
    ))
}

/// How many links each multiply linked content file has in CIPHERDIR, by
/// (device, inode): a file with more links than that is also linked from
/// outside CIPHERDIR, and the rekey never rewrites it (it would write a
/// file outside through a hard link planted there).
pub(crate) struct Links(HashMap<(u64, u64), u64>);

impl Links {
    /// Count the links among `files` (every content file of `root`).
    pub(crate) fn count(root: &Root, files: &[PathBuf]) -> Links {
        let mut m = HashMap::new();
        for st in files.iter().filter_map(|p| root.lstat(p).ok()) {
            if st.st_nlink > 1 {
                *m.entry((st.st_dev, st.st_ino)).or_insert(0u64) += 1;
            }
        }
        Links(m)
    }

    /// Why the file of `st` must not be rewritten, if it has links outside
    /// CIPHERDIR (counted again, in case links were made since).
    pub(crate) fn outside(&self, root: &Root, st: &libc::stat) -> Option<String> {
        let nlink = warpfs_backing::nlink(st);
        let inside = |l: &Links| l.0.get(&(st.st_dev, st.st_ino)).copied().unwrap_or(1);
        if nlink <= 1 || inside(self) >= nlink {
            return None;
        }
        // Up to three counts: one taken while names move (a mounted
        // volume's renames) can miss a link.
        let mut seen = 0;
        for _ in 0..3 {
            seen = inside(&content_files(root).map(|f| Links::count(root, &f)).ok()?);
            if seen >= nlink {
                return None;
            }
        }
        Some(format!(
            "it has {nlink} hard links but {seen} in CIPHERDIR: also linked from outside; the rekey never \
             rewrites it (remove the link outside CIPHERDIR, or replace the file by a copy of it)"
        ))
    }
}

/// [`files_behind`], looked for again with renames through the mount held
/// off when it finds none: a listing made while names move can miss a
/// file (renamed from a place not yet listed to one already listed).
fn behind_settled(w: &Walk, target: u32) -> io::Result<Vec<PathBuf>> {
    let behind = files_behind(&w.root, target)?;
    if !behind.is_empty() {
        return Ok(behind);
    }
    let _held = w.renames.write().unwrap_or_else(|e| e.into_inner());
    files_behind(&w.root, target)
}

/// Content files of `root` whose header is not at generation `target`
/// with a finished watermark (empty files hold no key and are never behind).
fn files_behind(root: &Root, target: u32) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for rel in content_files(root)? {
        let f = match root.open_file(&rel, libc::O_RDONLY, 0, Expect::File) {
            Ok(f) => f,
            Err(e) if e.0 == libc::ENOENT => continue,
            // Replaced while it was opened: walk it again to be sure.
            Err(e) if e.0 == libc::ESTALE => {
                out.push(rel);
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match file_generation(&f) {
            Ok(None) => {}
            Ok(Some((g, 0))) if g == target => {}
            Ok(Some(_)) | Err(_) => out.push(rel),
        }
    }
    Ok(out)
}

/// One walk over `files` with the run's jobs; the first error ends it.
fn walk_once(
    w: &Walk,
    files: &[PathBuf],
    links: &Links,
    opts: &RekeyOptions,
    progress: &Progress,
    stop: &AtomicBool,
    started: Instant,
) -> Result<(), String> {
    let jobs = opts.jobs.max(1).min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<String>> = Mutex::new(None);
    let halt = || stop.load(Ordering::Relaxed) || failed.lock().map(|f| f.is_some()).unwrap_or(true);
    let halt = &halt;
    std::thread::scope(|sc| {
        for k in 0..jobs {
            let (next, failed) = (&next, &failed);
            sc.spawn(move || {
                let target = w.keys.write_generation();
                let mut io = match JournalIo::create(
                    &w.root,
                    k,
                    w.journal_key.clone(),
                    target,
                    w.rekey_id,
                    opts.on_event.clone(),
                ) {
                    Ok(io) => io,
                    Err(m) => {
                        fail(failed, m);
                        return;
                    }
                };
                while !halt() {
                    let Some(rel) = files.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    let throttle = |bytes: u64| pace(opts.max_rate, started, bytes, stop);
                    match rekey_file(w, rel, links, &mut io, progress, halt, &throttle) {
                        Ok(true) => {
                            progress.files_done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(false) => {}
                        Err(m) => {
                            fail(failed, m);
                        }
                    }
                }
                io.remove();
            });
        }
    });
    match failed.into_inner().ok().flatten() {
        Some(m) => Err(m),
        None => Ok(()),
    }
}

/// Record the first error of a run.
fn fail(failed: &Mutex<Option<String>>, m: String) {
    failed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(m);
}

/// Sleep so that `bytes` done since `started` stay within `rate` bytes/s.
fn pace(rate: Option<u64>, started: Instant, bytes: u64, stop: &AtomicBool) {
    let Some(rate) = rate.filter(|&r| r > 0) else {
        return;
    };
    let due = Duration::from_secs_f64(bytes as f64 / rate as f64);
    while !stop.load(Ordering::Relaxed) {
        let el = started.elapsed();
        if el >= due {
            return;
        }
        std::thread::sleep((due - el).min(Duration::from_millis(100)));
    }
}

/// Move one file (relative path `rel`) to the write generation through
/// the volume's open-file table, so handles open on it share its range
/// lock while segments move. A file gone from its path is skipped here:
/// deleted, renamed, or replaced by another (the next walk of
/// [`run_walk`] finds what is behind).
/// `Ok(false)`: halted before the file was done.
fn rekey_file(
    w: &Walk,
    rel: &Path,
    links: &Links,
    io: &mut JournalIo,
    progress: &Progress,
    halt: &dyn Fn() -> bool,
    throttle: &dyn Fn(u64),
) -> Result<bool, String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", rel.display());
    let target = w.keys.write_generation();
    let f = match w.root.open_file(rel, libc::O_RDONLY, 0, Expect::File) {
        Ok(f) => f,
        // Gone, or replaced while it was opened (ESTALE).
        Err(e) if e.0 == libc::ENOENT || e.0 == libc::ESTALE => return Ok(true),
        Err(e) => return Err(err(&e)),
    };
    match file_generation(&f) {
        Ok(None) => return Ok(true),
        Ok(Some((g, 0))) if g == target => return Ok(true),
        Ok(Some(_)) => {}
        Err(e) => return Err(err(&e)),
    }
    let st = warpfs_backing::fstat(&f).map_err(|e| err(&e))?;
    if let Some(why) = links.outside(&w.root, &st) {
        // Renamed or replaced while its links were counted again (a count
        // that can miss a link on the move): the next walk looks again.
        if !w
            .root
            .lstat(rel)
            .is_ok_and(|s| (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino))
        {
            return Ok(true);
        }
        return Err(err(&why));
    }
    // Opened again for writing: still the file that was looked at.
    let f = match w.root.open_file(rel, libc::O_RDWR, 0, Expect::File) {
        Ok(f) => f,
        // Gone, or replaced while it was opened (ESTALE).
        Err(e) if e.0 == libc::ENOENT || e.0 == libc::ESTALE => return Ok(true),
        Err(e) => return Err(err(&e)),
    };
    let ino = f.metadata().map_err(|e| err(&e))?.ino();
    if (f.metadata().map_err(|e| err(&e))?.dev(), ino) != (st.st_dev, st.st_ino) {
        // Replaced between the two opens (a rename over it, e.g. an
        // editor's save through the mount): another file, skipped like one
        // gone; the next walk of [`run_walk`] moves whichever is behind.
        return Ok(true);
    }
    let of = w
        .files
        .open_keep_label(f, &w.keys, rel.display().to_string())
        .map_err(|e| err(&e))?;
    io.target(ino, rel);
    let mut moved = false;
    while !halt() {
        match of.rekey_step(io).map_err(|e| err(&e))? {
            Step::Moved { bytes, unreadable } => {
                moved = true;
                let done = progress.bytes_done.fetch_add(bytes, Ordering::Relaxed) + bytes;
                if unreadable > 0 {
                    progress.unreadable.fetch_add(unreadable, Ordering::Relaxed);
                    tracing::warn!(
                        "{}: rekey left {unreadable} unreadable block(s) as they were",
                        rel.display()
                    );
                }
                io.event(Event::Segment);
                throttle(done);
            }
            Step::Done => {
                if moved {
                    progress.files_moved.fetch_add(1, Ordering::Relaxed);
                }
                io.event(Event::File);
                return Ok(true);
            }
        }
    }
    Ok(false)
}

impl From<Stage> for Event {
    fn from(s: Stage) -> Self {
        match s {
            Stage::Saved => Event::Saved,
            Stage::DataWritten => Event::DataWritten,
        }
    }
}
