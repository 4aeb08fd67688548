//! fsck's repair of a directory with copies of its IV file (FORMAT.md
//! 13.2): every entry whose name decrypts only under a copy is renamed to
//! the name it is shown as, encrypted under `warpfs.diriv`; then the
//! copies are removed. Nothing is lost: a rename never replaces an entry,
//! and a copy of the IV stays until every entry it decrypts was moved.

use crate::dirview::{How, View};
use crate::names;
use crate::volume::Volume;
use std::ffi::OsStr;
use warpfs_backing::Dir;

/// Merge the directory `dir` (decoded as `view`) into its primary IV.
pub(super) fn merge(vol: &Volume, dir: &Dir, view: &View) -> Result<(), String> {
    let iv = crate::diriv::read(dir).map_err(|e| e.to_string())?;
    let mut failed = Vec::new();
    for s in &view.shown {
        let moves = match s.how {
            How::OtherIv => true,
            How::Copy => s.iv != 0,
            How::Plain | How::Undecryptable(_) => false,
        };
        if !moves {
            continue;
        }
        if let Err(e) = move_entry(vol, dir, &iv, &s.backing, &s.name, s.sidecar.is_some()) {
            failed.push(format!("{}: {e}", s.name.to_string_lossy()));
        }
    }
    if !failed.is_empty() {
        return Err(format!("entries not moved (IV copies kept): {}", failed.join("; ")));
    }
    for (n, _) in &view.alt_files {
        warpfs_backing::unlink(&dir.entry(n)).map_err(|e| format!("{}: {e}", n.to_string_lossy()))?;
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
    let b = names::encode(&vol.names, iv, name)?;
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
