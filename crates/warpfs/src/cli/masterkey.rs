//! The master key as `warpfs init` printed it, given instead of the
//! password (`--masterkey stdin` of `mount` and `passwd`), and the check
//! that it is this volume's key.

use super::exit::{CliError, ERROR, WRONG_PASSWORD};
use std::io::Read;
use std::path::Path;
use warpfs_crypto::keys::MasterKey;
use warpfs_volume::Volume;

/// The master key from standard input (the recovery text `warpfs init`
/// printed; dashes and whitespace ignored), for `--masterkey stdin`.
pub fn read_stdin() -> Result<MasterKey, CliError> {
    let mut text = zeroize::Zeroizing::new(String::new());
    std::io::stdin()
        .take(4096)
        .read_to_string(&mut text)
        .map_err(|e| CliError::new(ERROR, format!("cannot read the master key from stdin: {e}")))?;
    MasterKey::from_recovery_text(&text).map_err(|e| CliError::new(WRONG_PASSWORD, format!("bad master key: {e}")))
}

/// A master key given directly cannot be checked against the wrapped one;
/// refuse it when CIPHERDIR's root has entries and none of their names
/// decrypts under it.
pub fn check(vol: &Volume, cipherdir: &Path) -> Result<(), CliError> {
    let entries = vol
        .backing()
        .top()
        .list()
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", cipherdir.display())))?
        .into_iter()
        .filter(|e| {
            let n = e.name.to_string_lossy();
            !n.starts_with("warpfs.") || (n.starts_with("warpfs.long.") && !n.ends_with(".name"))
        })
        .count();
    if entries > 0 && !vol.some_name_decrypts(Path::new("")).unwrap_or(false) {
        return Err(CliError::new(
            WRONG_PASSWORD,
            "wrong master key: no name in the volume's root decrypts with it",
        ));
    }
    Ok(())
}
