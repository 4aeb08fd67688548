//! `warpfs init --reverse PLAINDIR` and `warpfs mount --reverse PLAINDIR
//! MOUNTPOINT`: the config of a reverse view, and the read-only encrypted
//! view itself (FORMAT.md 14), daemonized unless `-f`.

use super::daemon::Ready;
use super::exit::{CliError, BAD_CONFIG, ERROR, MOUNT_FAILED, USAGE};
use super::logging;
use super::PassArgs;
use crate::fuse::fs::reverse::ReverseFs;
use crate::fuse::transport::uring::RingOptions;
use crate::fuse::Transport;
use clap::Args;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use warpfs_config::{Config, FeatureFlag, KdfParams, REVERSE_CONFIG_FILE};
use warpfs_engine::{Engine, EngineConfig, DEFAULT_READ_AHEAD};
use warpfs_volume::reverse::{ConfigShown, Excludes, ReverseOptions, ReverseView};

/// The reverse-mode options of `warpfs mount`.
#[derive(Args, Debug, Default)]
pub struct ReverseArgs {
    /// Reverse mode: CIPHERDIR is a plaintext directory (PLAINDIR) and the
    /// mount shows it encrypted, read-only, for backups; a copy of the view
    /// mounts with the ordinary `warpfs mount`.
    #[arg(long)]
    pub reverse: bool,
    /// With --reverse: leave this plaintext path (relative to PLAINDIR)
    /// and everything below it out of the view (repeatable).
    #[arg(long, value_name = "PATH", requires = "reverse")]
    pub exclude: Vec<PathBuf>,
    /// With --reverse: leave out what matches this gitignore-style pattern
    /// (`*`, `?`, `[..]`, `**`, leading `/` anchors, trailing `/` for
    /// directories, leading `!` takes back; repeatable).
    #[arg(long, value_name = "PATTERN", requires = "reverse")]
    pub exclude_wildcard: Vec<String>,
    /// With --reverse: read --exclude-wildcard patterns from FILE, one per
    /// line (`#` starts a comment).
    #[arg(long, value_name = "FILE", requires = "reverse")]
    pub exclude_from: Vec<PathBuf>,
    /// With --reverse: show directories on other file systems (mount
    /// points) as empty directories, and leave out other entries there.
    #[arg(long, requires = "reverse")]
    pub one_file_system: bool,
}

/// Where the reverse config of `plaindir` is: `config`, or the hidden file
/// in PLAINDIR.
fn config_path(plaindir: &Path, config: Option<&Path>) -> PathBuf {
    config.map_or_else(|| plaindir.join(REVERSE_CONFIG_FILE), Path::to_owned)
}

/// `warpfs init --reverse`: write the reverse config for `plaindir`.
pub fn init(
    pass: &PassArgs,
    plaindir: &Path,
    config: Option<&Path>,
    (key_bits, summary): (u32, bool),
    kdf: KdfParams,
    quiet: bool,
) -> Result<(), CliError> {
    match warpfs_backing::host::metadata(plaindir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(CliError::new(
                USAGE,
                format!("{} is not a directory", plaindir.display()),
            ))
        }
        Err(e) => return Err(CliError::new(ERROR, format!("{}: {e}", plaindir.display()))),
    }
    let path = config_path(plaindir, config);
    let pw = pass.source().read("New password: ", true)?;
    let (_cfg, master) = Config::create_reverse(&path, pw.bytes(), key_bits, kdf, summary)?;
    println!(
        "Created warpfs reverse config {} for {} (mode gcm, AES-{key_bits}{}).",
        path.display(),
        plaindir.display(),
        if summary { ", file summaries" } else { "" }
    );
    println!(
        "Mount the encrypted view with: warpfs mount --reverse {} MOUNTPOINT",
        plaindir.display()
    );
    if !quiet {
        show_master_key(&master);
    }
    Ok(())
}

fn show_master_key(master: &warpfs_crypto::MasterKey) {
    println!();
    println!("Your master key is:");
    println!();
    println!("    {}", master.recovery_text());
    println!();
    println!("A copy of the view holds the config as warpfs.conf; this key opens it");
    println!("if the password is forgotten. Keep it somewhere safe and offline.");
}

/// `warpfs upgrade --reverse PLAINDIR`: replace the view's config with a
/// new one with file summaries and a new master key (FORMAT.md 14), the
/// old one kept hidden beside it. Every byte of the view changes once:
/// the next backup copies everything, and a copy made from then on
/// detects blocks rolled back or mixed within a file.
pub fn upgrade(pass: &PassArgs, plaindir: &Path, config: Option<&Path>, quiet: bool) -> Result<(), CliError> {
    let path = config_path(plaindir, config);
    let (cfg, _) = Config::load_file_bytes(&path)?;
    if !cfg.has_feature(FeatureFlag::Reverse) {
        return Err(CliError::new(
            BAD_CONFIG,
            format!("{} is not a reverse config", path.display()),
        ));
    }
    // Refused before the password is asked.
    if let Some(why) = cfg.renew_reverse_refused() {
        return Err(CliError::new(ERROR, format!("{}: {why}", path.display())));
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| CliError::new(USAGE, format!("{}: not a file name", path.display())))?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Under PLAINDIR a name starting with the config's stays hidden.
    let aside = format!("{name}.old-{secs}");
    let pw = pass.source().read("Password: ", false)?;
    let (_cfg, master) = cfg.renew_reverse(&path, &aside, pw.bytes())?;
    drop(pw);
    println!(
        "Upgraded {}: the view of {} now gives every file a summary, under a new master key.",
        path.display(),
        plaindir.display()
    );
    println!("Every byte of the view changes once: the next backup copies everything.");
    println!(
        "The old config is kept as {} (backups made before open with it).",
        path.with_file_name(&aside).display()
    );
    if let Some(at) = super::mounted::mounted_at(plaindir) {
        println!("The view mounted at {at} shows the old bytes until it is mounted again.");
    }
    if !quiet {
        show_master_key(&master);
    }
    Ok(())
}

fn excludes(r: &ReverseArgs) -> Result<Excludes, CliError> {
    let mut e = Excludes::default();
    let usage = |m: String| CliError::new(USAGE, m);
    for p in &r.exclude {
        e.add_path(p.as_os_str().as_bytes()).map_err(usage)?;
    }
    for p in &r.exclude_wildcard {
        e.add_pattern(p.as_bytes()).map_err(usage)?;
    }
    for f in &r.exclude_from {
        let text = warpfs_backing::host::read(f).map_err(|e| usage(format!("--exclude-from {}: {e}", f.display())))?;
        e.add_file(&text).map_err(usage)?;
    }
    Ok(e)
}

/// What `warpfs mount --reverse` needs from the mount's arguments.
pub struct MountReq<'a> {
    pub rev: &'a ReverseArgs,
    pub pass: &'a PassArgs,
    pub plaindir: &'a Path,
    pub mountpoint: &'a Path,
    pub config: Option<&'a Path>,
    pub options: &'a [String],
    pub foreground: bool,
    pub log_file: Option<&'a Path>,
    pub transport: Option<Transport>,
    /// `-o uring_enable`: enable_uring on for the mount, put back after.
    pub uring_enable: bool,
    /// `--read-ahead N`: requests of a sequential reader encrypted ahead.
    pub read_ahead: Option<u16>,
}

/// `warpfs mount --reverse PLAINDIR MOUNTPOINT`.
pub fn mount(m: MountReq<'_>) -> Result<(), CliError> {
    let mut mo = crate::fuse::MountOptions {
        threads: 4,
        ..Default::default()
    };
    for o in m.options {
        mo.parse_o(o).map_err(|e| CliError::new(USAGE, e))?;
    }
    mo.read_only = true;
    // The kernel checks permissions against the plaintext modes shown.
    mo.default_permissions = true;
    let excludes = excludes(m.rev)?;
    let nonempty = warpfs_backing::host::read_dir(m.mountpoint)
        .map(|mut d| d.next().is_some())
        .map_err(|e| CliError::new(MOUNT_FAILED, format!("mountpoint {}: {e}", m.mountpoint.display())))?;
    if nonempty {
        return Err(CliError::new(
            MOUNT_FAILED,
            format!("mountpoint {} is not empty", m.mountpoint.display()),
        ));
    }
    if !warpfs_crypto::make_non_dumpable() {
        eprintln!("warpfs: warning: cannot make the process non-dumpable");
    }
    let plaindir = warpfs_backing::host::canonicalize(m.plaindir)
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", m.plaindir.display())))?;
    let path = config_path(&plaindir, m.config);
    let (cfg, bytes) = Config::load_file_bytes(&path)?;
    if !cfg.has_feature(FeatureFlag::Reverse) {
        return Err(CliError::new(
            BAD_CONFIG,
            format!(
                "{} is not a reverse config (make one with warpfs init --reverse)",
                path.display()
            ),
        ));
    }
    let stat = warpfs_backing::split_user_path(&path)
        .and_then(|(dir, name)| warpfs_backing::lstat(&dir.top().entry(&name)))
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", path.display())))?;
    let stat = stat_of(&stat);
    let pw = m.pass.source().read("Password: ", false)?;
    let master = cfg.unlock(pw.bytes())?;
    drop(pw);
    let opts = ReverseOptions {
        excludes,
        one_file_system: m.rev.one_file_system,
    };
    let view = ReverseView::new(plaindir.clone(), &master, &cfg, ConfigShown { bytes, stat }, opts)
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", plaindir.display())))?;
    drop(master);
    let transport = Transport::resolve(m.transport).map_err(|e| CliError::new(USAGE, e))?;
    let ring = RingOptions {
        enable_param: m.uring_enable,
        ..RingOptions::default()
    };
    let mut config = crate::fuse::mount_config(&mo, &plaindir);
    for o in config.mount_options.iter_mut() {
        if let crate::fuse::MountOption::Subtype(s) = o {
            *s = "warpfs-reverse".into();
        }
    }
    let fs = ReverseFs::new(view);

    if m.foreground {
        let target = m.log_file.map_or(logging::Target::Stderr, logging::Target::File);
        logging::init(target).map_err(|e| CliError::new(ERROR, e))?;
        return serve(
            fs,
            m.read_ahead,
            &plaindir,
            m.mountpoint,
            &config,
            (transport, ring),
            None,
        );
    }
    let Some(ready) = super::daemon::daemonize("mount")? else {
        return Ok(());
    };
    let target = m.log_file.map_or(logging::Target::Syslog, logging::Target::File);
    if let Err(e) = logging::init(target) {
        ready.fail(&e);
    }
    let code = match serve(
        fs,
        m.read_ahead,
        &plaindir,
        m.mountpoint,
        &config,
        (transport, ring),
        Some(ready),
    ) {
        Ok(()) => 0,
        Err(e) => e.code,
    };
    std::process::exit(code);
}

/// What a reverse view shows of its config file's stat: owner and mtime.
fn stat_of(m: &libc::stat) -> libc::stat {
    // SAFETY: plain data; zero is a valid value for every field.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_uid = m.st_uid;
    st.st_gid = m.st_gid;
    st.st_mtime = m.st_mtime;
    st.st_mtime_nsec = m.st_mtime_nsec;
    st
}

/// An engine for encrypt-ahead alone: its decrypt-ahead threads read and
/// encrypt a sequential reader's next requests (`read_ahead`, as for a
/// forward mount: by default 2 on 2+ cores) while the reader copies the
/// current one. No masks are made ahead: a view's nonces are synthetic,
/// each block is sealed where it is read. Starts threads: in the daemon,
/// only after the fork.
fn ahead_engine(read_ahead: Option<u16>) -> Option<Arc<Engine>> {
    let cfg = EngineConfig {
        speculation: false,
        speculation_why: "reverse view: blocks are sealed where they are read".into(),
        read_ahead: read_ahead.map_or(DEFAULT_READ_AHEAD, usize::from),
        ahead_without_speculation: read_ahead.is_some()
            || std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2,
        ..EngineConfig::default()
    };
    match Engine::new(cfg) {
        Ok(e) if e.read_ahead() > 0 => {
            tracing::info!(
                "reverse view: encrypt-ahead {} request(s) on {} thread(s)",
                e.read_ahead(),
                e.ahead_threads()
            );
            Some(e)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("reverse view: no encrypt-ahead ({e})");
            None
        }
    }
}

/// Mount and serve until unmounted; `ready` (the daemon's pipe to its
/// parent) hears "OK" once the mount is live, or why it is not.
fn serve(
    fs: ReverseFs,
    read_ahead: Option<u16>,
    plaindir: &Path,
    mountpoint: &Path,
    config: &crate::fuse::MountConfig,
    (transport, ring): (Transport, RingOptions),
    mut ready: Option<Ready>,
) -> Result<(), CliError> {
    let mut fail = |e: CliError| {
        if let Some(w) = ready.as_mut() {
            w.tell(&e.msg);
        }
        e
    };
    let fs = match ahead_engine(read_ahead) {
        Some(e) => fs.with_engine(e),
        None => fs,
    };
    let mut mounting = crate::fuse::serve(
        crate::fuse::Served::new(fs, None, None),
        mountpoint,
        config,
        transport,
        ring,
    )
    .map_err(|e| fail(CliError::new(MOUNT_FAILED, e)))?;
    crate::fuse::tune_bdi(mountpoint);
    crate::fuse::stop_on_signals(mountpoint, mounting.unmount_callable())
        .map_err(|e| fail(CliError::new(ERROR, format!("cannot take SIGINT/SIGTERM: {e}"))))?;
    let session = mounting.start().map_err(|e| fail(CliError::new(MOUNT_FAILED, e)))?;
    tracing::info!(
        "mounted the reverse view of {} on {} (transport: {})",
        plaindir.display(),
        mountpoint.display(),
        session.describe()
    );
    if let Some(w) = ready.take() {
        w.live();
    }
    session
        .run()
        .map_err(|e| CliError::new(ERROR, format!("session ended with an error: {e}")))?;
    tracing::info!("unmounted {}", mountpoint.display());
    Ok(())
}
