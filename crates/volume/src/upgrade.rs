//! `warpfs upgrade` (FORMAT.md 12.6): give every cipher file of an
//! unmounted volume made without file summaries its summary, in place,
//! file by file ([`warpfs_content::upgrade::convert`]). The caller marks
//! the upgrade under way in the config before the first file is touched
//! (the `start` step of [`run`]) and sets `file-summary` once [`run`]
//! returns: a crash at any point leaves every file unconverted or
//! converted, and running it again skips the files already done.

use crate::rekey::{content_files, Links};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use warpfs_backing::{Expect, Root};
use warpfs_content::upgrade::{convert_with, Converted};
use warpfs_content::ContentError;
use warpfs_crypto::{MasterKey, SummaryKey};

/// Why a volume mid-upgrade is refused (FORMAT.md 12.6).
pub const UPGRADE_UNFINISHED: &str = "an upgrade to file summaries is unfinished: run `warpfs upgrade` again to \
     finish it (until then only it uses the volume)";

/// Points of an upgrade, for crash tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A file's record is durable, its header not changed yet.
    Record,
    /// A file has its summary (or needed none).
    File,
}

/// Counters of a run, shared with whoever shows progress.
#[derive(Debug, Default)]
pub struct Progress {
    /// Content files of the volume.
    pub files_total: AtomicU64,
    /// Files looked at.
    pub files_done: AtomicU64,
    /// Files given their summary by this run.
    pub files_converted: AtomicU64,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Report {
    /// Files given their summary by this run.
    pub converted: u64,
    /// Files that had one already (an earlier run's) or are empty.
    pub skipped: u64,
    /// Files whose header does not parse, left as they were (they read
    /// as errors before and after), with why.
    pub left: Vec<(PathBuf, String)>,
}

/// Hook told of every [`Event`].
pub type Hook = Arc<dyn Fn(Event) + Send + Sync>;

/// Give every content file of the volume at `cipherdir` its summary under
/// `master`'s summary key. First every file is listed and checked for hard
/// links from outside CIPHERDIR (which the upgrade never writes through,
/// as a rekey never does): any found stops it before anything is written.
/// Then `start` runs (the caller writes the config that marks the upgrade
/// under way) and the files are converted one by one. An I/O error stops
/// the run (files done keep their summary; a new run goes on).
pub fn run(
    cipherdir: &Path,
    master: &MasterKey,
    on_event: Option<Hook>,
    progress: &Progress,
    start: impl FnOnce() -> Result<(), String>,
) -> Result<Report, String> {
    let root = Root::open(cipherdir).map_err(|e| format!("{}: {e}", cipherdir.display()))?;
    let files = content_files(&root).map_err(|e| format!("{}: {e}", cipherdir.display()))?;
    let links = Links::count(&root, &files);
    for rel in &files {
        let Ok(st) = root.lstat(rel) else { continue };
        if let Some(why) = links.outside(&root, &st) {
            return Err(format!("{}: {why}", root.shown(rel).display()));
        }
    }
    start()?;
    progress.files_total.store(files.len() as u64, Ordering::Relaxed);
    let key = SummaryKey::derive(master);
    let mut report = Report::default();
    let event = |e: Event| {
        if let Some(h) = &on_event {
            h(e);
        }
    };
    for rel in &files {
        let shown = root.shown(rel);
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", shown.display());
        let f = match root.open_file(rel, libc::O_RDWR, 0, Expect::File) {
            Ok(f) => f,
            Err(e) => return Err(err(&e)),
        };
        let st = warpfs_backing::fstat(&f).map_err(|e| err(&e))?;
        if let Some(why) = links.outside(&root, &st) {
            return Err(err(&why));
        }
        match convert_with(&f, &key, || event(Event::Record)) {
            Ok(Converted::Now(_)) => {
                report.converted += 1;
                progress.files_converted.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Converted::Already | Converted::Empty) => report.skipped += 1,
            Err(ContentError::Io(e)) => return Err(err(&e)),
            Err(e) => {
                tracing::warn!("{}: left without a file summary: {e}", shown.display());
                report.left.push((shown.clone(), e.to_string()));
            }
        }
        progress.files_done.fetch_add(1, Ordering::Relaxed);
        event(Event::File);
    }
    Ok(report)
}
