//! Symlink targets and xattr values bound to their entry (`bound-seals`,
//! config version 2; FORMAT.md 5.1, 5.3): the sealing's associated data
//! names the entry, so a target or value moved or swapped to another
//! entry fails to open (EIO and a log line) instead of showing there.
//!
//! - A symlink's target is bound to its directory's IV and its backing
//!   name: a rename seals the target again for the new place (a new backing
//!   symlink renamed over the destination, then the old name removed), and
//!   a hard link to a symlink is made as a copy of it.
//! - An xattr value is bound to its plaintext attribute name and to the
//!   entry's random ID, kept in the backing xattr `user.warpfs.id` (made
//!   with the entry's first attribute; it moves with the inode through
//!   renames and hard links, and `cp -a` copies it).
//!
//! Volumes without the flag (version 1) keep format 1's unbound seals.

use crate::error::{Error, Result};
use crate::volume::Volume;
use warpfs_backing::Loc;

/// Associated data of format 1 (unbound) symlink targets.
pub(crate) const SYMLINK_AD: &[u8] = b"warpfs symlink";
pub(crate) const SYMLINK_AD_BOUND: &[u8] = b"warpfs symlink v2";
/// Associated data of format 1 (unbound) xattr values.
pub(crate) const VALUE_AD: &[u8] = b"warpfs xattr value";
pub(crate) const VALUE_AD_BOUND: &[u8] = b"warpfs xattr value v2";
/// Backing xattr holding an entry's 16-byte random ID.
pub(crate) const ID_XATTR: &str = "user.warpfs.id";
/// Prefix of a symlink being sealed again for its new place (reserved,
/// FORMAT.md 4.4).
pub(crate) const TMP_PREFIX: &str = "warpfs.symlink.tmp-";

/// `tag ‖ u32 LE length ‖ bytes` for each part.
pub(crate) fn ad(tag: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut a = tag.to_vec();
    for p in parts {
        a.extend_from_slice(&(p.len() as u32).to_le_bytes());
        a.extend_from_slice(p);
    }
    a
}

impl Volume {
    /// Associated data a symlink at `p` is sealed with.
    fn symlink_ad(&self, p: &Loc) -> Result<Vec<u8>> {
        if !self.bound_seals {
            return Ok(SYMLINK_AD.to_vec());
        }
        let (state, _) = self.dir_state(p.parent())?;
        Ok(ad(SYMLINK_AD_BOUND, &[&state.primary, p.name_bytes()]))
    }

    /// Every associated data a symlink found at `p` may have been sealed
    /// with where a sync tool had a hand in it (FORMAT.md 13): under the
    /// directory's IV or a copy of it, at its backing name or, for a
    /// tool's conflict copy, at the name it copied. All of them name this
    /// directory and this entry, so a target moved from another entry
    /// still fails to open.
    fn symlink_ads(&self, p: &Loc) -> Result<Vec<Vec<u8>>> {
        if !self.bound_seals {
            return Ok(vec![SYMLINK_AD.to_vec()]);
        }
        let (state, _) = self.dir_state(p.parent())?;
        let mut names = vec![p.name_bytes().to_vec()];
        if let Some(crate::synced::Copy::Of { original, .. }) = crate::synced::classify(p.name_bytes()) {
            names.push(original.into_bytes());
        }
        let ivs = std::iter::once(&state.primary).chain(state.alts.iter().map(|(_, iv)| iv));
        Ok(ivs
            .flat_map(|iv| names.iter().map(move |n| ad(SYMLINK_AD_BOUND, &[iv, n])))
            .collect())
    }

    /// Whether the entry at `p` proves it was sealed in a directory whose
    /// IV is `iv`, under the backing name `name`: only a bound symlink can
    /// (its target's seal names both, FORMAT.md 5.1). Regular files,
    /// directories, special files and unbound symlinks hold nothing that
    /// names their directory (a file's ID and an xattr value's entry ID
    /// stay the same wherever the entry is moved).
    pub(crate) fn sealed_in(&self, p: &Loc, iv: &[u8; 16], name: &[u8]) -> bool {
        if !self.bound_symlink(p) {
            return false;
        }
        let Ok(t) = warpfs_backing::readlink(p) else {
            return false;
        };
        std::str::from_utf8(&t).is_ok_and(|s| {
            self.naming()
                .sealer
                .open_b64(&ad(SYMLINK_AD_BOUND, &[iv, name]), s)
                .is_ok()
        })
    }

    /// The backing target of a symlink at `p` pointing to `target`.
    pub(crate) fn seal_symlink(&self, p: &Loc, target: &[u8]) -> Result<String> {
        let sealed = self.naming().sealer.seal_b64(&self.symlink_ad(p)?, target);
        if sealed.len() >= libc::PATH_MAX as usize {
            return Err(Error::ENAMETOOLONG);
        }
        Ok(sealed)
    }

    /// Open the backing target `sealed` of the symlink at `p`.
    pub(crate) fn open_symlink(&self, p: &Loc, sealed: &[u8]) -> Result<Vec<u8>> {
        let s = std::str::from_utf8(sealed).map_err(|_| Error::EIO)?;
        self.symlink_ads(p)?
            .iter()
            .find_map(|a| self.naming().sealer.open_b64(a, s).ok())
            .ok_or(Error::EIO)
    }

    /// Whether the backing entry at `p` is a symlink whose target must be
    /// sealed again when it moves.
    pub(crate) fn bound_symlink(&self, p: &Loc) -> bool {
        self.bound_seals && warpfs_backing::lstat(p).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
    }

    /// A new backing symlink in `to`'s directory holding `target` sealed
    /// for `to`, with the owner and times of `like`; returns its temporary
    /// name (to be renamed over `to`).
    pub(crate) fn symlink_for(&self, to: &Loc, target: &[u8], like: &libc::stat) -> Result<String> {
        let sealed = self.seal_symlink(to, target)?;
        let tmp = format!("{TMP_PREFIX}{:016x}", warpfs_crypto::rand::u64());
        let tl = to.parent().entry(tmp.as_ref());
        warpfs_backing::symlink(sealed.as_bytes(), &tl)?;
        let _ = warpfs_backing::lchown(&tl, Some(like.st_uid), Some(like.st_gid));
        let t = |s: i64, ns: i64| Some(Some((s, ns)));
        let _ = warpfs_backing::utimens(
            &tl,
            t(like.st_atime, like.st_atime_nsec),
            t(like.st_mtime, like.st_mtime_nsec),
        );
        Ok(tmp)
    }

    /// Associated data of xattr `name` of the entry at `p`; with `create`,
    /// the entry gets its ID if it has none yet.
    pub(crate) fn value_ad(&self, p: &Loc, name: &[u8], create: bool) -> Result<Vec<u8>> {
        if !self.bound_seals {
            return Ok(VALUE_AD.to_vec());
        }
        let id = match warpfs_backing::lgetxattr(p, ID_XATTR) {
            Ok(id) => id,
            Err(Error(libc::ENODATA)) if create => {
                let id: [u8; 16] = warpfs_crypto::rand::array();
                match warpfs_backing::lsetxattr(p, ID_XATTR, &id, libc::XATTR_CREATE) {
                    Ok(()) => id.to_vec(),
                    Err(Error(libc::EEXIST)) => warpfs_backing::lgetxattr(p, ID_XATTR)?,
                    Err(e) => return Err(e),
                }
            }
            // No ID: no value of this entry was sealed for it.
            Err(Error(libc::ENODATA)) => return Err(Error::EIO),
            Err(e) => return Err(e),
        };
        if id.len() != 16 {
            return Err(Error::EIO);
        }
        Ok(ad(VALUE_AD_BOUND, &[&id, name]))
    }
}

impl Volume {
    /// Whether plaintext `name` in backing directory `dir` is a symlink
    /// whose rename or hard link makes a new backing symlink (a new inode)
    /// in its place: the FUSE layer then keeps its node for the new inode.
    pub fn moves_recreate(&self, dir: &std::path::Path, name: &std::ffi::OsStr) -> bool {
        self.bound_seals
            && self
                .resolve(dir, name)
                .is_ok_and(|r| r.exists && self.bound_symlink(&r.adir.entry(r.file.as_ref())))
    }

    /// `link` of a bound symlink: a new symlink at `to` with the same
    /// target, owner and times.
    pub(crate) fn copy_symlink(&self, from: &Loc, to: &Loc) -> Result<()> {
        let target = self.readlink_at(from)?;
        let st = warpfs_backing::lstat(from)?;
        let tmp = self.symlink_for(to, &target, &st)?;
        let tl = to.parent().entry(tmp.as_ref());
        warpfs_backing::rename(&tl, to, libc::RENAME_NOREPLACE).inspect_err(|_| {
            let _ = warpfs_backing::unlink(&tl);
        })
    }

    /// `renameat2(from, to, flags)`, sealing the targets of bound symlinks
    /// again for their new places. A moved symlink is made anew at `to`
    /// (renamed over it, so the replace is still atomic) before `from` is
    /// removed: a crash in between leaves both names, never neither. An
    /// exchange swaps first and then seals both sides again in place.
    pub(crate) fn rename_entry(&self, from: &Loc, to: &Loc, flags: u32) -> Result<()> {
        let same = warpfs_backing::lstat(from)
            .ok()
            .zip(warpfs_backing::lstat(to).ok())
            .is_some_and(|(a, b)| (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino));
        let (fb, tb) = (self.bound_symlink(from), self.bound_symlink(to));
        if same || !(fb || (tb && flags & libc::RENAME_EXCHANGE != 0)) {
            return warpfs_backing::rename(from, to, flags);
        }
        if flags & libc::RENAME_EXCHANGE != 0 {
            let a = if fb { Some(self.readlink_at(from)?) } else { None };
            let b = if tb { Some(self.readlink_at(to)?) } else { None };
            warpfs_backing::rename(from, to, flags)?;
            for (loc, target) in [(to, a), (from, b)] {
                if let Some(t) = target {
                    let st = warpfs_backing::lstat(loc)?;
                    let tmp = self.symlink_for(loc, &t, &st)?;
                    warpfs_backing::rename(&loc.parent().entry(tmp.as_ref()), loc, 0)?;
                }
            }
            return Ok(());
        }
        let target = self.readlink_at(from)?;
        let st = warpfs_backing::lstat(from)?;
        let tmp = self.symlink_for(to, &target, &st)?;
        let tl = to.parent().entry(tmp.as_ref());
        // RENAME_WHITEOUT leaves its whiteout where the symlink was, not
        // where the new one was made.
        let whiteout = flags & libc::RENAME_WHITEOUT != 0;
        if let Err(e) = warpfs_backing::rename(&tl, to, flags & !libc::RENAME_WHITEOUT) {
            let _ = warpfs_backing::unlink(&tl);
            return Err(e);
        }
        if whiteout {
            // The old symlink moves onto the name the new one left, and the
            // whiteout takes its place in one step.
            warpfs_backing::rename(from, &tl, libc::RENAME_WHITEOUT)?;
            return warpfs_backing::unlink(&tl);
        }
        warpfs_backing::unlink(from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn associated_data_is_length_prefixed() {
        assert_eq!(ad(b"t", &[b"ab", b""]), b"t\x02\0\0\0ab\0\0\0\0".to_vec());
        assert_ne!(ad(b"t", &[b"a", b"b"]), ad(b"t", &[b"ab", b""]));
    }

    /// The FUSE layer asks by plaintext name, before the rename, whether
    /// the entry will be a new backing inode after it.
    #[test]
    fn moves_recreate_names_bound_symlinks_by_their_plaintext_name() {
        use crate::{Caller, Options};
        use std::ffi::OsStr;
        use std::path::Path;
        use warpfs_config::{Config, ContentMode, KdfParams};
        let t = tempfile::tempdir().unwrap();
        let bound = [warpfs_config::FeatureFlag::BoundSeals];
        let (cfg, master) =
            Config::create_with_features(t.path(), b"pw", ContentMode::Gcm, 256, KdfParams::MIN, &bound).unwrap();
        Volume::init_root(&warpfs_backing::Root::open(t.path()).unwrap()).unwrap();
        let v = Volume::open(t.path(), &cfg, &master, Options::default()).unwrap();
        let who = Caller { uid: 0, gid: 0 };
        let root = Path::new("");
        v.symlink(root, OsStr::new("s"), OsStr::new("target"), who).unwrap();
        v.mkdir(root, OsStr::new("d"), 0o755, who).unwrap();
        assert!(v.moves_recreate(root, OsStr::new("s")));
        assert!(!v.moves_recreate(root, OsStr::new("d")));
        assert!(!v.moves_recreate(root, OsStr::new("missing")));
        let (before, _) = v.lookup(root, OsStr::new("s")).unwrap();
        let ino = |c: &str| v.getattr(Path::new(c)).unwrap().ino;
        let old = ino(&before);
        let (_, to) = v.rename(root, OsStr::new("s"), root, OsStr::new("s2"), 0).unwrap();
        assert_ne!(ino(&to), old, "a moved bound symlink is a new inode");
    }
}
