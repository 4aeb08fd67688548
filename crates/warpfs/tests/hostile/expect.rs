//! The agreed target behaviour as a table: for each planted name, kind and
//! command, the exit status and the names its output must give; and the
//! findings of one test, collected so that one run reports every broken
//! expectation of a cell, not only the first.

use super::fixture::{long1, Template, JOURNAL, VICTIM};
use super::plant::{conf_copy_name, diriv_copy_name, Kind, Target};
use super::undo::UNDO;
use crate::common::Out;

/// What a scenario runs once its plant is in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `warpfs mount`, then listing, reading and writing through the
    /// mount, then unmounting.
    Mount,
    /// `warpfs fsck`.
    Fsck,
    /// `warpfs fsck --repair` (with `--zero-bad-blocks` on content).
    Repair,
    /// `warpfs rekey` (offline).
    Rekey,
    /// `warpfs passwd`.
    Passwd,
    /// `warpfs mount` with a password that does not open `warpfs.conf`
    /// (so the copies of the config are tried).
    WrongPassword,
    /// `warpfs fsck --undo` (the newest undo file in CIPHERDIR).
    Undo,
}

/// A name the output must contain: any one of the alternatives.
pub type Name = Vec<String>;

pub fn one(s: impl Into<String>) -> Name {
    vec![s.into()]
}

/// What a command must do.
#[derive(Clone, Debug)]
pub enum Want {
    /// A non-zero exit (exactly `code` when given) whose output names each.
    Refuse(Option<i32>, Vec<Name>),
    /// Exit 0.
    Works,
    /// Exit 0, or a non-zero exit whose output names each.
    Either(Vec<Name>),
    /// Any exit (bounded, not killed by a signal).
    Any,
}

/// The commands a cell of `target` runs.
pub fn ops(target: Target) -> Vec<Op> {
    let mut v = vec![Op::Mount, Op::Fsck, Op::Repair, Op::Rekey, Op::Passwd];
    if target == Target::ConfCopy {
        v.push(Op::WrongPassword);
    }
    // `fsck --undo` where it reads the planted name: the undo file, and
    // the config and the lock file it opens first.
    if matches!(target, Target::Undo | Target::Conf | Target::Lock) {
        v.push(Op::Undo);
    }
    v
}

/// The expected outcome of `op` with `kind` planted at `target`.
pub fn want(t: &Template, target: Target, kind: Kind, op: Op) -> Want {
    use Op::*;
    use Target::*;
    let old = kind == Kind::OldCopy;
    let conf = || one("warpfs.conf");
    let diriv = || one("warpfs.diriv");
    match target {
        Conf if !old => Want::Refuse(Some(11), vec![conf()]),
        Conf => match op {
            // The config from before the rekey: it opens, but lacks the
            // files' key generation; reads fail cleanly (checked in the
            // session), fsck reports the files.
            Mount | Rekey => Want::Either(vec![conf()]),
            Fsck | Repair => Want::Refuse(Some(20), vec![]),
            // No undo file in the template: said so.
            Op::Undo => Want::Refuse(Some(1), vec![]),
            _ => Want::Works,
        },
        ConfCopy => match op {
            Fsck | Repair => Want::Refuse(Some(20), vec![one(conf_copy_name())]),
            WrongPassword => Want::Refuse(Some(10), vec![]),
            _ => Want::Works,
        },
        Lock => Want::Either(vec![one("warpfs.lock")]),
        RootDiriv => match op {
            Mount if old => Want::Either(vec![diriv()]),
            Mount | Fsck | Repair if !old => Want::Refuse(None, vec![diriv()]),
            Fsck | Repair => Want::Refuse(Some(20), vec![]),
            _ => Want::Either(vec![diriv()]),
        },
        SubDiriv => match op {
            Mount => Want::Works,
            Fsck | Repair if !old => Want::Refuse(Some(20), vec![diriv()]),
            Fsck | Repair => Want::Refuse(Some(20), vec![]),
            _ => Want::Either(vec![diriv()]),
        },
        DirivCopy => match op {
            Mount => Want::Works,
            Fsck => Want::Refuse(Some(20), vec![one(diriv_copy_name())]),
            // The entry-move attack: whatever it says, checked afterwards.
            Repair if old => Want::Any,
            Repair => Want::Refuse(None, vec![one(diriv_copy_name())]),
            _ => Want::Either(vec![one(diriv_copy_name())]),
        },
        Sidecar => {
            let side = one(t.rel(&long1()).file_name().unwrap().to_string_lossy());
            match op {
                Mount => Want::Works,
                Fsck | Repair => Want::Refuse(None, vec![side]),
                _ => Want::Either(vec![side]),
            }
        }
        Content => {
            let name = vec![
                VICTIM.to_string(),
                t.rel(VICTIM).file_name().unwrap().to_string_lossy().into_owned(),
            ];
            match op {
                Mount | Passwd => Want::Works,
                _ => Want::Either(vec![name]),
            }
        }
        Journal => match op {
            Passwd => Want::Either(vec![one(JOURNAL)]),
            _ => Want::Refuse(None, vec![one(JOURNAL)]),
        },
        Target::Undo => match op {
            // Refused whole (not a regular file with one link, or its tags
            // do not verify), or the file it names not restored (the block
            // holds other bytes since): nothing written, exit 20, named.
            Op::Undo => Want::Refuse(Some(20), vec![one(UNDO)]),
            // fsck reports what is not an undo file it wrote, and notes a
            // regular one (read only by --undo).
            Fsck | Repair if matches!(kind, Kind::OldCopy | Kind::Foreign) => Want::Works,
            Fsck | Repair => Want::Refuse(Some(20), vec![one(UNDO)]),
            _ => Want::Works,
        },
    }
}

/// Check `out` (with `extra`, e.g. the daemon's log, as part of its
/// output) against `want`. `Ok(true)`: it named the plant while refusing.
pub fn judge(want: &Want, out: &Out, extra: &str) -> Result<bool, String> {
    let text = format!("{}\n{}\n{extra}", out.stdout, out.stderr);
    let missing = |names: &[Name]| -> Vec<String> {
        names
            .iter()
            .filter(|alts| !alts.iter().any(|a| text.contains(a.as_str())))
            .map(|alts| alts.join(" or "))
            .collect()
    };
    let Some(code) = out.code else {
        return Err("killed by a signal (crashed, or stopped by the harness)".into());
    };
    match want {
        Want::Works if code == 0 => Ok(false),
        Want::Works => Err(format!("should work (exit 0) but exited {code}")),
        Want::Any => Ok(false),
        Want::Either(_) if code == 0 => Ok(false),
        Want::Refuse(_, _) if code == 0 => {
            Err("should refuse (non-zero exit) but exited 0: it trusted the planted object".into())
        }
        Want::Refuse(Some(c), _) if code != *c => Err(format!("should exit {c} but exited {code}")),
        Want::Refuse(_, names) | Want::Either(names) => {
            let m = missing(names);
            if m.is_empty() {
                Ok(!names.is_empty())
            } else {
                Err(format!(
                    "exited {code} without naming the planted file ({})",
                    m.join(", ")
                ))
            }
        }
    }
}

/// The findings of one test, or of one command of it (buffered, merged
/// into the test's in order).
pub struct Findings {
    title: String,
    tag: String,
    /// Lines not printed yet (a command's, run beside the others).
    buffer: Option<Vec<String>>,
    fails: Vec<String>,
    reached: Vec<String>,
}

/// The running test's name, to tell lines apart when tests run at once.
fn tag() -> String {
    std::thread::current().name().unwrap_or("?").to_string()
}

impl Findings {
    pub fn new(title: impl Into<String>) -> Findings {
        let title = title.into();
        let tag = tag();
        eprintln!("[{tag}] === {title}");
        Findings {
            title,
            tag,
            buffer: None,
            fails: Vec::new(),
            reached: Vec::new(),
        }
    }

    /// Findings of one command of this test, kept until [`Findings::absorb`].
    pub fn part(&self) -> Findings {
        Findings {
            title: self.title.clone(),
            tag: self.tag.clone(),
            buffer: Some(Vec::new()),
            fails: Vec::new(),
            reached: Vec::new(),
        }
    }

    fn line(&mut self, l: String) {
        let l = format!("[{}]   {l}", self.tag);
        match &mut self.buffer {
            Some(b) => b.push(l),
            None => eprintln!("{l}"),
        }
    }

    /// Print a part's lines and take its findings.
    pub fn absorb(&mut self, part: Findings) {
        for l in part.buffer.unwrap_or_default() {
            eprintln!("{l}");
        }
        self.fails.extend(part.fails);
        self.reached.extend(part.reached);
    }

    /// A broken expectation.
    pub fn fail(&mut self, what: impl Into<String>) {
        let w = what.into();
        self.line(format!("FAIL {w}"));
        self.fails.push(w);
    }

    /// A kept one (printed, for the log).
    pub fn pass(&mut self, what: impl Into<String>) {
        self.line(format!("ok   {}", what.into()));
    }

    /// Evidence that the planted object was looked at.
    pub fn reached(&mut self, how: impl Into<String>) {
        let h = how.into();
        self.line(format!("seen {h}"));
        self.reached.push(h);
    }

    /// Panic with every finding, if any; also when nothing showed that the
    /// plant was looked at (unless `reach_optional`).
    pub fn finish(mut self, reach_optional: bool) {
        // (A cell that already failed needs no proof that it is not vacuous.)
        if self.reached.is_empty() && !reach_optional && self.fails.is_empty() {
            self.fails.push(
                "nothing showed that the planted object was ever looked at (no output naming it, no effect on the mount): the test proves nothing"
                    .into(),
            );
        }
        if !self.fails.is_empty() {
            let list: Vec<String> = self.fails.iter().map(|f| format!("  - {f}")).collect();
            panic!("{}: {} failure(s):\n{}", self.title, self.fails.len(), list.join("\n"));
        }
    }
}
