//! `warpfs passwd`: change the password. Only warpfs.conf is rewritten (the
//! master key is rewrapped), so no data is re-encrypted. With `--masterkey
//! stdin` a forgotten password is reset with the master key `warpfs init`
//! printed; the old config is kept beside the new one (`warpfs.conf.bak`).

use super::exit::{CliError, BAD_CONFIG};
use super::PassArgs;
use clap::Args;
use std::path::PathBuf;
use warpfs_config::Config;
use warpfs_volume::{Options, Volume};

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
    /// Forgotten password: `stdin` reads the master key as `warpfs init`
    /// printed it from standard input, instead of the old password; the old
    /// config is kept as FILE.bak (FILE.bak.N if that exists).
    #[arg(long, value_name = "stdin", value_parser = ["stdin"], conflicts_with_all = ["passfile", "extpass"])]
    masterkey: Option<String>,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
}

pub fn run(a: PasswdArgs) -> Result<(), CliError> {
    let path = a.config.path(&a.cipherdir);
    let cfg = Config::load_file(&path)?;
    let new_src = super::password::Source {
        passfile: a.new_passfile.clone(),
        extpass: a.new_extpass.clone(),
        // The keyfile stays: it is combined with the new password too.
        keyfile: a.pass.keyfile.clone(),
        keyfile_only: a.pass.keyfile_only,
    };
    if a.masterkey.is_some() {
        let master = super::masterkey::read_stdin()?;
        let vol = Volume::open(&a.cipherdir, &cfg, &master, Options { read_only: true })
            .map_err(|e| CliError::new(BAD_CONFIG, e))?;
        super::masterkey::check(&vol, &a.cipherdir)?;
        drop(vol);
        let new = new_src.read("New password: ", true)?;
        let backup = cfg.reset_password(&path, &master, new.bytes())?;
        println!("Password reset. The old config is kept as {}.", backup.display());
        return Ok(());
    }
    let old = a.pass.source().read("Old password: ", false)?;
    // Check the old password before asking for a new one (a sync tool's
    // copy of CIPHERDIR/warpfs.conf that it opens becomes warpfs.conf again).
    let cfg = if a.config.config.is_some() {
        cfg.unlock(old.bytes())?;
        cfg
    } else {
        super::unlock::unlock(&a.cipherdir, cfg, old.bytes())?.0
    };
    let new = new_src.read("New password: ", true)?;
    cfg.change_password_at(&path, old.bytes(), new.bytes())?;
    println!("Password changed.");
    Ok(())
}
