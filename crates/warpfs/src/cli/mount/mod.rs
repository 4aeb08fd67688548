//! `warpfs mount`: unlock, mount, and serve. Without `-f` the process forks
//! before any thread exists; the parent returns once the mount is live (or
//! prints why it failed). SIGINT/SIGTERM unmount cleanly, in the foreground
//! and as a daemon (`fuse::stop_on_signals`).

mod daily;
mod go_live;
mod mountpoint;

use super::exit::{CliError, ERROR, MOUNT_FAILED};
use super::logging;
pub use super::xts_device::ENV_ENGINE;
use super::PassArgs;
use crate::fuse::transport::uring::RingOptions;
use crate::fuse::{mount_config, Caches, MountOptions, Transport, WarpFs};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use warpfs_engine::gpu::{select_backend, EngineKind};
use warpfs_engine::{
    Engine, EngineConfig, DEFAULT_ENGINE_NICE, DEFAULT_POOL_SIZE, DEFAULT_READ_AHEAD, DEFAULT_SPIN_US,
    DEFAULT_WINDOW_MAX,
};
use warpfs_volume::seen::{self, Seen};
use warpfs_volume::{Options, Volume};

/// Whether speculation is on when `--speculation` is not given ("auto"),
/// and why: from the volume's cipher and the CPU
/// (`warpfs_engine::speculation_policy`). Measured (docs/decisions/0040):
/// on 2-core AES-NI machines making a 4 KiB mask
/// on the calling thread (~0.4 us) costs no more than fetching one made on
/// the other core, and the workers take CPU from the FUSE threads, so it is
/// off there (also over io_uring: docs/decisions/0007); with Twofish or
/// software AES (no AES-NI or ARMv8 AES, or `WARPFS_NO_AESNI=1`) or 4+ cores,
/// look-ahead pays and it is on (docs/decisions/0013); XChaCha20 is off below
/// 4 cores, where decrypt-ahead alone keeps the second core busy
/// (docs/decisions/0081).
pub fn auto_speculation(cipher: warpfs_crypto::ContentCipher) -> (bool, String) {
    let soft = std::env::var("WARPFS_NO_AESNI").is_ok_and(|v| v == "1") || !warpfs_crypto::cpu::aes_in_hardware();
    warpfs_engine::speculation_policy(warpfs_engine::PolicyInput {
        cipher,
        aes_ni: !soft,
        cores: cores(),
    })
}

/// Arguments of `warpfs mount`.
#[derive(Args, Debug)]
pub struct MountArgs {
    #[command(flatten)]
    pass: PassArgs,
    #[command(flatten)]
    tpm2: super::tpm2::UnlockArgs,
    #[command(flatten)]
    fido2: super::fido2::Fido2Args,
    /// Stay in the foreground (log to stderr; Ctrl-C unmounts).
    #[arg(short = 'f', long)]
    foreground: bool,
    /// Mount options, comma-separated: the kernel's (ro, allow_other,
    /// default_permissions, noatime, nosuid, nodev, noexec, sync, dirsync),
    /// any long option below as NAME=VALUE or NAME (passfile=F, idle=10m,
    /// no_xattr), and mount(8)/systemd's, which are ignored (nofail, _netdev,
    /// noauto, user, users, x-systemd.*). See mount.warpfs(8).
    #[arg(short = 'o', value_name = "OPTS")]
    options: Vec<String>,
    /// FUSE worker threads (default: max(4, cores)).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Make keystream ahead of need on worker threads (on), or only when a
    /// read or write needs it, on the same code path (off), or let the volume
    /// and the CPU decide (auto) [default: auto: off for XChaCha20 below 4
    /// cores; else on for Twofish, for AES without AES-NI, and with 4+ cores;
    /// off for AES-NI below 4 cores; on with --engine opencl|cuda].
    #[arg(long, value_name = "on|off|auto", value_parser = parse_speculation)]
    speculation: Option<Speculation>,
    /// Keystream worker threads (default: one per core; none with --speculation off).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    engine_threads: Option<u16>,
    /// Write-pool size Z: masks kept ready for the next Z block writes [default: 1024].
    #[arg(long, value_name = "Z", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pool_size: Option<u32>,
    /// Largest read-window look-ahead W, in 4 KiB blocks per open file [default: 256].
    #[arg(long, value_name = "W", value_parser = clap::value_parser!(u32).range(1..=4096))]
    window_max: Option<u32>,
    /// Decrypt-ahead depth: how many requests past a sequential reader's
    /// current one are read and decrypted ahead, on threads placed like the
    /// keystream workers, while the reader copies the current one (0: none;
    /// with --reverse: encrypted ahead) [default: 2 with speculation on or
    /// 2+ cores, else 0].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=64))]
    read_ahead: Option<u16>,
    /// Where masks are made: cpu, opencl, cuda, or auto (cuda if present, else
    /// an OpenCL GPU, else cpu); on an xts volume, where XTS requests of 128
    /// KiB or more run (the data crosses to the device). An unavailable
    /// engine falls back to cpu with a warning [default: $WARPFS_ENGINE, else
    /// cpu].
    #[arg(long, value_name = "cpu|opencl|cuda|auto", value_parser = parse_engine)]
    engine: Option<EngineKind>,
    /// Nice value of the keystream workers; lowering it needs root, otherwise
    /// they keep the daemon's [default: -19].
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    engine_nice: Option<i32>,
    /// CPUs the keystream workers run on, as `taskset -c` writes them (e.g.
    /// `0` or `0-1,3`); with no --engine-threads, one worker per listed CPU.
    /// Speculation pays when masks are made on cores the FUSE threads leave
    /// idle: pin the daemon to one CPU and list others here [default: the
    /// daemon's CPUs].
    #[arg(long, value_name = "LIST", value_parser = parse_engine_cpus)]
    engine_cpus: Option<CpuList>,
    /// How long an idle keystream worker polls for work before it sleeps, in
    /// microseconds: a wake-up saved for a busy reader or writer, CPU spent
    /// otherwise [default: 0].
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u32).range(0..=10_000))]
    engine_spin_us: Option<u32>,
    /// Send every write to the daemon at once instead of through the kernel's
    /// writeback cache: a full backing disk then fails `write(2)` itself (as
    /// on gocryptfs), not only `fsync`/`close`; small writes are slower.
    #[arg(long)]
    no_writeback_cache: bool,
    /// Turn extended attributes off (as gocryptfs's -noxattr): setting or
    /// reading an xattr fails (EOPNOTSUPP), and the kernel stops asking the
    /// daemon for the ones it looks up itself: with xattrs on, `ls -l`
    /// costs two GETXATTR round trips per file listed, and a new file's
    /// first write and each `chown` one (on kernels before 5.11, every
    /// write(2)), so listing and unpacking trees is faster without.
    #[arg(long, alias = "noxattr")]
    no_xattr: bool,
    /// Two mounts (or a program and a mount) share this CIPHERDIR, as
    /// gocryptfs's -sharedstorage: the kernel caches stay off (names and
    /// attributes valid 1 s, no negative entries, pages dropped at every
    /// open, no cached symlink targets), so changes made elsewhere show up
    /// within a second.
    #[arg(long, conflicts_with = "caches")]
    shared_storage: bool,
    /// Remember, outside CIPHERDIR, the versions of files and configs this
    /// host's changes ended and the highest key state it used, and refuse one
    /// put back (an older warpfs.conf: the mount fails; a whole file: EIO and
    /// a log line; files need file summaries); versions another host made
    /// are taken as new: on (in $WARPFS_STATE_DIR, else $XDG_STATE_HOME/warpfs/seen
    /// or ~/.local/state/warpfs/seen; as root /var/lib/warpfs/seen), off, or
    /// a directory [default: off].
    #[arg(long, value_name = "on|off|DIR")]
    versions_seen: Option<String>,
    /// Kernel caches to use: all, none, or a list of entries (long
    /// entry/attribute timeout), negative (cache "no such name"), keep
    /// (keep a file's pages across opens while its backing file is
    /// unchanged), symlinks (cache link targets), noflush (no FLUSH request
    /// at close). A file changed in CIPHERDIR behind the mount's back is
    /// seen at its next open (contents) and after at most --cache-timeout
    /// (names, attributes) [default: all].
    #[arg(long, value_name = "LIST")]
    caches: Option<String>,
    /// Seconds names and attributes stay valid in the kernel with the
    /// entries cache on; 0: the kernel asks the daemon at every use, so a
    /// change made in CIPHERDIR is seen at once (slower) [default: 30].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(0..=3600))]
    cache_timeout: Option<u32>,
    /// How requests reach the daemon: uring (FUSE over io_uring, Linux
    /// 6.14+: one ring queue per CPU, served on the caller's CPU), dev
    /// (/dev/fuse), or auto: uring when the kernel offers it (its module
    /// parameter enable_uring is on already), else dev with one log line
    /// saying how to turn it on; uring with the parameter off fails,
    /// saying the same. warpfs changes the parameter only with
    /// --uring-enable [default: $WARPFS_TRANSPORT, else auto].
    #[arg(long, value_name = "auto|uring|dev", value_parser = parse_transport)]
    transport: Option<Transport>,
    /// Turn the kernel's enable_uring parameter on for this mount (root;
    /// -o uring_enable; it is machine-wide), and put back the value found
    /// when the daemon ends, also after SIGINT/SIGTERM (not after SIGKILL).
    #[arg(long)]
    uring_enable: bool,
    /// io_uring entries (requests in flight) per ring queue thread; each
    /// holds a 1 MiB buffer [default: 2].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    uring_depth: Option<u16>,
    /// io_uring queue threads per CPU (a request that blocks holds up only
    /// its thread) [default: 2].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=16))]
    uring_threads: Option<u16>,
    /// After answering a read of up to 32 KiB or any request a caller
    /// waits for (a lookup, a stat, a create...), the ring thread commits
    /// at SCHED_IDLE priority, so the scheduler wakes the reader or caller
    /// on this CPU rather than on an idle one (whose wake-up it would wait
    /// for) and its next request comes back to the same queue. The thread takes
    /// its policy back before it waits again [default: on where it can
    /// leave SCHED_IDLE: root, CAP_SYS_NICE or RLIMIT_NICE 20].
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    uring_local_wake: Option<bool>,
    /// After serving a write of 64 KiB or more (the writeback of a
    /// sequential writer, queued on the busy CPU of the writer's flush) or
    /// a read of more than 32 KiB (read-ahead, queued on the reader's busy
    /// CPU), a ring thread may run on any CPU but the keystream workers'
    /// until it serves an answer somebody waits for (a small read, a
    /// lookup, an open), which pins it back to its own [default: on].
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    uring_roam: Option<bool>,
    /// Mount with the recovery key instead of the password: `stdin` reads
    /// the key as `warpfs init` (or `warpfs key add --recovery`) printed it
    /// from standard input (on a volume made before keyslots: its master
    /// key).
    #[arg(long, value_name = "stdin", value_parser = ["stdin"], conflicts_with_all = ["passfile", "extpass", "keyfile", "fido2"])]
    masterkey: Option<String>,
    /// Append log lines to this file (default: stderr with -f, else syslog).
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// (With --reverse: instead of PLAINDIR/.warpfs.reverse.conf.)
    #[command(flatten)]
    config: super::ConfigArg,
    #[command(flatten)]
    reverse: super::reverse::ReverseArgs,
    #[command(flatten)]
    extra: daily::MountExtra,
    /// The volume's cipher directory (with --reverse: the plaintext directory).
    cipherdir: PathBuf,
    /// Where the plaintext view appears.
    mountpoint: PathBuf,
}

impl MountArgs {
    /// The `-o` lists as given.
    pub fn options(&self) -> &[String] {
        &self.options
    }
}

/// `--speculation`: forced on or off, or `auto` (the same as not giving it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Speculation(Option<bool>);

fn parse_speculation(s: &str) -> Result<Speculation, String> {
    match s {
        "auto" => Ok(Speculation(None)),
        _ => parse_on_off(s)
            .map(|on| Speculation(Some(on)))
            .map_err(|_| format!("'{s}' is neither on, off nor auto")),
    }
}

impl MountArgs {
    /// The speculation the user forced; `None` for auto.
    fn speculation(&self) -> Option<bool> {
        self.speculation.and_then(|s| s.0)
    }
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "yes" | "true" | "1" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        _ => Err(format!("'{s}' is neither on nor off")),
    }
}

/// The CPUs of `--engine-cpus` (one value; clap would take a bare `Vec`
/// for a repeated option).
#[derive(Debug, Clone)]
struct CpuList(Vec<usize>);

/// `--engine-cpus`: a valid list of CPUs that exist and are online (a bad
/// one is a usage error, exit 2).
fn parse_engine_cpus(s: &str) -> Result<CpuList, String> {
    let cpus = warpfs_engine::placement::parse_cpu_list(s)?;
    warpfs_engine::placement::check_cpus_exist(&cpus)?;
    Ok(CpuList(cpus))
}

fn parse_transport(s: &str) -> Result<Transport, String> {
    s.parse()
}

/// The ring layout the arguments ask for.
fn ring_options(a: &MountArgs) -> RingOptions {
    let d = RingOptions::default();
    RingOptions {
        depth: a.uring_depth.map_or(d.depth, usize::from),
        threads: a.uring_threads.map_or(d.threads, usize::from),
        local_wake: a.uring_local_wake.unwrap_or(d.local_wake),
        roam: a.uring_roam.unwrap_or(d.roam),
        enable_param: a.uring_enable,
    }
}

fn parse_engine(s: &str) -> Result<EngineKind, String> {
    s.parse()
}

/// The engine `--engine` or `WARPFS_ENGINE` asks for (cpu by default; an
/// unparsable variable is a usage error).
fn engine_kind(a: &MountArgs) -> Result<EngineKind, CliError> {
    super::xts_device::engine_kind(a.engine)
}

/// The engine settings the arguments ask for (speculation: see `serve`).
fn engine_config(a: &MountArgs, cipher: warpfs_crypto::ContentCipher) -> EngineConfig {
    let (speculation, speculation_why) = match a.speculation() {
        Some(on) => (on, format!("--speculation {}", if on { "on" } else { "off" })),
        None => auto_speculation(cipher),
    };
    EngineConfig {
        threads: a.engine_threads.map_or(0, usize::from),
        speculation,
        speculation_why,
        pool_size: a.pool_size.map_or(DEFAULT_POOL_SIZE, |z| z as usize),
        window_max: a.window_max.map_or(DEFAULT_WINDOW_MAX, |w| w as usize),
        nice: Some(a.engine_nice.unwrap_or(DEFAULT_ENGINE_NICE)),
        cpus: a.engine_cpus.clone().map(|c| c.0).unwrap_or_default(),
        read_ahead: a.read_ahead.map_or(DEFAULT_READ_AHEAD, usize::from),
        // Decrypt-ahead needs a core the reader leaves idle, not masks
        // made ahead (docs/decisions/0042-decrypt-ahead.md).
        ahead_without_speculation: a.read_ahead.is_some()
            || std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2,
        spin_us: a.engine_spin_us.unwrap_or(DEFAULT_SPIN_US),
        ..EngineConfig::default()
    }
}

/// Start the keystream engine, attach it to the volume and wrap the volume
/// for FUSE. Starts threads: in the daemon, only after the fork.
/// The backend is opened here (after the daemon's fork: drivers start
/// threads). A device backend turns speculation on unless `--speculation`
/// said otherwise: look-ahead is what goes to the device.
/// The kernel caches `a` asks for.
fn caches(a: &MountArgs) -> Result<Caches, CliError> {
    if a.shared_storage {
        return Ok(Caches::NONE);
    }
    let t = a.cache_timeout.map_or(crate::fuse::cache::DEFAULT_TIMEOUT, |s| {
        std::time::Duration::from_secs(s.into())
    });
    Caches::parse(a.caches.as_deref().unwrap_or("all"), t).map_err(|e| CliError::new(super::exit::USAGE, e))
}

/// The frontend switches of `a`: writeback cache, xattrs, kernel caches.
fn frontend(fs: WarpFs, a: &MountArgs, caches: Caches) -> WarpFs {
    fs.with_writeback_cache(!a.no_writeback_cache)
        .with_xattrs(!a.no_xattr)
        .with_caches(caches)
}

fn serve(
    mut vol: Volume,
    mut cfg: EngineConfig,
    kind: EngineKind,
    speculation: Option<bool>,
) -> Result<WarpFs, String> {
    let sel = select_backend(kind);
    if let Some(w) = &sel.warning {
        tracing::warn!("{w}");
    }
    tracing::info!("{}", sel.note);
    if sel.device && speculation.is_none() {
        cfg.speculation = true;
        cfg.speculation_why = "auto: a device backend makes the masks".into();
    }
    let engine = Engine::with_backend(cfg, sel.backend).map_err(|e| format!("keystream engine: {e}"))?;
    if sel.device && vol.is_xts() {
        attach_xts_device(&engine, sel.kind);
    }
    vol.use_engine(engine.clone())
        .map_err(|e| format!("keystream engine: {e}"))?;
    let c = engine.config();
    tracing::info!(
        "keystream engine: {}, {} worker(s){}, speculation {}, write pool Z={}, read window W<={}, \
         decrypt-ahead {} request(s) on {} thread(s)",
        engine.backend_name(),
        engine.threads(),
        if c.cpus.is_empty() || engine.threads() == 0 {
            String::new()
        } else {
            format!(" on CPUs {}", warpfs_engine::placement::format_cpu_list(&c.cpus))
        },
        if engine.speculation() {
            format!("on ({})", c.speculation_why)
        } else {
            format!("off ({})", c.speculation_why)
        },
        c.pool_size,
        c.window_max,
        engine.read_ahead(),
        engine.ahead_threads()
    );
    WarpFs::new(vol)
        .map(|fs| fs.with_rekey_hook(super::rekey_crash::kill_hook()))
        .map_err(|e| e.to_string())
}

fn attach_xts_device(engine: &Engine, kind: EngineKind) {
    if let Some(r) = super::xts_device::open(kind) {
        engine.attach_xts_device(std::sync::Arc::new(r));
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
}

pub fn run(a: MountArgs) -> Result<(), CliError> {
    if a.reverse.reverse && (a.fido2.fido2 || a.fido2.fido2_device.is_some()) {
        return Err(CliError::new(
            super::exit::USAGE,
            "--fido2 opens a volume's fido2 keyslot; a reverse volume has none",
        ));
    }
    if a.reverse.reverse {
        return super::reverse::mount(super::reverse::MountReq {
            rev: &a.reverse,
            pass: &a.pass,
            plaindir: &a.cipherdir,
            mountpoint: &a.mountpoint,
            config: a.config.config.as_deref(),
            options: &a.options,
            foreground: a.foreground,
            log_file: a.log_file.as_deref(),
            transport: a.transport,
            uring_enable: a.uring_enable,
            read_ahead: a.read_ahead,
        });
    }
    let user = a.extra.setuid.as_ref();
    if let Some(u) = user {
        super::setuid::check_allowed(u).map_err(|e| CliError::new(MOUNT_FAILED, e))?;
    }
    #[cfg(feature = "bench-nocrypto")]
    eprintln!("warpfs: WARNING: bench-only no-crypto build: file contents are stored as plaintext");
    let mut mo = MountOptions {
        threads: a.threads.unwrap_or_else(|| cores().max(4)),
        fsname: a.extra.fsname.clone(),
        ..Default::default()
    };
    for o in &a.options {
        // The other items of the list were taken as options (cli::mountopts).
        mo.parse_o(&super::mountopts::kernel_part(o))
            .map_err(|e| CliError::new(super::exit::USAGE, e))?;
    }
    mountpoint::check(&a.mountpoint, a.extra.nonempty)?;
    // No core dumps or ptrace by others of a process that holds keys.
    if !warpfs_crypto::make_non_dumpable() {
        eprintln!("warpfs: warning: cannot make the process non-dumpable");
    }
    // Held (shared) while mounted, so that an offline rekey or fsck sees
    // the mount even under another fsname; inherited by the daemon.
    let lock = super::lock::lock_cipherdir(&a.cipherdir, false);
    if let Err(e) = &lock {
        // A lock file that is not a regular file with one link was planted.
        if e.kind() == std::io::ErrorKind::InvalidData {
            return Err(CliError::new(MOUNT_FAILED, e.to_string()));
        }
    }
    if let Ok(None) = lock {
        return Err(CliError::new(
            MOUNT_FAILED,
            format!(
                "{}: warpfs rekey is running (or fsck); mount when it has finished",
                a.cipherdir.display()
            ),
        ));
    }
    let cfg = super::unlock::load_main(&a.cipherdir, &a.config)?;
    super::unlock::usable(&cfg, &a.cipherdir)?;
    super::unlock::not_mid_upgrade(&cfg, &a.cipherdir)?;
    // The extpass program runs as the --setuid user.
    let hw = (&a.tpm2, &a.fido2);
    let masterkey = a.masterkey.is_some();
    let (cfg, opened, given) =
        super::unlock::open_given(&a.cipherdir, &a.config, cfg, hw, &a.pass.source(), masterkey, user)?;
    drop(given);
    let (master, verified) = (opened.key, opened.verified);
    let mut vol = Volume::open(
        &a.cipherdir,
        &cfg,
        &master,
        Options {
            read_only: mo.read_only,
        },
    )
    .map_err(|e| CliError::new(super::exit::BAD_CONFIG, e))?;
    // Backing directories kept open for *at calls, except where another
    // mount may move them (docs/decisions/0070-backing-directory-descriptors.md).
    if !a.shared_storage {
        vol.keep_dirs_open(warpfs_volume::DIR_FD_TTL);
    }
    // Other hosts may write the same files: their summaries are
    // coordinated through locks on the cipher files (FORMAT.md 12.7).
    vol.keys().set_shared_storage(a.shared_storage);
    if !verified {
        super::masterkey::check(&vol, &a.cipherdir)?;
    }
    // A rekey killed part way through a segment left its old bytes in an
    // undo journal: put them back before anything reads the file. A journal
    // that does not authenticate, or aims outside CIPHERDIR, is never
    // applied; the mount stops until the user decides (warpfs fsck).
    super::rekey_crash::recover_or_stop(&vol, &a.cipherdir, MOUNT_FAILED)?;
    vol.commit_after_close();
    // Crash tests of `warpfs upgrade` while mounted (WARPFS_UPGRADE_KILL).
    vol.set_upgrade_hook(super::upgrade::kill_hook());
    if let Some(dir) = versions_seen_dir(a.versions_seen.as_deref(), user.is_some())? {
        let canon = warpfs_backing::host::canonicalize(&a.cipherdir).unwrap_or(a.cipherdir.clone());
        let seen = Seen::open(&dir, &canon, &master).map_err(|e| CliError::new(MOUNT_FAILED, e))?;
        // A config named with --config (a copy the user chose) is held to
        // its key state alone.
        let digest = a
            .config
            .config
            .is_none()
            .then(|| seen::config_digest(cfg.to_json().as_bytes()));
        seen.check_config(cfg.key_state(), digest).map_err(|e| {
            CliError::new(
                super::exit::BAD_CONFIG,
                format!(
                    "{}: {e} (if you put it back yourself, remove {} to accept it)",
                    a.cipherdir.display(),
                    seen.path().display()
                ),
            )
        })?;
        vol.remember_versions(Arc::new(seen));
    }
    let engine_cfg = engine_config(&a, cfg.content_mode().cipher());
    let engine_kind = engine_kind(&a)?;
    let transport = Transport::resolve(a.transport).map_err(|e| CliError::new(super::exit::USAGE, e))?;
    let ring = ring_options(&a);
    let caches = caches(&a)?;
    let cipherdir = warpfs_backing::host::canonicalize(&a.cipherdir).unwrap_or(a.cipherdir.clone());
    // `-o noatime`: the atime shown is the backing file's; the daemon's
    // own reads must not move it.
    warpfs_backing::set_noatime(mo.other.iter().any(|o| o == "noatime"));
    let config = mount_config(&mo, &cipherdir);
    // SAFETY: umask has no preconditions. Modes are applied exactly as the
    // kernel sends them (it already applied the caller's umask).
    unsafe { libc::umask(0) };

    if a.foreground {
        let target = match &a.log_file {
            Some(p) => logging::Target::File(p),
            None => logging::Target::Stderr,
        };
        logging::init(target).map_err(|e| CliError::new(ERROR, e))?;
        let fs = serve(vol, engine_cfg, engine_kind, a.speculation())
            .map(|fs| frontend(fs, &a, caches))
            .map_err(|e| CliError::new(ERROR, e))?;
        drop(master);
        report_key_locking();
        let session = go_live::go_live(fs, &a.mountpoint, &a.extra, &config, (transport, ring), &cipherdir)?;
        session
            .run()
            .map_err(|e| CliError::new(ERROR, format!("session ended with an error: {e}")))?;
        tracing::info!("unmounted {}", a.mountpoint.display());
        return Ok(());
    }

    // Daemon: fork while single-threaded; the child reports through a pipe.
    let Some(ready) = super::daemon::daemonize("mount")? else {
        return Ok(());
    };
    let target = match &a.log_file {
        Some(p) => logging::Target::File(p),
        None => logging::Target::Syslog,
    };
    if let Err(e) = logging::init(target) {
        ready.fail(&e);
    }
    let fs = match serve(vol, engine_cfg, engine_kind, a.speculation()).map(|fs| frontend(fs, &a, caches)) {
        Ok(fs) => fs,
        Err(e) => ready.fail(&e),
    };
    drop(master);
    // The fork dropped the parent's memory locks: lock the keys again.
    report_key_locking();
    let session = match go_live::go_live(fs, &a.mountpoint, &a.extra, &config, (transport, ring), &cipherdir) {
        Ok(s) => s,
        Err(e) => ready.fail(&e.msg),
    };
    ready.live();
    let code = match session.run() {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("session ended with an error: {e}");
            1
        }
    };
    tracing::info!("unmounted {}", a.mountpoint.display());
    std::process::exit(code);
}

/// Where `--versions-seen` keeps its state: `None` for off.
fn versions_seen_dir(v: Option<&str>, setuid: bool) -> Result<Option<PathBuf>, CliError> {
    match v {
        None | Some("off") => Ok(None),
        Some("on") if setuid => Err(CliError::new(
            super::exit::USAGE,
            "--versions-seen on with --setuid: name a directory the user can write (--versions-seen DIR)",
        )),
        Some("on") => seen::default_dir()
            .map(Some)
            .map_err(|e| CliError::new(super::exit::USAGE, e)),
        Some(d) if Path::new(d).is_absolute() => Ok(Some(PathBuf::from(d))),
        Some(d) => Err(CliError::new(
            super::exit::USAGE,
            format!("--versions-seen {d}: give on, off or an absolute directory"),
        )),
    }
}

/// Lock all key memory in RAM (again, after a fork) and log the outcome.
fn report_key_locking() {
    match warpfs_crypto::locked::lock_all() {
        Ok(n) => tracing::info!("key memory locked in RAM ({n} bytes), excluded from core dumps"),
        Err(e) => tracing::warn!("cannot lock key memory in RAM ({e}); keys may be swapped out (raise RLIMIT_MEMLOCK)"),
    }
}
