//! What a backing directory shows (FORMAT.md 13): every entry whose name
//! decrypts under the directory's IV under that name; entries whose name
//! decrypts only under a sync tool's copy of its IV file, and conflict
//! copies, under their decrypted name with the tool's marker (never their
//! plain name); undecryptable names under a marked name; foreign files and
//! our own files never. Also the per-directory cache behind lookups
//! ([`cache::DirCache`]) and the resolution of a plaintext name to its backing
//! entry ([`Volume::resolve`]).

use crate::error::Result;
use crate::names;
use crate::synced::{self, Copy};
use crate::volume::Volume;
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::Arc;
use warpfs_backing::{Dir, RawEntry};
use warpfs_crypto::names::{is_reserved, BackingName, DIRIV_LEN};

pub(crate) mod cache;
use cache::stamp_of;
pub(crate) use cache::{DirState, Stamp};

/// How a shown entry got its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum How {
    /// Decrypted under `warpfs.diriv`.
    Plain,
    /// Decrypted under a copy of `warpfs.diriv` only: shown with that
    /// copy's marker, never under its plain name.
    OtherIv,
    /// A sync tool's copy of an entry (its marker shown).
    Copy,
    /// The name does not decrypt (why); shown as the backing name + marker.
    Undecryptable(String),
}

/// One shown entry.
#[derive(Debug, Clone)]
pub(crate) struct Shown {
    pub name: OsString,
    pub backing: OsString,
    pub ino: u64,
    pub d_type: u8,
    pub how: How,
    /// The long-name sidecar this entry owns (removed with it).
    pub sidecar: Option<BackingName>,
    /// The IV its name (a copy's: its original's) decrypted under: 0 for
    /// `warpfs.diriv`, k for the k-th copy of it.
    pub iv: usize,
}

/// Everything in one backing directory.
#[derive(Debug, Default)]
pub(crate) struct View {
    pub shown: Vec<Shown>,
    /// Foreign files (FORMAT.md 13.3), never shown.
    pub foreign: Vec<OsString>,
    /// Copies of `warpfs.diriv` used as further IVs: (file name, marker,
    /// index of its IV in `ivs`; 0 for a copy equal to `warpfs.diriv`).
    pub alt_files: Vec<(OsString, String, usize)>,
    /// Copies of `warpfs.diriv` that could not be used (file name, why).
    pub bad_alts: Vec<(OsString, String)>,
    /// Copies of `warpfs.conf` (in the root).
    pub config_copies: Vec<OsString>,
    /// `warpfs.diriv`, then each further IV ([`Shown::iv`] indexes it).
    pub ivs: Vec<[u8; DIRIV_LEN]>,
}

/// Read the IVs of `dir` (its `warpfs.diriv` and every copy of it) from a
/// listing: (primary, alts, alt file names, unusable copies).
type Ivs = (
    [u8; DIRIV_LEN],
    Vec<(String, [u8; DIRIV_LEN])>,
    Vec<(OsString, String, usize)>,
    Vec<(OsString, String)>,
);

fn read_ivs(dir: &Dir, list: &[RawEntry]) -> Result<Ivs> {
    let primary = crate::diriv::read(dir)?;
    let (mut alts, mut files, mut bad) = (Vec::new(), Vec::new(), Vec::new());
    // By name, so that which copy's marker an IV shows does not depend on
    // the listing's order.
    let mut copies: Vec<(&OsString, String)> = list
        .iter()
        .filter_map(|e| Some((&e.name, synced::diriv_copy(e.name.as_bytes())?)))
        .collect();
    copies.sort();
    for (name, marker) in copies {
        if !synced::is_tool_tail(&marker) {
            // Not a copy any sync tool warpfs knows makes: its IV would
            // show names under a marker anyone may choose.
            bad.push((name.clone(), format!("{marker:?} is no sync tool's conflict marker")));
            continue;
        }
        match crate::diriv::read_named(dir, name) {
            Ok(iv) if iv == primary => files.push((name.clone(), marker, 0)),
            Ok(iv) => {
                let k = match alts.iter().position(|(_, a)| *a == iv) {
                    Some(i) => i + 1,
                    None => {
                        alts.push((marker.clone(), iv));
                        alts.len()
                    }
                };
                files.push((name.clone(), marker, k));
            }
            Err(why) => bad.push((name.clone(), why)),
        }
    }
    Ok((primary, alts, files, bad))
}

/// A long-name sidecar read once, for decoding under several IVs.
fn sidecar_reader(dir: &Dir) -> impl FnMut(&str) -> std::result::Result<Vec<u8>, i32> + '_ {
    let mut cache: Option<(String, std::result::Result<Vec<u8>, i32>)> = None;
    move |side: &str| {
        if let Some((s, r)) = &cache {
            if s == side {
                return r.clone();
            }
        }
        let r = warpfs_backing::read_small(
            &dir.entry(OsStr::new(side)),
            names::MAX_SIDECAR,
            warpfs_backing::Expect::Reserved,
        )
        .map_err(|e| e.0);
        cache = Some((side.to_string(), r.clone()));
        r
    }
}

impl Volume {
    /// The state of backing directory `dir`, current as of the returned stamp.
    pub(crate) fn dir_state(&self, dir: &Dir) -> Result<(Arc<DirState>, Stamp)> {
        self.dir_state_st(dir).map(|(s, st)| (s, stamp_of(&st)))
    }

    /// [`Volume::dir_state`] with the directory's own `lstat`.
    fn dir_state_st(&self, dir: &Dir) -> Result<(Arc<DirState>, libc::stat)> {
        let st = dir.stat()?;
        let (key, stamp) = ((st.st_dev, st.st_ino), stamp_of(&st));
        if let Some(s) = self.ivs.lock().get(&key) {
            if s.stamp == stamp {
                return Ok((s.clone(), st));
            }
        }
        let list = dir.list()?;
        let ivs = read_ivs(dir, &list)?;
        // Only copies and other IVs need decoding now; a directory without
        // either keeps no marked names (undecryptable ones are found by a
        // listing, or by a lookup of a marked name).
        let copies = list
            .iter()
            .any(|e| matches!(synced::classify(e.name.as_bytes()), Some(Copy::Of { .. })));
        let decode = copies || !ivs.1.is_empty();
        let mut state = DirState {
            stamp,
            primary: ivs.0,
            alts: ivs.1.clone(),
            marked: Vec::new(),
        };
        if decode {
            state.marked = marked_of(&self.view_with(dir, list, &state, ivs));
        }
        let s = Arc::new(state);
        self.ivs.put(key, s.clone());
        Ok((s, st))
    }

    /// Every entry of backing directory `dir`, decoded (FORMAT.md 13).
    pub(crate) fn view(&self, dir: &Dir) -> Result<View> {
        let st = dir.stat()?;
        let list = dir.list()?;
        let ivs = read_ivs(dir, &list)?;
        let mut state = DirState {
            stamp: stamp_of(&st),
            primary: ivs.0,
            alts: ivs.1.clone(),
            marked: Vec::new(),
        };
        let v = self.view_with(dir, list, &state, ivs);
        state.marked = marked_of(&v);
        self.ivs.put((st.st_dev, st.st_ino), Arc::new(state));
        Ok(v)
    }

    /// Decode the backing names `list` as if they were in `dir` (which
    /// gives the IVs).
    pub(crate) fn view_of(&self, dir: &Dir, list: Vec<RawEntry>) -> Result<View> {
        let full = dir.list()?;
        let ivs = read_ivs(dir, &full)?;
        let state = DirState {
            stamp: stamp_of(&dir.stat()?),
            primary: ivs.0,
            alts: ivs.1.clone(),
            marked: Vec::new(),
        };
        Ok(self.view_with(dir, list, &state, ivs))
    }

    fn view_with(&self, dir: &Dir, list: Vec<RawEntry>, state: &DirState, ivs: Ivs) -> View {
        let mut v = View {
            alt_files: ivs.2,
            bad_alts: ivs.3,
            ivs: state.ivs().copied().collect(),
            ..View::default()
        };
        let ivs = v.ivs.clone();
        let naming = self.naming();
        let mut read = sidecar_reader(dir);
        // Decode `bname` under each IV: (plaintext, index of the IV).
        let mut decode = |bname: &[u8]| -> Option<std::result::Result<(Vec<u8>, usize), String>> {
            let mut first_err = None;
            for (k, iv) in ivs.iter().enumerate() {
                match names::decode_with(&naming.names, iv, bname, |s| {
                    read(s).map_err(std::io::Error::from_raw_os_error)
                })? {
                    Ok(p) => return Some(Ok((p, k))),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            Some(Err(first_err.unwrap_or_default()))
        };
        let undecryptable = |e: &RawEntry, why: String| {
            let mut n = e.name.clone().into_vec();
            n.extend_from_slice(synced::UNDECRYPTABLE.as_bytes());
            shown(e, n, How::Undecryptable(why), None)
        };
        // The marker of the k-th IV: none for `warpfs.diriv`, else the
        // text the sync tool added to its copy.
        let marker = |k: usize| if k == 0 { "" } else { state.alts[k - 1].0.as_str() };
        // Names decrypted under a copy of the IV, named after the plain
        // ones: (entry, shown name, how, sidecar, IV).
        let mut later = Vec::new();
        let mut used: HashSet<Vec<u8>> = HashSet::new();
        for e in list {
            let b = e.name.as_bytes();
            if synced::diriv_copy(b).is_some() {
                continue;
            }
            if synced::is_config_copy(b) {
                v.config_copies.push(e.name.clone());
                continue;
            }
            let copy = synced::classify(b);
            match copy {
                Some(Copy::Foreign) => {
                    v.foreign.push(e.name.clone());
                    continue;
                }
                Some(Copy::Unknown) => {
                    v.shown
                        .push(undecryptable(&e, "a long name with text no sync tool adds".into()));
                    continue;
                }
                _ => {}
            }
            // A copy of a long name is reserved-looking: never decoded as is.
            if copy.is_none() || !is_reserved(b) {
                match decode(b) {
                    None if copy.is_none() => continue, // our own files
                    Some(Ok((p, 0))) => {
                        used.insert(p.clone());
                        v.shown.push(shown(&e, p, How::Plain, long_of(&e.name)));
                        continue;
                    }
                    // Only a copy of the IV decrypts it: never its plain
                    // name, always the copy's marker (FORMAT.md 13.2).
                    Some(Ok((p, k))) => {
                        let name = [p.as_slice(), marker(k).as_bytes()].concat();
                        let sidecar = long_of(&e.name);
                        later.push((e, name, How::OtherIv, sidecar, k));
                        continue;
                    }
                    Some(Err(why)) if copy.is_none() => {
                        v.shown.push(undecryptable(&e, why));
                        continue;
                    }
                    _ => {}
                }
            }
            let Some(Copy::Of { original, tail, prefix }) = copy else {
                continue;
            };
            match decode(original.as_bytes()) {
                Some(Ok((p, k))) => {
                    let name = [prefix.as_bytes(), &p, marker(k).as_bytes(), tail.as_bytes()].concat();
                    if k == 0 {
                        used.insert(name.clone());
                        v.shown.push(shown(&e, name, How::Copy, None));
                    } else {
                        later.push((e, name, How::Copy, None, k));
                    }
                }
                Some(Err(why)) => v.shown.push(undecryptable(&e, why)),
                None => v.shown.push(undecryptable(&e, "a copy of a reserved name".into())),
            }
        }
        // Names of another IV: their marker once more while the name is
        // taken (by a plain entry, or one of them met first, by backing
        // name), so each is shown and found under a name of its own.
        later.sort_by(|x, y| x.0.name.cmp(&y.0.name));
        for (e, mut name, how, sidecar, k) in later {
            while used.contains(&name) {
                name.extend_from_slice(marker(k).as_bytes());
            }
            used.insert(name.clone());
            let mut o = shown(&e, name, how, sidecar);
            o.iv = k;
            v.shown.push(o);
        }
        v
    }

    /// Find the backing entry shown as `name` in `dir`: the name encrypted
    /// under the directory's IV, then the marked names (conflict copies,
    /// entries of another IV, undecryptable names). An entry that does not
    /// exist resolves to the name encrypted under `warpfs.diriv` (where a
    /// new entry goes).
    pub(crate) fn resolve(&self, dir: &Path, name: &OsStr) -> Result<Resolved> {
        let adir = self.dir(dir)?;
        let (state, st) = self.dir_state_st(&adir)?;
        self.resolve_in(adir, &state, st, name)
    }

    /// [`Volume::resolve`] for an operation that makes or removes the
    /// entry by its name and fails by itself when the name is taken or
    /// missing (O_EXCL, mkdir, unlink): where the directory has one IV, no
    /// marked names, and `name` is short and not one a marked name could
    /// be, the entry can only be the name encrypted under that IV, so it is
    /// not looked up first (`checked` is false: `exists` is not known).
    pub(crate) fn resolve_for_change(&self, dir: &Path, name: &OsStr) -> Result<Resolved> {
        let adir = self.dir(dir)?;
        let (state, st) = self.dir_state_st(&adir)?;
        if state.alts.is_empty() && state.marked.is_empty() && !synced::may_be_marked(name.as_bytes()) {
            if let b @ BackingName::Short(_) = names::encode(&self.naming().names, &state.primary, name)? {
                return Ok(Resolved {
                    file: names::file_of(&b).to_string(),
                    adir,
                    b: Some(b),
                    exists: false,
                    checked: false,
                    stamp: stamp_of(&st),
                    dir_st: st,
                });
            }
        }
        self.resolve_in(adir, &state, st, name)
    }

    fn resolve_in(&self, adir: Dir, state: &DirState, st: libc::stat, name: &OsStr) -> Result<Resolved> {
        let stamp = stamp_of(&st);
        let encoded = names::encode(&self.naming().names, &state.primary, name);
        if let Ok(b) = &encoded {
            let file = names::file_of(b).to_string();
            if warpfs_backing::lstat(&adir.entry(file.as_ref())).is_ok() {
                return Ok(Resolved::found(adir, file, Some(b.clone()), st));
            }
        }
        // An entry of another IV is found only by its marked name, among
        // the shown names: never by its plain one (FORMAT.md 13.7).
        let find = |marked: &[(OsString, String, Option<BackingName>)]| {
            marked
                .iter()
                .find(|(shown, file, _)| shown == name && warpfs_backing::lstat(&adir.entry(file.as_ref())).is_ok())
                .map(|(_, f, s)| (f.clone(), s.clone()))
        };
        let mut hit = find(&state.marked);
        if hit.is_none() && synced::may_be_marked(name.as_bytes()) {
            hit = find(&marked_of(&self.view(&adir)?));
        }
        if let Some((file, sidecar)) = hit {
            return Ok(Resolved::found(adir, file, sidecar, st));
        }
        let b = encoded?;
        Ok(Resolved {
            file: names::file_of(&b).to_string(),
            adir,
            b: Some(b),
            exists: false,
            checked: true,
            stamp,
            dir_st: st,
        })
    }

    /// Remove the sidecar of long name `b` in `dir`, unless a sync tool's
    /// copy of the entry still takes its name from it.
    pub(crate) fn drop_sidecar(&self, dir: &Dir, b: &Option<BackingName>) {
        let Some(b @ BackingName::Long { file, .. }) = b else {
            return;
        };
        let in_use = dir.list().is_ok_and(|l| {
            l.iter().any(
                |e| matches!(synced::classify(e.name.as_bytes()), Some(Copy::Of { original, .. }) if original == *file),
            )
        });
        if !in_use {
            names::remove_sidecar(dir, b);
        }
    }
}

/// A plaintext name resolved in its backing directory.
pub(crate) struct Resolved {
    pub adir: Dir,
    /// Backing file name.
    pub file: String,
    /// The backing name whose long-name sidecar the entry owns (a new
    /// entry's, to write; an existing one's, to remove with it). `None` for
    /// a sync tool's copy, which shares its original's sidecar.
    pub b: Option<BackingName>,
    /// The entry exists (when `checked`).
    pub exists: bool,
    /// Whether `exists` was looked up ([`Volume::resolve_for_change`]
    /// may leave it to the operation).
    pub checked: bool,
    /// The directory as seen before the operation.
    pub stamp: Stamp,
    /// The directory's `lstat` before the operation.
    pub dir_st: libc::stat,
}

impl Resolved {
    fn found(adir: Dir, file: String, b: Option<BackingName>, st: libc::stat) -> Resolved {
        Resolved {
            adir,
            file,
            b,
            exists: true,
            checked: true,
            stamp: stamp_of(&st),
            dir_st: st,
        }
    }
}

/// The long-name sidecar a backing name owns, if it is a long name.
fn long_of(name: &OsStr) -> Option<BackingName> {
    let s = name.to_str()?;
    warpfs_crypto::names::is_long_file(s).then(|| BackingName::Long {
        file: s.to_string(),
        encoded: String::new(),
    })
}

fn shown(e: &RawEntry, name: Vec<u8>, how: How, sidecar: Option<BackingName>) -> Shown {
    Shown {
        name: OsString::from_vec(name),
        backing: e.name.clone(),
        ino: e.ino,
        d_type: e.d_type,
        how,
        sidecar,
        iv: 0,
    }
}

fn marked_of(v: &View) -> Vec<(OsString, String, Option<BackingName>)> {
    v.shown
        .iter()
        .filter(|s| s.how != How::Plain)
        .filter_map(|s| Some((s.name.clone(), s.backing.to_str()?.to_string(), s.sidecar.clone())))
        .collect()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ivs;
#[cfg(test)]
mod tests_tails;
