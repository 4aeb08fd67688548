//! The rekey's undo journals in CIPHERDIR (FORMAT.md 10.3): one file per
//! rekey worker, `warpfs.rekey.undo-<k>`, holding the old bytes of the
//! segment that worker is moving; and their recovery after a crash. A
//! journal is applied only when its MAC verifies under the volume's
//! journal key, it belongs to the rekey under way (its generation and
//! random ID), its file is found beneath CIPHERDIR without following a
//! symlink and is at the very segment the record protects (its sequence
//! number), and no other journal names that file; anything else is refused
//! and left for the user to decide (`warpfs fsck`).

use super::Event;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use warpfs_backing::{Expect, Root};
use warpfs_content::header::{self, Header};
use warpfs_content::rekeystep::{RekeyIo, Stage};
use warpfs_content::undo::{self, Content, Journal, JournalError, Record, Rekey};
use warpfs_crypto::JournalKey;

/// Name prefix of the journals in the CIPHERDIR root (reserved, FORMAT.md 4.4).
pub const JOURNAL_PREFIX: &str = "warpfs.rekey.undo-";

/// One worker's journal, and which file it is moving.
pub(crate) struct JournalIo {
    journal: Journal,
    root: Root,
    name: PathBuf,
    key: Arc<JournalKey>,
    /// The key generation the rekey moves files to.
    generation: u32,
    /// The rekey's ID (records of version 3), if it has one.
    rekey_id: Option<[u8; 16]>,
    ino: u64,
    rel: Vec<u8>,
    /// The encoded record (reused: a segment's record is about 1 MiB).
    buf: Vec<u8>,
    on_event: Option<Arc<dyn Fn(Event) + Send + Sync>>,
}

fn sync_dir(root: &Root) -> io::Result<()> {
    Ok(root.top().sync()?)
}

/// Open journal `name` of `root` through the door: beneath it, never
/// through a symlink, never blocking, only a regular file with one link.
fn open_journal(root: &Root, name: &Path, flags: i32) -> io::Result<File> {
    root.open_file(name, flags, 0o600, Expect::Reserved)
        .map_err(|e| match e.0 {
            libc::ELOOP => io::Error::new(io::ErrorKind::InvalidData, "it is a symbolic link"),
            libc::EMLINK => io::Error::new(
                io::ErrorKind::InvalidData,
                "it has a second link (it may be a file outside CIPHERDIR)",
            ),
            libc::EISDIR | libc::EINVAL => io::Error::new(io::ErrorKind::InvalidData, "it is not a regular file"),
            _ => e.into(),
        })
}

impl JournalIo {
    /// Create (or take over, empty) worker `k`'s journal in `root`, for a
    /// rekey to key generation `generation` with ID `rekey_id` (none: a
    /// rekey an earlier warpfs started, records of version 2).
    pub(crate) fn create(
        root: &Root,
        k: usize,
        key: Arc<JournalKey>,
        generation: u32,
        rekey_id: Option<[u8; 16]>,
        on_event: Option<Arc<dyn Fn(Event) + Send + Sync>>,
    ) -> Result<Self, String> {
        let name = PathBuf::from(format!("{JOURNAL_PREFIX}{k}"));
        let path = root.shown(&name);
        let f =
            open_journal(root, &name, libc::O_RDWR | libc::O_CREAT).map_err(|e| format!("{}: {e}", path.display()))?;
        let journal = Journal::new(f);
        // Never overwrite a record that was not applied or was refused.
        match journal.load(&key) {
            Ok(Content::Empty) | Ok(Content::Torn) => {}
            _ => {
                return Err(format!(
                    "{}: holds an unapplied undo record (warpfs fsck tells what it is)",
                    path.display()
                ))
            }
        }
        journal.clear().map_err(|e| format!("{}: {e}", path.display()))?;
        sync_dir(root).map_err(|e| format!("{}: {e}", root.path().display()))?;
        Ok(Self {
            journal,
            root: root.clone(),
            name,
            key,
            generation,
            rekey_id,
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
        if matches!(self.journal.load(&self.key), Ok(Content::Empty)) {
            let _ = warpfs_backing::unlink(&self.root.top().entry(self.name.as_os_str()));
        }
    }
}

impl RekeyIo for JournalIo {
    fn save(&mut self, file_id: &[u8; 16], ranges: &[(u64, &[u8])]) -> io::Result<()> {
        // The sequence number is the segment's: the watermark of the old
        // header the record saves.
        let rekey = match self.rekey_id {
            Some(id) => {
                let seq = ranges
                    .iter()
                    .find(|(o, b)| *o == 0 && b.len() == header::LEN)
                    .and_then(|(_, b)| Header::parse(b).ok())
                    .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "undo record without the file's header"))?
                    .rekeyed;
                Some(Rekey {
                    id,
                    seq: u64::from(seq),
                })
            }
            None => None,
        };
        undo::encode_into(
            &self.key,
            self.generation,
            rekey.as_ref(),
            file_id,
            self.ino,
            &self.rel,
            ranges,
            &mut self.buf,
        );
        self.journal.save_encoded(&self.buf)
    }

    fn done(&mut self) -> io::Result<()> {
        self.journal.clear()
    }

    fn reached(&mut self, stage: Stage) {
        self.event(stage.into());
    }
}

/// Every journal name in `root` (any file type), sorted.
fn journals(root: &Root) -> io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = root
        .top()
        .list()?
        .into_iter()
        .filter(|e| e.name.as_bytes().starts_with(JOURNAL_PREFIX.as_bytes()))
        .map(|e| PathBuf::from(e.name))
        .collect();
    v.sort();
    Ok(v)
}

/// What a journal in CIPHERDIR holds, as recovery judges it.
#[derive(Debug, PartialEq, Eq)]
pub enum State {
    /// Empty: nothing to undo.
    Empty,
    /// Shorter than its record says: written only part way when a crash
    /// came, before its segment was touched; nothing to undo, never applied.
    Torn,
    /// An authenticated record of the rekey under way whose file is found
    /// (or gone): applied by a mount, `warpfs rekey` and `fsck --repair`.
    Ready(Record),
    /// A record of an earlier warpfs, which wrote no MAC: applied only when
    /// the user says so (`fsck --apply-old-journals`).
    Unauthenticated(Record),
    /// Never applied, for this reason.
    Refused(String),
}

/// One journal and its state.
#[derive(Debug)]
pub struct Found {
    /// Its path (CIPHERDIR/warpfs.rekey.undo-K).
    pub path: PathBuf,
    /// What it holds.
    pub state: State,
}

/// What recovery may do beyond the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct Decisions {
    /// Apply authenticated records and remove empty and torn journals
    /// (what a mount and `warpfs rekey` do).
    pub apply: bool,
    /// Also apply records of an earlier warpfs (no MAC; still only to a
    /// file beneath CIPHERDIR reached without a symlink).
    pub apply_unauthenticated: bool,
    /// Remove refused journals, and records of an earlier warpfs not
    /// applied, without applying them.
    pub discard: bool,
}

impl Decisions {
    /// What a mount and `warpfs rekey` do on their own.
    pub fn automatic() -> Self {
        Self {
            apply: true,
            ..Self::default()
        }
    }
}

/// What [`recover`] did.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Segments put back.
    pub restored: usize,
    /// Torn journals removed (nothing to undo).
    pub torn: usize,
    /// Journals removed unapplied by [`Decisions::discard`], with why.
    pub discarded: Vec<(PathBuf, String)>,
    /// Journals left as they were, with why (refused, or waiting for a
    /// decision): a mount or rekey must not go on while there are any.
    pub kept: Vec<(PathBuf, String)>,
}

impl Recovered {
    /// The kept journals and why, as one line for the user.
    pub fn kept_message(&self) -> String {
        let m: Vec<String> = self
            .kept
            .iter()
            .map(|(p, why)| format!("{}: {why}", p.display()))
            .collect();
        m.join("; ")
    }
}

impl Found {
    /// What `warpfs fsck` says of this journal; `None` when it is empty.
    pub fn describe(&self) -> Option<String> {
        let p = self.path.display();
        Some(match &self.state {
            State::Empty => return None,
            State::Torn => format!(
                "{p}: torn rekey undo journal (cut short while written, by a crash or by someone): nothing to undo, never applied; --repair removes it"
            ),
            State::Ready(_) => format!(
                "{p}: an interrupted rekey left this undo journal: the segment it protects may read as errors until it is applied (mount the volume, run warpfs rekey, or fsck --repair)"
            ),
            State::Unauthenticated(_) => format!(
                "{p}: rekey undo journal of an earlier warpfs, which has no MAC: never applied on its own; if a rekey by that warpfs was interrupted, apply it with fsck --apply-old-journals, else remove it with fsck --discard-journals"
            ),
            State::Refused(why) => format!(
                "{p}: rekey undo journal refused, never applied: {why}; fsck --discard-journals removes it"
            ),
        })
    }
}

/// Whether `f` is a regular cipher file with ID `id`.
fn has_id(f: &File, id: &[u8; 16]) -> bool {
    let mut h = [0u8; header::LEN];
    f.metadata().is_ok_and(|m| m.file_type().is_file())
        && f.read_exact_at(&mut h, 0).is_ok()
        && Header::parse(&h).is_ok_and(|hdr| hdr.file_id == *id)
}

/// The file a record is about: at its recorded path if that is still it,
/// else found by its file ID anywhere under `root` (it was renamed), all
/// opened beneath `root` without following symlinks. A symlink on the
/// recorded path refuses the record.
fn find(root: &Root, rec: &Record, flags: i32) -> Result<Option<File>, String> {
    let open = |rel: &Path| root.open_file(rel, flags, 0, Expect::File);
    let hint = Path::new(std::ffi::OsStr::from_bytes(&rec.path));
    if !rec.path.is_empty() {
        match open(hint) {
            Ok(f) if has_id(&f, &rec.file_id) => return Ok(Some(f)),
            Err(e) if e.0 == libc::ELOOP => {
                return Err(format!(
                    "its file's path {} leads through a symbolic link",
                    hint.display()
                ))
            }
            Err(e) if e.0 == libc::EINVAL => {
                return Err(format!(
                    "its file's path {} is not a plain path beneath CIPHERDIR",
                    hint.display()
                ))
            }
            _ => {}
        }
    }
    let files = super::content_files(root).map_err(|e| format!("{}: {e}", root.path().display()))?;
    for pass in [true, false] {
        for rel in &files {
            // First the files with the recorded inode; then any (a copy).
            let Ok(md) = root.lstat(rel) else {
                continue;
            };
            if pass && (rec.ino == 0 || md.st_ino != rec.ino) {
                continue;
            }
            if let Ok(f) = open(rel) {
                if has_id(&f, &rec.file_id) {
                    return Ok(Some(f));
                }
            }
        }
    }
    Ok(None)
}

/// What a journal must belong to: the rekey under way, if any.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Expected {
    /// Its target generation.
    pub(crate) generation: Option<u32>,
    /// Its ID (`None`: a rekey an earlier warpfs started, whose records
    /// have none).
    pub(crate) rekey_id: Option<[u8; 16]>,
}

/// Why `rec` (authentic, of the rekey's generation) is not of the rekey
/// under way, if it is not.
fn foreign(rec: &Record, expected: Expected) -> Option<String> {
    match (rec.rekey.map(|r| r.id), expected.rekey_id) {
        (Some(a), Some(b)) if a == b => None,
        (None, None) => None,
        (Some(_), Some(_)) => Some(
            "it belongs to another rekey (its rekey ID is not the config's): a journal copied from another volume or an earlier rekey".into(),
        ),
        (Some(_), None) => Some("it carries a rekey ID, but the rekey under way has none (a copied journal)".into()),
        (None, Some(_)) => Some(
            "it has no rekey ID, but the rekey under way has one: a journal of another rekey, or of an earlier warpfs".into(),
        ),
    }
}

/// Whether `f` is at the very point of the move `rec` protects: the
/// record's old header (its range at offset 0) is of the generation
/// before the record's and of its file ID, its watermark is the record's
/// sequence number, and `f`'s header now has that generation and that
/// watermark (a crash before the header was written) or the next (after).
/// Anything else is a record replayed from earlier in the rekey or out of
/// order: applying it would put back bytes the file has moved on from.
fn in_sequence(f: &File, rec: &Record) -> Result<(), String> {
    let old = rec
        .old_header()
        .ok_or_else(|| "corrupt record: it does not save its file's header".to_string())?;
    if old.file_id != rec.file_id || old.generation.checked_add(1) != Some(rec.generation) {
        return Err("corrupt record: its saved header is not of its file and generation".into());
    }
    if let Some(r) = rec.rekey {
        if r.seq != u64::from(old.rekeyed) {
            return Err("corrupt record: its sequence number is not its segment's".into());
        }
    }
    let mut h = [0u8; header::LEN];
    f.read_exact_at(&mut h, 0)
        .map_err(|e| format!("its file's header cannot be read: {e}"))?;
    let now = Header::parse(&h).map_err(|e| format!("its file's header is not valid: {e}"))?;
    if now.generation == old.generation
        && (now.rekeyed == old.rekeyed || Some(now.rekeyed) == old.rekeyed.checked_add(1))
    {
        return Ok(());
    }
    Err(format!(
        "out of sequence: it is record {} of its file's move to key generation {}, but the file is at {} (a record replayed from earlier in the rekey, or out of order)",
        old.rekeyed,
        rec.generation,
        if now.generation == old.generation {
            format!("segment {}", now.rekeyed)
        } else {
            format!("key generation {}", now.generation)
        }
    ))
}

/// Judge one journal: its state, and for a record the file it applies to.
fn judge(root: &Root, name: &Path, key: &JournalKey, expected: Expected, flags: i32) -> (State, Option<File>) {
    let loaded = open_journal(root, name, libc::O_RDONLY)
        .map_err(JournalError::Io)
        .and_then(|f| Journal::new(f).load(key));
    let (state, rec) = match loaded {
        Ok(Content::Empty) => return (State::Empty, None),
        Ok(Content::Torn) => return (State::Torn, None),
        Ok(Content::Record(r)) if expected.generation == Some(r.generation) => match foreign(&r, expected) {
            Some(why) => return (State::Refused(why), None),
            None => (State::Ready(r.clone()), r),
        },
        Ok(Content::Record(r)) => {
            let now = match expected.generation {
                Some(e) => format!("the rekey under way is to generation {e}"),
                None => "no rekey is under way".into(),
            };
            return (
                State::Refused(format!(
                    "it belongs to a rekey to key generation {}, but {now} (an old or copied journal)",
                    r.generation
                )),
                None,
            );
        }
        Ok(Content::Unauthenticated(r)) => (State::Unauthenticated(r.clone()), r),
        Err(JournalError::Refused(why)) => return (State::Refused(why.0), None),
        Err(JournalError::Io(e)) => return (State::Refused(format!("it cannot be read: {e}")), None),
    };
    match find(root, &rec, flags) {
        Ok(Some(f)) if matches!(state, State::Ready(_)) => match in_sequence(&f, &rec) {
            Ok(()) => (state, Some(f)),
            Err(why) => (State::Refused(why), None),
        },
        Ok(f) => (state, f),
        Err(why) => (State::Refused(why), None),
    }
}

/// Every journal of `root`, judged; two records naming one file are both
/// refused (a worker's journal is emptied before its file is handed on,
/// so one of them is replayed).
fn judge_all(
    root: &Root,
    key: &JournalKey,
    expected: Expected,
    flags: i32,
) -> Result<Vec<(PathBuf, State, Option<File>)>, String> {
    let names = journals(root).map_err(|e| format!("{}: {e}", root.path().display()))?;
    let mut v: Vec<(PathBuf, State, Option<File>)> = names
        .into_iter()
        .map(|n| {
            let (st, f) = judge(root, &n, key, expected, flags);
            (n, st, f)
        })
        .collect();
    let id = |s: &State| match s {
        State::Ready(r) | State::Unauthenticated(r) => Some(r.file_id),
        _ => None,
    };
    let ids: Vec<Option<[u8; 16]>> = v.iter().map(|(_, st, _)| id(st)).collect();
    for (i, mine) in ids.iter().enumerate() {
        let Some(mine) = mine else { continue };
        let other = ids
            .iter()
            .enumerate()
            .find(|&(j, o)| j != i && o.as_ref() == Some(mine))
            .map(|(j, _)| v[j].0.clone());
        if let Some(o) = other {
            v[i].1 = State::Refused(format!(
                "another undo journal ({}) names the same file: one of them is replayed",
                o.display()
            ));
            v[i].2 = None;
        }
    }
    Ok(v)
}

fn inspect_in(root: &Root, key: &JournalKey, expected: Expected) -> Result<Vec<Found>, String> {
    Ok(judge_all(root, key, expected, libc::O_RDONLY)?
        .into_iter()
        .map(|(n, state, _)| Found {
            state,
            path: root.shown(&n),
        })
        .collect())
}

fn recover_in(root: &Root, key: &JournalKey, expected: Expected, d: Decisions) -> Result<Recovered, String> {
    let e = |p: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
    let mut out = Recovered::default();
    let mut changed = false;
    for (name, state, file) in judge_all(root, key, expected, libc::O_RDWR)? {
        let path = root.shown(&name);
        let (apply, why) = match &state {
            State::Empty | State::Torn => (None, None),
            State::Ready(r) => (Some(r), None),
            State::Unauthenticated(r) if d.apply_unauthenticated => (Some(r), None),
            State::Unauthenticated(_) => (
                None,
                Some("an undo journal of an earlier warpfs, which has no MAC: not applied on its own".to_string()),
            ),
            State::Refused(why) => (None, Some(format!("refused: {why}"))),
        };
        if let Some(why) = why {
            if d.discard {
                out.discarded.push((path.clone(), why));
            } else {
                out.kept.push((path, why));
                continue;
            }
        } else if !(d.apply || (d.apply_unauthenticated && matches!(state, State::Unauthenticated(_)))) {
            continue;
        }
        match (apply, file) {
            (Some(rec), Some(f)) => {
                rec.apply(&f).map_err(|x| e(&path, &x))?;
                tracing::info!(
                    "rekey: put back a segment of {} that an interrupted rekey was moving",
                    String::from_utf8_lossy(&rec.path)
                );
                out.restored += 1;
            }
            (Some(_), None) => tracing::warn!(
                "rekey: {}: the file of this undo record no longer exists; dropped",
                path.display()
            ),
            (None, _) => {
                if state == State::Torn {
                    tracing::warn!(
                        "rekey: {}: torn undo journal (cut short while it was written; nothing to undo); removed",
                        path.display()
                    );
                    out.torn += 1;
                }
            }
        }
        warpfs_backing::unlink(&root.top().entry(name.as_os_str())).map_err(|x| e(&path, &x))?;
        changed = true;
    }
    if changed {
        sync_dir(root).map_err(|x| e(root.path(), &x))?;
    }
    Ok(out)
}

/// The rekey a journal of `vol` must belong to: the one under way, if any.
fn expected(vol: &crate::Volume) -> Expected {
    Expected {
        generation: vol.keys.rekeying().then(|| vol.keys.write_generation()),
        rekey_id: vol.online.rekey_id(),
    }
}

/// Every journal in `vol`'s CIPHERDIR and what it holds (for `fsck`;
/// nothing is changed).
pub fn inspect(vol: &crate::Volume) -> Result<Vec<Found>, String> {
    inspect_in(&vol.root, &vol.journal_key(), expected(vol))
}

/// Apply and remove the undo journals of `vol`'s CIPHERDIR as `d` allows,
/// so each segment a crashed rekey was moving is back to its old bytes
/// (FORMAT.md 10.3). Call before the volume is used (mount, `warpfs
/// rekey`). Journals not applied or removed are in [`Recovered::kept`]:
/// the caller must not go on with the volume then.
pub fn recover(vol: &crate::Volume, d: Decisions) -> Result<Recovered, String> {
    recover_in(&vol.root, &vol.journal_key(), expected(vol), d)
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
