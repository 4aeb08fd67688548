//! `warpfs rekey`: move every file to a new content key generation in place
//! (FORMAT.md 10). On an unmounted volume this process does the work; on a
//! mounted one it asks the mount daemon to, so reads and writes go on, and
//! follows its progress. Crash-safe and resumable either way: the config
//! records the target first, every segment moves under an undo journal,
//! and a rerun finishes what a killed run left. `--new-volume-key` draws a
//! new volume key instead (`volkey.rs`; on a mounted volume the daemon
//! moves the content while it serves and the names while requests wait),
//! and a rerun finishes that too.

use super::exit::{CliError, ERROR};
use super::rekey_online::{follow, refusal, send, Stopped};
use super::PassArgs;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use warpfs_config::Config;
use warpfs_crypto::{ControlKey, MasterKey};
use warpfs_volume::rekey::{self, Progress, RekeyOptions, Request};
use warpfs_volume::{Options, Volume};

/// Arguments of `warpfs rekey`.
#[derive(Args, Debug)]
pub struct RekeyArgs {
    #[command(flatten)]
    pass: PassArgs,
    #[command(flatten)]
    tpm2: super::tpm2::UnlockArgs,
    #[command(flatten)]
    fido2: super::fido2::Fido2Args,
    /// Files re-encrypted at once (default: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Re-encrypt at most this many MB (10^6 bytes) per second, so that a
    /// mounted volume keeps serving other work at speed.
    #[arg(long, value_name = "MB_PER_S")]
    max_rate: Option<f64>,
    /// Draw a new volume key and re-encrypt every file, name, directory IV,
    /// symlink target and xattr under it (on a mounted volume, the mount
    /// does it: requests wait while the names move): a copy of the
    /// config from before, opened with any secret, no longer decrypts the
    /// volume. Every backing name changes. Keyslots whose secret is not
    /// given are dropped (see --keep).
    #[arg(long)]
    new_volume_key: bool,
    #[command(flatten)]
    keep: super::volkey::KeepArgs,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory (mounted or not).
    cipherdir: PathBuf,
}

/// What [`begin`] gives: the config (recording the target), how it is
/// written again, the master key and the target generation.
type Begun = (Config, Access, MasterKey, u32);

/// How a content rekey writes the config again: with the password, or (a
/// keyslot config opened by a TPM2 slot, which has none) as opened.
enum Access {
    Secret(super::password::Password),
    Opened(warpfs_config::Opened),
}

impl Access {
    fn set_generations_at(&self, cfg: &Config, path: &Path, g: u32, t: Option<u32>) -> Result<Config, CliError> {
        Ok(match self {
            Access::Secret(pw) => cfg.set_generations_at(path, pw.bytes(), g, t)?,
            Access::Opened(o) => cfg.set_generations_opened_at(path, o, g, t)?,
        })
    }

    fn add_rekey_id_at(&self, cfg: &Config, path: &Path) -> Result<Config, CliError> {
        Ok(match self {
            Access::Secret(pw) => cfg.add_rekey_id_at(path, pw.bytes())?,
            Access::Opened(o) => cfg.add_rekey_id_opened_at(path, o)?,
        })
    }
}

/// Unlock the config and make sure it records a rekey target (writing it,
/// with a fresh rekey ID, when absent).
fn begin(a: &RekeyArgs) -> Result<Begun, CliError> {
    let conf = a.config.path(&a.cipherdir);
    let cfg = super::unlock::load_main(&a.cipherdir, &a.config)?;
    let hw = (&a.tpm2, &a.fido2);
    let (mut cfg, opened, given) =
        super::unlock::open_given(&a.cipherdir, &a.config, cfg, hw, &a.pass.source(), false, None)?;
    let master = opened.key.clone();
    let pw = match given {
        super::unlock::Given::Secret(pw) => Access::Secret(pw),
        _ => Access::Opened(opened),
    };
    let from = cfg.key_generation();
    let target = match cfg.rekey_target() {
        Some(t) => {
            eprintln!("warpfs: resuming the unfinished rekey to key generation {t}");
            t
        }
        None => {
            let t = from
                .checked_add(1)
                .ok_or_else(|| CliError::new(ERROR, "key generation limit reached"))?;
            cfg = pw.set_generations_at(&cfg, &conf, from, Some(t))?;
            t
        }
    };
    super::rekey_crash::kill_point("config:0");
    Ok((cfg, pw, master, target))
}

fn bar(total: u64) -> ProgressBar {
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("rekey {bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

fn jobs(a: &RekeyArgs) -> usize {
    a.jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
        .clamp(1, 256)
}

fn max_rate(a: &RekeyArgs) -> Result<Option<u64>, CliError> {
    match a.max_rate {
        None => Ok(None),
        Some(r) if r.is_finite() && r > 0.0 => Ok(Some((r * 1e6) as u64)),
        Some(_) => Err(CliError::new(
            super::exit::USAGE,
            "--max-rate must be a positive number",
        )),
    }
}

fn summary(moved: u64, files: u64, bytes: u64, target: u32, secs: f64, jobs: usize, how: &str) {
    let secs = secs.max(1e-9);
    println!(
        "rekeyed {moved} of {files} files ({:.1} MiB) to key generation {target} in {secs:.2} s: {:.1} MB/s ({jobs} jobs, {how})",
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / 1e6 / secs
    );
}

pub fn run(a: RekeyArgs) -> Result<(), CliError> {
    let k = &a.keep;
    if !a.new_volume_key && (!k.keep.is_empty() || k.new_recovery || k.yes) {
        return Err(CliError::new(
            super::exit::USAGE,
            "--keep, --new-recovery and --yes go with --new-volume-key",
        ));
    }
    let conf = a.config.path(&a.cipherdir);
    let cfg = Config::load_file(&conf)?;
    super::unlock::not_mid_upgrade(&cfg, &a.cipherdir)?;
    if a.new_volume_key || cfg.volume_rekey_under_way() {
        return volume_key(&a, &conf, cfg);
    }
    match super::rekey_online::mount_to_rekey(&a.cipherdir)? {
        Some(m) => online(&a, &m),
        None => offline(&a),
    }
}

/// `--new-volume-key`, or finishing one an earlier run left.
fn volume_key(a: &RekeyArgs, conf: &Path, cfg: Config) -> Result<(), CliError> {
    let run = super::volkey::RunArgs {
        jobs: jobs(a),
        max_rate: max_rate(a)?,
    };
    let hw = (&a.tpm2, &a.fido2);
    let (cfg, opened, given) =
        super::unlock::open_given(&a.cipherdir, &a.config, cfg, hw, &a.pass.source(), false, None)?;
    if cfg.volume_rekey_under_way() {
        return super::volkey::resume(&a.cipherdir, conf, &cfg, &opened, &run);
    }
    super::volkey::start(&a.cipherdir, conf, cfg, &given, opened, None, &a.keep, &run)
}

/// The volume is not mounted: this process moves every file.
fn offline(a: &RekeyArgs) -> Result<(), CliError> {
    let _lock = super::lock::lock_for_rekey(&a.cipherdir)?;
    let rate = max_rate(a)?;
    let (mut cfg, pw, master, target) = begin(a)?;
    let vol = Volume::open(&a.cipherdir, &cfg, &master, Options::default())
        .map_err(|m| CliError::new(super::exit::BAD_CONFIG, m))?;
    super::rekey_crash::recover_or_stop(&vol, &a.cipherdir, ERROR)?;
    if cfg.rekey_id().is_none() {
        // A rekey an earlier warpfs started: its journals (all applied by
        // now) had no rekey ID; from here on its records carry one.
        cfg = pw.add_rekey_id_at(&cfg, &a.config.path(&a.cipherdir))?;
        vol.set_rekey_id(cfg.rekey_id());
    }
    let jobs = jobs(a);
    let opts = RekeyOptions {
        jobs,
        max_rate: rate,
        on_event: super::rekey_crash::kill_hook(),
        rekey_id: None,
    };
    let (progress, stop, done) = (Progress::default(), AtomicBool::new(false), AtomicBool::new(false));
    let start = Instant::now();
    let r = std::thread::scope(|sc| {
        let worker = sc.spawn(|| {
            let r = rekey::run(&vol, &opts, &progress, &stop);
            done.store(true, Ordering::Release);
            r
        });
        let bar = bar(0);
        while !done.load(Ordering::Acquire) {
            bar.set_length(progress.bytes_total.load(Ordering::Relaxed));
            bar.set_position(progress.bytes_done.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
        worker
            .join()
            .unwrap_or_else(|_| Err("the rekey worker panicked".into()))
    });
    r.map_err(|m| {
        CliError::new(
            ERROR,
            format!("{m}\nwarpfs: rekey stopped; what was moved keeps its new key; run it again to finish"),
        )
    })?;
    drop(vol);
    pw.set_generations_at(&cfg, &a.config.path(&a.cipherdir), target, None)?;
    report_unreadable(progress.unreadable.load(Ordering::Relaxed));
    summary(
        progress.files_moved.load(Ordering::Relaxed),
        progress.files_total.load(Ordering::Relaxed),
        progress.bytes_done.load(Ordering::Relaxed),
        target,
        start.elapsed().as_secs_f64(),
        jobs,
        "offline",
    );
    Ok(())
}

fn report_unreadable(n: u64) {
    if n > 0 {
        eprintln!(
            "warpfs: {n} block(s) could not be decrypted and were left as they were (they read as errors); warpfs fsck names them"
        );
    }
}

/// The volume is mounted at `mnt`: its daemon moves every file while the
/// mount serves; this process writes the config, starts, follows and ends.
/// The daemon takes the start and the finish from root, and from the user
/// it runs as when the request carries the tag that proves the password
/// (HMAC under the master key's control key; `fuse::ctl`).
fn online(a: &RekeyArgs, mnt: &Path) -> Result<(), CliError> {
    let rate = max_rate(a)?;
    let (cfg, pw, master, target) = begin(a)?;
    let control = ControlKey::derive(&master);
    drop(master);
    let jobs = jobs(a);
    // A rekey an earlier warpfs started keeps going without a rekey ID
    // here (the mount may be writing records without one); an offline
    // `warpfs rekey` gives it one.
    let start = Request::Start {
        target,
        jobs,
        max_rate: rate,
        rekey_id: cfg.rekey_id(),
    };
    if let Err(e) = send(mnt, &control, &start) {
        if e.raw_os_error() == Some(libc::EPERM) {
            return Err(CliError::new(
                ERROR,
                format!(
                    "{}: the mount refused the rekey: it takes one from root, or from the user it runs as with proof of the password (a mount of an older warpfs: from root only); unmount it and run warpfs rekey again",
                    mnt.display()
                ),
            ));
        }
        return Err(CliError::new(
            ERROR,
            format!("{}: the mount refused the rekey: {}", mnt.display(), refusal(mnt, &e)),
        ));
    }
    eprintln!(
        "warpfs: {} is mounted at {}: the mount re-encrypts it while it serves",
        a.cipherdir.display(),
        mnt.display()
    );
    let bar = bar(0);
    let last = follow(mnt, &bar).map_err(|stop| {
        CliError::new(
            ERROR,
            match stop {
                Stopped::Gone => format!(
                    "{}: the mount's rekey status is gone (the mount ended?): run warpfs rekey again to finish the rekey",
                    mnt.display()
                ),
                Stopped::Ended(state, why) => format!(
                    "the mount's rekey {state}: {why}\nwarpfs: what was moved keeps its new key; run warpfs rekey again to finish"
                ),
            },
        )
    })?;
    bar.finish_and_clear();
    pw.set_generations_at(&cfg, &a.config.path(&a.cipherdir), target, None)?;
    if let Err(e) = send(mnt, &control, &Request::Finish) {
        // The config is final; the daemon only keeps the old key in memory
        // until it unmounts.
        eprintln!("warpfs: warning: the mount did not drop the old key: {e}");
    }
    let n = |k: &str| last[k].as_u64().unwrap_or(0);
    report_unreadable(n("unreadable_blocks"));
    summary(
        n("files_moved"),
        n("files_total"),
        n("bytes"),
        target,
        last["seconds"].as_f64().unwrap_or(0.0),
        jobs,
        "online",
    );
    Ok(())
}
