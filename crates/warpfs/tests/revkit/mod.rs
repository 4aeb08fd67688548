//! Shared pieces of the reverse-mode tests: a PLAINDIR with its reverse
//! config, the view mount, forward mounts of copies, tree comparison and
//! rsync's statistics.
#![allow(dead_code)]

use crate::common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The hidden reverse config in PLAINDIR.
pub const HIDDEN: &str = ".warpfs.reverse.conf";

/// A PLAINDIR, its view's mount point and whatever else a test mounts.
pub struct Rev {
    pub dir: tempfile::TempDir,
    pub plain: PathBuf,
    pub view: PathBuf,
    pub pass: PathBuf,
    pub log: PathBuf,
    mounted: Vec<PathBuf>,
}

impl Rev {
    /// An empty PLAINDIR (not initialised).
    pub fn new() -> Rev {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        let view = dir.path().join("view");
        fs::create_dir(&plain).unwrap();
        fs::create_dir(&view).unwrap();
        let pass = dir.path().join("pass");
        fs::write(&pass, format!("{PASSWORD}\n")).unwrap();
        let log = dir.path().join("log");
        Rev {
            plain,
            view,
            pass,
            log,
            mounted: Vec::new(),
            dir,
        }
    }

    /// A path in the test's directory.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `warpfs init --reverse` of PLAINDIR.
    pub fn init(&self) {
        let mut a = args!["init", "--reverse", "--passfile", &self.pass];
        a.extend(args![
            "--kdf-memory",
            "32768",
            "--kdf-iterations",
            "2",
            "--quiet",
            &self.plain
        ]);
        warpfs(a).expect_ok("init --reverse");
    }

    /// Mount the view with `extra` options.
    pub fn mount_view(&mut self, extra: &[&str]) {
        let mut a = args!["mount", "--reverse", "--passfile", &self.pass, "--log-file", &self.log];
        a.extend(extra.iter().map(std::ffi::OsString::from));
        a.extend(args![&self.plain, &self.view]);
        warpfs(a).expect_ok("mount --reverse");
        self.mounted.push(self.view.clone());
    }

    /// Mount the copy `cipher` forward, read-only, at a new mount point.
    pub fn forward(&mut self, cipher: &Path) -> PathBuf {
        let mnt = PathBuf::from(format!("{}.fwd", cipher.display()));
        fs::create_dir_all(&mnt).unwrap();
        let a = args![
            "mount",
            "--passfile",
            &self.pass,
            "-o",
            "ro",
            "--log-file",
            self.p("fwd.log"),
            cipher,
            &mnt
        ];
        warpfs(a).expect_ok("forward mount of a copy of the view");
        self.mounted.push(mnt.clone());
        mnt
    }

    /// Unmount `mnt` (a mount of this test).
    pub fn unmount(&mut self, mnt: &Path) {
        unmount_path(mnt).unwrap();
        self.mounted.retain(|m| m != mnt);
    }

    /// The daemons' log.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Rev {
    fn drop(&mut self) {
        for m in self.mounted.drain(..).rev() {
            if let Err(e) = unmount_path(&m) {
                eprintln!("{e}");
            }
        }
    }
}

/// Run `cmd`, panicking with its output unless it exits 0.
pub fn sh(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// rsync's `--stats` numbers of one run of `rsync -a --stats ARGS`.
#[derive(Debug, Default)]
pub struct RsyncStats {
    pub transferred: u64,
    pub created: u64,
    pub deleted: u64,
    pub literal: u64,
    pub sent: u64,
}

fn stat_num(out: &str, label: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|r| r.trim_start_matches(':').split_whitespace().next())
        .map(|n| n.replace(',', "").parse().unwrap_or(0))
        .unwrap_or(0)
}

/// `rsync -a --stats` with `extra` flags from `src/` to `dst/`.
pub fn rsync(extra: &[&str], src: &Path, dst: &Path) -> RsyncStats {
    let out = sh(Command::new("rsync")
        .arg("-a")
        .arg("--stats")
        .args(extra)
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", dst.display())));
    RsyncStats {
        transferred: stat_num(&out, "Number of regular files transferred"),
        created: stat_num(&out, "Number of created files"),
        deleted: stat_num(&out, "Number of deleted files"),
        literal: stat_num(&out, "Literal data"),
        sent: stat_num(&out, "Total bytes sent"),
    }
}

/// Why rsync cannot run here, or `None`.
pub fn rsync_missing() -> Option<String> {
    match Command::new("rsync").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("rsync is not installed".into()),
    }
}

/// Everything a forward mount must show exactly as PLAINDIR has it.
#[derive(Debug, PartialEq, Eq)]
pub struct Seen {
    kind: &'static str,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: (i64, i64),
    rdev: u64,
    content: Vec<u8>,
}

/// Every entry below `root` (relative path → what it is), without the
/// hidden reverse config (nor the old configs kept beside it).
pub fn tree(root: &Path) -> BTreeMap<String, Seen> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if !rel.contains('/') && rel.starts_with(HIDDEN) {
                continue;
            }
            let m = fs::symlink_metadata(&p).unwrap();
            let t = m.file_type();
            let (kind, content) = if t.is_dir() {
                stack.push(p.clone());
                ("dir", Vec::new())
            } else if t.is_symlink() {
                ("symlink", fs::read_link(&p).unwrap().as_os_str().as_bytes().to_vec())
            } else if t.is_file() {
                ("file", fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
            } else if t.is_fifo() {
                ("fifo", Vec::new())
            } else if t.is_socket() {
                ("socket", Vec::new())
            } else {
                ("device", Vec::new())
            };
            out.insert(
                rel,
                Seen {
                    kind,
                    mode: m.mode() & 0o7777,
                    uid: m.uid(),
                    gid: m.gid(),
                    size: if kind == "dir" { 0 } else { m.size() },
                    mtime: (m.mtime(), m.mtime_nsec()),
                    rdev: m.rdev(),
                    content,
                },
            );
        }
    }
    out
}

/// Assert two trees are equal, naming the first difference.
pub fn assert_same_tree(want: &BTreeMap<String, Seen>, got: &BTreeMap<String, Seen>) {
    let wk: Vec<_> = want.keys().collect();
    let gk: Vec<_> = got.keys().collect();
    assert_eq!(wk, gk, "the entries differ");
    for (k, w) in want {
        let g = &got[k];
        if w != g {
            let short = |s: &Seen| {
                format!(
                    "{} mode {:o} size {} mtime {:?} uid {} rdev {}",
                    s.kind, s.mode, s.size, s.mtime, s.uid, s.rdev
                )
            };
            panic!(
                "{k} differs:\n want {}\n got  {}\n same content: {}",
                short(w),
                short(g),
                w.content == g.content
            );
        }
    }
}

/// The super block options of the mount at `p` (`user_id=`, ...).
pub fn super_options(p: &Path) -> String {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = p.to_str().unwrap();
    info.lines()
        .filter(|l| l.split(' ').nth(4) == Some(want))
        .filter_map(|l| l.split(" - ").nth(1))
        .filter_map(|rest| rest.split(' ').nth(2).map(str::to_owned))
        .next_back()
        .unwrap_or_default()
}

/// Wait until `cond` holds (at most 10 s).
pub fn eventually(what: &str, cond: impl FnMut() -> bool) {
    assert!(wait_for(Duration::from_secs(10), cond), "{what}");
}
