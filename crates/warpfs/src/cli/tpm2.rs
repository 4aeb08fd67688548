//! TPM2 keyslots on the command line (FORMAT.md 2.6, decision record
//! 0084): `--tpm2 [--tpm2-tcti TCTI]` on `mount`, `fsck` and `rekey` (and
//! `-o tpm2,tpm2-tcti=...` in fstab) unlocks with a `tpm2` slot, no
//! password asked; `warpfs key add --tpm2 [--tpm2-pcrs LIST]` seals a new
//! slot's key. The TPM is reached through `warpfs-tpm2` (the `tpm2` cargo
//! feature, on by default); a build without it refuses `--tpm2` with a
//! clear message. The TCTI is the one given, else the slot's own hint,
//! else `device:/dev/tpmrm0`.

use super::exit::{CliError, USAGE};
use clap::Args;
use warpfs_config::{DeviceError, DeviceFailure, Tpm2Object};
use warpfs_crypto::locked::Locked;
use warpfs_crypto::slotkeys::SlotKey;

/// The TCTI used when none is given.
pub const DEFAULT_TCTI: &str = "device:/dev/tpmrm0";

/// How `--tpm2` is refused by a build without the `tpm2` feature.
#[cfg(not(feature = "tpm2"))]
const NOT_BUILT: &str = "this warpfs was built without TPM2 support (cargo feature `tpm2`, on by default; off for \
                         static musl builds): use a password, keyfile or recovery slot, or a build with TPM2";

/// libtss2 logs its own errors to stderr (`ERROR:tcti:...` lines for a
/// TPM that is not there, a policy that fails): warpfs reports each
/// failure in one line of its own, so the library stays quiet unless the
/// user asks for its log with `TSS2_LOG`. Called first thing in `main`,
/// while the process has one thread.
pub fn quiet_library_log() {
    if std::env::var_os("TSS2_LOG").is_none() {
        std::env::set_var("TSS2_LOG", "all+none");
    }
}

/// `--tpm2` and `--tpm2-tcti` of the commands that unlock.
#[derive(Args, Debug, Clone, Default)]
pub struct UnlockArgs {
    /// Unlock with a TPM2 keyslot instead of a password: the TPM unseals
    /// the slot's key (no prompt). Fails, without asking for a password,
    /// when no TPM is reachable (exit 15), when the slot's PCRs changed
    /// (exit 16) or when the slot was sealed by another TPM (exit 17).
    #[arg(long)]
    pub tpm2: bool,
    /// The TPM's TCTI: device:/dev/tpmrm0 (the default, unless the slot
    /// was sealed on another TPM device or a local simulator, which it
    /// remembers), swtpm:host=HOST,port=PORT, mssim:..., tabrmd:...
    #[arg(long, value_name = "TCTI", requires = "tpm2")]
    pub tpm2_tcti: Option<String>,
}

impl UnlockArgs {
    /// The TPM client, when `--tpm2` is given; refused beside a password
    /// source (`given`: which one was named on the command line).
    pub fn client(&self, other_source: Option<&str>) -> Result<Option<Client>, CliError> {
        if !self.tpm2 {
            return Ok(None);
        }
        if let Some(o) = other_source {
            return Err(CliError::new(
                USAGE,
                format!("--tpm2 unlocks with the TPM: it does not go with {o}"),
            ));
        }
        Client::new(self.tpm2_tcti.as_deref()).map(Some)
    }
}

/// What unseals `tpm2` slots: the TPM at the TCTI given, or at each
/// slot's own.
pub struct Client {
    tcti: Option<String>,
}

impl Client {
    /// A client for `tcti` (`None`: each slot's hint, else the default).
    pub fn new(tcti: Option<&str>) -> Result<Client, CliError> {
        built()?;
        if let Some(t) = tcti {
            check_tcti(t)?;
        }
        Ok(Client {
            tcti: tcti.map(str::to_owned),
        })
    }

    fn tcti_for<'a>(&'a self, o: &'a Tpm2Object) -> &'a str {
        self.tcti.as_deref().or(o.tcti.as_deref()).unwrap_or(DEFAULT_TCTI)
    }
}

impl warpfs_config::Unseal for Client {
    fn unseal(&self, o: &Tpm2Object) -> Result<SlotKey, DeviceError> {
        unseal(self.tcti_for(o), o)
    }
}

/// A new `tpm2` slot's object and the key it seals, on the TPM at `tcti`
/// (default [`DEFAULT_TCTI`]), bound to `pcrs` (e.g. `7` or `0,7`) when
/// given. The TCTI is kept in the slot as a hint when it is a safe one.
pub fn enroll(tcti: Option<&str>, pcrs: Option<&str>) -> Result<(Tpm2Object, Locked<[u8; 32]>), CliError> {
    built()?;
    let t = tcti.unwrap_or(DEFAULT_TCTI);
    check_tcti(t)?;
    let pcrs = match pcrs {
        Some(p) => parse_pcrs(p)?,
        None => Vec::new(),
    };
    let hint = (tcti.is_some() && warpfs_config::tcti_is_safe_hint(t)).then(|| t.to_owned());
    if tcti.is_some() && hint.is_none() {
        eprintln!("warpfs: note: TCTI {t} is not kept in the slot (only a TPM device or a simulator on the loopback address is): give --tpm2-tcti {t} to each command that unlocks with it");
    }
    seal(t, &pcrs, hint)
}

fn parse_pcrs(s: &str) -> Result<Vec<u32>, CliError> {
    let mut v = Vec::new();
    for part in s.split([',', '+']).map(str::trim) {
        match part.parse::<u32>() {
            Ok(n) if n <= warpfs_config::TPM2_MAX_PCR => v.push(n),
            _ => {
                return Err(CliError::new(
                    USAGE,
                    format!(
                        "--tpm2-pcrs {s}: a list of PCR numbers 0 to {} (e.g. 7 or 0,2,7)",
                        warpfs_config::TPM2_MAX_PCR
                    ),
                ))
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// The TPM client's error on `tcti` as the config's device error; a TPM
/// device that is not there or not open to this user says so.
#[cfg(feature = "tpm2")]
fn from_tpm2(tcti: &str, e: warpfs_tpm2::Error) -> DeviceError {
    let failure = match e.failure {
        warpfs_tpm2::Failure::Unreachable => DeviceFailure::Unreachable,
        warpfs_tpm2::Failure::PolicyRefused => DeviceFailure::Refused,
        warpfs_tpm2::Failure::NotLoadable => DeviceFailure::Foreign,
        warpfs_tpm2::Failure::Other => DeviceFailure::Other,
    };
    let msg = match (failure, tcti.strip_prefix("device:")) {
        (DeviceFailure::Unreachable, Some(path)) => match warpfs_backing::host::metadata(path) {
            Err(m) if m.kind() == std::io::ErrorKind::NotFound => format!(
                "no TPM: {path} does not exist (this machine has no TPM 2.0 or its driver is not loaded; \
                 --tpm2-tcti names another)"
            ),
            Err(m) if m.kind() == std::io::ErrorKind::PermissionDenied => {
                format!("no TPM reachable: {path}: permission denied (root, or a member of its group, uses it)")
            }
            _ => e.msg,
        },
        _ => e.msg,
    };
    DeviceError { failure, msg }
}

#[cfg(feature = "tpm2")]
fn built() -> Result<(), CliError> {
    Ok(())
}

#[cfg(not(feature = "tpm2"))]
fn built() -> Result<(), CliError> {
    Err(CliError::new(USAGE, NOT_BUILT))
}

#[cfg(feature = "tpm2")]
fn check_tcti(t: &str) -> Result<(), CliError> {
    warpfs_tpm2::Tcti::parse(t)
        .map(drop)
        .map_err(|e| CliError::new(USAGE, format!("--tpm2-tcti {t}: {e}")))
}

#[cfg(not(feature = "tpm2"))]
fn check_tcti(_: &str) -> Result<(), CliError> {
    built()
}

#[cfg(feature = "tpm2")]
fn unseal(tcti: &str, o: &Tpm2Object) -> Result<SlotKey, DeviceError> {
    let t = warpfs_tpm2::Tcti::parse(tcti).map_err(|e| DeviceError {
        failure: DeviceFailure::Other,
        msg: format!("TCTI {tcti}: {e}"),
    })?;
    let sealed = warpfs_tpm2::Sealed {
        pcrs: o.pcrs.clone(),
        public: o.public.clone(),
        private: o.private.clone(),
    };
    let secret = warpfs_tpm2::unseal(&t, &sealed).map_err(|e| from_tpm2(tcti, e))?;
    Ok(SlotKey::from_bytes(&secret))
}

#[cfg(not(feature = "tpm2"))]
fn unseal(_: &str, _: &Tpm2Object) -> Result<SlotKey, DeviceError> {
    Err(DeviceError {
        failure: DeviceFailure::Other,
        msg: NOT_BUILT.into(),
    })
}

#[cfg(feature = "tpm2")]
fn seal(tcti: &str, pcrs: &[u32], hint: Option<String>) -> Result<(Tpm2Object, Locked<[u8; 32]>), CliError> {
    let t = warpfs_tpm2::Tcti::parse(tcti).map_err(|e| CliError::new(USAGE, format!("--tpm2-tcti {tcti}: {e}")))?;
    let (sealed, secret) = warpfs_tpm2::seal(&t, pcrs).map_err(|e| {
        let e = from_tpm2(tcti, e);
        CliError::new(super::exit::device_code(e.failure), e.msg)
    })?;
    let object = Tpm2Object {
        pcrs: sealed.pcrs,
        public: sealed.public,
        private: sealed.private,
        tcti: hint,
    };
    Ok((object, secret.into_locked()))
}

#[cfg(not(feature = "tpm2"))]
fn seal(_: &str, _: &[u32], _: Option<String>) -> Result<(Tpm2Object, Locked<[u8; 32]>), CliError> {
    Err(CliError::new(USAGE, NOT_BUILT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcr_lists() {
        assert_eq!(parse_pcrs("7").unwrap(), vec![7]);
        assert_eq!(parse_pcrs("7,0+2,7").unwrap(), vec![0, 2, 7]);
        for bad in ["", "24", "x", "1,,2", "-1"] {
            assert_eq!(parse_pcrs(bad).unwrap_err().code, USAGE, "{bad}");
        }
    }

    #[test]
    fn a_tcti_given_wins_over_the_slots_hint() {
        let o = Tpm2Object {
            pcrs: vec![],
            public: vec![0, 1, 0],
            private: vec![0, 1, 0],
            tcti: Some("swtpm:port=2321".into()),
        };
        let bare = Tpm2Object {
            tcti: None,
            ..o.clone()
        };
        #[cfg(feature = "tpm2")]
        {
            let given = Client::new(Some("device:/dev/tpmrm1")).unwrap();
            let none = Client::new(None).unwrap();
            assert_eq!(given.tcti_for(&o), "device:/dev/tpmrm1");
            assert_eq!(none.tcti_for(&o), "swtpm:port=2321");
            assert_eq!(none.tcti_for(&bare), DEFAULT_TCTI);
            assert_eq!(Client::new(Some("cmd:true")).err().unwrap().code, USAGE);
        }
        #[cfg(not(feature = "tpm2"))]
        {
            let _ = (o, bare);
            let e = Client::new(None).err().unwrap();
            assert!(e.code == USAGE && e.msg.contains("without TPM2"), "{}", e.msg);
        }
    }
}
