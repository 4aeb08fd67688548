//! The names of a rekey to a new volume key (FORMAT.md 10.5): every
//! backing name, directory IV, long-name sidecar, symlink target and
//! xattr name and value made again under the new key, in place, one
//! directory at a time, subdirectories first. Resuming needs no journal:
//! an AES-SIV name opens under exactly one (key, IV), so each entry tells
//! whether it has moved, and a directory whose entries open under the new
//! key with its `warpfs.diriv` is done, with everything below it.

use super::{Event, Progress};
use crate::bound::{ad, ID_XATTR, SYMLINK_AD, SYMLINK_AD_BOUND, TMP_PREFIX, VALUE_AD, VALUE_AD_BOUND};
use crate::diriv::{DIRIV_LEN, DIRIV_NAME};
use crate::synced::{self, Copy};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use warpfs_backing::{Dir, Expect, Loc, RawEntry, Root};
use warpfs_crypto::names::{is_long_file, is_reserved, is_sidecar, long_sidecar, BackingName, NameCipher};
use warpfs_crypto::seal::Sealer;

/// A directory's new IV while its entries move (a reserved name, 4.4).
pub const PENDING_DIRIV: &str = "warpfs.rekey.iv";
/// Prefix of the backing names of encrypted xattrs (FORMAT.md 5.3).
const XATTR_PREFIX: &str = "user.warpfs.";
/// Largest sidecar read.
const MAX_SIDECAR: usize = 8192;

/// The name and seal keys of the old and the new volume key.
pub(crate) struct NameKeys {
    pub(crate) old_names: NameCipher,
    pub(crate) old_seal: Sealer,
    pub(crate) new_names: NameCipher,
    pub(crate) new_seal: Sealer,
    /// Symlink targets and xattr values bound to their entry (5.1, 5.3).
    pub(crate) bound: bool,
}

/// Which key a name opens under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Under {
    Old,
    New,
}

/// How an entry's backing name is made from its plaintext name.
#[derive(Debug, Clone)]
enum Shape {
    /// Its own encrypted name (short or long).
    Own,
    /// A sync tool's copy of the entry `original` (13.1): the copy's name
    /// is made again around the original's new name.
    Copy {
        original: String,
        tail: String,
        prefix: String,
    },
}

type Hook<'a> = Option<&'a Arc<dyn Fn(Event) + Send + Sync>>;

fn err(p: &Path, what: &dyn std::fmt::Display) -> String {
    format!("{}: {what}", p.display())
}

fn io(e: warpfs_backing::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.0)
}

/// Move every name of the volume at `root` to the new key. `Ok(false)`
/// when stopped.
pub(crate) fn migrate(
    root: &Root,
    k: &NameKeys,
    hook: Hook,
    progress: &Progress,
    stop: &AtomicBool,
) -> Result<bool, String> {
    enum Step {
        Enter(PathBuf),
        Exit(PathBuf),
    }
    let mut stack = vec![Step::Enter(PathBuf::new())];
    while let Some(step) = stack.pop() {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match step {
            Step::Enter(rel) => {
                let shown = root.shown(&rel);
                let dir = root.dir(&rel).map_err(|e| err(&shown, &io(e)))?;
                let list = dir.list().map_err(|e| err(&shown, &io(e)))?;
                match state(&dir, &list, k).map_err(|e| err(&shown, &e))? {
                    DirState::Done => continue,
                    DirState::NoIv if !rel.as_os_str().is_empty() => {
                        // Nothing in it can be read, now or after.
                        tracing::warn!("{}: no {DIRIV_NAME}: its names are left as they are", shown.display());
                        progress.names_left.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    DirState::NoIv | DirState::Todo => {}
                }
                stack.push(Step::Exit(rel.clone()));
                for e in &list {
                    if is_subdir(&dir, e) {
                        stack.push(Step::Enter(rel.join(&e.name)));
                    }
                }
            }
            Step::Exit(rel) => {
                migrate_dir(root, &rel, k, hook, progress).map_err(|e| err(&root.shown(&rel), &e))?;
                progress.dirs_done.fetch_add(1, Ordering::Relaxed);
                if let Some(h) = hook {
                    h(Event::Directory);
                }
            }
        }
    }
    Ok(true)
}

/// A subdirectory that is an entry of the volume (not one of ours or a
/// foreign tool's).
fn is_subdir(dir: &Dir, e: &RawEntry) -> bool {
    let n = e.name.as_bytes();
    if is_reserved(n) && !is_long_file(n) || synced::is_foreign(n) {
        return false;
    }
    match e.d_type {
        libc::DT_DIR => true,
        libc::DT_UNKNOWN => {
            warpfs_backing::lstat(&dir.entry(&e.name)).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
        }
        _ => false,
    }
}

fn read_iv(dir: &Dir, name: &str) -> std::io::Result<Option<[u8; DIRIV_LEN]>> {
    match warpfs_backing::read_small(&dir.entry(OsStr::new(name)), DIRIV_LEN + 1, Expect::Reserved) {
        Ok(d) => d
            .as_slice()
            .try_into()
            .map(Some)
            .map_err(|_| std::io::Error::other(format!("{name} is not {DIRIV_LEN} bytes"))),
        Err(e) if e.0 == libc::ENOENT => Ok(None),
        Err(e) => Err(io(e)),
    }
}

fn diriv(dir: &Dir) -> std::io::Result<[u8; DIRIV_LEN]> {
    read_iv(dir, DIRIV_NAME)?.ok_or_else(|| {
        std::io::Error::other(format!(
            "{DIRIV_NAME} is missing: the directory's names cannot be read (warpfs fsck reports it)"
        ))
    })
}

/// Where a directory stands.
enum DirState {
    /// Its names (and, the walk being post-order, everything below) are
    /// under the new key.
    Done,
    /// To do (or, with nothing that opens, to be given a new IV again,
    /// which is harmless).
    Todo,
    /// No `warpfs.diriv`: nothing in it opens under any key.
    NoIv,
}

/// A directory is done when no new IV is pending and the first name that
/// opens at all opens under the new key with its `warpfs.diriv`.
fn state(dir: &Dir, list: &[RawEntry], k: &NameKeys) -> std::io::Result<DirState> {
    if read_iv(dir, PENDING_DIRIV)?.is_some() {
        return Ok(DirState::Todo);
    }
    let Some(iv) = read_iv(dir, DIRIV_NAME)? else {
        return Ok(DirState::NoIv);
    };
    for e in list {
        if let Some((_, under, _)) = plan(dir, &e.name, k, &iv, &iv) {
            return Ok(if under == Under::New {
                DirState::Done
            } else {
                DirState::Todo
            });
        }
    }
    Ok(DirState::Todo)
}

/// The encrypted name behind backing name `name` (a long name's from its
/// sidecar, checked against its hash), if it is one of ours.
fn encoded_of(dir: &Dir, name: &str, names: &NameCipher) -> Option<String> {
    if is_long_file(name) {
        let side = long_sidecar(name);
        let data = warpfs_backing::read_small(&dir.entry(OsStr::new(&side)), MAX_SIDECAR, Expect::Reserved).ok()?;
        let encoded = String::from_utf8(data).ok()?;
        return (names.backing_name_of_encoded(&encoded).as_deref() == Some(name)).then_some(encoded);
    }
    (!is_reserved(name) && name.len() <= warpfs_crypto::MAX_NAME).then(|| name.to_string())
}

/// What backing name `name` is: its plaintext name, which key it opens
/// under, and how its name is made. `None`: not a name of the volume
/// (ours, foreign, or one that opens under neither key).
fn plan(
    dir: &Dir,
    name: &OsStr,
    k: &NameKeys,
    iv_old: &[u8; DIRIV_LEN],
    iv_new: &[u8; DIRIV_LEN],
) -> Option<(Vec<u8>, Under, Shape)> {
    let s = name.to_str()?;
    if is_sidecar(s) || s == DIRIV_NAME || s == PENDING_DIRIV {
        return None;
    }
    let open = |own: &str| {
        let enc = encoded_of(dir, own, &k.old_names)?;
        if let Ok(p) = k.old_names.decrypt_name(iv_old, &enc) {
            return Some((p, Under::Old));
        }
        k.new_names.decrypt_name(iv_new, &enc).ok().map(|p| (p, Under::New))
    };
    if let Some((p, u)) = open(s) {
        return Some((p, u, Shape::Own));
    }
    match synced::classify(s.as_bytes())? {
        Copy::Of { original, tail, prefix } => {
            let (p, u) = open(&original)?;
            Some((p, u, Shape::Copy { original, tail, prefix }))
        }
        Copy::Foreign | Copy::Unknown => None,
    }
}

/// The new backing name of an entry named `name` of `shape` whose
/// original's new backing name is `new`.
fn new_name(name: &str, shape: &Shape, new: &BackingName) -> String {
    match shape {
        Shape::Own => new.file().to_string(),
        Shape::Copy { original, tail, prefix } => {
            if name == format!("{prefix}{original}{tail}") {
                format!("{prefix}{}{tail}", new.file())
            } else {
                // A long name's copy with the tail before the hash:
                // `warpfs.long<TAIL>.H`.
                let hash = new.file().rsplit('.').next().unwrap_or_default();
                format!("warpfs.long{tail}.{hash}")
            }
        }
    }
}

/// The directory's new IV: the pending one, or a fresh one written and
/// synced before any entry moves.
fn pending_iv(dir: &Dir) -> std::io::Result<[u8; DIRIV_LEN]> {
    if let Some(iv) = read_iv(dir, PENDING_DIRIV)? {
        return Ok(iv);
    }
    let iv: [u8; DIRIV_LEN] = warpfs_crypto::rand::array();
    warpfs_backing::create_file(&dir.entry(OsStr::new(PENDING_DIRIV)), 0o444, &iv, true).map_err(io)?;
    dir.sync().map_err(io)?;
    Ok(iv)
}

/// Move the names of the directory at `rel` (its subdirectories are done).
fn migrate_dir(root: &Root, rel: &Path, k: &NameKeys, hook: Hook, progress: &Progress) -> std::io::Result<()> {
    let dir = root.dir(rel).map_err(io)?;
    let iv_old = diriv(&dir)?;
    let list = dir.list().map_err(io)?;
    if let Some(c) = list.iter().find(|e| synced::diriv_copy(e.name.as_bytes()).is_some()) {
        return Err(std::io::Error::other(format!(
            "holds {}, a copy of its directory IV (a sync conflict): settle it first (warpfs fsck explains; \
             warpfs fsck --repair merges what it can prove)",
            c.name.to_string_lossy()
        )));
    }
    let iv_new = pending_iv(&dir)?;
    for e in &list {
        let name = e.name.to_string_lossy();
        if name.starts_with(TMP_PREFIX) {
            // A symlink made again by a run that stopped before its rename.
            warpfs_backing::unlink(&dir.entry(&e.name)).map_err(io)?;
            continue;
        }
        match plan(&dir, &e.name, k, &iv_old, &iv_new) {
            Some((plain, Under::Old, shape)) => {
                move_entry(&dir, &e.name, &plain, &shape, k, (&iv_old, &iv_new))?;
                progress.names_done.fetch_add(1, Ordering::Relaxed);
                if let Some(h) = hook {
                    h(Event::Name);
                }
            }
            Some((_, Under::New, _)) => {}
            None => {
                let n = e.name.as_bytes();
                if !(is_reserved(n) || synced::is_foreign(n)) {
                    progress.names_left.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    remove_old_sidecars(&dir, k, &iv_old)?;
    if rel.as_os_str().is_empty() {
        // The root's own xattrs (another directory's are its parent's work).
        let (d, n) = root.entry(rel).map_err(io)?;
        reseal_xattrs(&d.entry(&n), k)?;
    }
    warpfs_backing::rename(
        &dir.entry(OsStr::new(PENDING_DIRIV)),
        &dir.entry(OsStr::new(DIRIV_NAME)),
        0,
    )
    .map_err(io)?;
    dir.sync().map_err(io)
}

/// Move one entry to its name under the new key and IV: its xattrs first
/// (in place), then the name; a long name's new sidecar before the
/// rename; a symlink made anew with its target sealed for its new place.
fn move_entry(
    dir: &Dir,
    name: &OsStr,
    plain: &[u8],
    shape: &Shape,
    k: &NameKeys,
    (iv_old, iv_new): (&[u8; DIRIV_LEN], &[u8; DIRIV_LEN]),
) -> std::io::Result<()> {
    let s = name.to_string_lossy();
    let new = k
        .new_names
        .backing_name(iv_new, plain)
        .map_err(|e| std::io::Error::other(format!("{s}: {e}")))?;
    let to_name = OsString::from(new_name(&s, shape, &new));
    if let BackingName::Long { file, encoded } = &new {
        let side_name = long_sidecar(file);
        let side = dir.entry(OsStr::new(&side_name));
        match warpfs_backing::create_file(&side, 0o444, encoded.as_bytes(), true) {
            Ok(()) => {}
            Err(e) if e.0 == libc::EEXIST => {}
            Err(e) => return Err(io(e)),
        }
    }
    let from = dir.entry(name);
    let to = dir.entry(&to_name);
    let st = warpfs_backing::lstat(&from).map_err(io)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFLNK {
        reseal_xattrs(&from, k)?;
        return warpfs_backing::rename(&from, &to, libc::RENAME_NOREPLACE).map_err(io);
    }
    let sealed = warpfs_backing::readlink(&from).map_err(io)?;
    let original = match shape {
        Shape::Own => s.to_string(),
        Shape::Copy { original, .. } => original.clone(),
    };
    let old_ads: Vec<Vec<u8>> = if k.bound {
        vec![
            ad(SYMLINK_AD_BOUND, &[iv_old, s.as_bytes()]),
            ad(SYMLINK_AD_BOUND, &[iv_old, original.as_bytes()]),
        ]
    } else {
        vec![SYMLINK_AD.to_vec()]
    };
    let target = std::str::from_utf8(&sealed)
        .ok()
        .and_then(|t| old_ads.iter().find_map(|a| k.old_seal.open_b64(a, t).ok()));
    let Some(target) = target else {
        // A target that never opened stays as it is (still unreadable).
        tracing::warn!("{s}: symlink target does not open; moved as it is");
        return warpfs_backing::rename(&from, &to, libc::RENAME_NOREPLACE).map_err(io);
    };
    let new_ad = if k.bound {
        ad(SYMLINK_AD_BOUND, &[iv_new, to_name.as_bytes()])
    } else {
        SYMLINK_AD.to_vec()
    };
    let resealed = k.new_seal.seal_b64(&new_ad, &target);
    let tmp = OsString::from(format!("{TMP_PREFIX}{:016x}", warpfs_crypto::rand::u64()));
    let tl = dir.entry(&tmp);
    warpfs_backing::symlink(resealed.as_bytes(), &tl).map_err(io)?;
    let _ = warpfs_backing::lchown(&tl, Some(st.st_uid), Some(st.st_gid));
    let t = |s: i64, ns: i64| Some(Some((s, ns)));
    let _ = warpfs_backing::utimens(&tl, t(st.st_atime, st.st_atime_nsec), t(st.st_mtime, st.st_mtime_nsec));
    match warpfs_backing::rename(&tl, &to, libc::RENAME_NOREPLACE) {
        Ok(()) => {}
        // A run that stopped after this rename and before the unlink below
        // made it already: keep that one if it opens for its place.
        Err(e) if e.0 == libc::EEXIST && opens_new(&to, k, &new_ad) => {
            warpfs_backing::unlink(&tl).map_err(io)?;
        }
        Err(e) => {
            let _ = warpfs_backing::unlink(&tl);
            return Err(io(e));
        }
    }
    warpfs_backing::unlink(&from).map_err(io)
}

fn opens_new(l: &Loc, k: &NameKeys, ad: &[u8]) -> bool {
    warpfs_backing::readlink(l)
        .ok()
        .and_then(|t| String::from_utf8(t).ok())
        .is_some_and(|t| k.new_seal.open_b64(ad, &t).is_ok())
}

/// Seal an entry's encrypted xattrs again under the new key: each name
/// that opens under the old key gets its new name with its value sealed
/// again (set before the old one is removed, so a stop in between leaves
/// both, and the old one is done again).
fn reseal_xattrs(l: &Loc, k: &NameKeys) -> std::io::Result<()> {
    let raw = match warpfs_backing::llistxattr(l) {
        Ok(r) => r,
        Err(e) if matches!(e.0, libc::ENOTSUP | libc::ENODATA) => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    for n in raw.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let Ok(n) = std::str::from_utf8(n) else { continue };
        let Some(enc) = n.strip_prefix(XATTR_PREFIX) else {
            continue;
        };
        if n == ID_XATTR {
            continue;
        }
        let Ok(plain) = k.old_names.decrypt_xattr_name(enc) else {
            continue;
        };
        let value = warpfs_backing::lgetxattr(l, n).map_err(io)?;
        let vad = if k.bound {
            match warpfs_backing::lgetxattr(l, ID_XATTR) {
                Ok(id) => Some(ad(VALUE_AD_BOUND, &[&id, &plain])),
                Err(_) => None,
            }
        } else {
            Some(VALUE_AD.to_vec())
        };
        // A value that never opened keeps its bytes (it stays unreadable).
        let value = match vad
            .as_ref()
            .and_then(|a| k.old_seal.open(a, &value).ok().map(|p| (a, p)))
        {
            Some((a, p)) => k.new_seal.seal(a, &p),
            None => value,
        };
        let new_name = k
            .new_names
            .encrypt_xattr_name(&plain)
            .map(|e| format!("{XATTR_PREFIX}{e}"))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        warpfs_backing::lsetxattr(l, &new_name, &value, 0).map_err(io)?;
        warpfs_backing::lremovexattr(l, n).map_err(io)?;
    }
    Ok(())
}

/// Remove the sidecars of long names moved away: a sidecar whose name
/// opens under the old key and that no entry of the directory (nor a sync
/// tool's copy of one) still uses.
fn remove_old_sidecars(dir: &Dir, k: &NameKeys, iv_old: &[u8; DIRIV_LEN]) -> std::io::Result<()> {
    let names: Vec<String> = dir
        .list()
        .map_err(io)?
        .into_iter()
        .filter_map(|e| e.name.into_string().ok())
        .collect();
    for side in names.iter().filter(|n| is_sidecar(n.as_str())) {
        let file = &side[..side.len() - ".name".len()];
        let hash = file.rsplit('.').next().unwrap_or_default();
        let used = names
            .iter()
            .any(|n| !is_sidecar(n.as_str()) && n.starts_with("warpfs.long") && n.contains(hash));
        if used {
            continue;
        }
        let Ok(data) = warpfs_backing::read_small(&dir.entry(OsStr::new(side)), MAX_SIDECAR, Expect::Reserved) else {
            continue;
        };
        let old = std::str::from_utf8(&data).is_ok_and(|enc| k.old_names.decrypt_name(iv_old, enc).is_ok());
        if old {
            warpfs_backing::unlink(&dir.entry(OsStr::new(side))).map_err(io)?;
        }
    }
    Ok(())
}
