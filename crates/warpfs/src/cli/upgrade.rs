//! `warpfs upgrade`: turn file summaries (FORMAT.md 12) on for an
//! unmounted volume of an authenticated mode made without them, in place
//! (FORMAT.md 12.6, decision record 0100). The config marks the upgrade
//! under way (flag `summary-upgrade`) before any file changes, each file
//! gets its record and then its new header version, and one last config
//! write sets `file-summary`. Killed at any point, a rerun finishes; until
//! then mount, fsck and rekey refuse the volume (exit 18).

use super::exit::{CliError, ERROR};
use super::PassArgs;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use warpfs_config::{Config, UpgradeStage};
use warpfs_volume::upgrade::{self, Event, Progress};

/// Arguments of `warpfs upgrade`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Each file gets its summary beside its nonce entries (FORMAT.md 12.6); no block is re-encrypted. \
Afterwards a block rolled back or mixed in from another version of a file reads as an error and \
warpfs fsck reports it. Killed at any point, run it again to finish; until then mount, fsck and \
rekey refuse the volume (exit 18). On a mounted volume the mount gives its files their \
summaries while it serves (new files get one at once), and this command follows it. Refused, \
nothing written (exit 1): ctr and xts modes (no authentication to build on), gcm over Twofish, \
a volume that has summaries already, one mid-rekey, one mounted read-only.")]
pub struct UpgradeArgs {
    #[command(flatten)]
    pass: PassArgs,
    #[command(flatten)]
    tpm2: super::tpm2::UnlockArgs,
    #[command(flatten)]
    fido2: super::fido2::Fido2Args,
    #[command(flatten)]
    config: super::ConfigArg,
    /// A reverse view: CIPHERDIR is its PLAINDIR. Its config is replaced
    /// by one with file summaries and a new master key (the old one kept
    /// hidden beside it), so every byte of the view changes once and the
    /// next backup copies everything; copies made from then on detect
    /// rolled-back or mixed blocks. A mounted view changes when mounted
    /// again.
    #[arg(long)]
    reverse: bool,
    /// With --reverse: print no master key.
    #[arg(long, requires = "reverse")]
    quiet: bool,
    /// The volume's cipher directory (mounted or not).
    cipherdir: PathBuf,
}

/// How the config is written again: with the password, or (a keyslot
/// config opened by a TPM2 or FIDO2 slot, which has none) as opened.
enum Access {
    Secret(super::password::Password),
    Opened(warpfs_config::Opened),
}

impl Access {
    fn write(&self, cfg: &Config, path: &Path, stage: UpgradeStage) -> Result<Config, CliError> {
        Ok(match self {
            Access::Secret(pw) => cfg.set_summary_upgrade_at(path, pw.bytes(), stage)?,
            Access::Opened(o) => cfg.set_summary_upgrade_opened_at(path, o, stage)?,
        })
    }
}

fn bar() -> ProgressBar {
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("upgrade {bar:40} {pos}/{len} files eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Refuse, before any password is asked, a volume that cannot be given
/// summaries (exit 1).
fn refused(cfg: &Config, cipherdir: &Path) -> Result<(), CliError> {
    if cfg.summary_upgrade_under_way() {
        return Ok(());
    }
    match cfg.summary_upgrade_refused() {
        Some(why) => Err(CliError::new(ERROR, format!("{}: {why}", cipherdir.display()))),
        None => Ok(()),
    }
}

pub fn run(a: UpgradeArgs) -> Result<(), CliError> {
    if a.reverse {
        return super::reverse::upgrade(&a.pass, &a.cipherdir, a.config.config.as_deref(), a.quiet);
    }
    let conf = a.config.path(&a.cipherdir);
    let cfg = super::unlock::load_main(&a.cipherdir, &a.config)?;
    refused(&cfg, &a.cipherdir)?;
    // Mounted: the mount converts its files while it serves (it holds the
    // volume's lock); else this process does, holding the lock.
    let mnt = super::rekey_online::mount_to_change(&a.cipherdir, "upgrade")?;
    if let Some(at) = &mnt {
        // A daemon of an older warpfs cannot: say so before the config
        // changes.
        super::rekey_online::require_cap(&a.cipherdir, at, crate::fuse::CAP_UPGRADE, "give its files summaries")?;
    }
    let _lock = match mnt {
        Some(_) => None,
        None => Some(super::lock::lock_for_rekey(&a.cipherdir)?),
    };
    let hw = (&a.tpm2, &a.fido2);
    let (cfg, opened, given) =
        super::unlock::open_given(&a.cipherdir, &a.config, cfg, hw, &a.pass.source(), false, None)?;
    // What the password opened is authenticated: look again.
    refused(&cfg, &a.cipherdir)?;
    let master = opened.key.clone();
    let access = match given {
        super::unlock::Given::Secret(pw) => Access::Secret(pw),
        _ => Access::Opened(opened),
    };
    let resuming = cfg.summary_upgrade_under_way();
    if resuming {
        eprintln!("warpfs: resuming the unfinished upgrade to file summaries");
    }
    if let Some(mnt) = mnt {
        return online(&a.cipherdir, &mnt, &conf, cfg, access, master, resuming);
    }
    let mut cfg = Some(cfg);
    let start = || -> Result<(), String> {
        if !resuming {
            let c = cfg.take().expect("the config");
            cfg = Some(access.write(&c, &conf, UpgradeStage::Start).map_err(|e| e.msg)?);
            kill_point("config:0");
        }
        Ok(())
    };
    let progress = Progress::default();
    let done = AtomicBool::new(false);
    let began = Instant::now();
    let r = std::thread::scope(|sc| {
        let worker = sc.spawn(|| {
            let r = upgrade::run(&a.cipherdir, &master, kill_hook(), &progress, start);
            done.store(true, Ordering::Release);
            r
        });
        let bar = bar();
        while !done.load(Ordering::Acquire) {
            bar.set_length(progress.files_total.load(Ordering::Relaxed));
            bar.set_position(progress.files_done.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
        worker
            .join()
            .unwrap_or_else(|_| Err("the upgrade worker panicked".into()))
    });
    drop(master);
    let under_way = Config::load_file(&conf).is_ok_and(|c| c.summary_upgrade_under_way());
    let report = r.map_err(|m| {
        let then = if under_way {
            "warpfs: upgrade stopped; files done keep their summary; run warpfs upgrade again to finish (until then the volume does not mount)"
        } else {
            "warpfs: nothing was changed"
        };
        CliError::new(ERROR, format!("{m}\n{then}"))
    })?;
    // The config as this run wrote it (or, resuming, as it unlocked): never
    // one read back from disk, which someone may have edited meanwhile.
    let cfg = cfg.take().expect("the config");
    access.write(&cfg, &conf, UpgradeStage::Finish)?;
    for (p, why) in &report.left {
        eprintln!(
            "warpfs: {}: left without a file summary ({why}); it was unreadable before and stays so; warpfs fsck reports it",
            p.display()
        );
    }
    println!(
        "upgraded {} of {} files in {:.2} s: file summaries are on; rolled-back or mixed blocks are now detected",
        report.converted,
        progress.files_total.load(Ordering::Relaxed),
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The volume is mounted at `mnt`: the config marks the upgrade under way,
/// the mount gives every file its summary while it serves (new files get
/// one from then on), this process follows it and marks the config done.
/// Stopped part way (the mount ended), the volume does not mount until an
/// unmounted `warpfs upgrade` finishes, as after a crash of one.
#[allow(clippy::too_many_arguments)]
fn online(
    cipherdir: &Path,
    mnt: &Path,
    conf: &Path,
    cfg: Config,
    access: Access,
    master: warpfs_crypto::MasterKey,
    resuming: bool,
) -> Result<(), CliError> {
    use super::rekey_online::{follow, refusal, send, Stopped};
    let control = warpfs_crypto::ControlKey::derive(&master);
    drop(master);
    let cfg = if resuming {
        cfg
    } else {
        access.write(&cfg, conf, UpgradeStage::Start)?
    };
    let again = "the volume does not mount until `warpfs upgrade` finishes it unmounted";
    if let Err(e) = send(mnt, &control, &warpfs_volume::rekey::Request::Upgrade) {
        return Err(CliError::new(
            ERROR,
            format!(
                "{}: the mount refused the upgrade: {}\nwarpfs: unmount it and run warpfs upgrade again ({again})",
                mnt.display(),
                refusal(mnt, &e)
            ),
        ));
    }
    eprintln!(
        "warpfs: {} is mounted at {}: the mount gives its files their summaries while it serves",
        cipherdir.display(),
        mnt.display()
    );
    let bar = bar();
    let last = follow(mnt, &bar).map_err(|stop| {
        let why = match stop {
            Stopped::Gone => "the mount's status is gone (the mount ended?)".to_string(),
            Stopped::Ended(state, why) => format!("the mount's upgrade {state}: {why}"),
        };
        CliError::new(
            ERROR,
            format!("{why}\nwarpfs: files done keep their summary; run warpfs upgrade again to finish ({again})"),
        )
    })?;
    bar.finish_and_clear();
    access.write(&cfg, conf, UpgradeStage::Finish)?;
    let n = |k: &str| last[k].as_u64().unwrap_or(0);
    println!(
        "upgraded {} of {} files while mounted in {:.2} s: file summaries are on; rolled-back or mixed blocks are now detected",
        n("files_converted"),
        n("files_total"),
        last["seconds"].as_f64().unwrap_or(0.0)
    );
    Ok(())
}

fn die() {
    // SAFETY: kill and getpid have no preconditions.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

/// Crash-test hook: `WARPFS_UPGRADE_KILL=EVENT:N` SIGKILLs `warpfs
/// upgrade` at the Nth EVENT: `record` (a file's record is durable, its
/// header not changed yet) or `file` (a file has its summary).
/// `config:0` stops it right after the config marks the upgrade under way.
pub(super) fn kill_hook() -> Option<upgrade::Hook> {
    let v = std::env::var("WARPFS_UPGRADE_KILL").ok()?;
    let (ev, n) = v.split_once(':')?;
    let n: u64 = n.parse().ok()?;
    let want = match ev {
        "record" => Event::Record,
        "file" => Event::File,
        _ => return None,
    };
    let seen = AtomicU64::new(0);
    Some(Arc::new(move |e| {
        if e == want && seen.fetch_add(1, Ordering::SeqCst) + 1 == n {
            die();
        }
    }))
}

/// The crash-test stop at `point` (`WARPFS_UPGRADE_KILL=config:0`).
fn kill_point(point: &str) {
    if std::env::var("WARPFS_UPGRADE_KILL").as_deref() == Ok(point) {
        die();
    }
}
