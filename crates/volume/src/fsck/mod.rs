//! `warpfs fsck` without the CLI: check an unmounted volume (every name,
//! directory IV, long-name sidecar, symlink target, cipher-file header,
//! nonce entry, repeated nonce within a file and across the volume, and in
//! `gcm` every tag), report each problem by plaintext path and block, and
//! repair only what was asked, never destroying readable data. A file is
//! scanned and repaired through one descriptor, opened without following a
//! symlink and checked to be the file the walk found; it is repaired only
//! while its path still leads to it.

mod merge;
mod repair;
mod report;
mod undo;
mod walk;

pub use report::{Finding, Fix, Kind, Report};
pub use undo::{restore, undo_files, Restored, UndoError, UndoTo, UNDO_PREFIX};

use crate::volume::Volume;
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use warpfs_content::{scan, Cipher};
use warpfs_crypto::Nonce;

/// Nonces remembered per file for the repeated-nonce check (4 Mi: a 16 GiB file).
pub const FILE_NONCE_CAP: usize = 4 << 20;
/// Nonces remembered for the volume-wide check (8 Mi, about 200 MiB of memory).
pub const VOLUME_NONCE_CAP: usize = 8 << 20;

/// Which repairs to make (all off: check only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Repairs {
    /// Make blocks that cannot be read (bad GCM tag, corrupt nonce entry)
    /// holes that read as zeros.
    pub zero_bad_blocks: bool,
    /// Delete long-name sidecars whose entry is gone.
    pub remove_orphan_sidecars: bool,
    /// Cut backing files that end inside a nonce page back to their
    /// readable size.
    pub fix_torn_tails: bool,
    /// Merge a directory whose IV file a sync tool copied into one IV,
    /// re-encrypting the names that need it (FORMAT.md 13.2).
    pub merge_dir_ivs: bool,
}

/// How an fsck run goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repairs to make.
    pub repairs: Repairs,
    /// Nonces remembered per file.
    pub file_nonce_cap: usize,
    /// Nonces remembered across the volume.
    pub volume_nonce_cap: usize,
    /// Where zeroed blocks are saved (FORMAT.md 6b).
    pub undo_to: UndoTo,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            repairs: Repairs::default(),
            file_nonce_cap: FILE_NONCE_CAP,
            volume_nonce_cap: VOLUME_NONCE_CAP,
            undo_to: UndoTo::default(),
        }
    }
}

/// Check (and repair as asked) the volume. `progress(done, total)` gets
/// plaintext bytes scanned so far and in all. The volume must not be
/// mounted (the CLI checks).
pub fn check(vol: &Volume, opts: Options, progress: &mut dyn FnMut(u64, u64)) -> Report {
    check_with(vol, opts, progress, &mut |_| {})
}

/// Open the walked file `item` for its scan (read-write when a repair may
/// write it), never through a symlink, and only if it is still the file
/// the walk found. With it, why it could not be opened for writing, if so
/// (its repairs then fail).
fn open_scanned(vol: &Volume, item: &walk::Item, write: bool) -> Result<(File, Option<String>), String> {
    let base = libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let replaced = |e: std::io::Error| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            "replaced by a symbolic link since the walk: not scanned".to_string()
        } else {
            e.to_string()
        }
    };
    // A file linked from outside CIPHERDIR is never opened for writing.
    if let Some(why) = item.linked_outside().filter(|_| write) {
        let file = vol.open_backing(&item.rel, libc::O_RDONLY | base).map_err(replaced)?;
        return check_same(file, item).map(|f| (f, Some(why)));
    }
    let (file, rw) = match vol.open_backing(&item.rel, if write { libc::O_RDWR } else { libc::O_RDONLY } | base) {
        Ok(f) => (f, None),
        Err(e) if write && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::EROFS)) => (
            vol.open_backing(&item.rel, libc::O_RDONLY | base).map_err(replaced)?,
            Some(format!("cannot be opened for writing: {e}")),
        ),
        Err(e) => return Err(replaced(e)),
    };
    check_same(file, item).map(|f| (f, rw))
}

/// `file` if it is still the regular file the walk found as `item`.
fn check_same(file: File, item: &walk::Item) -> Result<File, String> {
    let md = file.metadata().map_err(|e| e.to_string())?;
    use std::os::unix::fs::MetadataExt;
    if !md.file_type().is_file() || (md.dev(), md.ino()) != (item.dev, item.ino) {
        return Err("replaced by another file since the walk: not scanned".into());
    }
    Ok(file)
}

/// The cipher of the generation before the volume's, after a rekey (a
/// file left behind or put back from a backup may be of it): tried before
/// a block is called bad.
fn older_generation(vol: &Volume) -> Vec<Arc<Cipher>> {
    let g = vol.keys.write_generation();
    match g.checked_sub(1) {
        Some(p) if !vol.keys.rekeying() => vol.make_cipher(p).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// [`check`], calling `between(rel)` after each file's scan and before its
/// repairs (tests replace the file there).
pub(crate) fn check_with(
    vol: &Volume,
    opts: Options,
    progress: &mut dyn FnMut(u64, u64),
    between: &mut dyn FnMut(&Path),
) -> Report {
    let mut report = Report::default();
    let items = walk::walk(vol, &mut report, opts.repairs);
    let write = opts.repairs.zero_bad_blocks || opts.repairs.fix_torn_tails;
    let extra = older_generation(vol);
    let mut undo = undo::Out::new(opts.undo_to.clone());
    let total: u64 = items
        .iter()
        .map(|i| warpfs_content::plain_size_of(vol.mode, i.len))
        .sum();
    let mut done = 0u64;
    progress(done, total);
    // nonce -> (index of the file in `items`, block)
    let mut nonces: HashMap<Nonce, (u32, u64)> = HashMap::new();
    let mut volume_cap_hit = false;
    for (idx, item) in items.iter().enumerate() {
        report.files += 1;
        let mut across = Vec::new();
        let mut on_nonce = |block: u64, n: &Nonce| match nonces.get(n) {
            Some(&(other, other_block)) if other as usize != idx => across.push((block, other, other_block)),
            Some(_) => {} // within this file: the scan reports it
            None if nonces.len() < opts.volume_nonce_cap => {
                nonces.insert(*n, (idx as u32, block));
            }
            None => volume_cap_hit = true,
        };
        let mut on_bytes = |n: u64| {
            done += n;
            progress(done, total);
        };
        // Opening and reading the file fail alike: an I/O finding, no repair.
        let scanned = open_scanned(vol, item, write).and_then(|(file, rw)| {
            scan::scan_with(
                &file,
                &vol.keys,
                &extra,
                opts.file_nonce_cap,
                &mut on_nonce,
                &mut on_bytes,
            )
            .map(|s| (file, rw, s))
            .map_err(|e| e.to_string())
        });
        let (file, rw, s) = match scanned {
            Ok(x) => x,
            Err(e) => {
                report.findings.push(Finding {
                    path: item.path.clone(),
                    backing: item.rel.clone(),
                    kind: Kind::Io(e),
                    fix: Fix::None,
                });
                continue;
            }
        };
        report.blocks += s.blocks;
        report.written += s.written;
        if s.nonce_cap_hit {
            report.notes.push(format!(
                "{}: more than {} written blocks: repeated nonces checked among the first {} only",
                item.path, opts.file_nonce_cap, opts.file_nonce_cap
            ));
        }
        if s.unverified_segments > 0 {
            report.notes.push(format!(
                "{}: {} segment(s) changed since the file's last commit (open for writing, or a crash): \
                 checked by their tags, not by the file summary",
                item.path, s.unverified_segments
            ));
        }
        let first = report.findings.len();
        for p in s.problems.iter().cloned() {
            report.findings.push(Finding {
                path: item.path.clone(),
                backing: item.rel.clone(),
                kind: Kind::File(p),
                fix: Fix::None,
            });
        }
        for (block, other, other_block) in across {
            report.findings.push(Finding {
                path: item.path.clone(),
                backing: item.rel.clone(),
                kind: Kind::NonceAcrossFiles {
                    block,
                    other: items[other as usize].path.clone(),
                    other_block,
                },
                fix: Fix::None,
            });
        }
        between(&item.rel);
        let scanned = repair::Scanned {
            item,
            file: &file,
            read_only: rw,
            size: s.size,
            summary: s.summary,
        };
        repair::file(vol, &scanned, &mut report.findings[first..], opts.repairs, &mut undo);
    }
    if volume_cap_hit {
        report.notes.push(format!(
            "more than {} written blocks in the volume: repeated nonces across files checked among the first {} only",
            opts.volume_nonce_cap, opts.volume_nonce_cap
        ));
    }
    repair::sidecars(vol, &mut report.findings, opts.repairs);
    report.undo = undo.path().map(|p| (p.to_path_buf(), undo.blocks));
    for (p, kind) in undo::looked_at(vol) {
        if Some(vol.root.shown(&p).as_path()) == undo.path() {
            continue;
        }
        match kind {
            Ok(()) => {
                let p = vol.root.shown(&p);
                report.notes.push(format!(
                    "{}: the undo file of an earlier fsck --zero-bad-blocks: warpfs fsck --undo={} puts its blocks back; delete it once they are not wanted",
                    p.display(),
                    p.display()
                ))
            }
            Err(why) => report.findings.push(Finding {
                path: "/".into(),
                backing: p,
                kind: Kind::UndoFile(why),
                fix: Fix::None,
            }),
        }
    }
    report
}

#[cfg(test)]
mod tests;
