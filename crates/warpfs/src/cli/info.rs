//! `warpfs info`: a volume's settings, never secrets.

use super::exit::CliError;
use clap::Args;
use std::path::PathBuf;
use warpfs_config::Config;

/// Arguments of `warpfs info`.
#[derive(Args, Debug)]
pub struct InfoArgs {
    /// The volume's cipher directory.
    cipherdir: PathBuf,
}

pub fn run(a: InfoArgs) -> Result<(), CliError> {
    let cfg = Config::load(&a.cipherdir)?;
    println!("{cfg}");
    for p in super::unlock::config_copies(&a.cipherdir) {
        println!(
            "conflicting config copy: {} (a sync tool's; it unlocks with the password it was written for)",
            p.display()
        );
    }
    Ok(())
}
