//! Unlocking a volume's config, and what a sync tool's copies of
//! `warpfs.conf` may do (FORMAT.md 13.5). A copy is used only when the user
//! names it (`--config COPY`, `warpfs passwd --from-copy COPY`), and never
//! when it records an older key state than the volume's own config: an
//! older genuine copy (from a provider's version history) would roll the
//! content key back, and after a rekey done because a key leaked, new files
//! would go back under the leaked key. When the password opens a copy but
//! not `warpfs.conf`, `warpfs.conf` is reported as altered (exit 11), not
//! as a wrong password, and nothing is used.
//!
//! The decisions ([`check_named`], [`main_altered`]) take configs already
//! read; the file reads are apart ([`config_copies`], [`read_config`],
//! [`main_beside`]). A keyslot config opens with whichever slot the
//! input opens; "older" also counts the revision of its slot table, so a
//! copy from before a slot was removed is older.

use super::exit::{CliError, BAD_CONFIG, REKEY_UNFINISHED};
use super::password::Password;
use super::ConfigArg;
use std::path::{Path, PathBuf};
use warpfs_config::{Config, ConfigError, Input, Opened};
use warpfs_crypto::slotkeys::RecoveryKey;

/// What the user gave to open a config.
pub enum Given {
    /// A password, keyfile or both.
    Secret(Password),
    /// A recovery key (`--masterkey stdin`).
    Recovery(RecoveryKey),
    /// A TPM that unseals `tpm2` slots (`--tpm2`).
    Tpm2(super::tpm2::Client),
    /// What a FIDO2 security key gave for one slot (`--fido2`).
    Fido2(super::fido2::Unlocked),
}

impl Given {
    /// As keyslot input.
    pub fn input(&self) -> Input<'_> {
        match self {
            Given::Secret(p) => p.input(),
            Given::Recovery(r) => Input::Recovery(r),
            Given::Fido2(f) => f.input(),
            Given::Tpm2(c) => Input::Tpm2(c),
        }
    }

    /// [`Given::read`], or the TPM with `--tpm2` (no prompt; refused
    /// beside a password source or the recovery key).
    pub fn read_or_tpm2(
        tpm2: &super::tpm2::UnlockArgs,
        source: &super::password::Source,
        masterkey: bool,
        prompt: &str,
        user: Option<&super::setuid::User>,
    ) -> Result<Given, CliError> {
        let other = if masterkey {
            Some("--masterkey")
        } else if source.passfile.is_some() {
            Some("--passfile")
        } else if source.extpass.is_some() {
            Some("--extpass")
        } else if source.keyfile.is_some() {
            Some("--keyfile")
        } else {
            None
        };
        match tpm2.client(other)? {
            Some(c) => Ok(Given::Tpm2(c)),
            None => Given::read(source, masterkey, prompt, user),
        }
    }

    /// Read it: the recovery key from standard input with `masterkey`,
    /// else the secret from `source` (`prompt` on the terminal).
    pub fn read(
        source: &super::password::Source,
        masterkey: bool,
        prompt: &str,
        user: Option<&super::setuid::User>,
    ) -> Result<Given, CliError> {
        if masterkey {
            return Ok(Given::Recovery(super::masterkey::read_stdin()?));
        }
        Ok(Given::Secret(source.read_as(prompt, false, user)?))
    }
}

/// Refuse a volume whose rekey to a new volume key is unfinished (exit
/// 14): only `warpfs rekey` opens it, to finish.
pub fn usable(cfg: &Config, cipherdir: &Path) -> Result<(), CliError> {
    if cfg.volume_rekey_under_way() {
        return Err(CliError::new(
            REKEY_UNFINISHED,
            format!(
                "{}: {}",
                cipherdir.display(),
                warpfs_volume::rekey::VOLUME_REKEY_UNFINISHED
            ),
        ));
    }
    Ok(())
}

/// Refuse a volume whose upgrade to file summaries is unfinished (exit
/// 18): its files are of both versions until `warpfs upgrade` finishes
/// (FORMAT.md 12.6). Mount, fsck and rekey ask.
pub fn not_mid_upgrade(cfg: &Config, cipherdir: &Path) -> Result<(), CliError> {
    if cfg.summary_upgrade_under_way() {
        return Err(CliError::new(
            super::exit::UPGRADE_UNFINISHED,
            format!(
                "{}: {}",
                cipherdir.display(),
                warpfs_volume::upgrade::UPGRADE_UNFINISHED
            ),
        ));
    }
    Ok(())
}

/// What is found at the volume's own config path when another file is used
/// (`--config FILE`, `passwd --from-copy COPY`).
#[derive(Debug)]
pub enum Main {
    /// No file there (a config kept elsewhere, FORMAT.md 2.5).
    Absent,
    /// No file there, and the file used is a sync tool's copy of it in the
    /// same directory (someone may have removed the newer config).
    Missing,
    /// The very file that is used.
    Same,
    /// A file that is not a readable, valid config (why).
    Unreadable(String),
    /// A config, its fields as the file says (not authenticated: the
    /// password may not open it, and someone may have edited it).
    Read(Config),
}

/// Whether `chosen` (the file at `chosen_path`, unlocked, so its key state
/// is authenticated) may be used in place of the volume's own config
/// `main` at `main_path`: not when it records an older key state, and not
/// when `main` is there but cannot be read, or is missing beside a copy of
/// it (its state is unknown).
pub fn check_named(chosen: &Config, chosen_path: &Path, main: &Main, main_path: &Path) -> Result<(), CliError> {
    let (c, m) = (chosen_path.display(), main_path.display());
    match main {
        Main::Absent | Main::Same => Ok(()),
        Main::Missing => Err(CliError::new(
            BAD_CONFIG,
            format!(
                "{m} is missing, so its copy {c} cannot be checked against it: not using {c};                  `warpfs info --config {c}` shows its key generation, and if you trust it,                  renaming it to {m} makes it the config"
            ),
        )),
        Main::Unreadable(why) => Err(CliError::new(
            BAD_CONFIG,
            format!(
                "{m} cannot be read ({why}), so {c} cannot be checked against it: not using {c}; \
                 if you mean to, move {m} out of its directory first"
            ),
        )),
        Main::Read(main) if chosen.key_state() < main.key_state() => Err(CliError::new(
            BAD_CONFIG,
            format!(
                "{c} is older than {m} ({} against {}): not using it, it would roll the volume's \
                 content key back; use {m} (if it was altered, restore it from a backup)",
                chosen.key_state(),
                main.key_state()
            ),
        )),
        Main::Read(_) => Ok(()),
    }
}

/// The error when the password does not open `main` (the volume's config
/// at `main_path`, its fields as read) but opens its copy `copy` at
/// `copy_path`: `main` is reported as altered, and the copy is not used.
pub fn main_altered(cipherdir: &Path, main: &Config, main_path: &Path, copy: &Config, copy_path: &Path) -> CliError {
    let (m, c) = (main_path.display(), copy_path.display());
    let msg = if copy.key_state() < main.key_state() {
        format!(
            "{m} does not open with this password but its copy {c} does, and the copy is older \
             ({} against {}): if another host ran warpfs rekey, use the password {m} has there; \
             otherwise {m} was altered: restore it from a backup (the copy is not used)",
            copy.key_state(),
            main.key_state()
        )
    } else {
        format!(
            "{m} does not open with this password but its copy {c} does: if warpfs passwd ran on \
             two hosts, make the copy the config with `warpfs passwd --from-copy {c} {}`; otherwise \
             {m} was altered: restore it from a backup (the copy is not used)",
            cipherdir.display()
        )
    };
    CliError::new(BAD_CONFIG, msg)
}

/// Open `cfg` with what `mount`, `fsck` and `rekey` were given: a TPM2
/// slot (`--tpm2`), a FIDO2 slot (`--fido2`), else a password (or the
/// recovery key) read from `source`. With both `--tpm2` and `--fido2`
/// (`-o tpm2,fido2`) the TPM is tried first, and a security key when the
/// TPM does not open a slot (no TPM, no tpm2 slot, its policy refused).
pub fn open_given(
    cipherdir: &Path,
    config: &ConfigArg,
    cfg: Config,
    hw: (&super::tpm2::UnlockArgs, &super::fido2::Fido2Args),
    source: &super::password::Source,
    masterkey: bool,
    user: Option<&super::setuid::User>,
) -> Result<(Config, Opened, Given), CliError> {
    let (tpm2, fido2) = hw;
    if tpm2.tpm2 && fido2.fido2 {
        let g = Given::read_or_tpm2(tpm2, source, masterkey, "Password: ", user)?;
        match unlock(cipherdir, config, cfg.clone(), &g.input()) {
            Ok((c, o)) => return Ok((c, o, g)),
            Err(e) if ![BAD_CONFIG, REKEY_UNFINISHED, super::exit::USAGE].contains(&e.code) => {
                eprintln!("warpfs: TPM2: {}; trying a FIDO2 security key", e.msg);
            }
            Err(e) => return Err(e),
        }
    }
    let given = match fido2.given(&cfg, source, user)? {
        Some(f) => Given::Fido2(f),
        None => Given::read_or_tpm2(tpm2, source, masterkey, "Password: ", user)?,
    };
    let (cfg, opened) = unlock(cipherdir, config, cfg, &given.input())?;
    Ok((cfg, opened, given))
}

/// Open `cfg`, the config `config` names for the volume at `cipherdir`,
/// with `input` (a keyslot config: whichever slot it opens, then its MAC
/// checked, exit 11 if that fails). With `--config FILE` only FILE is
/// tried, and it must pass [`check_named`] against
/// `CIPHERDIR/warpfs.conf`. Without it, when the input does not open
/// `warpfs.conf` but opens a sync tool's copy of it, the answer is
/// [`main_altered`] (exit 11); when it opens nothing, a wrong password
/// (exit 10). A recovery key given to a config without keyslots is its
/// master key, unverified ([`Opened::verified`]): the caller checks it
/// against the volume's names.
pub fn unlock(cipherdir: &Path, config: &ConfigArg, cfg: Config, input: &Input) -> Result<(Config, Opened), CliError> {
    let path = config.path(cipherdir);
    if config.config.is_some() {
        let o = cfg.open(input)?;
        let main_path = warpfs_config::config_path(cipherdir);
        check_named(&cfg, &path, &main_beside(&main_path, &path), &main_path)?;
        return Ok((cfg, o));
    }
    match cfg.open(input) {
        Ok(o) => Ok((cfg, o)),
        Err(ConfigError::WrongPassword) => {
            for p in config_copies(cipherdir) {
                let Ok(c) = read_config(&p) else { continue };
                if c.open(input).is_ok_and(|o| o.verified) {
                    return Err(main_altered(cipherdir, &cfg, &path, &c, &p));
                }
            }
            Err(ConfigError::WrongPassword.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Load the config `config` names for the volume at `cipherdir`. When it
/// is CIPHERDIR's own `warpfs.conf` and cannot be loaded (corrupt,
/// unsupported, or refused by the door), the error also names the sync
/// tool's copies beside it, which are not used unless named.
pub fn load_main(cipherdir: &Path, config: &ConfigArg) -> Result<Config, CliError> {
    let path = config.path(cipherdir);
    Config::load_file(&path).map_err(|e| {
        let mut err = CliError::from(e);
        let copies = if config.config.is_none() {
            config_copies(cipherdir)
        } else {
            Vec::new()
        };
        if !copies.is_empty() {
            let names: Vec<String> = copies.iter().map(|c| c.display().to_string()).collect();
            err.msg = format!(
                "{}; not using the copies of it beside it ({}): name one with --config COPY \
                 (or `warpfs passwd --from-copy COPY`) if you trust it",
                err.msg,
                names.join(", ")
            );
        }
        err
    })
}

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

/// Read and validate the config file at `p`, which someone else may have
/// put there: through the backing-store door (a regular file with one
/// link only, never waiting on a FIFO, never following a symlink), at most
/// `MAX_CONFIG_SIZE` bytes.
pub fn read_config(p: &Path) -> Result<Config, String> {
    Config::load_file(p).map_err(|e| e.to_string())
}

/// The (device, inode) of the entry at `p`, looked up without following a
/// symlink at its last name.
fn dev_ino(p: &Path) -> std::io::Result<(u64, u64)> {
    let (root, name) = warpfs_backing::split_user_path(p)?;
    let st = warpfs_backing::lstat(&root.top().entry(&name))?;
    Ok((st.st_dev, st.st_ino))
}

/// What is at `main_path` when the file at `chosen` is used instead.
pub fn main_beside(main_path: &Path, chosen: &Path) -> Main {
    let main = match dev_ino(main_path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return if copy_beside(main_path, chosen) {
                Main::Missing
            } else {
                Main::Absent
            }
        }
        Err(e) => return Main::Unreadable(e.to_string()),
    };
    if dev_ino(chosen).is_ok_and(|c| c == main) {
        return Main::Same;
    }
    match read_config(main_path) {
        Ok(c) => Main::Read(c),
        Err(e) => Main::Unreadable(e),
    }
}

/// Whether `copy` is a sync tool's copy of the config `main_path`
/// (`CIPHERDIR/warpfs.conf`) in the same directory (FORMAT.md 13.5).
pub fn copy_beside(main_path: &Path, copy: &Path) -> bool {
    let dir = |p: &Path| {
        let d = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        warpfs_backing::host::canonicalize(d).ok()
    };
    main_path.file_name() == Some(warpfs_config::CONFIG_FILE.as_ref())
        && copy
            .file_name()
            .is_some_and(|n| warpfs_volume::is_config_copy(n.as_encoded_bytes()))
        && dir(main_path).is_some()
        && dir(main_path) == dir(copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpfs_config::{ContentMode, KdfParams};

    fn sec(bytes: &[u8]) -> Input<'_> {
        Input::Secret { bytes, kind: None }
    }

    /// A config at `dir/name` under `pw` with key state (`gen`, `target`),
    /// all wrapping one master key.
    fn conf(dir: &Path, name: &str, pw: &[u8], gen: u32, target: Option<u32>) -> (Config, PathBuf) {
        let p = dir.join(name);
        let (c, _) = Config::create_at(&p, pw, ContentMode::Gcm, 256, KdfParams::MIN).unwrap();
        let c = if (gen, target) == (0, None) {
            c
        } else {
            c.set_generations_at(&p, pw, gen, target).unwrap()
        };
        (c, p)
    }

    #[test]
    fn a_named_config_older_than_the_volumes_own_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let (main, mp) = conf(d.path(), "warpfs.conf", b"a", 1, None);
        let (old, op) = conf(d.path(), "old.conf", b"a", 0, None);
        let (mid, xp) = conf(d.path(), "mid.conf", b"a", 0, Some(1));
        let (same, sp) = conf(d.path(), "same.conf", b"a", 1, None);
        let (newer, np) = conf(d.path(), "newer.conf", b"a", 1, Some(2));
        let m = Main::Read(main);
        for (c, p) in [(&old, &op), (&mid, &xp)] {
            let e = check_named(c, p, &m, &mp).unwrap_err();
            assert_eq!(e.code, BAD_CONFIG);
            assert!(
                e.msg.contains(&*p.to_string_lossy()) && e.msg.contains(&*mp.to_string_lossy()),
                "{}",
                e.msg
            );
            assert!(e.msg.contains("key generation 1"), "{}", e.msg);
        }
        check_named(&same, &sp, &m, &mp).unwrap();
        check_named(&newer, &np, &m, &mp).unwrap();
        // Nothing to compare with: a config kept elsewhere, or the file itself.
        check_named(&old, &op, &Main::Absent, &mp).unwrap();
        check_named(&old, &op, &Main::Same, &mp).unwrap();
        // A copy whose config is gone: its state cannot be checked.
        let e = check_named(&newer, &np, &Main::Missing, &mp).unwrap_err();
        assert_eq!(e.code, BAD_CONFIG);
        assert!(e.msg.contains("missing") && e.msg.contains("renaming"), "{}", e.msg);
        // A main config that cannot be read says nothing: refused.
        let e = check_named(&newer, &np, &Main::Unreadable("corrupt".into()), &mp).unwrap_err();
        assert_eq!(e.code, BAD_CONFIG);
        assert!(e.msg.contains("move"), "{}", e.msg);
    }

    #[test]
    fn the_volumes_own_config_found_beside_a_named_one() {
        let d = tempfile::tempdir().unwrap();
        let (_, mp) = conf(d.path(), "warpfs.conf", b"a", 2, None);
        let (_, op) = conf(d.path(), "other.conf", b"a", 0, None);
        assert!(matches!(main_beside(&mp, &op), Main::Read(c) if c.key_generation() == 2));
        assert!(matches!(main_beside(&mp, &mp), Main::Same));
        assert!(matches!(main_beside(&d.path().join("none"), &op), Main::Absent));
        std::fs::write(d.path().join("junk"), b"{").unwrap();
        assert!(matches!(main_beside(&d.path().join("junk"), &op), Main::Unreadable(_)));
        // A FIFO or a symlink in its place is refused without waiting.
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(main_beside(&fifo, &op), Main::Unreadable(_)));
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&mp, &link).unwrap();
        assert!(matches!(main_beside(&link, &op), Main::Unreadable(_)));
        // Removed beside a sync tool's copy of it.
        let (_, cp) = conf(
            d.path(),
            "warpfs.sync-conflict-20261125-141403-ABCDEFG.conf",
            b"a",
            0,
            None,
        );
        assert!(matches!(main_beside(&mp, &cp), Main::Read(_)));
        let gone = d.path().join("sub/warpfs.conf");
        assert!(matches!(main_beside(&gone, &cp), Main::Absent), "a copy elsewhere");
        std::fs::remove_file(&mp).unwrap();
        assert!(matches!(main_beside(&mp, &cp), Main::Missing));
        assert!(matches!(main_beside(&mp, &op), Main::Absent), "not a copy's name");
    }

    #[test]
    fn a_copy_that_opens_reports_the_main_config_altered() {
        let d = tempfile::tempdir().unwrap();
        let (main, mp) = conf(d.path(), "warpfs.conf", b"a", 1, None);
        let (peer, pp) = conf(d.path(), "peer.conf", b"b", 1, None);
        let (old, op) = conf(d.path(), "old.conf", b"b", 0, None);
        let e = main_altered(d.path(), &main, &mp, &peer, &pp);
        assert_eq!(e.code, BAD_CONFIG);
        assert!(
            e.msg.contains(&format!("passwd --from-copy {}", pp.display())),
            "{}",
            e.msg
        );
        assert!(
            e.msg.contains(&*mp.to_string_lossy()) && e.msg.contains("altered"),
            "{}",
            e.msg
        );
        // An older copy is not offered as the way out.
        let e = main_altered(d.path(), &main, &mp, &old, &op);
        assert_eq!(e.code, BAD_CONFIG);
        assert!(!e.msg.contains("--from-copy") && e.msg.contains("older"), "{}", e.msg);
        assert!(
            e.msg.contains(&*op.to_string_lossy()) && e.msg.contains(&*mp.to_string_lossy()),
            "{}",
            e.msg
        );
    }

    #[test]
    fn a_named_copy_from_before_a_slot_was_removed_is_older() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("warpfs.conf");
        let (c, vk) = Config::create_slots_at(
            &p,
            b"a",
            warpfs_config::SlotKind::Password,
            ContentMode::Gcm,
            256,
            KdfParams::MIN,
            &[],
            None,
        )
        .unwrap();
        let new = warpfs_config::NewSlot::Secret {
            bytes: b"b",
            kind: warpfs_config::SlotKind::Password,
            kdf: KdfParams::MIN,
        };
        let (before, _) = c.with_slot(&vk, Some(0), &new, "").unwrap();
        let op = d.path().join("old.conf");
        before.save_at(&op).unwrap();
        let after = before.without_slot(&vk, Some(0), 1).unwrap();
        after.save_at(&p).unwrap();
        let named = ConfigArg {
            config: Some(op.clone()),
        };
        let e = unlock(d.path(), &named, before.clone(), &sec(b"b")).unwrap_err();
        assert_eq!(e.code, BAD_CONFIG, "{}", e.msg);
        assert!(
            e.msg.contains("older") && e.msg.contains("keyslot revision"),
            "{}",
            e.msg
        );
        // A password change keeps the revision: its copy is not older.
        let o = after.open(&sec(b"a")).unwrap();
        after.with_new_secret(&o, 0, b"c").unwrap().save_at(&p).unwrap();
        after.save_at(&op).unwrap();
        assert!(unlock(d.path(), &named, after, &sec(b"a")).is_ok());
    }

    #[test]
    fn unlocking_never_falls_back_to_a_copy() {
        let d = tempfile::tempdir().unwrap();
        let (main, _) = conf(d.path(), "warpfs.conf", b"a", 1, None);
        // A sync tool's copy under another password, of the same state.
        let (_, cp) = conf(
            d.path(),
            "warpfs.sync-conflict-20261125-141403-ABCDEFG.conf",
            b"b",
            1,
            None,
        );
        let own = ConfigArg::default();
        assert!(unlock(d.path(), &own, main.clone(), &sec(b"a")).is_ok());
        let e = unlock(d.path(), &own, main.clone(), &sec(b"b")).unwrap_err();
        assert_eq!(e.code, BAD_CONFIG, "{}", e.msg);
        assert!(e.msg.contains(&*cp.to_string_lossy()), "{}", e.msg);
        let e = unlock(d.path(), &own, main.clone(), &sec(b"c")).unwrap_err();
        assert_eq!(e.code, super::super::exit::WRONG_PASSWORD, "{}", e.msg);
        // Named, the copy is used; with --config nothing else is tried.
        let named = ConfigArg {
            config: Some(cp.clone()),
        };
        let copy = Config::load_file(&cp).unwrap();
        assert!(unlock(d.path(), &named, copy.clone(), &sec(b"b")).is_ok());
        let e = unlock(d.path(), &named, copy, &sec(b"a")).unwrap_err();
        assert_eq!(e.code, super::super::exit::WRONG_PASSWORD, "{}", e.msg);
    }
}
