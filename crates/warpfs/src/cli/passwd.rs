//! `warpfs passwd`: change the password. Only warpfs.conf is rewritten (the
//! master key is rewrapped; in a keyslot config, in the slot the old
//! password opened), so no data is re-encrypted. With `--masterkey stdin`
//! a forgotten password is reset with the recovery key `warpfs init`
//! printed (a keyslot config: the one password slot, or `--key-slot N`);
//! the old config is kept beside the new one (`warpfs.conf.bak`). With
//! `--from-copy COPY` a sync tool's copy of the config becomes the config
//! again (FORMAT.md 13.5), unless it is older than warpfs.conf.

use super::exit::{CliError, BAD_CONFIG, USAGE};
use super::PassArgs;
use clap::Args;
use std::path::PathBuf;
use warpfs_config::Input;
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
    /// Forgotten password: `stdin` reads the recovery key as `warpfs init`
    /// printed it from standard input, instead of the old password; the old
    /// config is kept as FILE.bak (FILE.bak.N if that exists).
    #[arg(long, value_name = "stdin", value_parser = ["stdin"], conflicts_with_all = ["passfile", "extpass"])]
    masterkey: Option<String>,
    /// With --masterkey, in a config with several password or keyfile
    /// slots: the slot whose password is reset (`warpfs key list`).
    #[arg(long, value_name = "N", requires = "masterkey")]
    key_slot: Option<u32>,
    /// A conflict of `warpfs passwd` on two hosts: make COPY (a sync tool's
    /// copy of warpfs.conf) the config again, under the new password (or
    /// the same one). The old password is COPY's; a copy older than
    /// warpfs.conf (key generation, rekey) is refused. A copy beside
    /// warpfs.conf is removed once it is the config.
    #[arg(long, value_name = "COPY", conflicts_with = "masterkey")]
    from_copy: Option<PathBuf>,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
}

pub fn run(a: PasswdArgs) -> Result<(), CliError> {
    let path = a.config.path(&a.cipherdir);
    let new_src = super::password::Source {
        passfile: a.new_passfile.clone(),
        extpass: a.new_extpass.clone(),
        // The keyfile stays: it is combined with the new password too.
        keyfile: a.pass.keyfile.clone(),
        keyfile_only: a.pass.keyfile_only,
    };
    if let Some(copy_path) = &a.from_copy {
        // The config at `path` is only compared with the copy: no password
        // need open it (a file there that does not parse refuses the copy).
        return from_copy(&path, copy_path, &a.pass, &new_src);
    }
    let cfg = super::unlock::load_main(&a.cipherdir, &a.config)?;
    if a.masterkey.is_some() {
        let rk = super::masterkey::read_stdin()?;
        let (cfg, opened) = super::unlock::unlock(&a.cipherdir, &a.config, cfg, &Input::Recovery(&rk))?;
        drop(rk);
        if !opened.verified {
            let vol = Volume::open(&a.cipherdir, &cfg, &opened.key, Options { read_only: true })
                .map_err(|e| CliError::new(BAD_CONFIG, e))?;
            super::masterkey::check(&vol, &a.cipherdir)?;
        }
        if let Some(id) = a.key_slot {
            if !cfg.slot(id).is_some_and(|s| s.kind() == new_src.kind()) {
                return Err(CliError::new(
                    USAGE,
                    format!(
                        "there is no {} slot {id} (warpfs key list shows the slots)",
                        new_src.kind()
                    ),
                ));
            }
        }
        let new = new_src.read("New password: ", true)?;
        let backup = cfg.reset_password_slot(&path, &opened, a.key_slot, new.bytes())?;
        println!("Password reset. The old config is kept as {}.", backup.display());
        return Ok(());
    }
    let old = a.pass.source().read("Old password: ", false)?;
    // Check the old password before asking for a new one; it opens the
    // config only (a copy that it opens is reported, never used).
    let (cfg, opened) = super::unlock::unlock(&a.cipherdir, &a.config, cfg, &old.input())?;
    let new = new_src.read("New password: ", true)?;
    match opened.slot {
        Some(id) => {
            cfg.with_new_secret(&opened, id, new.bytes())?.save_at(&path)?;
            println!("Password of keyslot {id} changed.");
        }
        None => {
            cfg.change_password_at(&path, old.bytes(), new.bytes())?;
            println!("Password changed.");
        }
    }
    super::seen::config_replaced(&a.cipherdir, &opened.key, super::seen::config_id(&cfg), &path);
    Ok(())
}

/// `--from-copy COPY`: the old password opens COPY, which must not be
/// older than the config at `path` as that file reads; COPY's settings
/// are written to `path` under the new password.
fn from_copy(
    path: &std::path::Path,
    copy_path: &std::path::Path,
    pass: &PassArgs,
    new_src: &super::password::Source,
) -> Result<(), CliError> {
    let copy = super::unlock::read_config(copy_path)
        .map_err(|e| CliError::new(BAD_CONFIG, format!("{}: {e}", copy_path.display())))?;
    let old = pass.source().read("Password of the copy: ", false)?;
    copy.open(&old.input())?;
    let main = super::unlock::main_beside(path, copy_path);
    super::unlock::check_named(&copy, copy_path, &main, path)?;
    let beside = super::unlock::copy_beside(path, copy_path);
    let new = new_src.read("New password: ", true)?;
    copy.change_password_at(path, old.bytes(), new.bytes())?;
    if beside {
        warpfs_backing::split_user_path(copy_path)
            .and_then(|(dir, name)| warpfs_backing::unlink(&dir.top().entry(&name)))
            .map_err(|e| CliError::new(super::exit::ERROR, format!("{}: {e}", copy_path.display())))?;
        println!(
            "Password changed: {} is the config again ({} removed).",
            path.display(),
            copy_path.display()
        );
    } else if !matches!(main, super::unlock::Main::Same) {
        println!(
            "Password changed: {} holds the settings of {} (which is left as it is).",
            path.display(),
            copy_path.display()
        );
    } else {
        println!("Password changed.");
    }
    Ok(())
}
