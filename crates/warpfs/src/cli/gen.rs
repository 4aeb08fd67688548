//! `warpfs gen-man DIR` and `warpfs gen-completions DIR` (hidden): man
//! pages made from the clap definitions (clap_mangen), so they never drift
//! from the program, and bash, zsh and fish completions (clap_complete).
//! The package installs what these write (`scripts/demo.sh` only makes it).

use super::exit::{CliError, ERROR};
use clap::{Arg, ArgAction, Args, Command, CommandFactory};
use std::path::{Path, PathBuf};

/// Arguments of `warpfs gen-man` and `warpfs gen-completions`.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// Directory to write into (created if missing).
    dir: PathBuf,
}

fn io(dir: &Path) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| CliError::new(ERROR, format!("{}: {e}", dir.display()))
}

/// The mount helper as mount(8) runs it, for its own page (section 8).
fn helper_command() -> Command {
    Command::new("mount.warpfs")
        .about("mount a warpfs volume from /etc/fstab, systemd or mount(8)")
        .long_about(
            "mount(8) runs mount.warpfs for file systems of type `warpfs`; mount.fuse3 runs \
             `warpfs CIPHERDIR MOUNTPOINT -o OPTIONS` for type `fuse.warpfs`. Both mount like \
             `warpfs mount -o OPTIONS CIPHERDIR MOUNTPOINT`.",
        )
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(
            Arg::new("cipherdir")
                .value_name("CIPHERDIR")
                .required(true)
                .help("The volume's cipher directory."),
        )
        .arg(
            Arg::new("mountpoint")
                .value_name("MOUNTPOINT")
                .required(true)
                .help("Where the plaintext view appears."),
        )
        .arg(
            Arg::new("options")
                .short('o')
                .value_name("OPTIONS")
                .action(ArgAction::Append)
                .help(
                    "Comma-separated options. Every long option of `warpfs mount` is one, with `_` or `-` \
                     (passfile=FILE, extpass=CMD, keyfile=FILE, config=FILE, idle=DURATION, \
                     force_owner=UID:GID, fsname=NAME, nonempty, engine=cpu, no_xattr, uring_enable, ...); \
                     tpm2 (open a TPM2 keyslot, no password prompt; tpm2-tcti=TCTI for another TPM than \
                     /dev/tpmrm0) and fido2 (a FIDO2 keyslot: a touch on the security key; with tpm2, \
                     tried when the TPM opens no slot); \
                     setuid=USER runs the extpass program and, once root has made the mount, the \
                     daemon as USER, whose mount it is (drop_privileges is accepted with it and \
                     refused alone); the kernel's: ro, rw, allow_other, default_permissions, nosuid, nodev, noexec, \
                     noatime, sync, dirsync; ignored as mount(8) and systemd's own: nofail, _netdev, \
                     noauto, auto, user, users, defaults, x-systemd.*, comment=. With remount \
                     (`mount -o remount,ro DIR`) only the kernel's options change, on the live \
                     mount; those not named stay. Anything else is an error (exit 2).",
                ),
        )
        .arg(
            Arg::new("sloppy")
                .short('s')
                .action(ArgAction::SetTrue)
                .help("Ignore unknown options (with a warning)."),
        )
        .arg(
            Arg::new("fake")
                .short('f')
                .action(ArgAction::SetTrue)
                .help("Check the options; mount nothing."),
        )
        .arg(
            Arg::new("nomtab")
                .short('n')
                .action(ArgAction::SetTrue)
                .help("Accepted (there is no mtab to write)."),
        )
        .arg(
            Arg::new("verbose")
                .short('v')
                .action(ArgAction::SetTrue)
                .help("Accepted."),
        )
        .arg(
            Arg::new("type")
                .short('t')
                .value_name("TYPE")
                .help("warpfs or fuse.warpfs."),
        )
        .after_long_help(
            "Example /etc/fstab line:\n\n    /srv/private.warpfs /mnt/private fuse.warpfs \
             passfile=/etc/warpfs/private.pass,nofail,idle=15min 0 0",
        )
}

/// Write `warpfs.1`, `warpfs-SUBCOMMAND.1` for each subcommand and
/// `mount.warpfs.8` into `a.dir`.
pub fn man(a: GenArgs) -> Result<(), CliError> {
    warpfs_backing::host::create_dir_all(&a.dir).map_err(io(&a.dir))?;
    clap_mangen::generate_to(super::Cli::command(), &a.dir).map_err(io(&a.dir))?;
    let mut helper = helper_command();
    helper.build();
    clap_mangen::Man::new(helper)
        .section("8")
        .generate_to(&a.dir)
        .map_err(io(&a.dir))?;
    Ok(())
}

/// Write `warpfs.bash`, `_warpfs` (zsh) and `warpfs.fish` into `a.dir`.
pub fn completions(a: GenArgs) -> Result<(), CliError> {
    use clap_complete::Shell;
    warpfs_backing::host::create_dir_all(&a.dir).map_err(io(&a.dir))?;
    let mut cmd = super::Cli::command();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, "warpfs", &a.dir).map_err(io(&a.dir))?;
    }
    Ok(())
}
