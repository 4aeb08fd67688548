//! A rekey to a new volume key (`warpfs key remove SLOT --rekey`,
//! `warpfs rekey --new-volume-key`; FORMAT.md 10.5, decision record 0083):
//! which slots keep the volume (the one that unlocked, and each whose
//! secret is given now), the plan said before anything changes, the
//! config written with the new key, then content, names and directory IVs
//! moved with a progress bar: by this process on an unmounted volume, by
//! the mount daemon on a mounted one (decision record 0092); `warpfs
//! rekey` finishes an interrupted one.

use super::exit::{CliError, ERROR, REKEY_UNFINISHED, USAGE, WRONG_PASSWORD};
use super::password::Source;
use super::unlock::Given;
pub use super::volkey_mount::RunArgs;
use super::volkey_mount::{bar, finish_online, mounted};
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use warpfs_config::{Config, Input, Opened, Slot, SlotKind};
use warpfs_crypto::slotkeys::{RecoveryKey, SlotKey};
use warpfs_volume::rekey::{self, Progress, RekeyOptions};

/// Which slots a volume-key rekey keeps, and how it asks.
#[derive(Args, Debug, Clone, Default)]
pub struct KeepArgs {
    /// Keep keyslot SLOT through the rekey, opened with SPEC:
    /// `passfile:FILE`, `keyfile:FILE`, `passfile:FILE,keyfile:FILE`,
    /// `recovery:FILE` (the recovery key's text), `tpm2` / `tpm2:TCTI`
    /// (a TPM2 slot, unsealed by the TPM now) or `fido2` (its security
    /// key; `fido2,passfile:FILE` with the key's PIN). Repeat for each slot. A
    /// slot whose secret is not given (here, or when asked on the
    /// terminal) is dropped: the new volume key can only be wrapped for a
    /// slot whose key is at hand.
    #[arg(long = "keep", value_name = "SLOT=SPEC")]
    pub keep: Vec<String>,
    /// Also make a new recovery slot and print its key once.
    #[arg(long)]
    pub new_recovery: bool,
    /// Do not ask: drop every slot whose secret was not given, and start.
    #[arg(long)]
    pub yes: bool,
}

/// How to open one slot kept through the rekey.
enum Spec {
    Secret(Source),
    Recovery(PathBuf),
    Tpm2(Option<String>),
    /// A security key; its PIN, if needed, from this source.
    Fido2(Source),
}

fn parse_keep(s: &str) -> Result<(u32, Spec), CliError> {
    let bad = |why: &str| CliError::new(USAGE, format!("--keep {s}: {why}"));
    let (slot, spec) = s.split_once('=').ok_or_else(|| bad("expected SLOT=SPEC"))?;
    let slot: u32 = slot.parse().map_err(|_| bad("SLOT is a keyslot number"))?;
    if let Some(f) = spec.strip_prefix("recovery:") {
        return Ok((slot, Spec::Recovery(PathBuf::from(f))));
    }
    if spec == "tpm2" {
        return Ok((slot, Spec::Tpm2(None)));
    }
    if let Some(t) = spec.strip_prefix("tpm2:") {
        return Ok((slot, Spec::Tpm2(Some(t.to_owned()))));
    }
    let mut src = Source::default();
    let mut fido2 = false;
    for part in spec.split(',') {
        match part.split_once(':') {
            Some(("passfile", f)) => src.passfile = Some(PathBuf::from(f)),
            Some(("keyfile", f)) if !fido2 => src.keyfile = Some(PathBuf::from(f)),
            None if part == "fido2" && src.keyfile.is_none() => fido2 = true,
            _ => {
                return Err(bad(
                    "SPEC is passfile:FILE, keyfile:FILE (or both, comma-separated), recovery:FILE, tpm2, tpm2:TCTI \
                     or fido2 (fido2,passfile:FILE with the key's PIN)",
                ))
            }
        }
    }
    if fido2 {
        return Ok((slot, Spec::Fido2(src)));
    }
    src.keyfile_only = src.passfile.is_none();
    Ok((slot, Spec::Secret(src)))
}

/// The slot key `spec` gives for slot `id` of `cfg`.
fn open_spec(cfg: &Config, id: u32, spec: &Spec) -> Result<SlotKey, CliError> {
    let key = match spec {
        Spec::Secret(src) => {
            let pw = src.read("", false)?;
            cfg.slot_key(id, &pw.input())
        }
        Spec::Recovery(f) => {
            let text = zeroize::Zeroizing::new(
                warpfs_backing::host::read_to_string(f)
                    .map_err(|e| CliError::new(ERROR, format!("cannot read {}: {e}", f.display())))?,
            );
            let rk = RecoveryKey::from_text(&text)
                .map_err(|e| CliError::new(WRONG_PASSWORD, format!("{}: bad recovery key: {e}", f.display())))?;
            cfg.slot_key(id, &Input::Recovery(&rk))
        }
        Spec::Tpm2(tcti) => {
            let tpm = super::tpm2::Client::new(tcti.as_deref())?;
            cfg.slot_key(id, &Input::Tpm2(&tpm))
        }
        Spec::Fido2(src) => {
            let pin = |prompt: &str| src.read(prompt, false);
            let f = super::fido2::unlock(cfg, None, &pin, Some(id))?;
            cfg.slot_key(id, &f.input())
        }
    };
    key.map_err(|e| match e {
        warpfs_config::ConfigError::WrongPassword => {
            CliError::new(WRONG_PASSWORD, format!("keyslot {id}: that does not open it"))
        }
        e => e.into(),
    })
}

/// Ask on the terminal for slot `s`'s secret; `None` when the user drops it.
fn ask(cfg: &Config, s: &Slot) -> Result<Option<SlotKey>, CliError> {
    let name = describe(s);
    let io = |e: std::io::Error| CliError::new(ERROR, format!("cannot read from the terminal: {e}"));
    let line = |prompt: &str| -> Result<String, CliError> {
        eprint!("{prompt}");
        std::io::stderr().flush().map_err(io)?;
        let mut l = String::new();
        std::io::stdin().lock().read_line(&mut l).map_err(io)?;
        Ok(l.trim().to_string())
    };
    loop {
        if matches!(
            line(&format!("Keep {name}? It needs its secret now [Y/n] "))?.as_str(),
            "n" | "N" | "no"
        ) {
            return Ok(None);
        }
        let key = match s.kind() {
            SlotKind::Tpm2 => {
                // No secret to type: the TPM unseals it (its own TCTI hint,
                // else the default device).
                let tpm = super::tpm2::Client::new(None)?;
                match cfg.slot_key(s.id, &Input::Tpm2(&tpm)) {
                    Err(warpfs_config::ConfigError::Device(e)) => {
                        eprintln!("warpfs: {name}: {e}; give --keep {}=tpm2:TCTI, or drop it", s.id);
                        continue;
                    }
                    r => r,
                }
            }
            SlotKind::Fido2 => {
                let pin = |prompt: &str| Source::default().read(prompt, false);
                match super::fido2::unlock(cfg, None, &pin, Some(s.id)) {
                    Ok(f) => cfg.slot_key(s.id, &f.input()),
                    Err(e) => {
                        eprintln!("warpfs: {}", e.msg);
                        continue;
                    }
                }
            }
            SlotKind::Recovery => {
                let t = zeroize::Zeroizing::new(
                    rpassword::prompt_password(format!("Recovery key of {name}: ")).map_err(io)?,
                );
                match RecoveryKey::from_text(&t) {
                    Ok(rk) => cfg.slot_key(s.id, &Input::Recovery(&rk)),
                    Err(e) => {
                        eprintln!("warpfs: not a recovery key: {e}");
                        continue;
                    }
                }
            }
            kind => {
                let keyfile = match kind {
                    SlotKind::Password => None,
                    _ => Some(PathBuf::from(line(&format!("Keyfile of {name}: "))?)),
                };
                let src = Source {
                    keyfile,
                    keyfile_only: kind == SlotKind::Keyfile,
                    ..Default::default()
                };
                let pw = src.read(&format!("Password of {name}: "), false)?;
                cfg.slot_key(s.id, &pw.input())
            }
        };
        match key {
            Ok(k) => return Ok(Some(k)),
            Err(warpfs_config::ConfigError::WrongPassword) => {
                eprintln!("warpfs: that does not open {name}");
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn describe(s: &Slot) -> String {
    if s.label.is_empty() {
        format!("keyslot {} ({})", s.id, s.kind())
    } else {
        format!("keyslot {} ({}, \"{}\")", s.id, s.kind(), s.label.escape_debug())
    }
}

/// Start a rekey to a new volume key of the volume at `cipherdir`, whose
/// config at `path` was opened as `opened` with `given`; slot `remove`
/// goes. Then run it to the end.
#[allow(clippy::too_many_arguments)]
pub fn start(
    cipherdir: &Path,
    path: &Path,
    cfg: Config,
    given: &Given,
    opened: Opened,
    remove: Option<u32>,
    keep: &KeepArgs,
    run: &RunArgs,
) -> Result<(), CliError> {
    super::unlock::not_mid_upgrade(&cfg, cipherdir)?;
    let mnt = mounted(cipherdir)?;
    let _lock = match &mnt {
        None => Some(super::lock::lock_for_rekey(cipherdir)?),
        Some(_) => None,
    };
    if cfg.rekey_target().is_some() {
        return Err(CliError::new(
            ERROR,
            format!(
                "{}: a rekey is unfinished: run warpfs rekey to finish it first",
                cipherdir.display()
            ),
        ));
    }
    // A config without keyslots gets one, for the secret that opened it.
    let (cfg, opened) = if cfg.has_slots() {
        (cfg, opened)
    } else {
        match given {
            Given::Secret(pw) => cfg.with_keyslots(pw.bytes(), pw.kind(), "")?,
            Given::Recovery(_) | Given::Tpm2(_) | Given::Fido2(_) => {
                return Err(CliError::new(
                    USAGE,
                    "this volume has no keyslots yet: give its password (not the master key) to rekey it",
                ))
            }
        }
    };
    if let Some(id) = remove {
        if cfg.slot(id).is_none() {
            return Err(CliError::new(
                ERROR,
                format!("there is no keyslot {id} (warpfs key list)"),
            ));
        }
    }
    let root = warpfs_backing::Root::open(cipherdir)
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", cipherdir.display())))?;
    let survey = rekey::survey(&root, cfg.content_mode()).map_err(|e| CliError::new(ERROR, e))?;
    // The slots kept: the one that opened (unless removed), the --keep ones,
    // then (on a terminal) each other one the user opens now.
    let mut kept: Vec<(u32, SlotKey)> = Vec::new();
    if let (Some(id), Some(k)) = (opened.slot, opened.slot_key) {
        if Some(id) != remove {
            kept.push((id, k));
        }
    }
    for k in &keep.keep {
        let (id, spec) = parse_keep(k)?;
        if Some(id) == remove {
            return Err(CliError::new(USAGE, format!("--keep {id}: that is the slot removed")));
        }
        let key = open_spec(&cfg, id, &spec)?;
        kept.retain(|(i, _)| *i != id);
        kept.push((id, key));
    }
    let asking = !keep.yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    for s in cfg.slots() {
        if Some(s.id) == remove || kept.iter().any(|(i, _)| *i == s.id) {
            continue;
        }
        if asking {
            if let Some(k) = ask(&cfg, s)? {
                kept.push((s.id, k));
            }
        }
    }
    let keeps = |s: &&Slot| kept.iter().any(|(i, _)| *i == s.id);
    let stay: Vec<String> = cfg.slots().iter().filter(keeps).map(describe).collect();
    let gone: Vec<String> = cfg.slots().iter().filter(|s| !keeps(s)).map(describe).collect();
    if stay.is_empty() && !keep.new_recovery {
        return Err(CliError::new(
            ERROR,
            "no keyslot would be left: keep one (--keep SLOT=SPEC) or make one (--new-recovery)",
        ));
    }
    eprintln!(
        "warpfs: this rekey draws a new volume key and re-encrypts {} file(s) ({:.1} MiB), {} name(s) and {} directory IV(s) \
         in {}: every backing name changes, so a sync tool uploads the whole volume again. {}",
        survey.files,
        survey.bytes as f64 / (1 << 20) as f64,
        survey.names,
        survey.dirs,
        cipherdir.display(),
        match &mnt {
            None => "The volume cannot be mounted until it finishes; if it stops, warpfs rekey finishes it.".to_string(),
            Some(m) => format!(
                "It stays mounted at {}: reads and writes go on while the content moves; requests to the mount wait \
                 while the names move. If it stops, warpfs rekey finishes it.",
                m.display()
            ),
        }
    );
    eprintln!(
        "warpfs: keyslots kept: {}",
        if stay.is_empty() {
            "none".into()
        } else {
            stay.join(", ")
        }
    );
    if !gone.is_empty() {
        eprintln!("warpfs: keyslots dropped: {}", gone.join(", "));
    }
    if keep.new_recovery {
        eprintln!("warpfs: a new recovery slot is made and its key printed once");
    }
    if !cfg.slots().iter().filter(keeps).any(|s| s.kind() == SlotKind::Recovery) && !keep.new_recovery {
        eprintln!("warpfs: note: no recovery slot is left (--new-recovery makes one)");
    }
    confirm(keep.yes)?;
    let rk = keep.new_recovery.then(RecoveryKey::generate);
    let (mid, new) = cfg.begin_volume_rekey(&opened.key, opened.slot, &kept, rk.as_ref().map(|r| (r, "")))?;
    mid.save_at(path)?;
    drop(kept);
    if let Some(rk) = &rk {
        let id = mid.slots().iter().map(|s| s.id).max().unwrap_or(0);
        print_recovery(rk, id);
    }
    super::rekey_crash::kill_point("config:0");
    match mnt {
        Some(m) => finish_online(&m, path, &mid, &new, opened.slot, run),
        None => finish(cipherdir, path, &mid, &new, opened.slot, run),
    }
}

/// Ask "Continue?" on a terminal; off a terminal `--yes` is needed.
fn confirm(yes: bool) -> Result<(), CliError> {
    if yes {
        return Ok(());
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(CliError::new(
            USAGE,
            "not on a terminal: add --yes to start this rekey (nothing was changed)",
        ));
    }
    eprint!("Continue? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut l = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut l)
        .map_err(|e| CliError::new(ERROR, e.to_string()))?;
    if matches!(l.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(CliError::new(ERROR, "stopped: nothing was changed"))
    }
}

/// Print a new recovery key once.
pub fn print_recovery(rk: &RecoveryKey, id: u32) {
    let text = zeroize::Zeroizing::new(rk.text());
    println!("Your recovery key (keyslot {id}) is:");
    println!();
    println!("    {}", &*text);
    println!();
    println!("It opens the volume like a password (warpfs mount --masterkey stdin). Keep it");
    println!("somewhere safe and offline; it is not shown again.");
}

/// Resume (or run) the volume-key rekey recorded in `cfg` (at `path`),
/// opened as `opened` (the new key), holding the offline lock.
pub fn resume(cipherdir: &Path, path: &Path, cfg: &Config, opened: &Opened, run: &RunArgs) -> Result<(), CliError> {
    if let Some(m) = mounted(cipherdir)? {
        eprintln!(
            "warpfs: finishing the unfinished rekey to a new volume key on the mount at {}",
            m.display()
        );
        return finish_online(&m, path, cfg, &opened.key, opened.slot, run);
    }
    let _lock = super::lock::lock_for_rekey(cipherdir)?;
    eprintln!("warpfs: finishing the unfinished rekey to a new volume key");
    finish(cipherdir, path, cfg, &opened.key, opened.slot, run)
}

fn finish(
    cipherdir: &Path,
    path: &Path,
    cfg: &Config,
    new: &warpfs_crypto::MasterKey,
    used: Option<u32>,
    run: &RunArgs,
) -> Result<(), CliError> {
    let (vol, old) = rekey::open_volume_rekey(cipherdir, cfg, new).map_err(|e| CliError::new(REKEY_UNFINISHED, e))?;
    super::rekey_crash::recover_or_stop(&vol, cipherdir, REKEY_UNFINISHED)?;
    let root = vol.backing().clone();
    let names = rekey::survey(&root, cfg.content_mode()).map(|s| s.names).unwrap_or(0);
    let opts = RekeyOptions {
        jobs: run.jobs,
        max_rate: run.max_rate,
        on_event: super::rekey_crash::kill_hook(),
        rekey_id: None,
    };
    let progress = Progress::default();
    progress.names_total.store(names, Ordering::Relaxed);
    let (stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let start = Instant::now();
    let r = std::thread::scope(|sc| {
        let worker = sc.spawn(|| {
            let r = rekey::run_volume_rekey(&vol, cfg, (new, &old), &opts, &progress, &stop);
            done.store(true, Ordering::Release);
            r
        });
        let bar = bar();
        while !done.load(Ordering::Acquire) {
            let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            let (b, bt) = (n(&progress.bytes_done), n(&progress.bytes_total));
            let (m, mt) = (n(&progress.names_done), n(&progress.names_total));
            // One bar over both parts: content by bytes, then names.
            bar.set_length(bt.max(1) + mt);
            bar.set_position(b.min(bt) + m.min(mt));
            bar.set_message(if m > 0 || n(&progress.dirs_done) > 0 {
                "names"
            } else {
                "content"
            });
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
        worker
            .join()
            .unwrap_or_else(|_| Err("the rekey worker panicked".into()))
    });
    drop(vol);
    let done = r.map_err(|m| {
        CliError::new(
            REKEY_UNFINISHED,
            format!("{m}\nwarpfs: the rekey stopped; run warpfs rekey to finish it"),
        )
    })?;
    if !done {
        return Err(CliError::new(
            REKEY_UNFINISHED,
            "the rekey stopped; run warpfs rekey to finish it",
        ));
    }
    cfg.finish_volume_rekey(new, used)?.save_at(path)?;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    if n(&progress.unreadable) > 0 {
        eprintln!(
            "warpfs: {} block(s) could not be decrypted and were left as they were (they read as errors)",
            n(&progress.unreadable)
        );
    }
    if n(&progress.names_left) > 0 {
        eprintln!(
            "warpfs: {} name(s) opened under neither key and were left as they were (warpfs fsck names them)",
            n(&progress.names_left)
        );
    }
    println!(
        "rekeyed {} file(s), {} name(s) and {} directory IV(s) to a new volume key (key generation {}) in {:.2} s",
        n(&progress.files_moved),
        n(&progress.names_done),
        n(&progress.dirs_done),
        cfg.rekey_target().unwrap_or(0),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_specs_parse_into_sources() {
        let (id, s) = parse_keep("3=passfile:/p,keyfile:/k").unwrap();
        assert_eq!(id, 3);
        let Spec::Secret(src) = s else { panic!() };
        assert_eq!(src.kind(), SlotKind::PasswordKeyfile);
        let Spec::Secret(src) = parse_keep("1=keyfile:/k").unwrap().1 else {
            panic!()
        };
        assert_eq!(src.kind(), SlotKind::Keyfile);
        let Spec::Secret(src) = parse_keep("1=passfile:/p").unwrap().1 else {
            panic!()
        };
        assert_eq!(src.kind(), SlotKind::Password);
        assert!(matches!(parse_keep("2=recovery:/r").unwrap().1, Spec::Recovery(_)));
        for bad in ["x=passfile:/p", "1", "1=password:/p", "1=passfile"] {
            assert_eq!(parse_keep(bad).err().unwrap().code, USAGE, "{bad}");
        }
    }
}
