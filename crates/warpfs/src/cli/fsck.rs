//! `warpfs fsck`: check an unmounted volume and report every problem by
//! plaintext path and block; repair only what the options ask for; put
//! back what `--zero-bad-blocks` changed (`--undo`). Exit codes: 0 clean
//! (or everything put back), 20 problems found (or not everything put
//! back), 21 every problem found was repaired, 22 refused because the
//! volume is mounted; 10/11 wrong password / bad config as everywhere.

use super::exit::{CliError, ERROR, FSCK_MOUNTED, FSCK_PROBLEMS, FSCK_REPAIRED};
use super::PassArgs;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use warpfs_volume::fsck::{self, Repairs};
use warpfs_volume::{Options, Volume};

/// Arguments of `warpfs fsck`.
#[derive(Args, Debug)]
pub struct FsckArgs {
    /// Password source.
    #[command(flatten)]
    pass: PassArgs,
    #[command(flatten)]
    tpm2: super::tpm2::UnlockArgs,
    #[command(flatten)]
    fido2: super::fido2::Fido2Args,
    /// Make blocks that cannot be read under any key generation of the
    /// volume (bad GCM tag, corrupt nonce entry) holes that read as zeros,
    /// saving what it changes to an undo file first (--undo puts it back).
    /// Not part of --repair.
    #[arg(long)]
    zero_bad_blocks: bool,
    /// With --zero-bad-blocks: write the undo file to PATH (a new file)
    /// instead of CIPHERDIR/warpfs.fsck.undo-N.
    #[arg(long, value_name = "PATH", requires = "zero_bad_blocks")]
    undo_file: Option<PathBuf>,
    /// Put back what an earlier --zero-bad-blocks changed, from its undo
    /// file (default: the newest CIPHERDIR/warpfs.fsck.undo-N); a file only
    /// if it is still the same file and still holds what fsck wrote.
    /// Checks and repairs nothing else. UNDOFILE goes after `=`
    /// (--undo=FILE).
    #[arg(
        long,
        value_name = "UNDOFILE",
        num_args = 0..=1,
        require_equals = true,
        conflicts_with_all = ["zero_bad_blocks", "remove_orphan_sidecars", "fix_torn_tails", "apply_old_journals", "discard_journals", "repair"]
    )]
    undo: Option<Option<PathBuf>>,
    /// Delete long-name sidecars whose entry is gone.
    #[arg(long)]
    remove_orphan_sidecars: bool,
    /// Cut cipher files that end inside a nonce page (a crash while
    /// extending) back to their readable size.
    #[arg(long)]
    fix_torn_tails: bool,
    /// Apply rekey undo journals written by an earlier warpfs, which have no
    /// MAC (only when a rekey by that warpfs was interrupted); still only to
    /// files beneath CIPHERDIR reached without a symlink.
    #[arg(long)]
    apply_old_journals: bool,
    /// Delete rekey undo journals that are refused (forged, damaged, aimed
    /// outside CIPHERDIR, of another rekey, replayed or out of sequence) or
    /// of an earlier warpfs and not applied, without applying them.
    #[arg(long)]
    discard_journals: bool,
    /// Every repair that loses no data: --remove-orphan-sidecars,
    /// --fix-torn-tails, applying the undo journals of an interrupted
    /// rekey (removing torn ones), and merging a directory whose IV file a
    /// sync tool copied into one IV where every entry it would move is
    /// proven to have been made there (FORMAT.md 13.2).
    #[arg(long)]
    repair: bool,
    /// Check even though the volume looks mounted (results may be wrong;
    /// repairs may race with the mount).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
}

pub fn run(a: FsckArgs) -> Result<(), CliError> {
    if let Some(mnt) = super::mounted::mounted_at(&a.cipherdir) {
        if !a.force {
            return Err(CliError::new(
                FSCK_MOUNTED,
                format!(
                    "{} is mounted at {mnt}: unmount it first (or --force)",
                    a.cipherdir.display()
                ),
            ));
        }
        eprintln!(
            "warpfs: warning: {} is mounted at {mnt}; checking anyway (--force)",
            a.cipherdir.display()
        );
    }
    // A mount holds a shared lock on CIPHERDIR (and a rekey an exclusive
    // one): this finds a mount under another fsname too.
    let _lock = if a.force {
        None
    } else {
        match super::lock::lock_exclusive(&a.cipherdir) {
            Ok(l) => Some(l),
            // Read-only media, or a lock file the door refused: checking
            // needs no lock (repairs are still refused while mounted).
            Err(e) => {
                eprintln!("warpfs: warning: cannot lock CIPHERDIR: {e}; checking without the lock");
                None
            }
        }
    };
    if matches!(_lock, Some(None)) {
        return Err(CliError::new(
            FSCK_MOUNTED,
            format!(
                "{} is in use (mounted, or a rekey is running): unmount it first (or --force)",
                a.cipherdir.display()
            ),
        ));
    }
    let cfg = super::unlock::load_main(&a.cipherdir, &a.config)?;
    super::unlock::usable(&cfg, &a.cipherdir)?;
    super::unlock::not_mid_upgrade(&cfg, &a.cipherdir)?;
    let hw = (&a.tpm2, &a.fido2);
    let (cfg, opened, pw) = super::unlock::open_given(&a.cipherdir, &a.config, cfg, hw, &a.pass.source(), false, None)?;
    let master = opened.key;
    drop(pw);
    println!("config: ok ({})", a.cipherdir.display());
    let vol = Volume::open(&a.cipherdir, &cfg, &master, Options { read_only: true })
        .map_err(|e| CliError::new(FSCK_PROBLEMS, format!("cannot check the volume: {e}")))?;
    drop(master);
    if let Some(u) = &a.undo {
        return undo(&vol, u.as_deref());
    }
    let repairs = Repairs {
        zero_bad_blocks: a.zero_bad_blocks,
        remove_orphan_sidecars: a.remove_orphan_sidecars || a.repair,
        fix_torn_tails: a.fix_torn_tails || a.repair,
        merge_dir_ivs: a.repair,
    };
    let bar = if std::io::stderr().is_terminal() {
        let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template("{spinner} checking {bytes}/{total_bytes} [{bar:40}] {eta}")
                .map_err(|e| CliError::new(ERROR, e.to_string()))?
                .progress_chars("=> "),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    // Undo journals of an interrupted rekey (FORMAT.md 10.3): an
    // authenticated one puts back the old bytes of the segment it
    // protects, losing nothing; any other is never applied on its own.
    let (extra, extra_fixed) = journals(&vol, &a)?;
    let opts = fsck::Options {
        repairs,
        undo_to: a.undo_file.clone().map_or(fsck::UndoTo::Cipherdir, fsck::UndoTo::Path),
        ..Default::default()
    };
    let report = fsck::check(&vol, opts, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    for f in &report.findings {
        println!("problem: {f}");
    }
    for n in &report.notes {
        println!("note: {n}");
    }
    if let Some((p, n)) = &report.undo {
        println!(
            "note: what the {n} zeroed block(s) held is saved in {}: warpfs fsck --undo={} {} puts it back",
            p.display(),
            p.display(),
            a.cipherdir.display()
        );
    }
    println!(
        "fsck: {} directories, {} files, {} symlinks, {} blocks ({} written, nonces checked); {} problems, {} repaired",
        report.dirs,
        report.files,
        report.symlinks,
        report.blocks,
        report.written,
        report.findings.len() + extra,
        report.repaired() + extra_fixed
    );
    let (found, fixed) = (report.findings.len() + extra, report.repaired() + extra_fixed);
    if found == 0 {
        println!("fsck: clean");
        Ok(())
    } else if found == fixed {
        Err(CliError::new(FSCK_REPAIRED, "every problem found was repaired"))
    } else {
        Err(CliError::new(
            FSCK_PROBLEMS,
            format!("{found} problem(s) found, {} not repaired", found - fixed),
        ))
    }
}

/// `fsck --undo`: put back what `--zero-bad-blocks` changed, from the
/// undo file `path` (or the newest in CIPHERDIR). Exit 0 when every file
/// was put back, 20 when the undo file is refused or a file was not.
fn undo(vol: &Volume, path: Option<&Path>) -> Result<(), CliError> {
    let r = fsck::restore(vol, path).map_err(|e| {
        let code = match e {
            fsck::UndoError::Refused(_) => FSCK_PROBLEMS,
            fsck::UndoError::NotFound(_) | fsck::UndoError::Io(_) => ERROR,
        };
        CliError::new(code, e.to_string())
    })?;
    let mut blocks = 0;
    for (f, res) in &r.files {
        match res {
            Ok(n) => {
                blocks += n;
                println!("restored: {f}: {n} block(s) put back");
            }
            Err(why) => println!("problem: {f}: not restored: {why}"),
        }
    }
    let bad = r.files.iter().filter(|(_, x)| x.is_err()).count();
    if bad == 0 {
        println!(
            "fsck: put back {blocks} block(s) of {} file(s) from {}; the undo file is removed",
            r.files.len(),
            r.path.display()
        );
        Ok(())
    } else {
        Err(CliError::new(
            FSCK_PROBLEMS,
            format!(
                "{bad} of {} file(s) not restored (nothing written to them); {} is kept",
                r.files.len(),
                r.path.display()
            ),
        ))
    }
}

/// Report every non-empty undo journal as a problem and settle what the
/// options ask for: (problems, repaired).
fn journals(vol: &Volume, a: &FsckArgs) -> Result<(usize, usize), CliError> {
    use warpfs_volume::rekey::{self, Decisions};
    let count = |v: &[rekey::Found]| v.iter().filter(|f| f.state != rekey::State::Empty).count();
    let found = rekey::inspect(vol).map_err(|e| CliError::new(ERROR, e))?;
    let d = Decisions {
        apply: a.repair,
        apply_unauthenticated: a.apply_old_journals,
        discard: a.discard_journals,
    };
    if !(d.apply || d.apply_unauthenticated || d.discard) {
        for f in &found {
            if let Some(m) = f.describe() {
                println!("problem: {m}");
            }
        }
        return Ok((count(&found), 0));
    }
    let r = rekey::recover(vol, d).map_err(|e| CliError::new(ERROR, e))?;
    let after = rekey::inspect(vol).map_err(|e| CliError::new(ERROR, e))?;
    let still: Vec<&std::path::Path> = after
        .iter()
        .filter(|f| f.state != rekey::State::Empty)
        .map(|f| f.path.as_path())
        .collect();
    for f in &found {
        if let Some(m) = f.describe() {
            let done = if still.contains(&f.path.as_path()) {
                ""
            } else {
                ": repaired"
            };
            println!("problem: {m}{done}");
        }
    }
    if r.restored > 0 {
        println!(
            "note: put back {} segment(s) an interrupted rekey was moving",
            r.restored
        );
    }
    for (p, why) in &r.discarded {
        println!("note: {}: removed without applying it ({why})", p.display());
    }
    Ok((count(&found), count(&found).saturating_sub(still.len())))
}
