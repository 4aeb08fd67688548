//! `warpfs rekey`: move every file of an unmounted volume to a new content
//! key generation (FORMAT.md 10). Crash-safe and resumable: the config
//! records the target first, each file is replaced whole by rename, and a
//! rerun finishes what a killed run left.

use super::exit::{CliError, ERROR, FSCK_MOUNTED};
use super::PassArgs;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use warpfs_config::Config;
use warpfs_volume::rekey;
use warpfs_volume::{Options, Volume};

/// Arguments of `warpfs rekey`.
#[derive(Args, Debug)]
pub struct RekeyArgs {
    #[command(flatten)]
    pass: PassArgs,
    /// Files re-encrypted at once (default: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// The volume's cipher directory (must not be mounted).
    cipherdir: PathBuf,
}

/// Test hook: `WARPFS_REKEY_KILL_AFTER=N` SIGKILLs the process after N files
/// were moved (0: right after the config records the target);
/// `WARPFS_REKEY_KILL_BEFORE_RENAME=N` when the Nth copy is durable but not
/// yet renamed.
fn hook(var: &str) -> Option<u64> {
    std::env::var(var).ok()?.parse().ok()
}

fn die() {
    // SAFETY: kill and getpid have no preconditions.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

/// Lock CIPHERDIR (flock on the directory; FORMAT.md 10) for the whole rekey: `warpfs
/// mount` and a second `warpfs rekey` refuse while it is held. `exclusive`
/// is the rekey's lock; a mount only checks for one (shared, then released).
/// `Ok(None)`: someone else holds the lock.
pub fn lock_cipherdir(dir: &std::path::Path, exclusive: bool) -> std::io::Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(dir)?;
    let op = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH } | libc::LOCK_NB;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
        return Ok(Some(f));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(None)
    } else {
        Err(e)
    }
}

pub fn run(a: RekeyArgs) -> Result<(), CliError> {
    if let Some(mnt) = super::fsck::mounted_at(&a.cipherdir) {
        return Err(CliError::new(
            FSCK_MOUNTED,
            format!("{} is mounted at {mnt}: unmount it first", a.cipherdir.display()),
        ));
    }
    let _lock = lock_cipherdir(&a.cipherdir, true)
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", a.cipherdir.display())))?
        .ok_or_else(|| {
            CliError::new(
                ERROR,
                format!("{}: another warpfs rekey is running", a.cipherdir.display()),
            )
        })?;
    let mut cfg = Config::load(&a.cipherdir)?;
    let pw = a.pass.source().read("Password: ", false)?;
    cfg.unlock(pw.bytes())?;
    let e = |e: std::io::Error| CliError::new(ERROR, format!("{}: {e}", a.cipherdir.display()));
    let files = rekey::content_files(&a.cipherdir).map_err(e)?;
    let from = cfg.key_generation();
    let target = match cfg.rekey_target() {
        Some(t) => {
            eprintln!("warpfs: resuming the unfinished rekey to key generation {t}");
            t
        }
        None => {
            // Refuse hard links before anything changes.
            if let Some(p) = files.iter().find(|p| {
                std::fs::symlink_metadata(p)
                    .map(|m| std::os::unix::fs::MetadataExt::nlink(&m) > 1)
                    .unwrap_or(false)
            }) {
                return Err(CliError::new(
                    ERROR,
                    format!(
                        "{}: has several hard links; rekey cannot keep them (nothing was changed)",
                        p.display()
                    ),
                ));
            }
            let t = from
                .checked_add(1)
                .ok_or_else(|| CliError::new(ERROR, "key generation limit reached"))?;
            cfg = cfg.set_generations(&a.cipherdir, pw.bytes(), from, Some(t))?;
            t
        }
    };
    if hook("WARPFS_REKEY_KILL_AFTER") == Some(0) {
        die();
    }
    let master = cfg.unlock(pw.bytes())?;
    let vol = Volume::open(&a.cipherdir, &cfg, &master, Options::default())
        .map_err(|m| CliError::new(super::exit::BAD_CONFIG, m))?;
    let total: u64 = files
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| rekey::plain_size_of(vol.cipher().mode(), m.len()))
        .sum();
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("rekey {bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let (kill_after, kill_rename) = (hook("WARPFS_REKEY_KILL_AFTER"), hook("WARPFS_REKEY_KILL_BEFORE_RENAME"));
    // Files are independent: one worker per core (one when a test hook
    // needs an exact count).
    let jobs = match a.jobs {
        Some(j) => j.max(1),
        None if kill_after.is_some() || kill_rename.is_some() => 1,
        None => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    }
    .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let moved = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let failed: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|sc| {
        for _ in 0..jobs {
            sc.spawn(|| loop {
                if failed.lock().map(|f| f.is_some()).unwrap_or(true) {
                    return;
                }
                let Some(p) = files.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                let before_rename = || {
                    if kill_rename == Some(moved.load(Ordering::SeqCst) + 1) {
                        die();
                    }
                };
                let mut on_bytes = |b: u64| {
                    bar.inc(b);
                    bytes.fetch_add(b, Ordering::Relaxed);
                };
                match rekey::rekey_file(&vol, p, &mut on_bytes, &before_rename) {
                    Ok(true) => {
                        let m = moved.fetch_add(1, Ordering::SeqCst) + 1;
                        if kill_after == Some(m) {
                            die();
                        }
                    }
                    Ok(false) => {}
                    Err(m) => {
                        if let Ok(mut f) = failed.lock() {
                            f.get_or_insert(m);
                        }
                        return;
                    }
                }
            });
        }
    });
    let (moved, bytes, n) = (moved.into_inner(), bytes.into_inner(), files.len());
    if let Some(m) = failed.into_inner().ok().flatten() {
        bar.abandon();
        return Err(CliError::new(
            ERROR,
            format!("{m}\nwarpfs: rekey stopped; files already moved keep their new key; run it again to finish"),
        ));
    }
    bar.finish_and_clear();
    drop(vol);
    cfg.set_generations(&a.cipherdir, pw.bytes(), target, None)?;
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    println!(
        "rekeyed {moved} of {n} files ({:.1} MiB) to key generation {target} in {secs:.2} s: {:.1} MB/s ({jobs} jobs)",
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / 1e6 / secs
    );
    Ok(())
}
