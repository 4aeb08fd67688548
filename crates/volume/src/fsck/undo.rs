//! fsck's undo files (FORMAT.md 6b): where `--zero-bad-blocks` saves what
//! it changes (`CIPHERDIR/warpfs.fsck.undo-N`, or a path the user gives),
//! and `fsck --undo`, which puts it back through files found beneath
//! CIPHERDIR without following a symlink, each only if it is still the file
//! fsck changed and still holds what fsck wrote.

use crate::volume::Volume;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use warpfs_backing::{Expect, Root};
use warpfs_content::zeroundo::{self, Loaded, Writer};

/// Name prefix of the undo files in the CIPHERDIR root (reserved,
/// FORMAT.md 4.4), followed by a number counting from 1.
pub const UNDO_PREFIX: &str = "warpfs.fsck.undo-";

/// Where `--zero-bad-blocks` writes its undo file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum UndoTo {
    /// `CIPHERDIR/warpfs.fsck.undo-N`, N one more than the highest there:
    /// it travels with the volume.
    #[default]
    Cipherdir,
    /// A new file at this path (never an existing one).
    Path(PathBuf),
}

/// The undo file of one fsck run, made when the first block is zeroed.
pub(super) struct Out {
    to: UndoTo,
    made: Option<(Writer, PathBuf)>,
    /// Blocks zeroed with their undo saved.
    pub(super) blocks: u64,
}

fn sync_dir(dir: &Root) -> io::Result<()> {
    Ok(dir.top().sync()?)
}

/// The undo file numbers in `root`, sorted (any file type).
fn numbered(root: &Root) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut v = Vec::new();
    for e in root.top().list()? {
        let n = e.name;
        let Some(rest) = n.as_bytes().strip_prefix(UNDO_PREFIX.as_bytes()) else {
            continue;
        };
        let num = std::str::from_utf8(rest).ok().and_then(|s| s.parse::<u64>().ok());
        if let Some(k) = num.filter(|_| !rest.starts_with(b"0") && !rest.starts_with(b"+")) {
            v.push((k, PathBuf::from(n)));
        }
    }
    v.sort();
    Ok(v)
}

/// What an entry at an undo file name is when it cannot be one
/// (`check_type`'s refusal of a reserved name).
fn not_undo_file(e: warpfs_backing::Errno, st: Option<&libc::stat>) -> String {
    match e.0 {
        libc::ELOOP => "a symbolic link".into(),
        libc::EISDIR => "a directory".into(),
        libc::EMLINK => format!(
            "a regular file with {} links, one of them maybe outside CIPHERDIR",
            st.map_or(2, |s| s.st_nlink)
        ),
        libc::EINVAL => "not a regular file (a FIFO, socket or device node)".into(),
        _ => e.to_string(),
    }
}

/// Each entry at an undo file name in `vol`'s CIPHERDIR, oldest first
/// (relative path), looked at without following or opening it: `Ok` for
/// a regular file with one link, else what it is instead.
pub(super) fn looked_at(vol: &Volume) -> Vec<(PathBuf, Result<(), String>)> {
    let Ok(all) = numbered(&vol.root) else {
        return Vec::new();
    };
    all.into_iter()
        .map(|(_, n)| {
            let r = match vol.root.lstat(&n) {
                Ok(st) => warpfs_backing::check_type(&st, Expect::Reserved).map_err(|e| not_undo_file(e, Some(&st))),
                Err(e) => Err(not_undo_file(e, None)),
            };
            (n, r)
        })
        .collect()
}

/// The undo files in `vol`'s CIPHERDIR, oldest first.
pub fn undo_files(vol: &Volume) -> io::Result<Vec<PathBuf>> {
    Ok(numbered(&vol.root)?
        .into_iter()
        .map(|(_, n)| vol.root.shown(&n))
        .collect())
}

impl Out {
    pub(super) fn new(to: UndoTo) -> Self {
        Self {
            to,
            made: None,
            blocks: 0,
        }
    }

    /// The writer, making the undo file first if this run has none yet.
    pub(super) fn writer(&mut self, vol: &Volume) -> io::Result<&mut Writer> {
        if self.made.is_none() {
            let (file, path) = match &self.to {
                UndoTo::Cipherdir => create_in(&vol.root)?,
                UndoTo::Path(p) => {
                    let named = |e: io::Error| io::Error::new(e.kind(), format!("undo file {}: {e}", p.display()));
                    let (dir, name) = warpfs_backing::split_user_path(p).map_err(|e| named(e.into()))?;
                    let f = warpfs_backing::open_file(
                        &dir.top().entry(&name),
                        libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
                        0o600,
                        Expect::Reserved,
                    )
                    .map_err(|e| named(e.into()))?;
                    sync_dir(&dir)?;
                    (f, p.clone())
                }
            };
            self.made = Some((Writer::new(file, vol.undo_key())?, path));
        }
        Ok(&mut self.made.as_mut().expect("just made").0)
    }

    /// The undo file written, if any.
    pub(super) fn path(&self) -> Option<&Path> {
        self.made.as_ref().map(|(_, p)| p.as_path())
    }
}

/// Make `root/warpfs.fsck.undo-N` (N one more than the highest there),
/// never replacing an entry, beneath `root` without following a symlink.
fn create_in(root: &Root) -> io::Result<(File, PathBuf)> {
    let mut n = numbered(root)?.last().map_or(1, |(k, _)| k + 1);
    loop {
        let name = PathBuf::from(format!("{UNDO_PREFIX}{n}"));
        match root.open_file(
            &name,
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
            0o600,
            Expect::Reserved,
        ) {
            Ok(f) => {
                sync_dir(root)?;
                return Ok((f, root.shown(&name)));
            }
            Err(e) if e.0 == libc::EEXIST => n += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Why `fsck --undo` did nothing.
#[derive(Debug)]
pub enum UndoError {
    /// No undo file to restore from.
    NotFound(String),
    /// The undo file is refused: nothing of it is applied.
    Refused(String),
    /// It could not be read.
    Io(String),
}

impl std::fmt::Display for UndoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UndoError::NotFound(m) | UndoError::Refused(m) | UndoError::Io(m) => f.write_str(m),
        }
    }
}

/// What `fsck --undo` did, file by file.
#[derive(Debug)]
pub struct Restored {
    /// The undo file read.
    pub path: PathBuf,
    /// Per changed file: its backing path (as recorded) and the blocks
    /// put back, or why it was not restored (then nothing of it was written).
    pub files: Vec<(String, Result<u64, String>)>,
    /// Every file was restored, and the undo file removed.
    pub removed: bool,
}

/// The undo file to restore from (`path`, or the newest in CIPHERDIR),
/// opened through the door: its directory, its name, the file and its
/// path for messages.
struct Undo {
    dir: Root,
    name: OsString,
    file: File,
    path: PathBuf,
}

/// Open the undo file to restore from: `path`, or the newest in CIPHERDIR
/// (a regular file with one link, never through a symlink).
fn open_undo(vol: &Volume, path: Option<&Path>) -> Result<Undo, UndoError> {
    let io = |p: &Path, e: warpfs_backing::Errno| match e.0 {
        libc::ELOOP | libc::EISDIR | libc::EINVAL | libc::EMLINK | libc::ESTALE => UndoError::Refused(format!(
            "{}: refused, nothing restored: not an undo file fsck wrote ({})",
            p.display(),
            not_undo_file(e, None)
        )),
        libc::ENOENT => UndoError::NotFound(format!("{}: no such undo file", p.display())),
        _ => UndoError::Io(format!("{}: {e}", p.display())),
    };
    let (dir, name, p) = match path {
        Some(p) => {
            let (dir, name) = warpfs_backing::split_user_path(p).map_err(|e| io(p, e))?;
            (dir, name, p.to_path_buf())
        }
        None => {
            let all = numbered(&vol.root).map_err(|e| io(vol.root(), e.into()))?;
            let Some((_, name)) = all.last() else {
                return Err(UndoError::NotFound(format!(
                    "{}: no fsck undo file ({UNDO_PREFIX}N) in it",
                    vol.root().display()
                )));
            };
            (vol.root.clone(), name.as_os_str().to_owned(), vol.root.shown(name))
        }
    };
    let file = warpfs_backing::open_file(&dir.top().entry(&name), libc::O_RDONLY, 0, Expect::Reserved)
        .map_err(|e| io(&p, e))?;
    Ok(Undo {
        dir,
        name,
        file,
        path: p,
    })
}

/// The file a step is about: at its recorded path if that is still the
/// same device and inode, else the content file with them; opened
/// read-write beneath CIPHERDIR without following a symlink.
fn find(vol: &Volume, l: &Loaded) -> Result<File, String> {
    let t = &l.step.target;
    let same = |f: &File| {
        f.metadata()
            .is_ok_and(|m| m.file_type().is_file() && (m.dev(), m.ino()) == (t.dev, t.ino))
    };
    let open = |rel: &Path| vol.root.open_file(rel, libc::O_RDWR, 0, Expect::File);
    let hint = Path::new(std::ffi::OsStr::from_bytes(&t.path));
    if !t.path.is_empty() {
        if let Ok(f) = open(hint) {
            if same(&f) {
                return Ok(f);
            }
        }
    }
    let files = crate::rekey::content_files(&vol.root).map_err(|e| format!("{}: {e}", vol.root().display()))?;
    for rel in files {
        let Ok(st) = vol.root.lstat(&rel) else {
            continue;
        };
        if (st.st_dev, st.st_ino) == (t.dev, t.ino) {
            if let Ok(f) = open(&rel) {
                if same(&f) {
                    return Ok(f);
                }
            }
        }
    }
    Err("the file fsck changed is not in CIPHERDIR any more (same device and inode)".into())
}

/// Put one file back; a summary sealed again since fsck (a rekey, or a
/// mount's commit) is sealed again over the blocks put back, when it
/// verifies before (FORMAT.md 6b).
fn restore_file(vol: &Volume, file: &File, steps: &[&Loaded]) -> Result<u64, String> {
    let verifies = |f: &File| match warpfs_content::scan::summary_failure(f, vol.keys()) {
        Ok(None) => Ok(()),
        Ok(Some(w)) => Err(format!(", and it does not verify ({w})")),
        Err(e) => Err(format!(" ({e})")),
    };
    let (n, reseal) = zeroundo::restore_then_reseal(file, steps, verifies)?;
    if reseal {
        warpfs_content::scan::reseal_summary(file, vol.keys())
            .map_err(|e| format!("blocks put back, but its summary not sealed again: {e}"))?;
    }
    Ok(n)
}

/// `fsck --undo`: put back what the undo file at `path` (or the newest in
/// CIPHERDIR) says `--zero-bad-blocks` changed. The whole file is checked
/// first (its tags under the volume's undo key, its records in order); a
/// changed file is put back only if it is still the same file and still
/// holds what fsck wrote, all of it or nothing. The undo file is removed
/// once every file it names is restored.
pub fn restore(vol: &Volume, path: Option<&Path>) -> Result<Restored, UndoError> {
    let Undo {
        dir,
        name,
        file: mut f,
        path: p,
    } = open_undo(vol, path)?;
    // One record at a time: a planted huge file costs one record's memory.
    let loaded = zeroundo::decode_from(&mut std::io::BufReader::new(&mut f), &vol.undo_key())
        .map_err(|e| UndoError::Refused(format!("{}: refused, nothing restored: {e}", p.display())))?;
    // Steps grouped by file, in the order fsck made them.
    let mut groups: Vec<Vec<&Loaded>> = Vec::new();
    for l in &loaded {
        match groups.iter_mut().find(|g| g[0].step.target == l.step.target) {
            Some(g) => g.push(l),
            None => groups.push(vec![l]),
        }
    }
    let mut files = Vec::new();
    for g in groups {
        let name = String::from_utf8_lossy(&g[0].step.target.path).into_owned();
        let r = find(vol, g[0]).and_then(|file| restore_file(vol, &file, &g));
        files.push((name, r));
    }
    let removed = files.iter().all(|(_, r)| r.is_ok());
    if removed {
        warpfs_backing::unlink(&dir.top().entry(&name)).map_err(|e| UndoError::Io(format!("{}: {e}", p.display())))?;
        let _ = sync_dir(&dir);
    }
    Ok(Restored {
        path: p,
        files,
        removed,
    })
}
