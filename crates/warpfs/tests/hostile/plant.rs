//! What is planted where: the kinds of hostile object, the names of
//! CIPHERDIR they replace or join, planting, checking that the plant is
//! still in place, and taking it away again (the genuine object back).

use super::canary::Canary;
use super::fixture::{long1, long2, Template, JOURNAL, VICTIM};
use super::undo::UNDO;
use crate::common::{cstr, mknod_fifo};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A sync tool's conflict marker (Syncthing's form).
pub const CONFLICT: &str = ".sync-conflict-20270101-000000-AAAAAAA";

/// A copy of `warpfs.conf` as Syncthing names it (FORMAT.md 13.5).
pub fn conf_copy_name() -> String {
    format!("warpfs{CONFLICT}.conf")
}

/// A copy of `warpfs.diriv` (FORMAT.md 13.2).
pub fn diriv_copy_name() -> String {
    format!("warpfs.diriv{CONFLICT}")
}

/// What is planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A symlink to a regular file outside CIPHERDIR (holding what the
    /// name should hold, or an older version of it).
    SymlinkFile,
    /// A symlink to a FIFO outside CIPHERDIR.
    SymlinkFifo,
    /// A FIFO.
    Fifo,
    /// A symlink to a zero device outside CIPHERDIR (char 1:5, as
    /// /dev/zero; one of the canary tree's, so that an open is seen).
    SymlinkDevZero,
    /// A character device 1:3 (as /dev/null).
    DevNull,
    /// A character device 1:5 (as /dev/zero).
    DevZero,
    /// An (empty) directory.
    Dir,
    /// A hard link to a file outside CIPHERDIR (the genuine bytes).
    HardLink,
    /// An older genuine copy (see [`Target`]).
    OldCopy,
    /// The genuine object of another volume (see [`Target`]).
    Foreign,
    /// A symlink to a path outside that does not exist.
    Dangling,
}

/// Where it is planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `warpfs.conf` (old copy: the config from before `warpfs rekey`).
    Conf,
    /// A sync tool's copy of `warpfs.conf` beside the intact one (old
    /// copy: the config from before `warpfs rekey`).
    ConfCopy,
    /// `warpfs.lock`.
    Lock,
    /// The root's `warpfs.diriv` (old copy: `a`'s).
    RootDiriv,
    /// `a/warpfs.diriv` (old copy: `b`'s).
    SubDiriv,
    /// A copy of `warpfs.diriv` in `a`, `b/g`'s backing file moved into
    /// `a` beside it (old copy: the entry-move attack, `a`'s IV as a
    /// conflict copy in `b` and `a`'s entries moved into `b`).
    DirivCopy,
    /// The sidecar of the first long name (old copy: the second's).
    Sidecar,
    /// `victim`'s backing file (old copy: its previous version).
    Content,
    /// `warpfs.rekey.undo-0` (old copy: the journal of the earlier rekey).
    Journal,
    /// `warpfs.fsck.undo-1`, the undo file of a block of `file1` zeroed by
    /// `fsck --zero-bad-blocks` (tests/hostile/undo.rs; old copy: the undo
    /// file of an earlier zeroing of that block, put back since; foreign:
    /// the undo file of another volume).
    Undo,
}

/// The shape `lstat` must show while the plant is in place.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    Link(PathBuf),
    Fifo,
    Char(u64),
    Dir,
    File { ino: u64 },
}

pub struct Plant {
    pub kind: Kind,
    /// The planted object's path.
    pub path: PathBuf,
    /// What was there before (bytes, mode), put back by [`Plant::remove`].
    pub genuine: Option<(Vec<u8>, u32)>,
    /// Backing entries moved by the attacker: (original place, new place).
    pub moved: Vec<(PathBuf, PathBuf)>,
    shape: Shape,
}

/// The bytes of the outside regular file: what a link to it should seem
/// to lead to (`cipher`: the scenario's CIPHERDIR, before the plant).
pub fn outside_bytes(t: &Template, cipher: &Path, target: Target, kind: Kind) -> Vec<u8> {
    match target {
        Target::Undo => fs::read(cipher.join(UNDO)).unwrap(),
        Target::Conf => t.read("warpfs.conf"),
        Target::ConfCopy => t.old_conf.clone(),
        Target::Lock => Vec::new(),
        Target::RootDiriv => t.read("warpfs.diriv"),
        Target::SubDiriv => t.read(t.rel("a").join("warpfs.diriv")),
        Target::DirivCopy => t.read(t.rel("b").join("warpfs.diriv")),
        Target::Sidecar => t.read(t.sidecar(&long1())),
        Target::Content if kind == Kind::HardLink => t.read(t.rel(VICTIM)),
        Target::Content => t.old_victim.clone(),
        Target::Journal => t.journal.clone(),
    }
}

/// Path of the planted name (relative to CIPHERDIR).
pub fn planted_rel(t: &Template, target: Target, kind: Kind) -> PathBuf {
    match target {
        Target::Conf => "warpfs.conf".into(),
        Target::ConfCopy => conf_copy_name().into(),
        Target::Lock => "warpfs.lock".into(),
        Target::RootDiriv => "warpfs.diriv".into(),
        Target::SubDiriv => t.rel("a").join("warpfs.diriv"),
        Target::DirivCopy if kind == Kind::OldCopy => t.rel("b").join(diriv_copy_name()),
        Target::DirivCopy => t.rel("a").join(diriv_copy_name()),
        Target::Sidecar => t.sidecar(&long1()),
        Target::Content => t.rel(VICTIM).to_path_buf(),
        Target::Journal => JOURNAL.into(),
        Target::Undo => UNDO.into(),
    }
}

/// The older genuine object of [`Kind::OldCopy`], or the other volume's
/// of [`Kind::Foreign`]; `stale`: the scenario's own older copy, where the
/// template has none.
fn old_bytes(t: &Template, target: Target, kind: Kind, stale: Option<&[u8]>) -> Vec<u8> {
    match target {
        Target::Undo if kind == Kind::Foreign => t.foreign_undo.clone(),
        Target::Undo => stale.expect("the scenario's older undo file").to_vec(),
        Target::Conf | Target::ConfCopy => t.old_conf.clone(),
        Target::Lock => panic!("a lock file has no older copy"),
        Target::RootDiriv => t.read(t.rel("a").join("warpfs.diriv")),
        Target::SubDiriv => t.read(t.rel("b").join("warpfs.diriv")),
        Target::DirivCopy => t.read(t.rel("a").join("warpfs.diriv")),
        Target::Sidecar => t.read(t.sidecar(&long2())),
        Target::Content => t.old_victim.clone(),
        Target::Journal => t.journal.clone(),
    }
}

fn mknod_char(p: &Path, minor: u32) {
    let c = cstr(p);
    // SAFETY: valid C string.
    let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, minor)) };
    assert_eq!(r, 0, "mknod {}: {}", p.display(), std::io::Error::last_os_error());
}

/// Make object `kind` at `path` (nothing there); `old` is the
/// [`Kind::OldCopy`] content. Returns its shape.
fn make(kind: Kind, path: &Path, canary: &Canary, old: impl FnOnce() -> Vec<u8>) -> Shape {
    use std::os::unix::fs::symlink;
    match kind {
        Kind::SymlinkFile => symlink(&canary.file, path).unwrap(),
        Kind::SymlinkFifo => symlink(&canary.fifo, path).unwrap(),
        Kind::Fifo => mknod_fifo(path, 0o644).unwrap(),
        Kind::SymlinkDevZero => symlink(&canary.zero, path).unwrap(),
        Kind::DevNull => mknod_char(path, 3),
        Kind::DevZero => mknod_char(path, 5),
        Kind::Dir => fs::create_dir(path).unwrap(),
        Kind::HardLink => fs::hard_link(&canary.file, path).unwrap(),
        Kind::OldCopy | Kind::Foreign => fs::write(path, old()).unwrap(),
        Kind::Dangling => symlink(&canary.missing, path).unwrap(),
    }
    shape_of(path).unwrap()
}

fn shape_of(p: &Path) -> Option<Shape> {
    let m = fs::symlink_metadata(p).ok()?;
    let ft = m.file_type();
    Some(if ft.is_symlink() {
        Shape::Link(fs::read_link(p).ok()?)
    } else if ft.is_fifo() {
        Shape::Fifo
    } else if ft.is_char_device() {
        Shape::Char(m.rdev())
    } else if ft.is_dir() {
        Shape::Dir
    } else {
        Shape::File { ino: m.ino() }
    })
}

fn remove_any(p: &Path) {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p).unwrap(),
        Ok(_) => fs::remove_file(p).unwrap(),
        Err(_) => {}
    }
}

/// Plant `kind` at `target` in the scenario's CIPHERDIR `cipher` (`stale`:
/// the older copy the scenario made, where the template has none).
pub fn plant(t: &Template, cipher: &Path, canary: &Canary, target: Target, kind: Kind, stale: Option<&[u8]>) -> Plant {
    let rel = planted_rel(t, target, kind);
    let path = cipher.join(&rel);
    let genuine = fs::symlink_metadata(&path)
        .ok()
        .map(|m| (fs::read(&path).unwrap(), m.permissions().mode() & 0o7777));
    remove_any(&path);
    let mut moved = Vec::new();
    let mut mv = |plain: &str, to_dir: &str| {
        let from = cipher.join(t.rel(plain));
        let to = cipher.join(t.rel(to_dir)).join(from.file_name().unwrap());
        fs::rename(&from, &to).unwrap();
        moved.push((from, to));
    };
    match (target, kind) {
        // The entry-move attack: `a`'s entries into `b`.
        (Target::DirivCopy, Kind::OldCopy) => {
            mv("a/f1", "b");
            mv("a/f2", "b");
        }
        // Bait: an entry of `b`, which only `b`'s IV decrypts, beside a
        // copy whose content (through a link) is `b`'s IV.
        (Target::DirivCopy, _) => mv("b/g", "a"),
        _ => {}
    }
    let shape = make(kind, &path, canary, || old_bytes(t, target, kind, stale));
    Plant {
        kind,
        path,
        genuine,
        moved,
        shape,
    }
}

/// Plant `kind` at an arbitrary path (the reverse config), `old` being the
/// content of an old copy.
pub fn plant_at(path: &Path, canary: &Canary, kind: Kind, old: &[u8]) -> Plant {
    let genuine = fs::symlink_metadata(path)
        .ok()
        .map(|m| (fs::read(path).unwrap(), m.permissions().mode() & 0o7777));
    remove_any(path);
    let shape = make(kind, path, canary, || old.to_vec());
    Plant {
        kind,
        path: path.to_path_buf(),
        genuine,
        moved: Vec::new(),
        shape,
    }
}

impl Plant {
    /// The planted name.
    pub fn name(&self) -> String {
        self.path.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// `Err` unless the planted object is still there as planted.
    pub fn in_place(&self) -> Result<(), String> {
        match shape_of(&self.path) {
            Some(s) if s == self.shape => Ok(()),
            other => Err(format!(
                "{} is no longer the planted {:?} ({:?}): now {other:?}",
                self.path.display(),
                self.kind,
                self.shape
            )),
        }
    }

    /// Paths the plant owns (left out when comparing CIPHERDIR).
    pub fn owned(&self) -> Vec<PathBuf> {
        let mut v = vec![self.path.clone()];
        v.extend(self.moved.iter().map(|(_, to)| to.clone()));
        v
    }

    /// Take the plant away: the genuine object back at its name, moved
    /// entries back where they were (those still there).
    pub fn remove(&self) {
        remove_any(&self.path);
        if let Some((bytes, mode)) = &self.genuine {
            fs::write(&self.path, bytes).unwrap();
            fs::set_permissions(&self.path, fs::Permissions::from_mode(*mode)).unwrap();
        }
        for (from, to) in &self.moved {
            if fs::symlink_metadata(to).is_ok() && fs::symlink_metadata(from).is_err() {
                fs::rename(to, from).unwrap();
            }
        }
    }
}
