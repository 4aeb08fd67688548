//! fsck's findings: one [`Finding`] per problem, named by plaintext path
//! (and block), with what was done about it; the [`Report`] of a run.

use warpfs_content::scan::Problem as FileProblem;

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A directory's `warpfs.diriv` is missing or corrupt: its names cannot
    /// be decoded.
    DirIv(String),
    /// A backing name that does not decode (bad base64, failed SIV tag, a
    /// long-name sidecar that is missing or does not match).
    Name(String),
    /// A long-name sidecar whose entry is gone (harmless leftover).
    OrphanSidecar,
    /// A sync tool made copies of the directory's `warpfs.diriv` (their
    /// file names): the directory has names under more than one IV.
    DirIvCopies(Vec<String>),
    /// A copy of the directory's `warpfs.diriv` that `--repair` does not
    /// merge (FORMAT.md 13.2): entries only its IV decrypts carry no proof
    /// that they were made in this directory, or another directory holds
    /// the same IV (a copy of that directory's IV, its entries moved here).
    DirIvCopyUnproven {
        /// The copy's file names (all holding one IV).
        copies: Vec<String>,
        /// The entries without proof: shown name and what it is.
        entries: Vec<String>,
        /// Backing path of another directory holding the same IV.
        elsewhere: Option<String>,
    },
    /// A sync tool's copy of `warpfs.conf` (it unlocks with the password
    /// it was written for).
    ConfigCopy,
    /// A symlink whose sealed target does not open.
    Symlink,
    /// A cipher-file problem found by the content scan.
    File(FileProblem),
    /// The block's nonce was already used by a block of another file.
    NonceAcrossFiles {
        /// This file's block.
        block: u64,
        /// Plaintext path of the other file.
        other: String,
        /// Its block.
        other_block: u64,
    },
    /// A backing entry that could not be read at all.
    Io(String),
    /// An entry at an undo file name (FORMAT.md 6b) that is not a regular
    /// file with one link (why): not an undo file fsck wrote, never read.
    UndoFile(String),
}

/// What fsck did about a finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fix {
    /// No safe repair exists (the finding is only reported).
    None,
    /// A repair exists but its option was not given (the option's name).
    NotAsked(&'static str),
    /// Repaired (how).
    Done(&'static str),
    /// The repair failed (why).
    Failed(String),
}

/// One problem.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Plaintext path from the volume root (`/dir/file`); an undecodable
    /// component shows as `?<backing name>`.
    pub path: String,
    /// Backing path relative to CIPHERDIR.
    pub backing: std::path::PathBuf,
    /// The problem.
    pub kind: Kind,
    /// What was done.
    pub fix: Fix,
}

impl Finding {
    /// The block the finding is about, if any.
    pub fn block(&self) -> Option<u64> {
        match &self.kind {
            Kind::File(p) => p.block(),
            Kind::NonceAcrossFiles { block, .. } => Some(*block),
            _ => None,
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: ", self.path)?;
        match &self.kind {
            Kind::DirIv(w) => write!(f, "directory IV: {w}")?,
            Kind::Name(w) => write!(f, "undecodable name {}: {w}", self.backing.display())?,
            Kind::OrphanSidecar => write!(f, "orphan long-name sidecar {}", self.backing.display())?,
            Kind::DirIvCopies(c) => write!(
                f,
                "directory IV copied by a sync tool ({}): names under {} IVs",
                c.join(", "),
                c.len() + 1
            )?,
            Kind::DirIvCopyUnproven {
                copies,
                entries,
                elsewhere,
            } => {
                write!(f, "copy of the directory IV ({}) not merged: ", copies.join(", "))?;
                if let Some(d) = elsewhere {
                    write!(
                        f,
                        "its IV is also the IV of backing directory {d:?}, so the entries only it \
                         decrypts may have been moved here from there; "
                    )?;
                }
                if !entries.is_empty() {
                    write!(
                        f,
                        "{} entr{} only it decrypts carry no proof of being made in this directory \
                         (only a bound symlink's seal names its directory): {}; ",
                        entries.len(),
                        if entries.len() == 1 { "y" } else { "ies" },
                        entries.join(", ")
                    )?;
                }
                write!(
                    f,
                    "they are shown under the copy's marker: check each, rename those you keep \
                     through a mount (the rename encrypts the name under warpfs.diriv) and delete \
                     the rest; then `warpfs fsck --repair` removes the copy"
                )?
            }
            Kind::ConfigCopy => write!(
                f,
                "conflicting copy of the config {}: it unlocks with the password it was written for, \
                 and is never used unasked; keep it (warpfs passwd --from-copy) or delete it",
                self.backing.display()
            )?,
            Kind::Symlink => write!(f, "symlink target does not decrypt")?,
            Kind::File(p) => write!(f, "{p}")?,
            Kind::NonceAcrossFiles {
                block,
                other,
                other_block,
            } => write!(f, "block {block}: nonce repeats the one of {other} block {other_block}")?,
            Kind::Io(w) => write!(f, "unreadable: {w}")?,
            Kind::UndoFile(w) => write!(
                f,
                "{} is not an undo file fsck wrote ({w}): nothing is read from it and fsck --undo refuses it; delete it",
                self.backing.display()
            )?,
        }
        match &self.fix {
            Fix::None => Ok(()),
            Fix::NotAsked(opt) => write!(f, " [repairable with {opt}]"),
            Fix::Done(how) => write!(f, " [repaired: {how}]"),
            Fix::Failed(why) => write!(f, " [repair failed: {why}]"),
        }
    }
}

/// Totals and findings of one fsck run.
#[derive(Debug, Default)]
pub struct Report {
    /// Directories walked.
    pub dirs: u64,
    /// Regular files scanned (hard links once).
    pub files: u64,
    /// Symlinks checked.
    pub symlinks: u64,
    /// Blocks checked.
    pub blocks: u64,
    /// Of them, written blocks (nonces checked).
    pub written: u64,
    /// Every problem, in walk order.
    pub findings: Vec<Finding>,
    /// Notes that are not problems (caps hit).
    pub notes: Vec<String>,
    /// The undo file this run wrote (FORMAT.md 6b) and the blocks it
    /// saved, when it zeroed any.
    pub undo: Option<(std::path::PathBuf, u64)>,
}

impl Report {
    /// No problem found.
    pub fn clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// Every finding was repaired.
    pub fn all_repaired(&self) -> bool {
        !self.findings.is_empty() && self.findings.iter().all(|f| matches!(f.fix, Fix::Done(_)))
    }

    /// Findings repaired.
    pub fn repaired(&self) -> usize {
        self.findings.iter().filter(|f| matches!(f.fix, Fix::Done(_))).count()
    }
}
