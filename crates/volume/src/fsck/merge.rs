//! fsck's check and repair of a directory with copies of its IV file
//! (FORMAT.md 13.2). A copy is merged (every entry only its IV decrypts
//! renamed to the name it is shown as, encrypted under `warpfs.diriv`;
//! then the copy removed) only when each of those entries proves it was
//! sealed in this directory under that IV, and no other directory of the
//! volume holds the IV: a copy of another directory's IV, with that
//! directory's entries moved in beside it, is reported, never merged.
//! Nothing is lost: a rename never replaces an entry, and a copy of the IV
//! stays until every entry it decrypts was moved.

use super::report::{Finding, Fix, Kind};
use crate::dirview::{How, Shown, View};
use crate::names;
use crate::synced::{self, Copy};
use crate::volume::Volume;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use warpfs_backing::Dir;
use warpfs_crypto::names::{is_reserved, DIRIV_LEN};

/// Which backing directories hold each IV (as `warpfs.diriv` or a copy of
/// it), built once per fsck run on first use.
#[derive(Default)]
pub(super) struct IvIndex(Option<HashMap<[u8; DIRIV_LEN], Vec<PathBuf>>>);

impl IvIndex {
    /// Another backing directory than `rel` holding `iv`, if any.
    fn elsewhere(&mut self, vol: &Volume, rel: &Path, iv: &[u8; DIRIV_LEN]) -> Option<PathBuf> {
        let map = self.0.get_or_insert_with(|| index(vol));
        map.get(iv)?.iter().find(|d| d.as_path() != rel).cloned()
    }
}

/// Every backing directory's IVs, from the root down (foreign directories,
/// our own files and symlinks not entered).
fn index(vol: &Volume) -> HashMap<[u8; DIRIV_LEN], Vec<PathBuf>> {
    let mut map: HashMap<[u8; DIRIV_LEN], Vec<PathBuf>> = HashMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(dir) = vol.dir(&rel) else { continue };
        let Ok(list) = dir.list() else { continue };
        let mut ivs: Vec<[u8; DIRIV_LEN]> = crate::diriv::read(&dir).into_iter().collect();
        for e in &list {
            let b = e.name.as_bytes();
            if synced::diriv_copy(b).is_some() {
                ivs.extend(crate::diriv::read_named(&dir, &e.name).ok());
                continue;
            }
            if is_reserved(b) || synced::classify(b) == Some(Copy::Foreign) {
                continue;
            }
            let is_dir = match e.d_type {
                libc::DT_DIR => true,
                libc::DT_UNKNOWN => warpfs_backing::lstat(&dir.entry(&e.name))
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
                _ => false,
            };
            if is_dir {
                stack.push(rel.join(&e.name));
            }
        }
        ivs.sort();
        ivs.dedup();
        for iv in ivs {
            map.entry(iv).or_default().push(rel.clone());
        }
    }
    map
}

/// The copies of one IV in a directory and the entries only it decrypts.
struct Group<'a> {
    /// Index of the IV in [`View::ivs`] (0: copies equal to `warpfs.diriv`).
    k: usize,
    files: Vec<&'a OsString>,
    moves: Vec<&'a Shown>,
    /// Entries that carry no proof (shown name and why).
    unproven: Vec<String>,
    /// Another directory holding the IV.
    elsewhere: Option<PathBuf>,
}

impl Group<'_> {
    fn mergeable(&self) -> bool {
        self.unproven.is_empty() && self.elsewhere.is_none()
    }
}

fn lossy(n: &OsStr) -> String {
    n.to_string_lossy().into_owned()
}

/// Why `s`, an entry only IV `iv` decrypts, does not prove it was sealed
/// in `dir` under that IV; `None` when it does.
fn unproven(vol: &Volume, dir: &Dir, iv: &[u8; DIRIV_LEN], s: &Shown) -> Option<String> {
    // A conflict copy was sealed under the name it is a copy of.
    let sealed_as = match synced::classify(s.backing.as_bytes()) {
        Some(Copy::Of { original, .. }) if s.how == How::Copy => OsString::from(original),
        _ => s.backing.clone(),
    };
    let loc = dir.entry(&s.backing);
    if vol.sealed_in(&loc, iv, sealed_as.as_bytes()) {
        return None;
    }
    let what = match warpfs_backing::lstat(&loc) {
        Err(e) => format!("unreadable: {e}"),
        Ok(st) => match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => "a regular file".into(),
            libc::S_IFDIR => "a directory".into(),
            libc::S_IFLNK if vol.bound_seals => "a symlink whose target is not sealed for this IV and name".into(),
            libc::S_IFLNK => "a symlink without a bound seal".into(),
            _ => "a special file".into(),
        },
    };
    Some(format!("{} ({what})", lossy(&s.name)))
}

/// Check the IV copies of directory `dir` (backing `rel`, plaintext
/// `plain`, decoded as `view`) and, with `repair`, merge those that can
/// be. Returns the findings and whether anything was merged.
pub(super) fn check(
    vol: &Volume,
    dir: &Dir,
    (rel, plain): (&Path, &str),
    view: &View,
    repair: bool,
    index: &mut IvIndex,
) -> (Vec<Finding>, bool) {
    let mut groups: Vec<Group> = Vec::new();
    for (file, _, k) in &view.alt_files {
        match groups.iter_mut().find(|g| g.k == *k) {
            Some(g) => g.files.push(file),
            None => groups.push(Group {
                k: *k,
                files: vec![file],
                moves: Vec::new(),
                unproven: Vec::new(),
                elsewhere: None,
            }),
        }
    }
    for g in groups.iter_mut().filter(|g| g.k != 0) {
        let iv = &view.ivs[g.k];
        g.moves = view
            .shown
            .iter()
            .filter(|s| s.iv == g.k && matches!(s.how, How::OtherIv | How::Copy))
            .collect();
        g.unproven = g.moves.iter().filter_map(|s| unproven(vol, dir, iv, s)).collect();
        g.elsewhere = index.elsewhere(vol, rel, iv);
    }
    let mut out = Vec::new();
    let (ok, refused): (Vec<&Group>, Vec<&Group>) = groups.iter().partition(|g| g.mergeable());
    let mut merged = false;
    if !ok.is_empty() {
        let files: Vec<String> = ok.iter().flat_map(|g| g.files.iter().map(|f| lossy(f))).collect();
        let fix = if repair {
            merged = true;
            match merge(vol, dir, view, &ok) {
                Ok(()) => Fix::Done("merged into one IV, names re-encrypted"),
                Err(e) => Fix::Failed(e),
            }
        } else {
            Fix::NotAsked("--repair")
        };
        out.push(Finding {
            path: plain.to_string(),
            backing: rel.join(crate::diriv::DIRIV_NAME),
            kind: Kind::DirIvCopies(files),
            fix,
        });
    }
    for g in refused {
        out.push(Finding {
            path: plain.to_string(),
            backing: rel.join(g.files[0]),
            kind: Kind::DirIvCopyUnproven {
                copies: g.files.iter().map(|f| lossy(f)).collect(),
                entries: g.unproven.clone(),
                elsewhere: g.elsewhere.as_ref().map(|p| p.display().to_string()),
            },
            fix: Fix::None,
        });
    }
    (out, merged)
}

/// Merge the IV copies of `groups` into `warpfs.diriv`.
fn merge(vol: &Volume, dir: &Dir, view: &View, groups: &[&Group]) -> Result<(), String> {
    let iv = crate::diriv::read(dir).map_err(|e| e.to_string())?;
    if view.ivs.first() != Some(&iv) {
        return Err("warpfs.diriv changed during the check".into());
    }
    let mut failed = Vec::new();
    for g in groups {
        let mut moved = true;
        for s in &g.moves {
            if let Err(e) = move_entry(vol, dir, &iv, &s.backing, &s.name, s.sidecar.is_some()) {
                failed.push(format!("{}: {e}", lossy(&s.name)));
                moved = false;
            }
        }
        if moved {
            for n in &g.files {
                warpfs_backing::unlink(&dir.entry(n)).map_err(|e| format!("{}: {e}", lossy(n)))?;
            }
        }
    }
    if !failed.is_empty() {
        return Err(format!("entries not moved (IV copies kept): {}", failed.join("; ")));
    }
    dir.reopen().and_then(|f| Ok(f.sync_all()?)).map_err(|e| e.to_string())
}

/// Rename backing entry `from` to plaintext `name` under `iv`, never
/// replacing an entry; a long name gets its sidecar first, the old
/// sidecar goes last.
fn move_entry(
    vol: &Volume,
    dir: &Dir,
    iv: &[u8; 16],
    from: &OsStr,
    name: &OsStr,
    owns_sidecar: bool,
) -> crate::Result<()> {
    let b = names::encode(&vol.naming().names, iv, name)?;
    let to = names::file_of(&b).to_string();
    let made = names::write_sidecar(dir, &b)?;
    // A bound symlink's target is sealed again for its new name (its old
    // seal names the other IV, whose file goes once every entry moved).
    let r = vol.rename_entry(&dir.entry(from), &dir.entry(to.as_ref()), libc::RENAME_NOREPLACE);
    if let Err(e) = r {
        if made {
            names::remove_sidecar(dir, &b);
        }
        return Err(e);
    }
    if owns_sidecar {
        let side = warpfs_crypto::names::long_sidecar(&from.to_string_lossy());
        let _ = warpfs_backing::unlink(&dir.entry(OsStr::new(&side)));
    }
    Ok(())
}
