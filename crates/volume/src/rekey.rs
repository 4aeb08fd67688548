//! Rekey (FORMAT.md 10): move one cipher file to the volume's current key
//! generation by writing a re-encrypted copy beside it and renaming it over
//! the original, so after a crash each file is wholly old or wholly new.

use crate::Volume;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use warpfs_content::header::{self, Header};
use warpfs_content::CipherFile;

pub use warpfs_content::plain_size_of;

/// Prefix of the temporary copy a rekey writes (a reserved name, FORMAT.md 4.4).
pub const TMP_PREFIX: &str = "warpfs.rekey.tmp-";
/// Plaintext bytes copied per read.
const CHUNK: usize = 1 << 20;

/// Every backing regular file of `root` that holds file contents (reserved
/// `warpfs.*` names excluded, long-name entries included), in walk order.
/// Leftover rekey temp files of an interrupted run are removed.
pub fn content_files(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            let ft = e.file_type()?;
            if ft.is_dir() {
                dirs.push(e.path());
            } else if ft.is_file() {
                if name.starts_with(TMP_PREFIX) {
                    std::fs::remove_file(e.path())?;
                } else if !name.starts_with("warpfs.") || (name.starts_with("warpfs.long.") && !name.ends_with(".name"))
                {
                    out.push(e.path());
                }
            }
        }
    }
    Ok(out)
}

/// The key generation a cipher file's header records; `None` for an empty
/// file (no header, no key).
pub fn file_generation(path: &Path) -> io::Result<Option<u32>> {
    use std::os::unix::fs::FileExt;
    let f = File::open(path)?;
    if f.metadata()?.len() == 0 {
        return Ok(None);
    }
    let mut h = [0u8; header::LEN];
    f.read_exact_at(&mut h, 0)?;
    let hdr = Header::parse(&h).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    Ok(Some(hdr.generation))
}

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

/// Re-encrypt `path` under `vol`'s key generation unless it already uses
/// it (returns whether it was rewritten). Holes stay holes; mode, owner,
/// times and extended attributes are kept. `on_bytes` is told each chunk's
/// plaintext bytes; `before_rename` runs when the copy is durable, just
/// before it replaces the original. Refuses a file with several links.
pub fn rekey_file(
    vol: &Volume,
    path: &Path,
    on_bytes: &mut dyn FnMut(u64),
    before_rename: &dyn Fn(),
) -> Result<bool, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| err(path, e))?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(false);
    }
    if file_generation(path).map_err(|e| err(path, e))? == Some(vol.generation()) {
        return Ok(false);
    }
    if meta.nlink() > 1 {
        return Err(err(path, "has several hard links: rekey would split them"));
    }
    let src = File::open(path).map_err(|e| err(path, e))?;
    let src = CipherFile::open(src, vol.cipher().clone(), path.display().to_string()).map_err(|e| err(path, e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        "{TMP_PREFIX}{:016x}",
        u64::from_le_bytes(warpfs_crypto::rand::array())
    ));
    let out = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| err(&tmp, e))?;
    let res = copy(vol, path, &src, out, &tmp, &meta, on_bytes).and_then(|()| {
        before_rename();
        std::fs::rename(&tmp, path).map_err(|e| err(path, e))?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| err(dir, e))
    });
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map(|()| true)
}

fn copy(
    vol: &Volume,
    orig: &Path,
    src: &CipherFile,
    out: File,
    tmp: &Path,
    meta: &std::fs::Metadata,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<(), String> {
    let dst = CipherFile::open(out, vol.cipher().clone(), tmp.display().to_string()).map_err(|e| err(tmp, e))?;
    let size = src.size();
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0u64;
    while off < size {
        let want = (size - off).min(CHUNK as u64) as usize;
        let n = src.read_at(off, &mut buf[..want]).map_err(|e| err(tmp, e))?;
        if n == 0 {
            break;
        }
        // All-zero chunks stay holes (they read back as zeros).
        if buf[..n].iter().any(|&b| b != 0) {
            dst.write_at(off, &buf[..n]).map_err(|e| err(tmp, e))?;
        }
        on_bytes(n as u64);
        off += n as u64;
    }
    dst.set_len(size).map_err(|e| err(tmp, e))?;
    copy_meta(orig, tmp, dst.backing(), meta).map_err(|e| err(tmp, e))?;
    dst.sync(false).map_err(|e| err(tmp, e))?;
    Ok(())
}

/// Owner, mode, extended attributes (copied raw: their values are sealed
/// with the seal key, which a rekey keeps) and times of the original.
fn copy_meta(orig: &Path, tmp: &Path, f: &File, meta: &std::fs::Metadata) -> io::Result<()> {
    copy_xattrs(orig, tmp)?;
    std::os::unix::fs::fchown(f, Some(meta.uid()), Some(meta.gid()))?;
    f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(meta.mode() & 0o7777))?;
    let times = std::fs::FileTimes::new()
        .set_accessed(meta.accessed()?)
        .set_modified(meta.modified()?);
    f.set_times(times)
}

/// Copy every extended attribute of `from` to `to`, raw.
fn copy_xattrs(from: &Path, to: &Path) -> io::Result<()> {
    let e = |e: crate::Error| io::Error::from_raw_os_error(e.0);
    let list = crate::sys::llistxattr(from).map_err(e)?;
    for name in list.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let v = crate::sys::lgetxattr(from, &name).map_err(e)?;
        crate::sys::lsetxattr(to, &name, &v, 0).map_err(e)?;
    }
    Ok(())
}
