//! `warpfs init`: create a volume (config + root directory IV) with two
//! keyslots, the password and a recovery key, and show the recovery key
//! once.

use super::exit::{CliError, ERROR, NOT_EMPTY};
use super::PassArgs;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use warpfs_config::{Config, ContentMode, FeatureFlag, SlotKind};
use warpfs_crypto::kdf::KdfParams;
use warpfs_crypto::slotkeys::RecoveryKey;

/// Content encryption mode.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum ModeArg {
    /// GCM per 4 KiB block (authenticated; default); with --cipher
    /// xchacha20, XChaCha20-Poly1305 per block.
    Gcm,
    /// CTR per 4 KiB block (the EncFS++ paper's mode; no integrity); with
    /// --cipher xchacha20, the XChaCha20 keystream alone.
    Ctr,
    /// XTS per 4 KiB block (IEEE 1619, as disk encryption; no integrity, no nonce table).
    Xts,
}

/// Block cipher of the content mode.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CipherArg {
    /// AES (hardware-accelerated with AES-NI).
    Aes,
    /// Twofish (as TrueCrypt offers it; software: masks made ahead on idle
    /// cores by the speculative engine in gcm and ctr).
    Twofish,
    /// XChaCha20, with Poly1305 tags in gcm (fast without AES hardware;
    /// masks made ahead on idle cores like Twofish's; gcm and ctr only,
    /// 256-bit keys).
    Xchacha20,
}

/// A switch.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// Arguments of `warpfs init`.
#[derive(Args, Debug)]
pub struct InitArgs {
    #[command(flatten)]
    pass: PassArgs,
    /// Content mode.
    #[arg(long, value_enum, default_value = "gcm")]
    mode: ModeArg,
    /// Content key size in bits (xts: each of its two keys).
    #[arg(long, default_value_t = 256, value_parser = parse_key_bits)]
    key_bits: u32,
    /// Content cipher: aes or twofish (any mode), xchacha20 (gcm: as
    /// XChaCha20-Poly1305, and ctr). Which to pick: README, "Choosing a
    /// cipher"; `warpfs speed` measures each on this CPU.
    #[arg(long, value_enum, default_value = "aes")]
    cipher: CipherArg,
    /// Argon2id memory in KiB (at least 32768).
    #[arg(long, value_name = "KIB")]
    kdf_memory: Option<u32>,
    /// Argon2id iterations (at least 2).
    #[arg(long, value_name = "N")]
    kdf_iterations: Option<u32>,
    /// Make no recovery keyslot (and print no recovery key).
    #[arg(long)]
    quiet: bool,
    /// Reverse mode: CIPHERDIR is a plaintext directory (PLAINDIR, need not
    /// be empty); writes the config of its encrypted view (`warpfs mount
    /// --reverse`) to PLAINDIR/.warpfs.reverse.conf, or to --config FILE.
    #[arg(long)]
    reverse: bool,
    /// Write the config here instead of CIPHERDIR/warpfs.conf (every
    /// later command then needs the same --config FILE).
    #[command(flatten)]
    config: super::ConfigArg,
    /// gcm (AES or XChaCha20): keep an authenticated summary of each file's nonce entries, so
    /// that rolling back or mixing some of a file's blocks is detected
    /// (FORMAT.md 12; format version 2). On by default in gcm with AES or
    /// XChaCha20, where it costs within about 10% of write throughput
    /// (bench/results/2026-12-07-summary-fsync); other modes have no tags
    /// to summarise. `warpfs upgrade` turns it on later for a volume made
    /// without it. With --reverse off by default: on gives every file of
    /// the view a summary (each file is read once more when opened), so
    /// a restore from a copy of the view detects rolled-back or mixed
    /// blocks; `warpfs upgrade --reverse` turns it on later.
    #[arg(long, value_enum, value_name = "on|off")]
    file_summary: Option<OnOff>,
    /// The (empty or new) directory that will hold the encrypted files.
    cipherdir: PathBuf,
}

fn parse_key_bits(s: &str) -> Result<u32, String> {
    match s {
        "128" => Ok(128),
        "256" => Ok(256),
        _ => Err("must be 128 or 256".into()),
    }
}

pub fn run(a: InitArgs) -> Result<(), CliError> {
    let dir = &a.cipherdir;
    let base = match a.mode {
        ModeArg::Gcm => ContentMode::Gcm,
        ModeArg::Ctr => ContentMode::Ctr,
        ModeArg::Xts => ContentMode::Xts,
    };
    let cipher = match a.cipher {
        CipherArg::Aes => warpfs_crypto::ContentCipher::Aes,
        CipherArg::Twofish => warpfs_crypto::ContentCipher::Twofish,
        CipherArg::Xchacha20 => warpfs_crypto::ContentCipher::XChaCha20,
    };
    let mode = ContentMode::with_cipher(base, cipher).ok_or_else(|| {
        CliError::new(
            super::exit::USAGE,
            "--cipher xchacha20 needs --mode gcm or ctr (a stream cipher has no XTS mode)",
        )
    })?;
    if cipher == warpfs_crypto::ContentCipher::XChaCha20 && a.key_bits != 256 {
        return Err(CliError::new(
            super::exit::USAGE,
            "--cipher xchacha20 has 256-bit keys only (--key-bits 256)",
        ));
    }
    if a.reverse {
        if !matches!(mode, ContentMode::Gcm) {
            return Err(CliError::new(
                super::exit::USAGE,
                "--reverse volumes use --mode gcm with AES",
            ));
        }
        let kdf = kdf_params(&a)?;
        let summary = a.file_summary == Some(OnOff::On);
        return super::reverse::init(
            &a.pass,
            dir,
            a.config.config.as_deref(),
            (a.key_bits, summary),
            kdf,
            a.quiet,
        );
    }
    // Version 2 (FORMAT.md 6): symlink targets and xattr values bound to
    // their entry; gcm files with summaries when asked for.
    let mut features = vec![FeatureFlag::BoundSeals];
    let summaries = match a.file_summary {
        Some(OnOff::On) => true,
        Some(OnOff::Off) => false,
        None => mode.has_file_summaries(),
    };
    if summaries {
        if !mode.has_file_summaries() {
            return Err(CliError::new(
                super::exit::USAGE,
                "--file-summary on needs --mode gcm with AES or XChaCha20 (ctr and xts have no tags to summarise)",
            ));
        }
        features.push(FeatureFlag::FileSummary);
    }
    if let Err(e) = warpfs_backing::host::metadata(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(CliError::new(ERROR, format!("{}: {e}", dir.display())));
        }
        warpfs_backing::host::create_dir_all(dir)
            .map_err(|e| CliError::new(ERROR, format!("cannot create {}: {e}", dir.display())))?;
    }
    let root = warpfs_backing::Root::open(dir).map_err(|e| CliError::new(ERROR, format!("{}: {e}", dir.display())))?;
    if !root
        .top()
        .list()
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", dir.display())))?
        .is_empty()
    {
        return Err(CliError::new(
            NOT_EMPTY,
            format!("{} is not empty; init needs an empty directory", dir.display()),
        ));
    }
    let kdf = kdf_params(&a)?;
    let pw = a.pass.source().read("New password: ", true)?;
    let recovery = (!a.quiet).then(RecoveryKey::generate);
    let (cfg, _volume_key) = Config::create_slots_at(
        &a.config.path(dir),
        pw.bytes(),
        pw.kind(),
        mode,
        a.key_bits,
        kdf,
        &features,
        recovery.as_ref(),
    )?;
    warpfs_volume::Volume::init_root(&root)
        .map_err(|e| CliError::new(ERROR, format!("cannot write the root directory IV: {e}")))?;
    println!(
        "Created warpfs volume in {} (mode {}, {}-{}).",
        dir.display(),
        mode,
        mode.cipher_name(),
        a.key_bits
    );
    if let Some(rk) = &recovery {
        println!();
        let id = cfg
            .slots()
            .iter()
            .find(|s| s.kind() == SlotKind::Recovery)
            .map_or(1, |s| s.id);
        super::volkey::print_recovery(rk, id);
        println!("If the password is forgotten, this key still opens the volume (it does not help");
        println!("if warpfs.conf is lost: keep a copy of that too).");
    }
    Ok(())
}

/// The Argon2id parameters the arguments ask for.
fn kdf_params(a: &InitArgs) -> Result<KdfParams, CliError> {
    let mut kdf = KdfParams::DEFAULT;
    if let Some(m) = a.kdf_memory {
        kdf.memory_kib = m;
    }
    if let Some(t) = a.kdf_iterations {
        kdf.iterations = t;
    }
    kdf.validate().map_err(|e| CliError::new(ERROR, e.to_string()))?;
    Ok(kdf)
}
