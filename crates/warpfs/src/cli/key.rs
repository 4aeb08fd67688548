//! `warpfs key`: a volume's keyslots (FORMAT.md 2.6). `list` shows them
//! (never a secret; without a secret the table is shown as read, not
//! verified); `add` makes a password, keyfile, password+keyfile,
//! recovery, TPM2 (`tpm2.rs`) or FIDO2 (`fido2.rs`) slot, opened by any
//! slot the user can open (a config without
//! keyslots becomes one, with its password as slot 0); `remove` takes a
//! slot away, and with `--rekey` draws a new volume key so that an older
//! copy of the config opened with the removed secret decrypts nothing
//! (`volkey.rs`).

use super::exit::{CliError, ERROR, USAGE};
use super::password::Source;
use super::unlock::Given;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use warpfs_config::{Config, NewSlot, Opened, Slot, SlotKind};
use warpfs_crypto::slotkeys::RecoveryKey;

/// Arguments of `warpfs key`.
#[derive(Args, Debug)]
pub struct KeyArgs {
    #[command(subcommand)]
    cmd: KeyCmd,
}

#[derive(Subcommand, Debug)]
enum KeyCmd {
    /// List the keyslots (slot, kind, label, created, last used; never a secret).
    List(ListArgs),
    /// Add a keyslot: a password, a keyfile, both, a recovery key printed once, a key sealed by a TPM2, or a FIDO2 security key (hmac-secret).
    Add(AddArgs),
    /// Remove a keyslot; with --rekey, re-encrypt the volume under a new volume key.
    Remove(RemoveArgs),
}

/// How an existing slot is opened (the secret of any slot).
#[derive(Args, Debug, Clone, Default)]
struct UnlockArgs {
    /// Read the password of an existing slot from the first line of this file.
    #[arg(long, value_name = "FILE", conflicts_with = "extpass")]
    passfile: Option<PathBuf>,
    /// Run this shell command for the password of an existing slot.
    #[arg(long, value_name = "CMD")]
    extpass: Option<String>,
    /// The keyfile of an existing slot (combined with its password).
    #[arg(long, value_name = "FILE")]
    unlock_keyfile: Option<PathBuf>,
    /// The existing slot opens with --unlock-keyfile alone.
    #[arg(long, requires = "unlock_keyfile", conflicts_with_all = ["passfile", "extpass"])]
    unlock_keyfile_only: bool,
    /// Open with the recovery key instead: `stdin` reads it as it was printed.
    #[arg(long, value_name = "stdin", value_parser = ["stdin"], conflicts_with_all = ["passfile", "extpass", "unlock_keyfile"])]
    masterkey: Option<String>,
    /// Open with an existing TPM2 slot instead (unsealed by the TPM at the
    /// slot's own TCTI, else device:/dev/tpmrm0; no prompt).
    #[arg(long, conflicts_with_all = ["passfile", "extpass", "unlock_keyfile", "masterkey", "unlock_fido2"])]
    unlock_tpm2: bool,
    /// Open with a FIDO2 security key (an existing fido2 slot) instead;
    /// --passfile or --extpass then give the key's PIN, if it needs one.
    #[arg(long, conflicts_with_all = ["unlock_keyfile", "masterkey"])]
    unlock_fido2: bool,
    /// The FIDO2 device for --unlock-fido2 and for a new fido2 slot, e.g.
    /// /dev/hidraw3 (default: each one plugged in).
    #[arg(long, value_name = "PATH")]
    fido2_device: Option<String>,
}

impl UnlockArgs {
    fn given(&self, cfg: &Config) -> Result<Given, CliError> {
        if self.unlock_tpm2 {
            return Ok(Given::Tpm2(super::tpm2::Client::new(None)?));
        }
        let src = Source {
            passfile: self.passfile.clone(),
            extpass: self.extpass.clone(),
            keyfile: self.unlock_keyfile.clone(),
            keyfile_only: self.unlock_keyfile_only,
        };
        if self.unlock_fido2 {
            let pin = |prompt: &str| src.read(prompt, false);
            let f = super::fido2::unlock(cfg, self.fido2_device.as_deref(), &pin, None)?;
            return Ok(Given::Fido2(f));
        }
        Given::read(
            &src,
            self.masterkey.is_some(),
            "Password of an existing keyslot: ",
            None,
        )
    }
}

/// Arguments of `warpfs key list`.
#[derive(Args, Debug)]
struct ListArgs {
    /// Print one JSON object (fields: docs/CLI.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
}

/// Arguments of `warpfs key add`.
#[derive(Args, Debug)]
struct AddArgs {
    #[command(flatten)]
    unlock: UnlockArgs,
    /// The new slot opens with a password (with --keyfile: a password and
    /// that keyfile together).
    #[arg(long, required_unless_present_any = ["keyfile", "recovery", "tpm2", "fido2"])]
    password: bool,
    /// The new slot opens with this keyfile (alone, or with --password).
    #[arg(long, value_name = "FILE", conflicts_with = "recovery")]
    keyfile: Option<PathBuf>,
    /// A recovery slot: a new random recovery key, printed once.
    #[arg(long, conflicts_with = "password")]
    recovery: bool,
    /// A TPM2 slot: a new random key sealed by this machine's TPM (to
    /// --tpm2-pcrs when given); `--tpm2` on mount, fsck and rekey opens it
    /// without a password.
    #[arg(long, conflicts_with_all = ["password", "keyfile", "recovery", "fido2"])]
    tpm2: bool,
    /// The TPM's TCTI [default: device:/dev/tpmrm0]; kept in the slot as a
    /// hint when it is a TPM device or a simulator on the loopback address.
    #[arg(long, value_name = "TCTI", requires = "tpm2")]
    tpm2_tcti: Option<String>,
    /// Seal to these PCRs of the SHA-256 bank at their current values
    /// (e.g. 7, or 0,2,7): the TPM refuses to unseal once one changes (a
    /// firmware, boot loader or Secure Boot change).
    #[arg(long, value_name = "LIST", requires = "tpm2")]
    tpm2_pcrs: Option<String>,
    /// A FIDO2 slot: a new credential with the hmac-secret extension on a
    /// security key (two touches; the key's PIN when it has one, read from
    /// --new-passfile, --new-extpass or the terminal, and then needed at
    /// every unlock).
    #[arg(long, conflicts_with_all = ["password", "keyfile", "recovery"])]
    fido2: bool,
    /// Read the new slot's password (a fido2 slot: the key's PIN) from the
    /// first line of this file.
    #[arg(long, value_name = "FILE", conflicts_with = "new_extpass")]
    new_passfile: Option<PathBuf>,
    /// Run this shell command for the new slot's password (or PIN).
    #[arg(long, value_name = "CMD")]
    new_extpass: Option<String>,
    /// A name for the slot (at most 64 bytes), shown by `warpfs key list`.
    #[arg(long, value_name = "LABEL", default_value = "")]
    label: String,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
}

/// Arguments of `warpfs key remove`.
#[derive(Args, Debug)]
struct RemoveArgs {
    #[command(flatten)]
    unlock: UnlockArgs,
    /// Also draw a new volume key and re-encrypt every file, name,
    /// directory IV, symlink target and xattr under it, so that a copy of
    /// the config from before, opened with the removed secret, decrypts
    /// nothing. Every backing name changes. On a mounted volume the mount
    /// does it (requests wait while the names move).
    #[arg(long)]
    rekey: bool,
    #[command(flatten)]
    keep: super::volkey::KeepArgs,
    /// With --rekey: files re-encrypted at once (default: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
    /// The keyslot to remove (`warpfs key list`).
    slot: u32,
}

pub fn run(a: KeyArgs) -> Result<(), CliError> {
    match a.cmd {
        KeyCmd::List(a) => list(a),
        KeyCmd::Add(a) => add(a),
        KeyCmd::Remove(a) => remove(a),
    }
}

/// `YYYY-MM-DD HH:MM:SS UTC` of Unix seconds `t`.
pub fn utc(t: u64) -> String {
    let (days, secs) = ((t / 86400) as i64, t % 86400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The JSON of one slot (no secret, nothing of its wrapping); a FIDO2
/// slot adds its relying party, device hint and whether it needs the
/// key's PIN.
pub fn slot_json(s: &Slot) -> serde_json::Value {
    let mut j = serde_json::json!({
        "id": s.id,
        "kind": s.kind().as_str(),
        "label": s.label,
        "created": s.created,
        "last_used": s.last_used,
        "tpm2": s.tpm2().map(|t| serde_json::json!({
            "pcr_bank": "sha256",
            "pcrs": t.pcrs,
            "tcti": t.tcti,
        })),
    });
    if let Some(f) = s.fido2() {
        j["fido2"] = serde_json::json!({
            "rp_id": f.rp_id,
            "device": f.device,
            "user_verification": f.user_verification,
        });
    }
    j
}

/// What `key list` and `info` say of a slot's device: a FIDO2 slot's
/// device hint and whether it needs the key's PIN ("-" for other kinds).
pub fn slot_device(s: &Slot) -> String {
    match s.fido2() {
        Some(f) => format!(
            "{}{}",
            f.device.as_deref().unwrap_or("security key").escape_debug(),
            if f.user_verification { ", PIN" } else { "" }
        ),
        None => "-".to_string(),
    }
}

/// What a slot is opened with, in words (no secret): its KDF, the TPM2
/// policy, or the FIDO2 device.
pub fn slot_detail(s: &Slot) -> String {
    if s.fido2().is_some() {
        return format!("hmac-secret of {}", slot_device(s));
    }
    if let Some(t) = s.tpm2() {
        let pcrs = if t.pcrs.is_empty() {
            "no PCR policy".to_string()
        } else {
            let l: Vec<String> = t.pcrs.iter().map(u32::to_string).collect();
            format!("PCRs {} of sha256", l.join(","))
        };
        let tcti = t.tcti.as_ref().map_or_else(String::new, |t| format!(", TCTI {t}"));
        return format!("sealed by a TPM2, {pcrs}{tcti}");
    }
    match s.kdf() {
        Some(k) => format!(
            "argon2id, {} KiB memory, {} iterations, parallelism {}",
            k.memory_kib, k.iterations, k.parallelism
        ),
        None => "hkdf-sha256".to_string(),
    }
}

fn list(a: ListArgs) -> Result<(), CliError> {
    let cfg = Config::load_file(&a.config.path(&a.cipherdir))?;
    if a.json {
        let slots = cfg
            .has_slots()
            .then(|| cfg.slots().iter().map(slot_json).collect::<Vec<_>>());
        let j = serde_json::json!({
            "schema": 1,
            "format_version": cfg.version(),
            "keyslots": slots,
            "revision": cfg.revision(),
            "verified": false,
            "volume_rekey_unfinished": cfg.volume_rekey_under_way(),
        });
        println!("{j}");
        return Ok(());
    }
    if !cfg.has_slots() {
        println!(
            "{}: no keyslots (config version {}): one password (or keyfile); `warpfs key add` turns it into slot 0",
            a.cipherdir.display(),
            cfg.version()
        );
        return Ok(());
    }
    println!(
        "{:<5} {:<17} {:<24} {:<24} {:<24} DEVICE",
        "SLOT", "KIND", "LABEL", "CREATED", "LAST USED"
    );
    for s in cfg.slots() {
        println!(
            "{:<5} {:<17} {:<24} {:<24} {:<24} {}",
            s.id,
            s.kind().as_str(),
            s.label.escape_debug().to_string(),
            utc(s.created),
            s.last_used.map_or_else(|| "-".to_string(), utc),
            slot_device(s)
        );
        if s.kind() == SlotKind::Tpm2 {
            println!("      ({})", slot_detail(s));
        }
    }
    println!("(as warpfs.conf says: a slot opening it checks the whole table)");
    Ok(())
}

/// Open the config at `config` of `cipherdir` with what the user gives;
/// a config without keyslots is turned into one (in memory), its secret
/// slot 0. Returns the config, how it opened, and the input given.
fn open(cipherdir: &Path, config: &super::ConfigArg, unlock: &UnlockArgs) -> Result<(Config, Opened, Given), CliError> {
    let path = config.path(cipherdir);
    let cfg = Config::load_file(&path)?;
    let given = unlock.given(&cfg)?;
    let (cfg, opened) = super::unlock::unlock(cipherdir, config, cfg, &given.input())?;
    if cfg.has_slots() {
        return Ok((cfg, opened, given));
    }
    let Given::Secret(pw) = &given else {
        return Err(CliError::new(
            USAGE,
            "this volume has no keyslots yet: open it with its password (its old master key cannot make slot 0)",
        ));
    };
    let (cfg, opened) = cfg.with_keyslots(pw.bytes(), pw.kind(), "")?;
    eprintln!(
        "warpfs: {} gets keyslots (config version 3; warpfs builds without keyslots no longer open it); \
         its password is slot 0",
        path.display()
    );
    Ok((cfg, opened, given))
}

fn add(a: AddArgs) -> Result<(), CliError> {
    let path = a.config.path(&a.cipherdir);
    if a.label.len() > warpfs_config::MAX_LABEL_LEN || a.label.chars().any(char::is_control) {
        return Err(CliError::new(
            USAGE,
            format!(
                "--label is at most {} bytes, without control characters",
                warpfs_config::MAX_LABEL_LEN
            ),
        ));
    }
    let (cfg, opened, _) = open(&a.cipherdir, &a.config, &a.unlock)?;
    let before = super::seen::config_id(&cfg);
    let (cfg, id, rk) = if a.tpm2 {
        let (object, secret) = super::tpm2::enroll(a.tpm2_tcti.as_deref(), a.tpm2_pcrs.as_deref())?;
        let new = NewSlot::Tpm2 {
            object,
            secret: &secret,
        };
        let (c, id) = cfg.with_slot(&opened.key, opened.slot, &new, &a.label)?;
        (c, id, None)
    } else if a.recovery {
        let rk = RecoveryKey::generate();
        let (c, id) = cfg.with_slot(&opened.key, opened.slot, &NewSlot::Recovery(&rk), &a.label)?;
        (c, id, Some(rk))
    } else if a.fido2 {
        let src = Source {
            passfile: a.new_passfile.clone(),
            extpass: a.new_extpass.clone(),
            ..Default::default()
        };
        let pin = |prompt: &str| src.read(prompt, false);
        let new = super::fido2::enrol(a.unlock.fido2_device.as_deref(), &pin)?;
        let slot = NewSlot::Fido2 {
            params: &new.params,
            output: &new.output,
        };
        let (c, id) = cfg.with_slot(&opened.key, opened.slot, &slot, &a.label)?;
        (c, id, None)
    } else {
        let src = Source {
            passfile: a.new_passfile.clone(),
            extpass: a.new_extpass.clone(),
            keyfile: a.keyfile.clone(),
            keyfile_only: !a.password,
        };
        let secret = src.read("Password of the new keyslot: ", true)?;
        let new = NewSlot::Secret {
            bytes: secret.bytes(),
            kind: secret.kind(),
            kdf: cfg.kdf_params(),
        };
        let (c, id) = cfg.with_slot(&opened.key, opened.slot, &new, &a.label)?;
        (c, id, None)
    };
    cfg.save_at(&path)?;
    super::seen::config_replaced(&a.cipherdir, &opened.key, before, &path);
    let kind = cfg.slot(id).map_or("?", |s| s.kind().as_str());
    println!("Added keyslot {id} ({kind}).");
    if let Some(rk) = &rk {
        super::volkey::print_recovery(rk, id);
    }
    Ok(())
}

fn remove(a: RemoveArgs) -> Result<(), CliError> {
    let path = a.config.path(&a.cipherdir);
    let k = &a.keep;
    if !a.rekey && (!k.keep.is_empty() || k.new_recovery || k.yes || a.jobs.is_some()) {
        return Err(CliError::new(
            USAGE,
            "--keep, --new-recovery, --yes and --jobs go with --rekey",
        ));
    }
    let (cfg, opened, given) = open(&a.cipherdir, &a.config, &a.unlock)?;
    if cfg.slot(a.slot).is_none() {
        return Err(CliError::new(
            ERROR,
            format!("there is no keyslot {} (warpfs key list shows them)", a.slot),
        ));
    }
    if a.rekey {
        let run = super::volkey::RunArgs {
            jobs: a
                .jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
                .clamp(1, 256),
            max_rate: None,
        };
        return super::volkey::start(&a.cipherdir, &path, cfg, &given, opened, Some(a.slot), &a.keep, &run);
    }
    let kind = cfg.slot(a.slot).map_or(SlotKind::Password, |s| s.kind());
    cfg.without_slot(&opened.key, opened.slot, a.slot)?.save_at(&path)?;
    super::seen::config_replaced(&a.cipherdir, &opened.key, super::seen::config_id(&cfg), &path);
    println!("Removed keyslot {} ({kind}).", a.slot);
    eprintln!(
        "warpfs: note: a copy of warpfs.conf from before this (a sync tool's history, a backup) still opens with \
         that slot's secret and gives the volume key; `warpfs key remove --rekey` (or `warpfs rekey \
         --new-volume-key`) re-encrypts the volume under a new key, after which it decrypts nothing"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(4_102_444_799), "2099-12-31 23:59:59 UTC");
    }
}
