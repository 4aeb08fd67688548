//! Versions seen (FORMAT.md 16) from the commands that rewrite
//! `warpfs.conf` (`passwd`, `key add`, `key remove`): when this host keeps
//! the versions seen of the volume in the default place, the config just
//! replaced is remembered as replaced, so a copy of it put back is refused
//! by the next mount with `--versions-seen` even before any mount used the
//! new one.

use std::path::Path;
use warpfs_backing::host;
use warpfs_config::Config;
use warpfs_crypto::keys::MasterKey;
use warpfs_volume::seen::{self, Seen};

/// What the versions seen name a config by: its key state and digest.
pub type ConfigId = (warpfs_config::KeyState, [u8; 32]);

/// `c`'s [`ConfigId`].
pub fn config_id(c: &Config) -> ConfigId {
    (c.key_state(), seen::config_digest(c.to_json().as_bytes()))
}

/// The config `old` (of volume key `master`) was replaced by the one now
/// at `path`. Does nothing unless a state of the volume exists in the
/// default place (`seen::default_dir`); a failure is a warning.
pub fn config_replaced(cipherdir: &Path, master: &MasterKey, old: ConfigId, path: &Path) {
    let Ok(dir) = seen::default_dir() else {
        return;
    };
    let canon = host::canonicalize(cipherdir).unwrap_or(cipherdir.to_path_buf());
    if host::metadata(seen::state_path(&dir, &canon)).is_err() {
        return;
    }
    let r = Config::load_file(path)
        .map_err(|e| e.to_string())
        .and_then(|new| Seen::open(&dir, &canon, master)?.config_replaced(old, config_id(&new)));
    if let Err(e) = r {
        eprintln!("warpfs: warning: the versions seen of this volume were not updated: {e}");
    }
}
