//! Whole paths between their plaintext and backing forms (`warpfs name`):
//! a backing path from a sync tool's version history or trash to the
//! plaintext path it had, and a plaintext path to the backing path to look
//! for (FORMAT.md 13.6).

use crate::volume::Volume;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use warpfs_backing::RawEntry;

/// Sync tools' version folders at the top of CIPHERDIR, skipped at the
/// start of a backing path (Syncthing keeps old versions under
/// `.stversions/` with the folder's own layout).
const VERSION_DIRS: &[&str] = &[".stversions"];

fn parts(p: &Path) -> Result<Vec<&OsStr>, String> {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(format!("{}: not a path inside the volume", p.display())),
        })
        .collect()
}

impl Volume {
    /// The plaintext path (from the volume root, starting with `/`) of a
    /// backing path relative to CIPHERDIR. Every directory on the way must
    /// be in CIPHERDIR (its IV is needed); the last name need not exist
    /// (a deleted file's name from a version history decrypts too).
    pub fn decrypt_path(&self, backing: &Path) -> Result<PathBuf, String> {
        let mut comps = parts(backing)?;
        if comps.len() > 1
            && comps
                .first()
                .is_some_and(|c| VERSION_DIRS.iter().any(|v| *c == OsStr::new(v)))
        {
            comps.remove(0);
        }
        let (mut rel, mut plain) = (PathBuf::new(), PathBuf::from("/"));
        for (i, c) in comps.iter().enumerate() {
            let dir = self
                .dir(&rel)
                .map_err(|e| format!("{}: {e}", self.shown(&rel).display()))?;
            let view = self
                .view(&dir)
                .map_err(|e| format!("{}: {e}", self.shown(&rel).display()))?;
            let shown = match view.shown.into_iter().find(|s| s.backing == *c) {
                Some(s) => s,
                None => {
                    // Not there (any more): decode the name alone.
                    let one = vec![RawEntry {
                        name: c.to_os_string(),
                        ino: 0,
                        d_type: libc::DT_UNKNOWN,
                    }];
                    let mut v = self.view_of(&dir, one).map_err(|e| e.to_string())?;
                    if v.shown.is_empty() {
                        let why = if v.foreign.is_empty() {
                            "one of warpfs's own files"
                        } else {
                            "a sync tool's or system's own file"
                        };
                        return Err(format!("{}: {why}, not an entry", rel.join(c).display()));
                    }
                    if i + 1 < comps.len() {
                        return Err(format!(
                            "{}: no such directory in CIPHERDIR (its IV is needed)",
                            rel.join(c).display()
                        ));
                    }
                    v.shown.remove(0)
                }
            };
            if let crate::dirview::How::Undecryptable(why) = &shown.how {
                return Err(format!("{}: does not decrypt: {why}", rel.join(c).display()));
            }
            plain.push(&shown.name);
            rel.push(c);
        }
        Ok(plain)
    }

    /// The backing path, relative to CIPHERDIR, of a plaintext path from
    /// the volume root: each name as a lookup finds it (another IV of its
    /// directory, a conflict copy's shown name), a name that does not
    /// exist encrypted as a new entry would be. Every directory on the way
    /// must exist.
    pub fn encrypt_path(&self, plain: &Path) -> Result<PathBuf, String> {
        let plain = plain.strip_prefix("/").unwrap_or(plain);
        let comps = parts(plain)?;
        let mut rel = PathBuf::new();
        for (i, c) in comps.iter().enumerate() {
            let r = self
                .resolve(&rel, c)
                .map_err(|e| format!("{}: {e}", Path::new("/").join(plain).display()))?;
            if !r.exists && i + 1 < comps.len() {
                let upto: PathBuf = comps[..=i].iter().collect();
                return Err(format!("/{}: no such directory", upto.display()));
            }
            rel.push(OsString::from(r.file));
        }
        Ok(rel)
    }
}
