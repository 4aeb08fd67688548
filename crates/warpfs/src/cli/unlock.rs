//! Unlocking a volume whose `warpfs.conf` a sync tool may have copied
//! (FORMAT.md 13.5): the password is tried on `warpfs.conf`, then on each
//! copy of it, since both sides of a `warpfs passwd` conflict wrap the same
//! master key.

use super::exit::CliError;
use std::path::{Path, PathBuf};
use warpfs_config::{Config, ConfigError, MasterKey};

/// A sync tool's copies of `warpfs.conf` in `cipherdir`, sorted (listed
/// through the backing-store door).
pub fn config_copies(cipherdir: &Path) -> Vec<PathBuf> {
    let Ok(root) = warpfs_backing::Root::open(cipherdir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = root
        .top()
        .list()
        .map(|d| {
            d.into_iter()
                .filter(|e| warpfs_volume::is_config_copy(e.name.as_encoded_bytes()))
                .map(|e| cipherdir.join(e.name))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A copy of the config (through the door: never a symlink, FIFO, device
/// or second link).
fn load_copy(p: &Path) -> Result<Config, String> {
    Config::load_file(p).map_err(|e| e.to_string())
}

/// Unlock `cfg` (CIPHERDIR's `warpfs.conf`) with `password`, or, when the
/// password is wrong for it, the first copy of it the password unlocks:
/// that copy's config, the master key and the copy's path.
pub fn unlock(
    cipherdir: &Path,
    cfg: Config,
    password: &[u8],
) -> Result<(Config, MasterKey, Option<PathBuf>), CliError> {
    match cfg.unlock(password) {
        Ok(m) => Ok((cfg, m, None)),
        Err(ConfigError::WrongPassword) => {
            for p in config_copies(cipherdir) {
                let Ok(c) = load_copy(&p) else { continue };
                if let Ok(m) = c.unlock(password) {
                    eprintln!(
                        "warpfs: warning: the password opens {}, a sync tool's conflicting copy of \
                         warpfs.conf, not warpfs.conf itself; `warpfs passwd` with it makes it \
                         warpfs.conf again",
                        p.display()
                    );
                    return Ok((c, m, Some(p)));
                }
            }
            Err(ConfigError::WrongPassword.into())
        }
        Err(e) => Err(e.into()),
    }
}
