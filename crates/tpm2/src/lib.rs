//! The TPM2 client of warpfs's `tpm2` keyslots (FORMAT.md 2.6, decision
//! record 0084): a random 32-byte secret sealed into a TPM2 sealed data
//! object under the owner hierarchy's storage root key (the TCG default
//! ECC template, made again from the TPM's seed at each use), optionally
//! bound by a PolicyPCR to the current values of some SHA-256 PCRs, and
//! unsealed again. Every command goes through the TSS2 ESAPI (`tss-esapi`
//! over libtss2) in a session salted by the storage root key with
//! parameter encryption both ways, so the secret never crosses the bus to
//! the TPM in the clear. What a slot stores ([`Sealed`]) is public: the
//! object's TPM2B_PUBLIC and TPM2B_PRIVATE (the latter encrypted by the
//! TPM under its storage key) and the PCR list. This is a hardware client
//! and lives apart from the pure config crate, behind its `Unseal` seam.

use std::fmt;
use std::str::FromStr;
use tss_esapi::tcti_ldr::TctiNameConf;
use warpfs_crypto::locked::Locked;

mod tpm;

pub use tpm::extend_pcr;

/// The TCTI used when none is given: the kernel's resource manager.
pub const DEFAULT_TCTI: &str = "device:/dev/tpmrm0";
/// The PCR bank a policy reads (the only one warpfs uses).
pub const PCR_BANK: &str = "sha256";
/// PCRs a policy may name: 0 to 23 (the PC Client platform's).
pub const MAX_PCR: u32 = 23;
/// Length of the sealed secret.
pub const SECRET_LEN: usize = 32;
/// Longest TPM2B_PUBLIC or TPM2B_PRIVATE accepted from a slot.
pub const MAX_BLOB_LEN: usize = 1024;
/// Longest TCTI string.
pub const MAX_TCTI_LEN: usize = 256;

/// What went wrong, as a user can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No TPM answered on this TCTI (no device, no simulator listening,
    /// no permission, a library missing).
    Unreachable,
    /// The TPM refused to unseal: the PCRs the object is bound to no
    /// longer hold the values they had when it was sealed.
    PolicyRefused,
    /// The object does not load under this TPM's storage root key: it was
    /// sealed by another TPM, or this one was cleared since.
    NotLoadable,
    /// Anything else (a TPM error, a malformed object).
    Other,
}

/// A failed TPM operation: what kind, and one line for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What kind of failure.
    pub failure: Failure,
    /// One line, never a secret.
    pub msg: String,
}

impl Error {
    pub(crate) fn new(failure: Failure, msg: impl Into<String>) -> Self {
        Error {
            failure,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A sealed object as a slot keeps it: nothing in it is secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The SHA-256 PCRs of its policy, ascending (empty: no policy).
    pub pcrs: Vec<u32>,
    /// TPM2B_PUBLIC, marshalled (size first).
    pub public: Vec<u8>,
    /// TPM2B_PRIVATE, marshalled (size first).
    pub private: Vec<u8>,
}

/// The secret a sealed object holds, on locked pages, zeroed on drop;
/// `Debug` shows nothing.
pub struct Secret(pub(crate) Locked<[u8; SECRET_LEN]>);

impl Secret {
    pub(crate) fn zeroed() -> Self {
        Secret(Locked::new([0u8; SECRET_LEN]))
    }

    /// The locked bytes themselves.
    pub fn into_locked(self) -> Locked<[u8; SECRET_LEN]> {
        self.0
    }
}

impl std::ops::Deref for Secret {
    type Target = [u8; SECRET_LEN];
    fn deref(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// A TCTI the user named: `device:PATH`, `swtpm:host=H,port=P`,
/// `mssim:...` or `tabrmd:...` (libtss2's syntax; others are refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tcti(String);

impl Tcti {
    /// Parse a TCTI string (at most [`MAX_TCTI_LEN`] printable ASCII
    /// bytes, of a kind named above).
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.is_empty() || s.len() > MAX_TCTI_LEN || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "a TCTI is 1 to {MAX_TCTI_LEN} printable characters without spaces"
            ));
        }
        TctiNameConf::from_str(s).map_err(|_| {
            "the TCTI must be device:PATH, swtpm:host=HOST,port=PORT, mssim:host=HOST,port=PORT or tabrmd:..."
                .to_string()
        })?;
        Ok(Tcti(s.to_string()))
    }

    /// The default, [`DEFAULT_TCTI`].
    pub fn default_device() -> Self {
        Tcti(DEFAULT_TCTI.to_string())
    }

    /// As written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn conf(&self) -> Result<TctiNameConf> {
        TctiNameConf::from_str(&self.0).map_err(|e| Error::new(Failure::Unreachable, format!("TCTI {}: {e}", self.0)))
    }
}

impl fmt::Display for Tcti {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Check a PCR list: each at most [`MAX_PCR`], ascending, none twice.
pub fn check_pcrs(pcrs: &[u32]) -> Result<(), String> {
    if pcrs.iter().any(|&p| p > MAX_PCR) {
        return Err(format!("a PCR is 0 to {MAX_PCR}"));
    }
    if pcrs.windows(2).any(|w| w[0] >= w[1]) {
        return Err("PCRs are listed in ascending order, each once".into());
    }
    Ok(())
}

/// Parse a PCR list as the user writes it (`7`, `0,2,7`, `0+7`),
/// sorted.
pub fn parse_pcrs(s: &str) -> Result<Vec<u32>, String> {
    let mut v = Vec::new();
    for part in s.split([',', '+']).map(str::trim) {
        let n: u32 = part
            .parse()
            .map_err(|_| format!("{part:?} is not a PCR number (0 to {MAX_PCR})"))?;
        v.push(n);
    }
    v.sort_unstable();
    v.dedup();
    check_pcrs(&v)?;
    Ok(v)
}

/// Seal a new random secret on the TPM at `tcti`, bound to the current
/// values of `pcrs` (SHA-256 bank; empty: no policy). Returns the object
/// and the secret (the caller derives the slot key from it).
pub fn seal(tcti: &Tcti, pcrs: &[u32]) -> Result<(Sealed, Secret)> {
    check_pcrs(pcrs).map_err(|e| Error::new(Failure::Other, e))?;
    let mut secret = Secret::zeroed();
    warpfs_crypto::rand::fill(&mut *secret.0);
    let sealed = tpm::seal(tcti, pcrs, &secret)?;
    Ok((sealed, secret))
}

/// Unseal `sealed` on the TPM at `tcti`.
pub fn unseal(tcti: &Tcti, sealed: &Sealed) -> Result<Secret> {
    check_pcrs(&sealed.pcrs).map_err(|e| Error::new(Failure::Other, e))?;
    tpm::unseal(tcti, sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcr_lists() {
        assert_eq!(parse_pcrs("7").unwrap(), vec![7]);
        assert_eq!(parse_pcrs("7,0, 2+7").unwrap(), vec![0, 2, 7]);
        assert!(parse_pcrs("24").is_err());
        assert!(parse_pcrs("").is_err());
        assert!(parse_pcrs("a").is_err());
        assert!(check_pcrs(&[2, 1]).is_err());
        assert!(check_pcrs(&[1, 1]).is_err());
        assert!(check_pcrs(&[]).is_ok());
    }

    #[test]
    fn tctis() {
        for ok in [
            "device:/dev/tpmrm0",
            "swtpm:port=2321",
            "swtpm:host=127.0.0.1,port=2321",
            "mssim:host=localhost,port=2321",
            "tabrmd:bus_name=com.intel.tss2.Tabrmd",
        ] {
            assert_eq!(Tcti::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "cmd:rm -rf /", "cmd:true", "libtpms:", "device :x", "swtpm:port=x"] {
            assert!(Tcti::parse(bad).is_err(), "{bad}");
        }
    }
}
