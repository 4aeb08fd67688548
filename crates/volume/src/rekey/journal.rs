//! The rekey's undo journals in CIPHERDIR (FORMAT.md 10.3): one file per
//! rekey worker, `warpfs.rekey.undo-<k>`, holding the old bytes of the
//! segment that worker is moving; and their recovery after a crash.

use super::Event;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use warpfs_content::header::{self, Header};
use warpfs_content::rekeystep::{RekeyIo, Stage};
use warpfs_content::undo::{self, Content, Journal, Record};

/// Name prefix of the journals in the CIPHERDIR root (reserved, FORMAT.md 4.4).
pub const JOURNAL_PREFIX: &str = "warpfs.rekey.undo-";

/// One worker's journal, and which file it is moving.
pub(crate) struct JournalIo {
    journal: Journal,
    path: PathBuf,
    ino: u64,
    rel: Vec<u8>,
    /// The encoded record (reused: a segment's record is about 1 MiB).
    buf: Vec<u8>,
    on_event: Option<Arc<dyn Fn(Event) + Send + Sync>>,
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl JournalIo {
    /// Create (or take over, empty) worker `k`'s journal in `root`.
    pub(crate) fn create(
        root: &Path,
        k: usize,
        on_event: Option<Arc<dyn Fn(Event) + Send + Sync>>,
    ) -> Result<Self, String> {
        let path = root.join(format!("{JOURNAL_PREFIX}{k}"));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let journal = Journal::new(f);
        // Never overwrite a record that was not applied.
        match journal.load() {
            Ok(Content::Empty) | Ok(Content::Torn) => {}
            Ok(Content::Record(_)) | Err(_) => {
                return Err(format!(
                    "{}: holds an unapplied undo record (it is applied at mount and at the start of warpfs rekey)",
                    path.display()
                ))
            }
        }
        journal.clear().map_err(|e| format!("{}: {e}", path.display()))?;
        sync_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
        Ok(Self {
            journal,
            path,
            ino: 0,
            rel: Vec::new(),
            buf: Vec::new(),
            on_event,
        })
    }

    /// The file whose segments the next records protect.
    pub(crate) fn target(&mut self, ino: u64, rel: &Path) {
        self.ino = ino;
        self.rel = rel.as_os_str().as_bytes().to_vec();
    }

    pub(crate) fn event(&self, e: Event) {
        if let Some(f) = &self.on_event {
            f(e);
        }
    }

    /// Remove the (empty) journal at the end of a run.
    pub(crate) fn remove(self) {
        if matches!(self.journal.load(), Ok(Content::Empty)) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl RekeyIo for JournalIo {
    fn save(&mut self, file_id: &[u8; 16], ranges: &[(u64, &[u8])]) -> io::Result<()> {
        undo::encode_into(file_id, self.ino, &self.rel, ranges, &mut self.buf);
        self.journal.save_encoded(&self.buf)
    }

    fn done(&mut self) -> io::Result<()> {
        self.journal.clear()
    }

    fn reached(&mut self, stage: Stage) {
        self.event(stage.into());
    }
}

/// Every journal file in `root`, empty or not.
fn journals(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(root)? {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with(JOURNAL_PREFIX) {
            v.push(e.path());
        }
    }
    v.sort();
    Ok(v)
}

/// The journals in `root` that hold something (an interrupted rekey left
/// them; empty ones are harmless leftovers).
pub fn pending_journals(root: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(journals(root)?
        .into_iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
        .collect())
}

/// Whether `f` is the cipher file with ID `id`.
fn has_id(f: &File, id: &[u8; 16]) -> bool {
    let mut h = [0u8; header::LEN];
    f.read_exact_at(&mut h, 0).is_ok() && Header::parse(&h).is_ok_and(|hdr| hdr.file_id == *id)
}

/// The file a record is about: at its recorded path if that is still it,
/// else found by its file ID anywhere under `root` (it was renamed).
fn find(root: &Path, rec: &Record) -> io::Result<Option<File>> {
    let open = |rel: &Path| crate::at::open_under(root, rel, libc::O_RDWR);
    let hint = Path::new(std::ffi::OsStr::from_bytes(&rec.path));
    if !rec.path.is_empty() {
        if let Ok(f) = open(hint) {
            if has_id(&f, &rec.file_id) {
                return Ok(Some(f));
            }
        }
    }
    for rel in super::content_files(root)? {
        let Ok(md) = crate::at::lstat_under(root, &rel) else {
            continue;
        };
        if rec.ino != 0 && md.st_ino != rec.ino {
            continue;
        }
        if let Ok(f) = open(&rel) {
            if has_id(&f, &rec.file_id) {
                return Ok(Some(f));
            }
        }
    }
    // The inode may have changed (a copy); look by file ID alone.
    if rec.ino != 0 {
        return find(
            root,
            &Record {
                ino: 0,
                path: Vec::new(),
                ..rec.clone()
            },
        );
    }
    Ok(None)
}

/// Apply and remove every undo journal in `root`, so each segment a
/// crashed rekey was moving is back to its old bytes (FORMAT.md 10.3).
/// Returns how many segments were put back. Call before the volume is
/// used (mount, `warpfs rekey`). Empty and torn journals are removed; a
/// record whose file is gone is dropped with a log line.
pub fn recover(root: &Path) -> Result<usize, String> {
    let e = |p: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
    let mut restored = 0;
    for path in journals(root).map_err(|x| e(root, &x))? {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|x| e(&path, &x))?;
        match Journal::new(f).load().map_err(|x| e(&path, &x))? {
            Content::Empty | Content::Torn => {}
            Content::Record(rec) => match find(root, &rec).map_err(|x| e(root, &x))? {
                Some(file) => {
                    rec.apply(&file).map_err(|x| e(&path, &x))?;
                    tracing::info!(
                        "rekey: put back a segment of {} that an interrupted rekey was moving",
                        String::from_utf8_lossy(&rec.path)
                    );
                    restored += 1;
                }
                None => tracing::warn!(
                    "rekey: {}: the file of this undo record no longer exists; dropped",
                    path.display()
                ),
            },
        }
        std::fs::remove_file(&path).map_err(|x| e(&path, &x))?;
    }
    sync_dir(root).map_err(|x| e(root, &x))?;
    Ok(restored)
}
