//! Directory operations: lookup, create, open, mkdir, mknod, symlink, link,
//! unlink, rmdir, rename, readdir. Directories are backing paths relative to
//! CIPHERDIR; the returned `String` is the entry's backing file name.

use crate::attr::{Attr, Kind};
use crate::error::{Error, Result};
use crate::files::OpenFile;
use crate::names;
use crate::volume::{Caller, Volume};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use warpfs_crypto::names::BackingName;

/// Associated data of sealed symlink targets.
pub(crate) const SYMLINK_AD: &[u8] = b"warpfs symlink";

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
    fn backing(&self, dir: &Path, name: &OsStr) -> Result<(std::path::PathBuf, BackingName)> {
        let adir = self.abs(dir);
        let iv = self.ivs.get(&adir)?;
        let b = names::encode(&self.names, &iv, name)?;
        Ok((adir, b))
    }

    /// Find `name` in `dir`.
    pub fn lookup(&self, dir: &Path, name: &OsStr) -> Result<(String, Attr)> {
        let (adir, b) = self.backing(dir, name)?;
        let file = names::file_of(&b).to_string();
        let p = adir.join(&file);
        let attr = self.stat_path(&p)?;
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
    ) -> Result<(String, Attr, OpenFile)> {
        self.writable()?;
        let (adir, b) = self.backing(dir, name)?;
        let file = names::file_of(&b).to_string();
        let p = adir.join(&file);
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        let excl = flags & libc::O_EXCL != 0;
        let existed = std::fs::symlink_metadata(&p).is_ok();
        let res = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(!excl)
            .create_new(excl)
            .mode(mode & 0o7777)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p);
        let f = match res {
            Ok(f) => f,
            Err(e) => {
                if made_sidecar {
                    names::remove_sidecar(&adir, &b);
                }
                return Err(e.into());
            }
        };
        if !existed {
            self.own(&p, &adir, who)?;
        }
        let of = self.files.open(f, true, &self.keys, label)?;
        if existed && flags & libc::O_TRUNC != 0 {
            of.set_len(0)?;
        }
        let attr = self.stat_path(&p)?;
        Ok((file, attr, of))
    }

    /// Open an existing regular file. The backing file is always opened
    /// read-write when allowed (partial writes read the block back).
    pub fn open_file(&self, path: &Path, flags: i32, label: String) -> Result<OpenFile> {
        let wants_write = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        if wants_write {
            self.writable()?;
        }
        let p = self.abs(path);
        let rw = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p);
        let (f, writable) = match rw {
            Ok(f) => (f, true),
            Err(e)
                if !wants_write
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM)
                    ) =>
            {
                (
                    std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&p)?,
                    false,
                )
            }
            Err(e) => return Err(e.into()),
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
        let (adir, b) = self.backing(dir, name)?;
        let file = names::file_of(&b).to_string();
        let p = adir.join(&file);
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        if let Err(e) = crate::sys::mkdir(&p, (mode & 0o7777) | 0o700) {
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e);
        }
        let finish = || -> Result<()> {
            crate::diriv::create(&p)?;
            if mode & 0o700 != 0o700 {
                // Keep the set-group-ID bit inherited from a setgid parent.
                let inherited = crate::sys::lstat(&p)?.st_mode & libc::S_ISGID;
                crate::sys::chmod(&p, (mode & 0o7777) | inherited)?;
            }
            self.own(&p, &adir, who)
        };
        if let Err(e) = finish() {
            let _ = std::fs::remove_file(p.join(crate::diriv::DIRIV_NAME));
            let _ = std::fs::remove_dir(&p);
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e);
        }
        let attr = self.stat_path(&p)?;
        Ok((file, attr))
    }

    /// Make a fifo, socket, device node or empty regular file.
    pub fn mknod(&self, dir: &Path, name: &OsStr, mode: u32, rdev: u64, who: Caller) -> Result<(String, Attr)> {
        self.writable()?;
        let (adir, b) = self.backing(dir, name)?;
        let file = names::file_of(&b).to_string();
        let p = adir.join(&file);
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        if let Err(e) = crate::sys::mknod(&p, mode, rdev) {
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e);
        }
        self.own(&p, &adir, who)?;
        let attr = self.stat_path(&p)?;
        Ok((file, attr))
    }

    /// Make a symlink; the target is stored encrypted.
    pub fn symlink(&self, dir: &Path, name: &OsStr, target: &OsStr, who: Caller) -> Result<(String, Attr)> {
        self.writable()?;
        let (adir, b) = self.backing(dir, name)?;
        let file = names::file_of(&b).to_string();
        let p = adir.join(&file);
        let sealed = self.sealer.seal_b64(SYMLINK_AD, target.as_bytes());
        if sealed.len() >= libc::PATH_MAX as usize {
            return Err(Error::ENAMETOOLONG);
        }
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        if let Err(e) = std::os::unix::fs::symlink(&sealed, &p) {
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e.into());
        }
        self.own(&p, &adir, who)?;
        let attr = self.stat_path(&p)?;
        Ok((file, attr))
    }

    /// Read a symlink's plaintext target.
    pub fn readlink(&self, path: &Path) -> Result<Vec<u8>> {
        self.readlink_abs(&self.abs(path))
    }

    pub(crate) fn readlink_abs(&self, p: &Path) -> Result<Vec<u8>> {
        let sealed = std::fs::read_link(p)?;
        let s = sealed.as_os_str().to_str().ok_or(Error::EIO)?;
        self.sealer.open_b64(SYMLINK_AD, s).map_err(|_| {
            tracing::error!("corrupt symlink target in {}", p.display());
            Error::EIO
        })
    }

    /// Make a hard link to `path` as `name` in `dir`.
    pub fn link(&self, path: &Path, dir: &Path, name: &OsStr) -> Result<(String, Attr)> {
        self.writable()?;
        let (adir, b) = self.backing(dir, name)?;
        let file = names::file_of(&b).to_string();
        let p = adir.join(&file);
        let made_sidecar = names::write_sidecar(&adir, &b)?;
        if let Err(e) = std::fs::hard_link(self.abs(path), &p) {
            if made_sidecar {
                names::remove_sidecar(&adir, &b);
            }
            return Err(e.into());
        }
        let attr = self.stat_path(&p)?;
        Ok((file, attr))
    }

    /// Remove a non-directory.
    pub fn unlink(&self, dir: &Path, name: &OsStr) -> Result<String> {
        self.writable()?;
        let (adir, b) = self.backing(dir, name)?;
        let file = names::file_of(&b).to_string();
        std::fs::remove_file(adir.join(&file))?;
        names::remove_sidecar(&adir, &b);
        Ok(file)
    }

    /// Remove an empty directory.
    pub fn rmdir(&self, dir: &Path, name: &OsStr) -> Result<String> {
        self.writable()?;
        let (adir, b) = self.backing(dir, name)?;
        let file = names::file_of(&b).to_string();
        let p = adir.join(&file);
        let st = crate::sys::lstat(&p)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(Error(libc::ENOTDIR));
        }
        for e in std::fs::read_dir(&p)? {
            if e?.file_name() != crate::diriv::DIRIV_NAME {
                return Err(Error(libc::ENOTEMPTY));
            }
        }
        let iv = crate::diriv::read(&p).ok();
        match std::fs::remove_file(p.join(crate::diriv::DIRIV_NAME)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        if let Err(e) = std::fs::remove_dir(&p) {
            if let Some(iv) = iv {
                let _ = crate::diriv::restore(&p, &iv);
            }
            return Err(e.into());
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
        let (adir, b) = self.backing(dir, name)?;
        let (anew, nb) = self.backing(newdir, newname)?;
        let (from_f, to_f) = (names::file_of(&b).to_string(), names::file_of(&nb).to_string());
        let made_sidecar = names::write_sidecar(&anew, &nb)?;
        let (from, to) = (adir.join(&from_f), anew.join(&to_f));
        // A directory may replace an empty directory, but the backing target
        // still holds its IV file: take it out first, put it back on failure.
        let target_iv = if flags & libc::RENAME_EXCHANGE == 0 {
            empty_dir_iv(&from, &to)
        } else {
            None
        };
        if target_iv.is_some() {
            let _ = std::fs::remove_file(to.join(crate::diriv::DIRIV_NAME));
        }
        if let Err(e) = crate::sys::renameat2(&from, &to, flags) {
            if let Some(iv) = target_iv {
                let _ = crate::diriv::restore(&to, &iv);
            }
            if made_sidecar {
                names::remove_sidecar(&anew, &nb);
            }
            return Err(e);
        }
        if flags & libc::RENAME_EXCHANGE == 0 && !(adir == anew && from_f == to_f) {
            names::remove_sidecar(&adir, &b);
        }
        Ok((from_f, to_f))
    }

    /// List a directory (plaintext names; undecryptable entries are logged and skipped).
    pub fn readdir(&self, dir: &Path) -> Result<Vec<DirEntry>> {
        let adir = self.abs(dir);
        let iv = self.ivs.get(&adir)?;
        let mut out = Vec::new();
        for e in std::fs::read_dir(&adir)? {
            let e = e?;
            let bname = e.file_name();
            let plain = match names::decode(&self.names, &iv, &adir, &bname) {
                None => continue,
                Some(Ok(p)) => p,
                Some(Err(why)) => {
                    tracing::warn!("skipping backing entry {:?} in {}: {why}", bname, adir.display());
                    continue;
                }
            };
            let kind = match e.file_type() {
                Ok(t) => Kind::from_std(t),
                Err(_) => Kind::File,
            };
            let Some(cname) = bname.to_str().map(str::to_string) else {
                continue;
            };
            out.push(DirEntry {
                name: OsString::from_vec(plain),
                cname,
                ino: std::os::unix::fs::DirEntryExt::ino(&e),
                kind,
            });
        }
        Ok(out)
    }
}

/// If `from` is a directory and `to` an existing directory holding nothing
/// but its IV file, that IV (so the rename can replace the empty directory).
fn empty_dir_iv(from: &Path, to: &Path) -> Option<[u8; crate::diriv::DIRIV_LEN]> {
    let (f, t) = (crate::sys::lstat(from).ok()?, crate::sys::lstat(to).ok()?);
    if f.st_mode & libc::S_IFMT != libc::S_IFDIR || t.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return None;
    }
    if (f.st_dev, f.st_ino) == (t.st_dev, t.st_ino) {
        return None;
    }
    let mut it = std::fs::read_dir(to).ok()?;
    match (it.next(), it.next()) {
        (Some(Ok(e)), None) if e.file_name() == crate::diriv::DIRIV_NAME => crate::diriv::read(to).ok(),
        _ => None,
    }
}

impl Kind {
    fn from_std(t: std::fs::FileType) -> Kind {
        use std::os::unix::fs::FileTypeExt;
        if t.is_dir() {
            Kind::Dir
        } else if t.is_symlink() {
            Kind::Symlink
        } else if t.is_fifo() {
            Kind::Fifo
        } else if t.is_socket() {
            Kind::Socket
        } else if t.is_char_device() {
            Kind::CharDev
        } else if t.is_block_device() {
            Kind::BlockDev
        } else {
            Kind::File
        }
    }
}
