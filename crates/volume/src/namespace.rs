//! Directory operations: lookup, create, open, mkdir, mknod, symlink, link,
//! unlink, rmdir, rename, readdir. Directories are backing paths relative to
//! CIPHERDIR; the returned `String` is the entry's backing file name.

use crate::at::{Dir, Loc};
use crate::attr::{Attr, Kind};
use crate::error::{Error, Result};
use crate::files::OpenFile;
use crate::names;
use crate::volume::{Caller, Volume};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use warpfs_crypto::names::BackingName;

/// One plaintext directory entry.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Plaintext name.
    pub name: OsString,
    /// Backing file name.
    pub cname: String,
    /// Backing inode number.
    pub ino: u64,
    /// Kind, if the backing entry's type is known.
    pub kind: Kind,
}

impl Volume {
    /// The backing directory `dir`, the backing name of `name` in it and
    /// that name's file name.
    fn backing(&self, dir: &Path, name: &OsStr) -> Result<(Dir, BackingName, String)> {
        let adir = self.dir(dir)?;
        let iv = self.ivs.get(&adir)?;
        let b = names::encode(&self.names, &iv, name)?;
        let file = names::file_of(&b).to_string();
        Ok((adir, b, file))
    }

    /// Find `name` in `dir`.
    pub fn lookup(&self, dir: &Path, name: &OsStr) -> Result<(String, Attr)> {
        let (adir, _, file) = self.backing(dir, name)?;
        let attr = self.stat_at(&adir.entry(file.as_ref()))?;
        Ok((file, attr))
    }

    /// Create and open a regular file (`flags` are the caller's open flags).
    pub fn create(
        &self,
        dir: &Path,
        name: &OsStr,
        mode: u32,
        flags: i32,
        who: Caller,
        label: String,
    ) -> Result<(String, Attr, OpenFile, bool)> {
        self.writable()?;
        let (adir, b, file) = self.backing(dir, name)?;
        let p = adir.entry(file.as_ref());
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        let excl = flags & libc::O_EXCL != 0;
        let existed = crate::sys::lstat(&p).is_ok();
        let oflags = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | if excl { libc::O_EXCL } else { 0 };
        let f = match crate::sys::open(&p, oflags, mode & 0o7777) {
            Ok(f) => f,
            Err(e) => {
                if made_sidecar {
                    names::remove_sidecar(&adir, &b);
                }
                return Err(e);
            }
        };
        if !existed {
            self.own(&p, who)?;
        }
        let of = self.files.open(f, true, &self.keys, label)?;
        if existed && flags & libc::O_TRUNC != 0 {
            of.set_len(0)?;
        }
        let attr = self.stat_at(&p)?;
        Ok((file, attr, of, existed))
    }

    /// Open an existing regular file. The backing file is always opened
    /// read-write when allowed (partial writes read the block back).
    pub fn open_file(&self, path: &Path, flags: i32, label: String) -> Result<OpenFile> {
        let wants_write = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        if wants_write {
            self.writable()?;
        }
        let (d, n) = self.at(path)?;
        let p = d.entry(&n);
        let (f, writable) = match crate::sys::open(&p, libc::O_RDWR | libc::O_NOFOLLOW, 0) {
            Ok(f) => (f, true),
            Err(Error(libc::EACCES | libc::EROFS | libc::EPERM)) if !wants_write => {
                (crate::sys::open(&p, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?, false)
            }
            Err(e) => return Err(e),
        };
        let of = self.files.open(f, writable, &self.keys, label)?;
        if flags & libc::O_TRUNC != 0 {
            of.set_len(0)?;
        }
        Ok(of)
    }

    /// Make a directory (with its own name IV).
    pub fn mkdir(&self, dir: &Path, name: &OsStr, mode: u32, who: Caller) -> Result<(String, Attr)> {
        self.writable()?;
        let (adir, b, file) = self.backing(dir, name)?;
        let p = adir.entry(file.as_ref());
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        if let Err(e) = crate::sys::mkdir(&p, (mode & 0o7777) | 0o700) {
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e);
        }
        let finish = || -> Result<()> {
            crate::diriv::create(&p.as_dir()?)?;
            if mode & 0o700 != 0o700 {
                // Keep the set-group-ID bit inherited from a setgid parent.
                let inherited = crate::sys::lstat(&p)?.st_mode & libc::S_ISGID;
                crate::sys::chmod(&p, (mode & 0o7777) | inherited)?;
            }
            self.own(&p, who)
        };
        if let Err(e) = finish() {
            if let Ok(d) = p.as_dir() {
                let _ = crate::sys::unlink(&d.entry(crate::diriv::DIRIV_NAME.as_ref()));
            }
            let _ = crate::sys::rmdir(&p);
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e);
        }
        let attr = self.stat_at(&p)?;
        Ok((file, attr))
    }

    /// Make a fifo, socket, device node or empty regular file.
    pub fn mknod(&self, dir: &Path, name: &OsStr, mode: u32, rdev: u64, who: Caller) -> Result<(String, Attr)> {
        self.writable()?;
        let (adir, b, file) = self.backing(dir, name)?;
        let p = adir.entry(file.as_ref());
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        if let Err(e) = crate::sys::mknod(&p, mode, rdev) {
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e);
        }
        self.own(&p, who)?;
        let attr = self.stat_at(&p)?;
        Ok((file, attr))
    }

    /// Make a symlink; the target is stored encrypted.
    pub fn symlink(&self, dir: &Path, name: &OsStr, target: &OsStr, who: Caller) -> Result<(String, Attr)> {
        self.writable()?;
        let (adir, b, file) = self.backing(dir, name)?;
        let p = adir.entry(file.as_ref());
        let sealed = self.seal_symlink(&p, target.as_bytes())?;
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        if let Err(e) = crate::sys::symlink(sealed.as_bytes(), &p) {
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e);
        }
        self.own(&p, who)?;
        let attr = self.stat_at(&p)?;
        Ok((file, attr))
    }

    /// Read a symlink's plaintext target.
    pub fn readlink(&self, path: &Path) -> Result<Vec<u8>> {
        let (d, n) = self.at(path)?;
        self.readlink_at(&d.entry(&n))
    }

    pub(crate) fn readlink_at(&self, p: &Loc) -> Result<Vec<u8>> {
        let sealed = crate::sys::readlink(p)?;
        self.open_symlink(p, &sealed).inspect_err(|_| {
            tracing::error!(
                "corrupt symlink target in {} (tampered, or moved from another entry)",
                p.shown().display()
            );
        })
    }

    /// Make a hard link to `path` as `name` in `dir`.
    pub fn link(&self, path: &Path, dir: &Path, name: &OsStr) -> Result<(String, Attr)> {
        self.writable()?;
        let (adir, b, file) = self.backing(dir, name)?;
        let p = adir.entry(file.as_ref());
        let (sdir, sname) = self.at(path)?;
        let src = sdir.entry(&sname);
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        // A bound symlink's target names its entry: the new name gets a
        // copy sealed for it (a hard link would not open there).
        let r = if self.bound_symlink(&src) {
            self.copy_symlink(&src, &p)
        } else {
            crate::sys::link(&src, &p)
        };
        if let Err(e) = r {
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e);
        }
        let attr = self.stat_at(&p)?;
        Ok((file, attr))
    }

    /// Remove a non-directory.
    pub fn unlink(&self, dir: &Path, name: &OsStr) -> Result<String> {
        self.writable()?;
        let (adir, b, file) = self.backing(dir, name)?;
        crate::sys::unlink(&adir.entry(file.as_ref()))?;
        names::remove_sidecar(&adir, &b);
        Ok(file)
    }

    /// Remove an empty directory.
    pub fn rmdir(&self, dir: &Path, name: &OsStr) -> Result<String> {
        self.writable()?;
        let (adir, b, file) = self.backing(dir, name)?;
        let p = adir.entry(file.as_ref());
        let st = crate::sys::lstat(&p)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(Error(libc::ENOTDIR));
        }
        let pd = p.as_dir()?;
        if pd.list()?.iter().any(|e| e.name != crate::diriv::DIRIV_NAME) {
            return Err(Error(libc::ENOTEMPTY));
        }
        let iv = crate::diriv::read(&pd).ok();
        match crate::sys::unlink(&pd.entry(crate::diriv::DIRIV_NAME.as_ref())) {
            Ok(()) | Err(Error(libc::ENOENT)) => {}
            Err(e) => return Err(e),
        }
        if let Err(e) = crate::sys::rmdir(&p) {
            if let Some(iv) = iv {
                let _ = crate::diriv::restore(&pd, &iv);
            }
            return Err(e);
        }
        self.ivs.forget(st.st_dev, st.st_ino);
        names::remove_sidecar(&adir, &b);
        Ok(file)
    }

    /// Rename with renameat2 flags (RENAME_NOREPLACE, RENAME_EXCHANGE).
    /// Returns the old and new backing names.
    pub fn rename(
        &self,
        dir: &Path,
        name: &OsStr,
        newdir: &Path,
        newname: &OsStr,
        flags: u32,
    ) -> Result<(String, String)> {
        self.writable()?;
        let (adir, b, from_f) = self.backing(dir, name)?;
        let (anew, nb, to_f) = self.backing(newdir, newname)?;
        let made_sidecar = names::write_sidecar(&anew, &nb)?;
        let (from, to) = (adir.entry(from_f.as_ref()), anew.entry(to_f.as_ref()));
        // A directory may replace an empty directory, but the backing target
        // still holds its IV file: take it out first, put it back on failure.
        let target_iv = if flags & libc::RENAME_EXCHANGE == 0 {
            empty_dir_iv(&from, &to)
        } else {
            None
        };
        if let Some((d, _)) = &target_iv {
            let _ = crate::sys::unlink(&d.entry(crate::diriv::DIRIV_NAME.as_ref()));
        }
        if let Err(e) = self.rename_entry(&from, &to, flags) {
            if let Some((d, iv)) = target_iv {
                let _ = crate::diriv::restore(&d, &iv);
            }
            if made_sidecar {
                names::remove_sidecar(&anew, &nb);
            }
            return Err(e);
        }
        if flags & libc::RENAME_EXCHANGE == 0 && !(adir.path() == anew.path() && from_f == to_f) {
            names::remove_sidecar(&adir, &b);
        }
        Ok((from_f, to_f))
    }

    /// List a directory (plaintext names; undecryptable entries are logged and skipped).
    pub fn readdir(&self, dir: &Path) -> Result<Vec<DirEntry>> {
        let adir = self.dir(dir)?;
        let iv = self.ivs.get(&adir)?;
        let mut out = Vec::new();
        for e in adir.list()? {
            let bname = e.name;
            let plain = match names::decode(&self.names, &iv, &adir, &bname) {
                None => continue,
                Some(Ok(p)) => p,
                Some(Err(why)) => {
                    tracing::warn!("skipping backing entry {:?} in {}: {why}", bname, adir.path().display());
                    continue;
                }
            };
            let kind = match e.d_type {
                libc::DT_UNKNOWN => crate::sys::lstat(&adir.entry(&bname))
                    .ok()
                    .and_then(|st| Kind::from_mode(st.st_mode))
                    .unwrap_or(Kind::File),
                t => Kind::from_d_type(t),
            };
            let Some(cname) = bname.to_str().map(str::to_string) else {
                continue;
            };
            out.push(DirEntry {
                name: OsString::from_vec(plain),
                cname,
                ino: e.ino,
                kind,
            });
        }
        Ok(out)
    }
}

/// If `from` is a directory and `to` an existing directory holding nothing
/// but its IV file: that directory and its IV (so the rename can replace
/// the empty directory).
fn empty_dir_iv(from: &Loc, to: &Loc) -> Option<(Dir, [u8; crate::diriv::DIRIV_LEN])> {
    let (f, t) = (crate::sys::lstat(from).ok()?, crate::sys::lstat(to).ok()?);
    if f.st_mode & libc::S_IFMT != libc::S_IFDIR || t.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return None;
    }
    if (f.st_dev, f.st_ino) == (t.st_dev, t.st_ino) {
        return None;
    }
    let d = to.as_dir().ok()?;
    match d.list().ok()?.as_slice() {
        [e] if e.name == crate::diriv::DIRIV_NAME => crate::diriv::read(&d).ok().map(|iv| (d, iv)),
        _ => None,
    }
}

impl Kind {
    /// The kind of a directory entry's `d_type` (a regular file if unknown).
    fn from_d_type(t: u8) -> Kind {
        match t {
            libc::DT_DIR => Kind::Dir,
            libc::DT_LNK => Kind::Symlink,
            libc::DT_FIFO => Kind::Fifo,
            libc::DT_SOCK => Kind::Socket,
            libc::DT_CHR => Kind::CharDev,
            libc::DT_BLK => Kind::BlockDev,
            _ => Kind::File,
        }
    }
}
