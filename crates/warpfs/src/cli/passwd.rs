//! `warpfs passwd`: change the password. Only warpfs.conf is rewritten (the
//! master key is rewrapped), so no data is re-encrypted.

use super::exit::CliError;
use super::PassArgs;
use clap::Args;
use std::path::PathBuf;
use warpfs_config::Config;

/// Arguments of `warpfs passwd`.
#[derive(Args, Debug)]
pub struct PasswdArgs {
    /// Old password source.
    #[command(flatten)]
    pass: PassArgs,
    /// Read the new password from the first line of this file.
    #[arg(long, value_name = "FILE", conflicts_with = "new_extpass")]
    new_passfile: Option<PathBuf>,
    /// Run this shell command for the new password.
    #[arg(long, value_name = "CMD")]
    new_extpass: Option<String>,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
}

pub fn run(a: PasswdArgs) -> Result<(), CliError> {
    let cfg = Config::load(&a.cipherdir)?;
    let old = a.pass.source().read("Old password: ", false)?;
    // Check the old password before asking for a new one (a sync tool's
    // copy of the config it opens becomes warpfs.conf again).
    let (cfg, _, _) = super::unlock::unlock(&a.cipherdir, cfg, old.bytes())?;
    let new_src = super::password::Source {
        passfile: a.new_passfile.clone(),
        extpass: a.new_extpass.clone(),
        // The keyfile stays: it is combined with the new password too.
        keyfile: a.pass.keyfile.clone(),
        keyfile_only: a.pass.keyfile_only,
    };
    let new = new_src.read("New password: ", true)?;
    cfg.change_password(&a.cipherdir, old.bytes(), new.bytes())?;
    println!("Password changed.");
    Ok(())
}
