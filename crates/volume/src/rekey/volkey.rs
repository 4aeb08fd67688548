//! A rekey to a new volume key (FORMAT.md 10.5, decision record 0083):
//! the content moves to the next key generation, made from the new key,
//! with the in-place rekey of this module's parent; each file summary is
//! sealed again under the new key; then every name, directory IV, symlink
//! target and xattr is made again (`renames.rs`). Offline here: the
//! volume is opened for it alone, and refused by every other opener until
//! the config records the end. On a mounted volume the mount runs the same
//! parts (`handover.rs`).

use super::renames::{migrate, NameKeys};
use super::{content_files, run, Progress, RekeyOptions};
use crate::{Options, Volume};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use warpfs_backing::{Expect, Root};
use warpfs_config::{Config, FeatureFlag};
use warpfs_content::header::{self, Header};
use warpfs_content::summary;
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::SummaryKey;

/// What a volume says while its volume-key rekey is unfinished.
pub const VOLUME_REKEY_UNFINISHED: &str = "a rekey to a new volume key is unfinished: run `warpfs rekey` to finish \
     it (until then the volume cannot be mounted, checked or read)";

/// The size of a volume-key rekey, counted before it starts.
#[derive(Debug, Default, Clone)]
pub struct Survey {
    /// Content files (re-encrypted).
    pub files: u64,
    /// Their plaintext bytes.
    pub bytes: u64,
    /// Directories (each gets a new IV).
    pub dirs: u64,
    /// Backing names (each changes).
    pub names: u64,
}

/// Count what a volume-key rekey of `root` will change (on a mounted
/// volume, as of a moment: entries made or removed meanwhile are counted
/// or not), and refuse a volume it cannot do: a directory holding a copy of its IV (a sync
/// conflict, FORMAT.md 13.2), whose entries only the copy decrypts.
pub fn survey(root: &Root, mode: warpfs_config::ContentMode) -> Result<Survey, String> {
    let mode = crate::volume::content_mode(mode);
    let mut s = Survey::default();
    let e = |p: &Path, x: &dyn std::fmt::Display| format!("{}: {x}", root.shown(p).display());
    let mut dirs = vec![PathBuf::new()];
    // On a mounted volume entries come and go while it counts: one gone
    // (ENOENT) is not counted.
    let gone = |x: &warpfs_backing::Errno| x.0 == libc::ENOENT;
    while let Some(d) = dirs.pop() {
        let dir = match root.dir(&d) {
            Ok(dir) => dir,
            Err(x) if gone(&x) && !d.as_os_str().is_empty() => continue,
            Err(x) => return Err(e(&d, &x)),
        };
        let list = match dir.list() {
            Ok(l) => l,
            Err(x) if gone(&x) && !d.as_os_str().is_empty() => continue,
            Err(x) => return Err(e(&d, &x)),
        };
        s.dirs += 1;
        for ent in list {
            let n = ent.name.as_encoded_bytes();
            if crate::synced::diriv_copy(n).is_some() {
                return Err(e(
                    &d.join(&ent.name),
                    &"a copy of a directory IV (a sync conflict): settle it first (warpfs fsck explains; \
                      warpfs fsck --repair merges what it can prove)",
                ));
            }
            let ours = warpfs_crypto::is_reserved(n) && !warpfs_crypto::names::is_long_file(n);
            if ours || crate::synced::is_foreign(n) {
                continue;
            }
            let st = match warpfs_backing::lstat(&dir.entry(&ent.name)) {
                Ok(st) => st,
                Err(x) if gone(&x) => continue,
                Err(x) => return Err(e(&d, &x)),
            };
            s.names += 1;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => dirs.push(d.join(&ent.name)),
                libc::S_IFREG => {
                    s.files += 1;
                    s.bytes += super::plain_size_of(mode, st.st_size as u64);
                }
                _ => {}
            }
        }
    }
    Ok(s)
}

/// Open the volume at `cipherdir` for its unfinished volume-key rekey:
/// `new` is the volume key the config's slots gave; returns the volume
/// (new files and moved blocks at the new key's generation, the previous
/// generation of the old key) and the old key.
pub fn open_volume_rekey(cipherdir: &Path, config: &Config, new: &MasterKey) -> Result<(Volume, MasterKey), String> {
    let prev = config
        .previous_key(new)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no rekey to a new volume key is under way".to_string())?;
    let vol = Volume::open_keys(cipherdir, config, new, Some(&prev), Options::default())?;
    Ok((vol, prev))
}

/// Run (or finish) the volume-key rekey of `vol` (from
/// [`open_volume_rekey`]; undo journals applied first, [`super::recover`]):
/// content, summaries, names. `Ok(false)` when stopped; `Ok(true)` when
/// every part is done and the config may record the end.
pub fn run_volume_rekey(
    vol: &Volume,
    config: &Config,
    keys: (&MasterKey, &MasterKey),
    opts: &RekeyOptions,
    progress: &Progress,
    stop: &AtomicBool,
) -> Result<bool, String> {
    let (new, old) = keys;
    if !run(vol, opts, progress, stop)? {
        return Ok(false);
    }
    if config.has_feature(FeatureFlag::FileSummary) {
        reseal_summaries(vol, &SummaryKey::derive(old), &SummaryKey::derive(new), progress)?;
    }
    let (o, n) = (
        Subkeys::derive(old, config.key_bits()),
        Subkeys::derive(new, config.key_bits()),
    );
    let k = NameKeys {
        old_names: o.names,
        old_seal: o.seal,
        new_names: n.names,
        new_seal: n.seal,
        bound: config.has_feature(FeatureFlag::BoundSeals),
    };
    migrate(&vol.root, &k, opts.on_event.as_ref(), progress, stop)
}

/// Seal every file summary again under `new`: each file whose summary
/// verifies under `old` gets a new record of its current entries under
/// `new` (and its old markers erased); one that already verifies under
/// `new` is done; one that verifies under neither is left (it failed
/// before) and logged.
pub(super) fn reseal_summaries(
    vol: &Volume,
    old: &SummaryKey,
    new: &SummaryKey,
    progress: &Progress,
) -> Result<(), String> {
    let root = &vol.root;
    let files = content_files(root).map_err(|e| format!("{}: {e}", root.path().display()))?;
    for rel in files {
        let e = |x: &dyn std::fmt::Display| format!("{}: {x}", root.shown(&rel).display());
        let f = match root.open_file(&rel, libc::O_RDWR, 0, Expect::File) {
            Ok(f) => f,
            Err(x) if x.0 == libc::ENOENT => continue,
            Err(x) => return Err(e(&x)),
        };
        let len = f.metadata().map_err(|x| e(&x))?.len();
        if len == 0 {
            continue;
        }
        let mut h = [0u8; header::LEN];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut h, 0).map_err(|x| e(&x))?;
        let hdr = Header::parse(&h).map_err(|x| e(&x))?;
        if !hdr.summary {
            continue;
        }
        let size = warpfs_content::layout::plain_size(vol.mode, len).map_err(|x| e(&x))?;
        let id = hdr.file_id;
        if summary::check(&f, new, &id, size).is_ok_and(|c| c.state.poisoned.is_none()) {
            continue;
        }
        let mut st = summary::check(&f, old, &id, size).map_err(|x| e(&x))?.state;
        if let Some(why) = &st.poisoned {
            tracing::warn!("{}: {why}; its summary is left as it was", root.shown(&rel).display());
            continue;
        }
        // Every contribution is recomputed under the new key.
        st.unknown();
        summary::commit(&f, new, &id, size, &mut st).map_err(|x| e(&x))?;
        progress.summaries.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
#[path = "volkey_tests.rs"]
mod tests;
