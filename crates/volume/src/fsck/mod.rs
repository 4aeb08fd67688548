//! `warpfs fsck` without the CLI: check an unmounted volume (every name,
//! directory IV, long-name sidecar, symlink target, cipher-file header,
//! nonce entry, repeated nonce within a file and across the volume, and in
//! `gcm` every tag), report each problem by plaintext path and block, and
//! repair only what was asked, never destroying readable data.

mod merge;
mod repair;
mod report;
mod walk;

pub use report::{Finding, Fix, Kind, Report};

use crate::volume::Volume;
use std::collections::HashMap;
use warpfs_content::scan;
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
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Repairs to make.
    pub repairs: Repairs,
    /// Nonces remembered per file.
    pub file_nonce_cap: usize,
    /// Nonces remembered across the volume.
    pub volume_nonce_cap: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            repairs: Repairs::default(),
            file_nonce_cap: FILE_NONCE_CAP,
            volume_nonce_cap: VOLUME_NONCE_CAP,
        }
    }
}

/// Check (and repair as asked) the volume. `progress(done, total)` gets
/// plaintext bytes scanned so far and in all. The volume must not be
/// mounted (the CLI checks).
pub fn check(vol: &Volume, opts: Options, progress: &mut dyn FnMut(u64, u64)) -> Report {
    let mut report = Report::default();
    let items = walk::walk(vol, &mut report, opts.repairs);
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
        let scanned = vol
            .open_backing(&item.rel, libc::O_RDONLY)
            .map_err(|e| e.to_string())
            .and_then(|file| {
                scan::scan(&file, &vol.keys, opts.file_nonce_cap, &mut on_nonce, &mut on_bytes)
                    .map_err(|e| e.to_string())
            });
        let s = match scanned {
            Ok(s) => s,
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
        for p in s.problems {
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
        repair::file(vol, &item.rel, &mut report.findings[first..], opts.repairs);
    }
    if volume_cap_hit {
        report.notes.push(format!(
            "more than {} written blocks in the volume: repeated nonces across files checked among the first {} only",
            opts.volume_nonce_cap, opts.volume_nonce_cap
        ));
    }
    repair::sidecars(vol, &mut report.findings, opts.repairs);
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Caller, Options as VolOptions};
    use std::ffi::OsStr;
    use std::path::Path;
    use warpfs_config::{Config, ContentMode, KdfParams};

    fn volume(dir: &Path, mode: ContentMode) -> Volume {
        let (cfg, master) = Config::create(dir, b"pw", mode, 256, KdfParams::MIN).unwrap();
        Volume::init_root(&warpfs_backing::Root::open(dir).unwrap()).unwrap();
        Volume::open(dir, &cfg, &master, VolOptions::default()).unwrap()
    }

    fn write(v: &Volume, name: &str, blocks: usize) {
        let who = Caller { uid: 0, gid: 0 };
        let (_, _, f, _) = v
            .create(Path::new(""), OsStr::new(name), 0o644, libc::O_RDWR, who, name.into())
            .unwrap();
        f.write_at(0, &vec![0x5a; blocks * 4096]).unwrap();
    }

    #[test]
    fn clean_then_flipped_block_named_by_path() {
        let t = tempfile::tempdir().unwrap();
        let v = volume(t.path(), ContentMode::Gcm);
        write(&v, "f", 4);
        let mut seen = (0, 0);
        let r = check(&v, Options::default(), &mut |d, t| seen = (d, t));
        assert!(r.clean(), "{:?}", r.findings);
        assert_eq!((r.files, r.blocks, r.written), (1, 4, 4));
        assert_eq!(seen, (4 * 4096, 4 * 4096));
        let back = crate::names::encode(
            &v.names,
            &crate::diriv::read(&v.dir(std::path::Path::new("")).unwrap()).unwrap(),
            OsStr::new("f"),
        )
        .unwrap();
        let p = v.root().join(crate::names::file_of(&back));
        let mut raw = std::fs::read(&p).unwrap();
        let off = warpfs_content::layout::data_offset(v.mode, 2) as usize;
        raw[off] ^= 1;
        std::fs::write(&p, &raw).unwrap();
        let r = check(&v, Options::default(), &mut |_, _| {});
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].path, "/f");
        assert_eq!(r.findings[0].block(), Some(2));
        assert_eq!(r.findings[0].fix, Fix::NotAsked("--zero-bad-blocks"));
        assert!(!r.all_repaired());
    }

    #[test]
    fn volume_nonce_cap_is_a_note() {
        let t = tempfile::tempdir().unwrap();
        let v = volume(t.path(), ContentMode::Ctr);
        write(&v, "a", 3);
        write(&v, "b", 3);
        let opts = Options {
            volume_nonce_cap: 4,
            ..Options::default()
        };
        let r = check(&v, opts, &mut |_, _| {});
        assert!(r.clean());
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("first 4 only"));
    }
}
