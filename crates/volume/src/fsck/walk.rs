//! fsck's walk of the backing tree: decodes every name through the
//! directory view (directory IVs and their copies, long-name sidecars,
//! conflict copies, foreign files, orphan sidecars, symlink targets) and
//! lists the regular files to scan, each once (hard links share one scan).

use super::report::{Finding, Fix, Kind, Report};
use super::Repairs;
use crate::dirview::{How, View};
use crate::synced::{self, Copy};
use crate::volume::Volume;
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use warpfs_backing::{Dir, Loc};
use warpfs_crypto::names::{is_sidecar, DIRIV_FILE};

/// A regular file to scan.
#[derive(Debug)]
pub(super) struct Item {
    /// Plaintext path.
    pub path: String,
    /// Backing path relative to CIPHERDIR.
    pub rel: PathBuf,
    /// Backing length when walked.
    pub len: u64,
    /// Device and inode when walked: the file fsck scans and repairs must
    /// still be this one.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// Links the file had when walked.
    pub nlink: u64,
    /// Links to it the walk found in CIPHERDIR: fewer than `nlink` means
    /// it is also linked from outside, and no repair rewrites it.
    pub inside: u64,
}

impl Item {
    /// Why the file must not be rewritten, when it is linked from outside
    /// CIPHERDIR (a hard link planted to make a repair write there).
    pub fn linked_outside(&self) -> Option<String> {
        (self.nlink > self.inside).then(|| {
            format!(
                "it has {} hard links but {} in CIPHERDIR: also linked from outside, never rewritten",
                self.nlink, self.inside
            )
        })
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

pub(super) fn finding(path: String, rel: PathBuf, kind: Kind) -> Finding {
    Finding {
        path,
        backing: rel,
        kind,
        fix: Fix::None,
    }
}

/// One backing entry to look at: its name, plaintext path, and whether its
/// name failed to decode (already reported).
struct Entry {
    bname: OsString,
    path: String,
}

/// Walk the whole tree under the volume root; findings go to `report`.
pub(super) fn walk(vol: &Volume, report: &mut Report, want: Repairs) -> Vec<Item> {
    let mut items = Vec::new();
    let mut seen: HashMap<(u64, u64), u64> = HashMap::new();
    let mut ivs = super::merge::IvIndex::default();
    let mut stack = vec![(PathBuf::new(), "/".to_string())];
    while let Some((rel, plain)) = stack.pop() {
        report.dirs += 1;
        let dir = match vol.dir(&rel) {
            Ok(d) => d,
            Err(e) => {
                report
                    .findings
                    .push(finding(plain.clone(), rel.clone(), Kind::Io(e.to_string())));
                continue;
            }
        };
        let entries = match vol.view(&dir) {
            Ok(mut view) => {
                if !view.alt_files.is_empty() {
                    let (found, merged) =
                        super::merge::check(vol, &dir, (&rel, &plain), &view, want.merge_dir_ivs, &mut ivs);
                    report.findings.extend(found);
                    if merged {
                        view = vol.view(&dir).unwrap_or(view);
                    }
                }
                shown(report, &rel, &plain, view)
            }
            Err(_) => match unreadable_iv(report, &dir, &rel, &plain) {
                Some(e) => e,
                None => continue,
            },
        };
        sidecars(report, &dir, &rel, &plain);
        for Entry { bname, path } in entries {
            let erel = rel.join(&bname);
            let eloc = dir.entry(&bname);
            let md = match warpfs_backing::lstat(&eloc) {
                Ok(m) => m,
                Err(e) => {
                    report.findings.push(finding(path, erel, Kind::Io(e.to_string())));
                    continue;
                }
            };
            let ft = md.st_mode & libc::S_IFMT;
            if ft == libc::S_IFDIR {
                stack.push((erel, path));
            } else if ft == libc::S_IFREG {
                let links = seen.entry((md.st_dev, md.st_ino)).or_insert(0);
                *links += 1;
                if *links == 1 {
                    items.push(Item {
                        path,
                        rel: erel,
                        len: md.st_size as u64,
                        dev: md.st_dev,
                        ino: md.st_ino,
                        nlink: warpfs_backing::nlink(&md),
                        inside: 0,
                    });
                }
            } else if ft == libc::S_IFLNK {
                report.symlinks += 1;
                if !symlink_ok(vol, &eloc) {
                    report.findings.push(finding(path, erel, Kind::Symlink));
                }
            }
        }
    }
    for i in &mut items {
        i.inside = seen.get(&(i.dev, i.ino)).copied().unwrap_or(1);
    }
    items
}

fn lossy(n: &OsStr) -> String {
    n.to_string_lossy().into_owned()
}

/// The entries of a decoded directory; findings and notes for what is not
/// a plain entry.
fn shown(report: &mut Report, rel: &std::path::Path, plain: &str, view: View) -> Vec<Entry> {
    for (n, why) in &view.bad_alts {
        report.findings.push(finding(
            plain.to_string(),
            rel.join(n),
            Kind::DirIv(format!("{}: {why}", lossy(n))),
        ));
    }
    for n in &view.config_copies {
        report
            .findings
            .push(finding(plain.to_string(), rel.join(n), Kind::ConfigCopy));
    }
    if !view.foreign.is_empty() {
        let names: Vec<String> = view.foreign.iter().map(|n| lossy(n)).collect();
        report.notes.push(format!(
            "{plain}: {} foreign file(s) in {} not shown (a sync tool's or system's own): {}",
            names.len(),
            if rel.as_os_str().is_empty() {
                "CIPHERDIR".to_string()
            } else {
                rel.display().to_string()
            },
            names.join(", ")
        ));
    }
    let mut out = Vec::new();
    let mut shown = view.shown;
    shown.sort_by(|a, b| a.backing.cmp(&b.backing));
    for s in shown {
        let path = join(plain, &lossy(&s.name));
        match &s.how {
            How::Undecryptable(why) => {
                report
                    .findings
                    .push(finding(path.clone(), rel.join(&s.backing), Kind::Name(why.clone())));
            }
            How::Copy => report.notes.push(format!(
                "{path}: a sync tool's conflict copy (backing {})",
                rel.join(&s.backing).display()
            )),
            How::Plain | How::OtherIv => {}
        }
        out.push(Entry { bname: s.backing, path });
    }
    out
}

/// A directory whose IV cannot be read: reported, and its entries walked
/// under their backing names.
fn unreadable_iv(report: &mut Report, dir: &Dir, rel: &std::path::Path, plain: &str) -> Option<Vec<Entry>> {
    let why = match warpfs_backing::lstat(&dir.entry(DIRIV_FILE.as_ref())) {
        Ok(m) => format!("{} has {} bytes, not 16", DIRIV_FILE, m.st_size),
        Err(e) => format!("{DIRIV_FILE}: {e}"),
    };
    report
        .findings
        .push(finding(plain.to_string(), rel.join(DIRIV_FILE), Kind::DirIv(why)));
    let list = match dir.list() {
        Ok(l) => l,
        Err(e) => {
            report
                .findings
                .push(finding(plain.to_string(), rel.to_path_buf(), Kind::Io(e.to_string())));
            return None;
        }
    };
    let mut out: Vec<Entry> = list
        .into_iter()
        .filter(|e| !warpfs_crypto::names::is_reserved(e.name.as_bytes()) && !synced::is_foreign(e.name.as_bytes()))
        .map(|e| Entry {
            path: join(plain, &format!("?{}", lossy(&e.name))),
            bname: e.name,
        })
        .collect();
    out.sort_by(|a, b| a.bname.cmp(&b.bname));
    Some(out)
}

/// Orphan long-name sidecars: neither their entry nor a sync tool's copy
/// of it is there.
fn sidecars(report: &mut Report, dir: &Dir, rel: &std::path::Path, plain: &str) {
    let Ok(list) = dir.list() else { return };
    let copied: HashSet<String> = list
        .iter()
        .filter_map(|e| match synced::classify(e.name.as_bytes()) {
            Some(Copy::Of { original, .. }) => Some(original),
            _ => None,
        })
        .collect();
    let mut names: Vec<&OsString> = list
        .iter()
        .map(|e| &e.name)
        .filter(|n| is_sidecar(n.as_bytes()))
        .collect();
    names.sort();
    for bname in names {
        let b = bname.as_bytes();
        let entry = &b[..b.len() - warpfs_crypto::names::SIDECAR_SUFFIX.len()];
        let used = copied.contains(&*String::from_utf8_lossy(entry));
        if !used && warpfs_backing::lstat(&dir.entry(OsStr::from_bytes(entry))).is_err() {
            report.findings.push(finding(
                join(plain, &format!("?{}", lossy(bname))),
                rel.join(bname),
                Kind::OrphanSidecar,
            ));
        }
    }
}

fn symlink_ok(vol: &Volume, p: &Loc) -> bool {
    let Ok(t) = warpfs_backing::readlink(p) else {
        return false;
    };
    vol.open_symlink(p, &t).is_ok()
}
