//! warpfs layer 1: the command line. Argument parsing, password prompts,
//! exit codes; no file-system logic.

mod container;
mod ctl_client;
mod daemon;
mod exit;
mod fido2;
mod fsck;
mod gen;
mod info;
mod init;
mod key;
mod lock;
mod logging;
mod masterkey;
mod mount;
mod mounted;
mod mountopts;
mod name;
mod passwd;
mod password;
mod rekey;
mod rekey_crash;
mod rekey_online;
mod reverse;
mod seen;
mod setuid;
mod speed;
mod stats;
mod tpm2;
mod unlock;
mod upgrade;
mod volkey;
mod volkey_mount;
mod xts_device;

use clap::{Args, CommandFactory, Parser, Subcommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// warpfs: an encrypted file system with speculative AES-CTR keystream.
#[derive(Parser, Debug)]
#[command(
    name = "warpfs",
    version,
    about = "a fast user-space encrypted file system (FUSE), stacked over a directory like gocryptfs",
    after_long_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// The end of `warpfs --help` and of warpfs(1): mounting from fstab, exit codes.
const AFTER_HELP: &str = "\
Mounting from /etc/fstab or systemd: warpfs CIPHERDIR MOUNTPOINT -o OPTIONS (as mount.fuse3 \
runs type fuse.warpfs) and mount.warpfs (type warpfs) mount like warpfs mount; every long \
option of warpfs mount is also an -o option (passfile=FILE, idle=10m, ...); see mount.warpfs(8).
    /srv/private.warpfs /mnt/private fuse.warpfs passfile=/etc/warpfs/private.pass,nofail 0 0

Exit codes: 0 success; 1 other error; 2 bad command line or mount option; 10 wrong password; \
11 missing, corrupt, tampered or unsupported warpfs.conf; 12 init on a non-empty directory; \
13 the mount failed; 14 a rekey to a new volume key is unfinished (run warpfs rekey); 15 no FIDO2 security \
key found, or it did not answer (not touched in time, PIN blocked); 18 an upgrade to file summaries is \
unfinished (run warpfs upgrade); 20 fsck found problems; 21 fsck repaired every problem found; \
22 fsck refused, the volume is in use. docs/CLI.md describes the machine-readable outputs.";

/// Where the password comes from.
#[derive(Args, Debug, Clone, Default)]
pub struct PassArgs {
    /// Read the password from the first line of this file.
    #[arg(long, value_name = "FILE", conflicts_with = "extpass")]
    passfile: Option<PathBuf>,
    /// Run this shell command and use the first line it prints as the password.
    #[arg(long, value_name = "CMD")]
    extpass: Option<String>,
    /// Also require this file's bytes (e.g. 32 random bytes on a USB stick):
    /// combined with the password through HKDF-SHA256.
    #[arg(long, value_name = "FILE")]
    keyfile: Option<PathBuf>,
    /// Use the keyfile alone, without a password.
    #[arg(long, requires = "keyfile", conflicts_with_all = ["passfile", "extpass"])]
    keyfile_only: bool,
}

impl PassArgs {
    fn source(&self) -> password::Source {
        password::Source {
            passfile: self.passfile.clone(),
            extpass: self.extpass.clone(),
            keyfile: self.keyfile.clone(),
            keyfile_only: self.keyfile_only,
        }
    }
}

/// Where `warpfs.conf` is (`--config FILE`).
#[derive(Args, Debug, Clone, Default)]
pub struct ConfigArg {
    /// Use this config file instead of CIPHERDIR/warpfs.conf (e.g. to keep
    /// the wrapped key off a synced or shared CIPHERDIR).
    #[arg(long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
}

impl ConfigArg {
    /// The config file of the volume at `cipherdir`.
    pub fn path(&self, cipherdir: &Path) -> PathBuf {
        self.config
            .clone()
            .unwrap_or_else(|| warpfs_config::config_path(cipherdir))
    }
}

/// The clap definition of `warpfs mount` (its options are `-o` options too).
pub(crate) fn mount_command() -> clap::Command {
    Cli::command()
        .find_subcommand("mount")
        .cloned()
        .expect("warpfs has a mount subcommand")
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create a new encrypted volume in an empty CIPHERDIR.
    Init(init::InitArgs),
    /// Mount CIPHERDIR at MOUNTPOINT (daemonizes unless -f).
    Mount(Box<mount::MountArgs>),
    /// Change the password (rewraps the master key; data is not re-encrypted).
    Passwd(passwd::PasswdArgs),
    /// Keyslots: list, add (password, keyfile, recovery key), remove (--rekey: revoke for good).
    Key(key::KeyArgs),
    /// Show a volume's settings (never secrets).
    Info(info::InfoArgs),
    /// Show a live mount's keystream engine counters (ready-hits, waits, ...; root or the mount's user).
    Stats(stats::StatsArgs),
    /// Check an unmounted volume (config, names, headers, nonces, GCM tags); repair when asked.
    Fsck(fsck::FsckArgs),
    /// Encrypted container: one XTS-encrypted image exposed as MOUNTPOINT/volume.
    Container(container::ContainerArgs),
    /// Re-encrypt every file under a new content key, in place (mounted or not; resumable); --new-volume-key: everything under a new volume key.
    Rekey(rekey::RekeyArgs),
    /// Turn file summaries on for an unmounted volume made without them (gcm, xchacha20-poly1305; in place, resumable).
    Upgrade(upgrade::UpgradeArgs),
    /// Translate paths between CIPHERDIR and plaintext (find a file in a sync tool's history or trash).
    Name(name::NameArgs),
    /// Throughput of each content mode, cipher and keystream backend on this CPU (about a second).
    Speed(speed::SpeedArgs),
    /// Write the man pages into DIR (made from these definitions).
    #[command(hide = true)]
    GenMan(gen::GenArgs),
    /// Write bash, zsh and fish completions into DIR.
    #[command(hide = true)]
    GenCompletions(gen::GenArgs),
}

/// Run the command line; returns the process exit code.
pub fn run() -> i32 {
    tpm2::quiet_library_log();
    match parse(std::env::args_os().collect()) {
        Ok(Some(cli)) => finish(dispatch(cli)),
        Ok(None) => exit::OK,
        Err(code) => code,
    }
}

/// Parse a command line: a subcommand, or a mount helper's call
/// (`cli::mountopts`); `-o` items that are `warpfs mount` options become
/// those options. `Ok(None)`: nothing to do (help, version, a fake mount).
fn parse(argv: Vec<OsString>) -> Result<Option<Cli>, i32> {
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .flat_map(|c| std::iter::once(c.get_name().to_string()).chain(c.get_all_aliases().map(str::to_string)))
        .chain(["help".to_string()])
        .collect();
    let (argv, fake) = match mountopts::helper(&argv, &names) {
        Ok(mountopts::Helper::No) => (argv, false),
        Ok(mountopts::Helper::Mount(v)) => (v, false),
        Ok(mountopts::Helper::Fake(v)) => (v, true),
        Ok(mountopts::Helper::Remount(_, _, true)) => return Ok(None),
        Ok(mountopts::Helper::Remount(dir, opts, false)) => {
            let r = crate::fuse::remount::remount(std::path::Path::new(&dir), &opts).map_err(|e| {
                exit::CliError::new(
                    exit::MOUNT_FAILED,
                    format!(
                        "remount of {} ({opts}) failed: {e}",
                        std::path::Path::new(&dir).display()
                    ),
                )
            });
            return Err(finish(r));
        }
        Err(e) => return Err(finish(Err(e))),
    };
    let clap_err = |e: clap::Error| {
        let _ = e.print();
        if e.use_stderr() {
            exit::USAGE
        } else {
            exit::OK
        }
    };
    let mut cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) if e.use_stderr() => return Err(clap_err(e)),
        Err(e) => {
            clap_err(e);
            return Ok(None);
        }
    };
    if let Cmd::Mount(a) = &cli.cmd {
        let flags = mountopts::flags(a.options(), &mount_command()).map_err(|e| finish(Err(e)))?;
        if !flags.is_empty() {
            cli = Cli::try_parse_from(mountopts::with_flags(argv, flags)).map_err(clap_err)?;
        }
    }
    Ok((!fake).then_some(cli))
}

/// The exit code of a command's result (an error is printed first).
fn finish(res: Result<(), exit::CliError>) -> i32 {
    match res {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("warpfs: {}", e.msg);
            e.code
        }
    }
}

fn dispatch(cli: Cli) -> Result<(), exit::CliError> {
    // Every command that handles a password or key: no core dumps, no
    // ptrace or /proc/PID/mem by other unprivileged processes (the mount
    // and container daemons keep it after their fork). Key material itself
    // lives in locked, zeroed-on-drop memory (warpfs_crypto::Locked).
    if matches!(
        cli.cmd,
        Cmd::Init(_)
            | Cmd::Mount(_)
            | Cmd::Passwd(_)
            | Cmd::Key(_)
            | Cmd::Fsck(_)
            | Cmd::Container(_)
            | Cmd::Rekey(_)
            | Cmd::Upgrade(_)
            | Cmd::Name(_)
    ) && !warpfs_crypto::make_non_dumpable()
    {
        eprintln!("warpfs: warning: cannot make the process non-dumpable");
    }
    // Commands that only print end as any Unix tool does when their
    // reader goes away (`warpfs speed | head`): killed by SIGPIPE, not a
    // panic from println!. Commands that write to CIPHERDIR or become a
    // daemon keep SIGPIPE ignored (Rust's default) and see EPIPE instead.
    if matches!(cli.cmd, Cmd::Info(_) | Cmd::Stats(_) | Cmd::Speed(_) | Cmd::Name(_)) {
        // SAFETY: restoring a signal's default disposition; no handler runs.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match cli.cmd {
        Cmd::Init(a) => init::run(a),
        Cmd::Mount(a) => mount::run(*a),
        Cmd::Passwd(a) => passwd::run(a),
        Cmd::Key(a) => key::run(a),
        Cmd::Info(a) => info::run(a),
        Cmd::Stats(a) => stats::run(a),
        Cmd::Fsck(a) => fsck::run(a),
        Cmd::Container(a) => container::run(a),
        Cmd::Rekey(a) => rekey::run(a),
        Cmd::Upgrade(a) => upgrade::run(a),
        Cmd::Name(a) => name::run(a),
        Cmd::Speed(a) => speed::run(a),
        Cmd::GenMan(a) => gen::man(a),
        Cmd::GenCompletions(a) => gen::completions(a),
    }
}
