//! warpfs layer 1: the command line. Argument parsing, password prompts,
//! exit codes; no file-system logic.

mod container;
mod exit;
mod fsck;
mod info;
mod init;
mod logging;
mod mount;
mod passwd;
mod password;
mod rekey;
mod stats;
mod virt;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// warpfs: an encrypted file system with speculative AES-CTR keystream.
#[derive(Parser, Debug)]
#[command(name = "warpfs", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

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

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create a new encrypted volume in an empty CIPHERDIR.
    Init(init::InitArgs),
    /// Mount CIPHERDIR at MOUNTPOINT (daemonizes unless -f).
    Mount(mount::MountArgs),
    /// Change the password (rewraps the master key; data is not re-encrypted).
    Passwd(passwd::PasswdArgs),
    /// Show a volume's settings (never secrets).
    Info(info::InfoArgs),
    /// Show a live mount's keystream engine counters (ready-hits, waits, ...; root or the mount's user).
    Stats(stats::StatsArgs),
    /// Check an unmounted volume (config, names, headers, nonces, GCM tags); repair when asked.
    Fsck(fsck::FsckArgs),
    /// Encrypted container: one XTS-encrypted image exposed as MOUNTPOINT/volume.
    Container(container::ContainerArgs),
    /// Re-encrypt every file under a new content key, in place (mounted or not; resumable).
    Rekey(rekey::RekeyArgs),
}

/// Run the command line; returns the process exit code.
pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { exit::USAGE } else { exit::OK };
        }
    };
    // Every command that handles a password or key: no core dumps, no
    // ptrace or /proc/PID/mem by other unprivileged processes (the mount
    // and container daemons keep it after their fork). Key material itself
    // lives in locked, zeroed-on-drop memory (warpfs_crypto::Locked).
    if matches!(
        cli.cmd,
        Cmd::Init(_) | Cmd::Mount(_) | Cmd::Passwd(_) | Cmd::Fsck(_) | Cmd::Container(_) | Cmd::Rekey(_)
    ) && !warpfs_crypto::make_non_dumpable()
    {
        eprintln!("warpfs: warning: cannot make the process non-dumpable");
    }
    let res = match cli.cmd {
        Cmd::Init(a) => init::run(a),
        Cmd::Mount(a) => mount::run(a),
        Cmd::Passwd(a) => passwd::run(a),
        Cmd::Info(a) => info::run(a),
        Cmd::Stats(a) => stats::run(a),
        Cmd::Fsck(a) => fsck::run(a),
        Cmd::Container(a) => container::run(a),
        Cmd::Rekey(a) => rekey::run(a),
    };
    match res {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("warpfs: {}", e.msg);
            e.code
        }
    }
}
