//! The recovery key as `warpfs init` (or `warpfs key add --recovery`)
//! printed it, given instead of the password (`--masterkey stdin`): on a
//! keyslot volume it opens a recovery slot (or is the volume key itself,
//! checked by the config's MAC); on a volume made before keyslots it is
//! the master key, checked here against the volume's names.

use super::exit::{CliError, ERROR, WRONG_PASSWORD};
use std::io::Read;
use std::path::Path;
use warpfs_crypto::slotkeys::RecoveryKey;
use warpfs_volume::Volume;

/// The recovery key from standard input (the text `warpfs init` printed;
/// dashes and whitespace ignored), for `--masterkey stdin`.
pub fn read_stdin() -> Result<RecoveryKey, CliError> {
    let mut text = zeroize::Zeroizing::new(String::new());
    std::io::stdin()
        .take(4096)
        .read_to_string(&mut text)
        .map_err(|e| CliError::new(ERROR, format!("cannot read the recovery key from stdin: {e}")))?;
    RecoveryKey::from_text(&text).map_err(|e| CliError::new(WRONG_PASSWORD, format!("bad recovery key: {e}")))
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
