//! Directory operations: lookup, create, open, mkdir, mknod, symlink, link,
//! unlink, rmdir, rename, readdir. Directories are backing paths relative to
//! CIPHERDIR; the returned `String` is the entry's backing file name.

use crate::attr::{Attr, Kind};
use crate::dirview::{How, Resolved};
use crate::error::{Error, Result};
use crate::handle::OpenFile;
use crate::names;
use crate::volume::{Caller, Volume};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use warpfs_backing::{Dir, Expect, Loc};

/// One plaintext directory entry.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Plaintext name.
    pub name: OsString,
    /// Backing file name.
    pub cname: String,
    /// Backing inode number.
    pub ino: u64,
    /// Backing device (of the directory: a mount point's own is not looked at).
    pub dev: u64,
    /// Kind, if the backing entry's type is known.
    pub kind: Kind,
}

impl Volume {
    /// Find `name` in `dir` (FORMAT.md 13: also under another IV of the
    /// directory, and conflict copies and undecryptable names by the name
    /// they are shown as).
    pub fn lookup(&self, dir: &Path, name: &OsStr) -> Result<(String, Attr)> {
        let r = self.resolve(dir, name)?;
        if !r.exists {
            return Err(Error(libc::ENOENT));
        }
        let attr = self.stat_at(&r.adir.entry(r.file.as_ref()))?;
        Ok((r.file, attr))
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
        let excl = flags & libc::O_EXCL != 0;
        let mut r = self.resolve_for_change(dir, name)?;
        let mut f = None;
        if !r.checked {
            // Only the name under the directory's IV can be taken: a new
            // file unless it exists (then as if looked up first).
            let oflags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
            match warpfs_backing::open_file(&r.adir.entry(r.file.as_ref()), oflags, mode & 0o7777, Expect::File) {
                Ok(made) => f = Some(made),
                Err(Error(libc::EEXIST)) if !excl => r = self.resolve(dir, name)?,
                Err(e) => return Err(e),
            }
        }
        let (adir, file, existed) = (&r.adir, r.file.clone(), r.exists);
        let p = adir.entry(file.as_ref());
        let f = match f {
            Some(f) => f,
            None => {
                let made_sidecar = self.new_sidecar(&r)?;
                let oflags = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | if excl { libc::O_EXCL } else { 0 };
                match warpfs_backing::open_file(&p, oflags, mode & 0o7777, Expect::File) {
                    Ok(f) => f,
                    Err(e) => {
                        self.undo_sidecar(&r, made_sidecar);
                        return Err(e);
                    }
                }
            }
        };
        if !existed {
            self.ivs.touched(adir, r.stamp);
            self.own_file(&p, &r.dir_st, who, mode)?;
        }
        let of = OpenFile::new(
            self.files.open(f, true, &self.keys, label)?,
            self.engine(),
            self.committer(),
        );
        if existed && flags & libc::O_TRUNC != 0 {
            of.set_len(0)?;
        }
        let attr = self.getattr_open(&of)?;
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
        let (f, writable) = match warpfs_backing::open_file(&p, libc::O_RDWR, 0, Expect::File) {
            Ok(f) => (f, true),
            Err(Error(libc::EACCES | libc::EROFS | libc::EPERM)) if !wants_write => {
                (warpfs_backing::open_file(&p, libc::O_RDONLY, 0, Expect::File)?, false)
            }
            Err(e) => return Err(e),
        };
        let of = OpenFile::new(
            self.files.open(f, writable, &self.keys, label)?,
            self.engine(),
            self.committer(),
        );
        if flags & libc::O_TRUNC != 0 {
            of.set_len(0)?;
        }
        Ok(of)
    }

    /// Make a directory (with its own name IV).
    pub fn mkdir(&self, dir: &Path, name: &OsStr, mode: u32, who: Caller) -> Result<(String, Attr)> {
        self.writable()?;
        let r = self.resolve_for_change(dir, name)?;
        let (adir, file) = (&r.adir, r.file.clone());
        let p = adir.entry(file.as_ref());
        let made_sidecar = self.new_sidecar(&r)?;
        if let Err(e) = warpfs_backing::mkdir(&p, (mode & 0o7777) | 0o700) {
            self.undo_sidecar(&r, made_sidecar);
            return Err(e);
        }
        self.ivs.touched(adir, r.stamp);
        let finish = || -> Result<()> {
            crate::diriv::create(&p.as_dir()?)?;
            if mode & 0o700 != 0o700 {
                // Keep the set-group-ID bit inherited from a setgid parent.
                let inherited = warpfs_backing::lstat(&p)?.st_mode & libc::S_ISGID;
                warpfs_backing::chmod(&p, (mode & 0o7777) | inherited)?;
            }
            self.own(&p, &r.dir_st, who)
        };
        if let Err(e) = finish() {
            if let Ok(d) = p.as_dir() {
                let _ = warpfs_backing::unlink(&d.entry(crate::diriv::DIRIV_NAME.as_ref()));
            }
            let _ = warpfs_backing::rmdir(&p);
            self.undo_sidecar(&r, made_sidecar);
            return Err(e);
        }
        let attr = self.stat_at(&p)?;
        Ok((file, attr))
    }

    /// Make a fifo, socket, device node or empty regular file.
    pub fn mknod(&self, dir: &Path, name: &OsStr, mode: u32, rdev: u64, who: Caller) -> Result<(String, Attr)> {
        self.writable()?;
        let r = self.resolve_for_change(dir, name)?;
        let (adir, file) = (&r.adir, r.file.clone());
        let p = adir.entry(file.as_ref());
        let made_sidecar = self.new_sidecar(&r)?;
        if let Err(e) = warpfs_backing::mknod(&p, mode, rdev) {
            self.undo_sidecar(&r, made_sidecar);
            return Err(e);
        }
        self.ivs.touched(adir, r.stamp);
        self.own_file(&p, &r.dir_st, who, mode)?;
        let attr = self.stat_at(&p)?;
        Ok((file, attr))
    }

    /// Make a symlink; the target is stored encrypted.
    pub fn symlink(&self, dir: &Path, name: &OsStr, target: &OsStr, who: Caller) -> Result<(String, Attr)> {
        self.writable()?;
        let r = self.resolve_for_change(dir, name)?;
        let (adir, file) = (&r.adir, r.file.clone());
        let p = adir.entry(file.as_ref());
        let sealed = self.seal_symlink(&p, target.as_bytes())?;
        let made_sidecar = self.new_sidecar(&r)?;
        if let Err(e) = warpfs_backing::symlink(sealed.as_bytes(), &p) {
            self.undo_sidecar(&r, made_sidecar);
            return Err(e);
        }
        self.ivs.touched(adir, r.stamp);
        self.own(&p, &r.dir_st, who)?;
        let attr = self.stat_at(&p)?;
        Ok((file, attr))
    }

    /// Read a symlink's plaintext target.
    pub fn readlink(&self, path: &Path) -> Result<Vec<u8>> {
        let (d, n) = self.at(path)?;
        self.readlink_at(&d.entry(&n))
    }

    pub(crate) fn readlink_at(&self, p: &Loc) -> Result<Vec<u8>> {
        let sealed = warpfs_backing::readlink(p)?;
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
        let r = self.resolve(dir, name)?;
        let (adir, file) = (&r.adir, r.file.clone());
        let p = adir.entry(file.as_ref());
        let (sdir, sname) = self.at(path)?;
        let src = sdir.entry(&sname);
        let made_sidecar = self.new_sidecar(&r)?;
        // A bound symlink's target names its entry: the new name gets a
        // copy sealed for it (a hard link would not open there).
        let res = if self.bound_symlink(&src) {
            self.copy_symlink(&src, &p)
        } else {
            warpfs_backing::link(&src, &p)
        };
        if let Err(e) = res {
            self.undo_sidecar(&r, made_sidecar);
            return Err(e);
        }
        self.ivs.touched(adir, r.stamp);
        let attr = self.stat_at(&p)?;
        Ok((file, attr))
    }

    /// Remove a non-directory.
    pub fn unlink(&self, dir: &Path, name: &OsStr) -> Result<String> {
        self.writable()?;
        let r = self.resolve_for_change(dir, name)?;
        let gone = self.version_at(&r.adir.entry(r.file.as_ref()));
        warpfs_backing::unlink(&r.adir.entry(r.file.as_ref()))?;
        self.retire(gone);
        self.ivs.touched(&r.adir, r.stamp);
        self.drop_sidecar(&r.adir, &r.b);
        Ok(r.file)
    }

    /// Remove an empty directory.
    pub fn rmdir(&self, dir: &Path, name: &OsStr) -> Result<String> {
        self.writable()?;
        let r = self.resolve_for_change(dir, name)?;
        let (adir, file) = (&r.adir, r.file.clone());
        let p = adir.entry(file.as_ref());
        let st = warpfs_backing::lstat(&p)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(Error(libc::ENOTDIR));
        }
        let pd = p.as_dir()?;
        if pd.list()?.iter().any(|e| e.name != crate::diriv::DIRIV_NAME) {
            return Err(Error(libc::ENOTEMPTY));
        }
        let iv = crate::diriv::read(&pd).ok();
        match warpfs_backing::unlink(&pd.entry(crate::diriv::DIRIV_NAME.as_ref())) {
            Ok(()) | Err(Error(libc::ENOENT)) => {}
            Err(e) => return Err(e),
        }
        if let Err(e) = warpfs_backing::rmdir(&p) {
            if let Some(iv) = iv {
                let _ = crate::diriv::restore(&pd, &iv);
            }
            return Err(e);
        }
        self.ivs.forget(st.st_dev, st.st_ino);
        self.dirfds.forget_under(&dir.join(&file));
        self.ivs.touched(adir, r.stamp);
        self.drop_sidecar(adir, &r.b);
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
        let _renaming = self.renames.read().unwrap_or_else(|e| e.into_inner());
        let r = self.resolve(dir, name)?;
        let dst = self.resolve(newdir, newname)?;
        let (adir, from_f, anew, to_f) = (&r.adir, r.file.clone(), &dst.adir, dst.file.clone());
        let made_sidecar = self.new_sidecar(&dst)?;
        let (from, to) = (adir.entry(from_f.as_ref()), anew.entry(to_f.as_ref()));
        // A directory may replace an empty directory, but the backing target
        // still holds its IV file: take it out first, put it back on failure.
        let target_iv = if flags & libc::RENAME_EXCHANGE == 0 {
            empty_dir_iv(&from, &to)
        } else {
            None
        };
        if let Some((d, _)) = &target_iv {
            let _ = warpfs_backing::unlink(&d.entry(crate::diriv::DIRIV_NAME.as_ref()));
        }
        let same = adir.path() == anew.path() && from_f == to_f;
        let gone = if flags & libc::RENAME_EXCHANGE == 0 && dst.exists && !same {
            self.version_at(&to)
        } else {
            None
        };
        if let Err(e) = self.rename_entry(&from, &to, flags) {
            if let Some((d, iv)) = target_iv {
                let _ = crate::diriv::restore(&d, &iv);
            }
            self.undo_sidecar(&dst, made_sidecar);
            return Err(e);
        }
        self.retire(gone);
        // A directory moved (or replaced): its old path and the path it
        // took no longer name the directories kept open there.
        self.dirfds.forget_under(&dir.join(&from_f));
        self.dirfds.forget_under(&newdir.join(&to_f));
        self.ivs.touched(adir, r.stamp);
        self.ivs.touched(anew, dst.stamp);
        if flags & libc::RENAME_EXCHANGE == 0 && !(adir.path() == anew.path() && from_f == to_f) {
            self.drop_sidecar(adir, &r.b);
        }
        Ok((from_f, to_f))
    }

    /// List a directory: every entry under its plaintext name; conflict
    /// copies, entries of another IV whose name is taken and undecryptable
    /// names under a marked name; foreign files never (FORMAT.md 13).
    pub fn readdir(&self, dir: &Path) -> Result<Vec<DirEntry>> {
        self.readdir_in(&self.dir(dir)?)
    }

    /// [`readdir`](Self::readdir) of a backing directory already held
    /// open ([`open_dir`](Self::open_dir)).
    pub fn readdir_in(&self, adir: &warpfs_backing::Dir) -> Result<Vec<DirEntry>> {
        let dev = adir.stat()?.st_dev;
        let view = self.view(adir)?;
        let mut out = Vec::with_capacity(view.shown.len());
        for e in view.shown {
            if let How::Undecryptable(why) = &e.how {
                tracing::warn!(
                    "backing entry {:?} in {} does not decrypt ({why}): shown as {:?}",
                    e.backing,
                    adir.path().display(),
                    e.name
                );
            }
            let kind = match e.d_type {
                libc::DT_UNKNOWN => warpfs_backing::lstat(&adir.entry(&e.backing))
                    .ok()
                    .and_then(|st| Kind::from_mode(st.st_mode))
                    .unwrap_or(Kind::File),
                t => Kind::from_d_type(t),
            };
            let Ok(cname) = e.backing.into_string() else {
                continue;
            };
            out.push(DirEntry {
                name: e.name,
                cname,
                ino: e.ino,
                dev,
                kind,
            });
        }
        Ok(out)
    }

    /// Whether some name in `dir` decrypts with this volume's key (an
    /// entry shown under its plaintext name, not as undecryptable).
    pub fn some_name_decrypts(&self, dir: &Path) -> Result<bool> {
        let view = self.view(&self.dir(dir)?)?;
        Ok(view.shown.iter().any(|e| !matches!(e.how, How::Undecryptable(_))))
    }

    /// Write the sidecar of a new long name (FORMAT.md 4.3); whether made.
    fn new_sidecar(&self, r: &Resolved) -> Result<bool> {
        match &r.b {
            Some(b) if !r.exists => names::write_sidecar(&r.adir, b),
            _ => Ok(false),
        }
    }

    /// Remove a sidecar [`Volume::new_sidecar`] made for an operation that failed.
    fn undo_sidecar(&self, r: &Resolved, made: bool) {
        if let (true, Some(b)) = (made, &r.b) {
            names::remove_sidecar(&r.adir, b);
        }
    }
}

/// If `from` is a directory and `to` an existing directory holding nothing
/// but its IV file: that directory and its IV (so the rename can replace
/// the empty directory).
fn empty_dir_iv(from: &Loc, to: &Loc) -> Option<(Dir, [u8; crate::diriv::DIRIV_LEN])> {
    let (f, t) = (warpfs_backing::lstat(from).ok()?, warpfs_backing::lstat(to).ok()?);
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
