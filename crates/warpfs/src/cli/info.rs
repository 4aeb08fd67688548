//! `warpfs info`: a volume's settings and keyslots, never secrets; `--json`
//! prints one JSON object whose fields docs/CLI.md lists (a stable
//! interface).

use super::exit::CliError;
use clap::Args;
use std::path::{Path, PathBuf};
use warpfs_config::Config;

/// Version of the `info --json` object (bumped only when a field changes
/// meaning or goes away; new fields may be added within a version).
pub const INFO_SCHEMA: u32 = 1;

/// Arguments of `warpfs info`.
#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Print one JSON object (fields: docs/CLI.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
}

/// The `info --json` object of `cfg` (read from `config`), for the volume
/// at `cipherdir`.
pub fn info_json(cfg: &Config, cipherdir: &Path, config: &Path) -> serde_json::Value {
    let abs = |p: &Path| warpfs_backing::host::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    serde_json::json!({
        "schema": INFO_SCHEMA,
        "cipherdir": abs(cipherdir).to_string_lossy(),
        "config": abs(config).to_string_lossy(),
        "format_version": cfg.version(),
        "creator": cfg.creator(),
        "content_mode": cfg.content_mode().as_str(),
        "cipher": cfg.content_mode().cipher_name(),
        "key_bits": cfg.key_bits(),
        "authenticated": cfg.content_mode().is_authenticated(),
        "block_size": cfg.block_size(),
        "feature_flags": cfg.feature_flags().iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        "kdf": {
            "algorithm": "argon2id",
            "memory_kib": cfg.kdf_params().memory_kib,
            "iterations": cfg.kdf_params().iterations,
            "parallelism": cfg.kdf_params().parallelism,
        },
        "key_generation": cfg.key_generation(),
        "rekey_target": cfg.rekey_target(),
        "keyslots": cfg.has_slots().then(|| cfg.slots().iter().map(super::key::slot_json).collect::<Vec<_>>()),
        "keyslot_revision": cfg.revision(),
        "volume_rekey_unfinished": cfg.volume_rekey_under_way(),
        "summary_upgrade_unfinished": cfg.summary_upgrade_under_way(),
        "mounted_at": super::mounted::mounted_at(cipherdir),
    })
}

pub fn run(a: InfoArgs) -> Result<(), CliError> {
    let path = a.config.path(&a.cipherdir);
    let cfg = Config::load_file(&path)?;
    let copies = super::unlock::config_copies(&a.cipherdir);
    if a.json {
        let mut j = info_json(&cfg, &a.cipherdir, &path);
        j["config_copies"] = copies.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        println!("{j}");
    } else {
        println!("{cfg}");
        for sl in cfg.slots() {
            let label = if sl.label.is_empty() {
                String::new()
            } else {
                format!(" \"{}\"", sl.label.escape_debug())
            };
            let used = sl
                .last_used
                .map_or_else(String::new, |t| format!(", last used {}", super::key::utc(t)));
            let kdf = format!(" ({})", super::key::slot_detail(sl));
            println!(
                "  slot {}: {}{label}{kdf}, created {}{used}",
                sl.id,
                sl.kind(),
                super::key::utc(sl.created)
            );
        }
        for p in copies {
            let state = match super::unlock::read_config(&p) {
                Ok(c) => format!("it says {}", c.key_state()),
                Err(e) => format!("unreadable: {e}"),
            };
            println!(
                "conflicting config copy: {} (a sync tool's; {state}; it unlocks with the password it was \
                 written for; `warpfs passwd --from-copy {} {}` makes it the config)",
                p.display(),
                p.display(),
                a.cipherdir.display()
            );
        }
    }
    Ok(())
}
