//! One scenario: a fresh copy of the template volume, the canary tree
//! beside it, one object planted, one command (or mount session) run under
//! the guard, then the checks: bounded time, nothing outside touched, the
//! expected exit and message, and no data lost.

use super::canary::Canary;
use super::expect::{judge, ops, want, Findings, Op, Want};
use super::fixture::{template, Template, VICTIM};
use super::guard::Scope;
use super::plant::{outside_bytes, plant, Kind, Plant, Target};
use crate::common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The new password `warpfs passwd` sets.
pub const NEW_PASSWORD: &str = "a new password after the plant";

pub struct Scenario {
    pub t: &'static Template,
    pub target: Target,
    pub kind: Kind,
    pub v: Volume,
    pub canary: Canary,
    pub plant: Plant,
    pub scope: Scope,
    /// Files written through the mount (they must read back too).
    pub written: BTreeMap<String, Vec<u8>>,
    /// Every plaintext file and what it must read as (the template's, but
    /// `file1` with its zeroed block in the undo cells).
    pub files: BTreeMap<String, Vec<u8>>,
    /// The undo cells' genuine undo file and what it puts back.
    pub undo: Option<super::undo::Made>,
}

/// Run every command of the cell (`target`, `kind`) in `mode`, each in a
/// scenario of its own, and report.
pub fn cell(target: Target, kind: Kind, mode: Mode) {
    if warpfs_testkit::skip_if(fuse_unavailable()) {
        return;
    }
    let t = template(mode);
    let mut f = Findings::new(format!("{target:?} planted as {kind:?} ({})", mode.name()));
    // The commands run at once, each on a copy of its own (a hang costs
    // one bound per cell, not one per command); reported in order.
    let parts: Vec<Findings> = std::thread::scope(|sc| {
        let hs: Vec<_> = ops(target)
            .into_iter()
            .map(|op| {
                let mut part = f.part();
                sc.spawn(move || {
                    let mut s = Scenario::new(t, target, kind);
                    s.run(op, &mut part);
                    part
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    for p in parts {
        f.absorb(p);
    }
    // A lock file is looked at by every command (the control test shows
    // it); one that is safely ignored leaves no trace to see here.
    f.finish(target == Target::Lock);
}

/// The backing tree's state, leaving out `skip` (and the lock file).
pub fn backing_state(root: &Path, skip: &[PathBuf]) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if skip.contains(&p) || e.file_name() == "warpfs.lock" {
                continue;
            }
            let Ok(m) = fs::symlink_metadata(&p) else { continue };
            let ft = m.file_type();
            let v = if ft.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if ft.is_file() {
                format!("file {:?}", fs::read(&p).unwrap_or_default())
            } else if ft.is_symlink() {
                format!("link {:?}", fs::read_link(&p).ok())
            } else {
                format!("special {:o} {}", m.mode(), m.rdev())
            };
            out.insert(p, v);
        }
    }
    out
}

impl Scenario {
    pub fn new(t: &'static Template, target: Target, kind: Kind) -> Scenario {
        let mut v = Volume::blank(t.mode);
        copy_tree(&t.cipher, &v.cipher);
        v.mount_timeout = super::guard::limit() + std::time::Duration::from_secs(30);
        let mut files = t.files.clone();
        let undo = (target == Target::Undo).then(|| {
            let zeroed = super::undo::ZEROED;
            files.insert(zeroed.into(), super::undo::zeroed(&t.files[zeroed]));
            super::undo::prepare(t.rel(zeroed), &v, kind == Kind::OldCopy)
        });
        let mut canary = Canary::new(v.root(), &outside_bytes(t, &v.cipher, target, kind));
        let stale = undo.as_ref().map(|m| m.stale.as_slice());
        let plant = plant(t, &v.cipher, &canary, target, kind, stale);
        canary.watch_plant(&plant.path);
        let mut fifos = vec![(canary.fifo.clone(), canary.fifo_own.clone())];
        if kind == Kind::Fifo {
            fifos.push((plant.path.clone(), canary.plant_own.clone()));
        }
        let scope = Scope {
            root: v.root().to_path_buf(),
            mnt: Some(v.mnt.clone()),
            fifos,
        };
        Scenario {
            t,
            target,
            kind,
            v,
            canary,
            plant,
            scope,
            written: BTreeMap::new(),
            files,
            undo,
        }
    }

    /// A scenario with nothing planted (its canary and guard only).
    pub fn unplanted(t: &'static Template) -> Scenario {
        let s = Scenario::new(t, Target::Lock, Kind::Dangling);
        s.plant.remove();
        s
    }

    /// Files that the plant itself took away (the attacker's doing): not
    /// required to read back.
    pub fn destroyed(&self) -> Vec<String> {
        match (self.target, self.kind) {
            (Target::Content, _) => vec![VICTIM.into()],
            (Target::DirivCopy, Kind::OldCopy) => vec!["a/f1".into(), "a/f2".into()],
            (Target::DirivCopy, _) => vec!["b/g".into()],
            _ => vec![],
        }
    }

    /// Whether opening the planted object at all is a failure (the
    /// agreed behaviour: config copies, content files and undo files that
    /// are FIFOs or devices are never opened).
    fn never_open(&self) -> bool {
        matches!(self.target, Target::ConfCopy | Target::Content | Target::Undo)
            && matches!(self.kind, Kind::Fifo | Kind::DevNull | Kind::DevZero)
    }

    /// `warpfs ARGS[0] --passfile PASSFILE ARGS[1..] CIPHERDIR` on this
    /// scenario's volume.
    pub(super) fn warpfs_cmd(&self, args: &[&str], passfile: &Path) -> Command {
        let mut c = Command::new(BIN);
        c.arg(args[0]).arg("--passfile").arg(passfile);
        c.args(&args[1..]);
        c.arg(&self.v.cipher);
        c
    }

    /// Run `op` with the plant in place, then every check.
    pub fn run(&mut self, op: Op, f: &mut Findings) {
        if let Err(e) = self.plant.in_place() {
            panic!("harness: before {op:?}: {e}");
        }
        let before = backing_state(&self.v.cipher, &self.plant.owned());
        let w = want(self.t, self.target, self.kind, op);
        self.canary.begin();
        match op {
            Op::Mount => super::session::session(self, &w, f),
            _ => self.offline(op, &w, f),
        }
        let win = self.canary.end();
        // A cipher file hard-linked from outside is the same file: a mount
        // cannot tell that link from a plaintext hard link, so a write
        // through the mount reaches it (SECURITY.md, "Hard links into
        // CIPHERDIR"); fsck's repairs and the rekey count links and never
        // rewrite it, and what the mount writes is this volume's ciphertext.
        let through_link = self.target == Target::Content && self.kind == Kind::HardLink && op == Op::Mount;
        let linked = self.canary.file.display().to_string();
        let allowed = |m: &str| through_link && m.starts_with(&linked);
        for o in &win.outside {
            if allowed(o) {
                f.reached(format!("{op:?}: wrote the cipher file linked from outside ({o})"));
            } else {
                f.fail(format!("{op:?}: {o}"));
            }
        }
        if win.plant_opens > 0 {
            if self.never_open() {
                f.fail(format!(
                    "{op:?}: the planted {:?} {} was opened {} time(s)",
                    self.kind,
                    self.plant.name(),
                    win.plant_opens
                ));
            } else {
                f.reached(format!("{op:?} opened the planted object (without hanging)"));
            }
        }
        if self.plant.in_place().is_err() {
            f.reached(format!("{op:?} replaced or removed the planted object"));
        }
        for c in self.canary.changed() {
            if !allowed(&c) {
                f.fail(format!("{op:?}: {c}"));
            }
        }
        let after = backing_state(&self.v.cipher, &self.plant.owned());
        // The undo file is data too: its cells always check that it still
        // puts back what it saved.
        if after != before || !self.written.is_empty() || self.target == Target::Undo {
            self.data_intact(op, f);
        }
    }

    fn offline(&mut self, op: Op, w: &Want, f: &mut Findings) {
        let repair: &[&str] = if self.target == Target::Content {
            &["fsck", "--repair", "--zero-bad-blocks"]
        } else {
            &["fsck", "--repair"]
        };
        let newpass = self.v.root().join("newpass");
        fs::write(&newpass, format!("{NEW_PASSWORD}\n")).unwrap();
        let wrong = self.v.root().join("wrongpass");
        fs::write(&wrong, "not the password of warpfs.conf\n").unwrap();
        let nps = newpass.to_str().unwrap();
        let cmd = match op {
            Op::Fsck => self.warpfs_cmd(&["fsck"], &self.v.passfile),
            Op::Repair => self.warpfs_cmd(repair, &self.v.passfile),
            Op::Rekey => self.warpfs_cmd(&["rekey", "--jobs", "1"], &self.v.passfile),
            Op::Passwd => self.warpfs_cmd(&["passwd", "--new-passfile", nps], &self.v.passfile),
            Op::Undo => self.warpfs_cmd(&["fsck", "--undo"], &self.v.passfile),
            Op::WrongPassword => {
                let mut c = Command::new(BIN);
                c.args(["mount", "--passfile"])
                    .arg(&wrong)
                    .arg("--log-file")
                    .arg(&self.v.logfile);
                c.arg(&self.v.cipher).arg(&self.v.mnt);
                c
            }
            Op::Mount => unreachable!(),
        };
        let r = self.scope.cmd(&format!("warpfs {op:?}"), cmd);
        if op == Op::WrongPassword && is_mounted(&self.v.mnt) {
            f.fail("WrongPassword: the volume was mounted with a password that does not open warpfs.conf");
            self.scope.stop();
        }
        let out = match r {
            Ok(o) => o,
            Err(e) => return f.fail(format!("{op:?}: {e}")),
        };
        self.check(op, w, &out, "", f);
        if op == Op::Passwd && out.ok() {
            fs::write(&self.v.passfile, format!("{NEW_PASSWORD}\n")).unwrap();
        }
        if self.target == Target::DirivCopy && self.kind == Kind::OldCopy && op == Op::Repair {
            super::session::moved_entries_stay_hidden(self, f);
        }
    }

    /// Judge a command's output; record the result.
    pub fn check(&mut self, op: Op, w: &Want, out: &Out, log: &str, f: &mut Findings) {
        match judge(w, out, log) {
            Ok(named) => {
                f.pass(format!("{op:?}: exit {:?} as expected ({w:?})", out.code));
                if named {
                    f.reached(format!("{op:?} named the planted file"));
                }
            }
            Err(e) => {
                let last: Vec<&str> = out.stderr.lines().rev().take(3).collect();
                f.fail(format!("{op:?}: {e}; stderr ends: {:?}", last))
            }
        }
    }

    /// (d): with the plant taken away (the genuine object back), every file
    /// readable before still reads back exactly, and so does every file
    /// written through the mount. For the config, also the config an
    /// accepted command wrote in place of the plant.
    fn data_intact(&mut self, op: Op, f: &mut Findings) {
        let mut confs: Vec<Option<Vec<u8>>> = vec![None];
        if self.target == Target::Conf {
            let cur = &self.plant.path;
            let m = fs::symlink_metadata(cur).ok();
            let replaced =
                self.plant.in_place().is_err() && m.is_some_and(|m| m.file_type().is_file() && m.nlink() == 1);
            confs = vec![Some(self.t.read("warpfs.conf"))];
            if replaced {
                confs.insert(0, Some(fs::read(cur).unwrap()));
            }
        }
        self.plant.remove();
        let mut problems = Vec::new();
        for conf in confs {
            if let Some(c) = &conf {
                let p = self.v.cipher.join("warpfs.conf");
                let _ = fs::remove_file(&p);
                fs::write(&p, c).unwrap();
            }
            // The password the scenario last set first.
            let cur = fs::read_to_string(&self.v.passfile).unwrap_or_default();
            let mut pws = [PASSWORD, NEW_PASSWORD];
            if cur.trim_end() == NEW_PASSWORD {
                pws.reverse();
            }
            for pw in pws {
                fs::write(&self.v.passfile, format!("{pw}\n")).unwrap();
                match self.read_everything() {
                    Ok(()) => {
                        f.pass(format!("{op:?}: every file reads back afterwards"));
                        return super::undo::still_restores(self, op, f);
                    }
                    Err(e) => problems.push(e),
                }
            }
        }
        f.fail(format!(
            "{op:?}: data readable before is lost (plant taken away, genuine object back): {}",
            problems.join(" | ")
        ));
    }

    pub fn read_everything(&mut self) -> Result<(), String> {
        let o = self.scope.run("mount to check the data", || self.v.try_mount(&[]))?;
        if !o.ok() {
            return Err(format!("mount exit {:?}: {}", o.code, o.stderr.trim()));
        }
        let skip = self.destroyed();
        let mut want: Vec<(String, Vec<u8>)> = self
            .files
            .iter()
            .filter(|(p, _)| !skip.contains(p))
            .map(|(p, d)| (p.clone(), d.clone()))
            .collect();
        want.extend(self.written.iter().map(|(p, d)| (p.clone(), d.clone())));
        let mut bad = Vec::new();
        for (p, d) in want {
            let path = self.v.p(&p);
            match self.scope.run(&format!("read {p}"), move || fs::read(&path)) {
                Ok(Ok(got)) if got == d => {}
                Ok(Ok(got)) => bad.push(format!("{p}: {} bytes, not the {} written", got.len(), d.len())),
                Ok(Err(e)) => bad.push(format!("{p}: {e}")),
                Err(e) => {
                    bad.push(e);
                    break;
                }
            }
        }
        self.unmount_guarded();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("; "))
        }
    }

    /// Unmount under the guard; a daemon that does not exit is stopped.
    pub fn unmount_guarded(&mut self) -> Option<String> {
        if !self.v.is_mounted() {
            return None;
        }
        let mnt = self.v.mnt.clone();
        let pids = self.v.daemon_pids().to_vec();
        let r = self.scope.run("unmount", move || {
            unmount_path(&mnt)?;
            let left = wait_pids_gone(&pids, super::guard::limit());
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("daemon(s) {left:?} did not exit after the unmount"))
            }
        });
        let err = match r {
            Ok(Ok(())) => None,
            Ok(Err(e)) | Err(e) => {
                self.scope.stop();
                Some(e)
            }
        };
        if is_mounted(&self.v.mnt) {
            super::guard::lazy_unmount(&self.v.mnt);
        }
        self.v.daemon_stopped();
        err
    }
}

/// Whether `p` (through the mount) is of the special kind planted.
pub fn shows_as(m: &fs::Metadata, kind: Kind) -> bool {
    let ft = m.file_type();
    match kind {
        Kind::Fifo => ft.is_fifo(),
        Kind::DevNull => ft.is_char_device() && m.rdev() == libc::makedev(1, 3),
        Kind::DevZero => ft.is_char_device() && m.rdev() == libc::makedev(1, 5),
        Kind::Dir => ft.is_dir(),
        _ => false,
    }
}
