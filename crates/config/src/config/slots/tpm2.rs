//! TPM2 slots (FORMAT.md 2.6): the slot key is the 32 bytes a TPM2 sealed
//! data object unseals, optionally only while some SHA-256 PCRs hold the
//! values they had when it was sealed. The slot keeps only public data:
//! the object's TPM2B_PUBLIC and TPM2B_PRIVATE, the PCR list, and the TCTI
//! it was sealed on when that is a safe hint. Talking to the TPM is not
//! this crate's: the caller's [`Unseal`] does it (decision record 0084).

use super::Input;
use crate::config::fields::show;
use crate::config::mac::Fields;
use crate::error::{ConfigError, DeviceError, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use warpfs_crypto::slotkeys::SlotKey;

/// The only PCR bank a policy reads.
pub const TPM2_PCR_BANK: &str = "sha256";
/// The highest PCR a policy may name.
pub const TPM2_MAX_PCR: u32 = 23;
/// Longest TPM2B_PUBLIC or TPM2B_PRIVATE a slot holds.
pub const TPM2_MAX_BLOB: usize = 1024;
/// Longest TCTI hint.
pub const TPM2_MAX_TCTI: usize = 256;

/// A `tpm2` slot's sealed object: nothing in it is secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tpm2Object {
    /// The SHA-256 PCRs its policy reads, ascending (empty: no policy).
    pub pcrs: Vec<u32>,
    /// TPM2B_PUBLIC, marshalled.
    pub public: Vec<u8>,
    /// TPM2B_PRIVATE, marshalled.
    pub private: Vec<u8>,
    /// The TCTI it was sealed on, kept as a hint (only a safe one:
    /// [`tcti_is_safe_hint`]).
    pub tcti: Option<String>,
}

/// What unseals a [`Tpm2Object`]: the caller's TPM client.
pub trait Unseal {
    /// The slot key the object holds (the 32 bytes it unseals).
    fn unseal(&self, object: &Tpm2Object) -> std::result::Result<SlotKey, DeviceError>;
}

/// Whether a TCTI may be kept in a slot as a hint, to be used before the
/// config is authenticated (an edited hint is only found out by the MAC,
/// after the TPM was asked): a TPM character device (`device:/dev/tpmrmN`,
/// `device:/dev/tpmN`), or a simulator on the loopback address
/// (`swtpm:`/`mssim:` with `host` localhost, 127.0.0.1 or ::1 and a
/// `port`). Anything else would let whoever can write CIPHERDIR make
/// warpfs write a TPM command into a file of their choosing, or talk to
/// another host.
pub fn tcti_is_safe_hint(s: &str) -> bool {
    if s.len() > TPM2_MAX_TCTI {
        return false;
    }
    if let Some(path) = s.strip_prefix("device:") {
        let digits = |t: &str| !t.is_empty() && t.len() <= 3 && t.bytes().all(|b| b.is_ascii_digit());
        return path.strip_prefix("/dev/tpmrm").is_some_and(digits)
            || path.strip_prefix("/dev/tpm").is_some_and(digits);
    }
    let Some(conf) = s.strip_prefix("swtpm:").or_else(|| s.strip_prefix("mssim:")) else {
        return false;
    };
    !conf.is_empty()
        && conf.split(',').all(|kv| match kv.split_once('=') {
            Some(("host", h)) => matches!(h, "localhost" | "127.0.0.1" | "::1"),
            Some(("port", p)) => p.parse::<u16>().is_ok_and(|p| p > 0),
            _ => false,
        })
}

impl Tpm2Object {
    /// Check what a slot may hold (as read, and as made).
    pub(crate) fn check(&self) -> Result<()> {
        if self.pcrs.iter().any(|&p| p > TPM2_MAX_PCR) || self.pcrs.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ConfigError::parse(format!(
                "a tpm2 keyslot's PCRs are 0 to {TPM2_MAX_PCR}, ascending, each once"
            )));
        }
        for (what, b) in [("public", &self.public), ("private", &self.private)] {
            if b.len() < 3 || b.len() > TPM2_MAX_BLOB {
                return Err(ConfigError::parse(format!(
                    "a tpm2 keyslot's {what} area is 3 to {TPM2_MAX_BLOB} bytes"
                )));
            }
        }
        if let Some(t) = &self.tcti {
            if !tcti_is_safe_hint(t) {
                return Err(ConfigError::parse(format!(
                    "a tpm2 keyslot's TCTI hint {} is not a TPM device or a simulator on the loopback address",
                    show(t)
                )));
            }
        }
        Ok(())
    }
}

/// Public parameters of a TPM2 slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tpm2 {
    pub(crate) object: Tpm2Object,
}

/// The `"tpm2"` member of a slot as written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Tpm2Json {
    pcr_bank: String,
    pcrs: Vec<u32>,
    public: String,
    private: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tcti: Option<String>,
}

impl Tpm2 {
    pub(crate) fn new(object: Tpm2Object) -> Result<Self> {
        object.check()?;
        Ok(Tpm2 { object })
    }

    pub(crate) fn slot_key(&self, input: &Input) -> Option<Result<SlotKey>> {
        let Input::Tpm2(tpm) = input else {
            return None;
        };
        Some(tpm.unseal(&self.object).map_err(ConfigError::Device))
    }

    pub(crate) fn fields(&self, f: &mut Fields) {
        let o = &self.object;
        f.str("tpm2.pcr_bank", TPM2_PCR_BANK);
        let pcrs: Vec<String> = o.pcrs.iter().map(u32::to_string).collect();
        f.str("tpm2.pcrs", &pcrs.join(","));
        f.bytes("tpm2.public", &o.public);
        f.bytes("tpm2.private", &o.private);
        if let Some(t) = &o.tcti {
            f.str("tpm2.tcti", t);
        }
    }

    pub(crate) fn to_json(&self) -> Tpm2Json {
        let o = &self.object;
        Tpm2Json {
            pcr_bank: TPM2_PCR_BANK.to_owned(),
            pcrs: o.pcrs.clone(),
            public: B64.encode(&o.public),
            private: B64.encode(&o.private),
            tcti: o.tcti.clone(),
        }
    }

    pub(crate) fn from_json(j: &Tpm2Json) -> Result<Self> {
        if j.pcr_bank != TPM2_PCR_BANK {
            return Err(ConfigError::Unsupported(format!(
                "a tpm2 keyslot's PCR bank {} is not supported (only {TPM2_PCR_BANK})",
                show(&j.pcr_bank)
            )));
        }
        if j.pcrs.len() > TPM2_MAX_PCR as usize + 1 {
            return Err(ConfigError::parse("a tpm2 keyslot lists too many PCRs"));
        }
        let blob = |what: &str, s: &str| {
            if s.len() > TPM2_MAX_BLOB * 4 / 3 + 4 {
                return Err(ConfigError::parse(format!("keyslots[].tpm2.{what} is too long")));
            }
            B64.decode(s)
                .map_err(|_| ConfigError::parse(format!("keyslots[].tpm2.{what} is not base64")))
        };
        Tpm2::new(Tpm2Object {
            pcrs: j.pcrs.clone(),
            public: blob("public", &j.public)?,
            private: blob("private", &j.private)?,
            tcti: j.tcti.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_devices_and_loopback_simulators_are_hints() {
        for ok in [
            "device:/dev/tpmrm0",
            "device:/dev/tpm1",
            "swtpm:port=2321",
            "swtpm:host=127.0.0.1,port=2321",
            "mssim:host=localhost,port=2321",
            "swtpm:host=::1,port=1",
        ] {
            assert!(tcti_is_safe_hint(ok), "{ok}");
        }
        for bad in [
            "device:/dev/sda",
            "device:/etc/passwd",
            "device:/dev/tpmrm0/../sda",
            "device:/dev/tpm",
            "swtpm:host=192.0.2.1,port=2321",
            "swtpm:host=127.0.0.1,port=2321,other=1",
            "swtpm:",
            "swtpm:port=0",
            "tabrmd:bus_name=com.intel.tss2.Tabrmd",
            "cmd:tpm2_send",
            "",
        ] {
            assert!(!tcti_is_safe_hint(bad), "{bad}");
        }
    }

    fn object() -> Tpm2Object {
        Tpm2Object {
            pcrs: vec![7],
            public: vec![0, 1, 2],
            private: vec![0, 1, 3],
            tcti: None,
        }
    }

    #[test]
    fn what_a_slot_may_hold() {
        assert!(object().check().is_ok());
        for edit in [
            |o: &mut Tpm2Object| o.pcrs = vec![24],
            |o: &mut Tpm2Object| o.pcrs = vec![7, 7],
            |o: &mut Tpm2Object| o.pcrs = vec![7, 0],
            |o: &mut Tpm2Object| o.public = vec![0, 0],
            |o: &mut Tpm2Object| o.private = vec![0; TPM2_MAX_BLOB + 1],
            |o: &mut Tpm2Object| o.tcti = Some("device:/dev/sda".into()),
        ] {
            let mut o = object();
            edit(&mut o);
            assert!(matches!(o.check(), Err(ConfigError::Parse(_))), "{o:?}");
        }
    }
}
