//! fsck's walk of the backing tree: decodes every name (directory IVs,
//! long-name sidecars, orphan sidecars, symlink targets) and lists the
//! regular files to scan, each once (hard links share one scan).

use super::report::{Finding, Fix, Kind, Report};
use crate::at::Loc;
use crate::names;
use crate::volume::Volume;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
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
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

fn finding(path: String, rel: PathBuf, kind: Kind) -> Finding {
    Finding {
        path,
        backing: rel,
        kind,
        fix: Fix::None,
    }
}

/// Walk the whole tree under the volume root; findings go to `report`.
pub(super) fn walk(vol: &Volume, report: &mut Report) -> Vec<Item> {
    let mut items = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![(PathBuf::new(), "/".to_string())];
    while let Some((rel, plain)) = stack.pop() {
        report.dirs += 1;
        let (dir, entries) = match vol.dir(&rel).and_then(|d| d.list().map(|l| (d, l))) {
            Ok(x) => x,
            Err(e) => {
                report
                    .findings
                    .push(finding(plain.clone(), rel.clone(), Kind::Io(e.to_string())));
                continue;
            }
        };
        let iv = match crate::diriv::read(&dir) {
            Ok(iv) => Some(iv),
            Err(_) => {
                let why = match crate::sys::lstat(&dir.entry(DIRIV_FILE.as_ref())) {
                    Ok(m) => format!("{} has {} bytes, not 16", DIRIV_FILE, m.st_size),
                    Err(e) => format!("{DIRIV_FILE}: {e}"),
                };
                report
                    .findings
                    .push(finding(plain.clone(), rel.join(DIRIV_FILE), Kind::DirIv(why)));
                None
            }
        };
        let mut names_here: Vec<_> = entries.into_iter().map(|e| e.name).collect();
        names_here.sort();
        for bname in names_here {
            let erel = rel.join(&bname);
            let eloc = dir.entry(&bname);
            let b = bname.as_bytes();
            if is_sidecar(b) {
                // Its entry is the same name without `.name`.
                let entry = &b[..b.len() - warpfs_crypto::names::SIDECAR_SUFFIX.len()];
                if crate::sys::lstat(&dir.entry(OsStr::from_bytes(entry))).is_err() {
                    report.findings.push(finding(
                        join(&plain, &format!("?{}", bname.to_string_lossy())),
                        erel,
                        Kind::OrphanSidecar,
                    ));
                }
                continue;
            }
            let name = match &iv {
                None => Err("its directory IV is missing".to_string()),
                Some(iv) => match names::decode(&vol.names, iv, &dir, &bname) {
                    None => continue, // warpfs.conf, warpfs.diriv, config temp files
                    Some(r) => r,
                },
            };
            let path = match name {
                Ok(n) => join(&plain, &String::from_utf8_lossy(&n)),
                Err(why) => {
                    let p = join(&plain, &format!("?{}", bname.to_string_lossy()));
                    if iv.is_some() {
                        report.findings.push(finding(p.clone(), erel.clone(), Kind::Name(why)));
                    }
                    p
                }
            };
            let md = match crate::sys::lstat(&eloc) {
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
                if seen.insert((md.st_dev, md.st_ino)) {
                    items.push(Item {
                        path,
                        rel: erel,
                        len: md.st_size as u64,
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
    items
}

fn symlink_ok(vol: &Volume, p: &Loc) -> bool {
    let Ok(t) = crate::sys::readlink(p) else {
        return false;
    };
    vol.open_symlink(p, &t).is_ok()
}
