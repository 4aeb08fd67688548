//! Shared by the fuzz targets: the keys of the example volumes in
//! crates/warpfs/tests/volumes (unlocked once per process), so seeds made
//! from those volumes decrypt and the fuzzer starts from valid files.

use std::path::PathBuf;
use std::sync::OnceLock;
use warpfs_config::Config;
use warpfs_crypto::Subkeys;

/// `crates/warpfs/tests/volumes/v1-<mode>` of this checkout.
pub fn volume_dir(mode: &str) -> PathBuf {
    example_dir(&format!("v1-{mode}"))
}

/// `crates/warpfs/tests/volumes/<name>` of this checkout.
pub fn example_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../crates/warpfs/tests/volumes/{name}"))
}

/// The unlocked master key and config of example volume `v1-<mode>`.
fn unlock(mode: &str) -> (warpfs_crypto::MasterKey, Config) {
    unlock_example(&format!("v1-{mode}"))
}

/// The unlocked master key and config of example volume `name` (its
/// directory under crates/warpfs/tests/volumes).
pub fn unlock_example(name: &str) -> (warpfs_crypto::MasterKey, Config) {
    let dir = example_dir(name);
    let cfg = Config::load(&dir.join("cipher")).expect("example volume config");
    let pw = std::fs::read_to_string(dir.join("password.txt")).expect("example volume password");
    let master = cfg
        .unlock(pw.trim_end_matches('\n').as_bytes())
        .expect("example volume unlocks");
    (master, cfg)
}

/// The subkeys of example volume `v1-<mode>` (`mode`: "gcm" or "ctr").
pub fn keys(mode: &'static str) -> &'static Subkeys {
    static GCM: OnceLock<Subkeys> = OnceLock::new();
    static CTR: OnceLock<Subkeys> = OnceLock::new();
    let cell = if mode == "gcm" { &GCM } else { &CTR };
    cell.get_or_init(|| {
        let (master, cfg) = unlock(mode);
        Subkeys::derive(&master, cfg.key_bits())
    })
}

/// The subkeys and XTS key of example volume `v1-xts`.
pub fn xts_keys() -> &'static (Subkeys, warpfs_crypto::XtsKey) {
    static XTS: OnceLock<(Subkeys, warpfs_crypto::XtsKey)> = OnceLock::new();
    XTS.get_or_init(|| {
        let (master, cfg) = unlock("xts");
        let cipher = cfg.content_mode().xts_cipher().expect("v1-xts is an xts volume");
        (
            Subkeys::derive(&master, cfg.key_bits()),
            Subkeys::xts_key(&master, cfg.key_bits(), cipher),
        )
    })
}
