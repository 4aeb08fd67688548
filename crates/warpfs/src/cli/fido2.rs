//! FIDO2 keyslots on the command line (FORMAT.md 2.6, decision record
//! 0085): `--fido2 [--fido2-device PATH]` opens a volume with a security
//! key instead of a password (`warpfs mount`, `fsck`, `rekey`, `-o fido2`
//! from fstab; `--unlock-fido2` for `warpfs key`), and `warpfs key add
//! --fido2` makes a slot. Unlocking finds a device holding one of the
//! volume's FIDO2 credentials (asked silently, no touch), reads the key's
//! PIN when the slot was made with it (like a password: `--passfile`,
//! `--extpass` or the terminal), asks for a touch and gets the
//! hmac-secret output for the slot's salt. The device work is the
//! `warpfs-fido2` crate's (libfido2); a build without the `fido2` feature
//! refuses these options.

use super::exit::CliError;
use super::password::{Password, Source};
use clap::Args;
use warpfs_config::{Config, Fido2, Input};

/// `--fido2` and `--fido2-device` of the commands that open a volume.
#[derive(Args, Debug, Clone, Default)]
pub struct Fido2Args {
    /// Open the volume with a FIDO2 security key (a fido2 keyslot) instead
    /// of a password: no password prompt; a touch, and the key's PIN when
    /// the slot was made with one (read like a password: --passfile,
    /// --extpass or the terminal).
    #[arg(long)]
    pub fido2: bool,
    /// The FIDO2 device to use, e.g. /dev/hidraw3 (default: each one
    /// plugged in).
    #[arg(long, value_name = "PATH")]
    pub fido2_device: Option<String>,
}

impl Fido2Args {
    /// With `--fido2`: what a security key gives for one of `cfg`'s FIDO2
    /// slots (the PIN, when needed, read from `src`: a passfile, an
    /// extpass command run as `user`, or the terminal). `None` without it.
    pub fn given(
        &self,
        cfg: &Config,
        src: &Source,
        user: Option<&super::setuid::User>,
    ) -> Result<Option<Unlocked>, CliError> {
        if !self.fido2 {
            if self.fido2_device.is_some() {
                return Err(CliError::new(super::exit::USAGE, "--fido2-device goes with --fido2"));
            }
            return Ok(None);
        }
        if src.keyfile.is_some() {
            return Err(CliError::new(
                super::exit::USAGE,
                "--keyfile does not go with --fido2 (a fido2 slot opens with its security key alone)",
            ));
        }
        let pin = |prompt: &str| src.read_as(prompt, false, user);
        unlock(cfg, self.fido2_device.as_deref(), &pin, None).map(Some)
    }
}

/// What a security key gave for one slot: its credential and the
/// hmac-secret output (on locked pages, zeroed on drop).
pub struct Unlocked {
    credential: Vec<u8>,
    output: Output,
}

impl Unlocked {
    /// As keyslot input.
    pub fn input(&self) -> Input<'_> {
        Input::Fido2 {
            credential: &self.credential,
            output: &self.output,
        }
    }
}

/// Reads a security key's PIN, given the prompt (like a password).
pub type PinReader<'a> = &'a dyn Fn(&str) -> Result<Password, CliError>;

/// A new slot's parameters and the key's output for them.
pub struct Enrolled {
    /// The slot's parameters (fresh salt).
    pub params: Fido2,
    /// The key's hmac-secret output for `params.salt`.
    pub output: Output,
}

#[cfg(feature = "fido2")]
type Output = warpfs_fido2::Output;
#[cfg(not(feature = "fido2"))]
type Output = warpfs_crypto::Locked<[u8; 32]>;

#[cfg(feature = "fido2")]
pub use imp::{enrol, unlock};

#[cfg(not(feature = "fido2"))]
pub use off::{enrol, unlock};

/// The builds without the `fido2` feature.
#[cfg(not(feature = "fido2"))]
mod off {
    use super::*;

    fn refused() -> CliError {
        CliError::new(
            super::super::exit::ERROR,
            "this warpfs was built without FIDO2 support (its cargo feature fido2 is off): \
             it cannot use a security key; open the volume with another keyslot",
        )
    }

    /// Refused: no FIDO2 in this build.
    pub fn unlock(_: &Config, _: Option<&str>, _: PinReader, _: Option<u32>) -> Result<Unlocked, CliError> {
        Err(refused())
    }

    /// Refused: no FIDO2 in this build.
    pub fn enrol(_: Option<&str>, _: PinReader) -> Result<Enrolled, CliError> {
        Err(refused())
    }
}

#[cfg(feature = "fido2")]
mod imp {
    use super::*;
    use crate::cli::exit::{DEVICE_UNREACHABLE, USAGE, WRONG_PASSWORD};
    use warpfs_config::FIDO2_RP_ID;
    use warpfs_fido2::{Device, DeviceInfo, Error, Pin};

    /// The exit code and message of a device error on `what`.
    fn fail(what: &str, e: Error) -> CliError {
        let code = match e {
            Error::PinInvalid => WRONG_PASSWORD,
            Error::NoCredential => WRONG_PASSWORD,
            _ => DEVICE_UNREACHABLE,
        };
        let hint = match e {
            Error::NotTouched => ": run it again and touch the key when asked",
            Error::PinBlocked(true) => ": unplug it, plug it in again and retry",
            Error::PinBlocked(false) => ": only a reset of the key (which loses its credentials) unblocks it",
            Error::PinRequired => ": set one with the key's own tool (fido2-token -S, ykman fido access change-pin)",
            _ => "",
        };
        CliError::new(code, format!("FIDO2, {what}: {e}{hint}"))
    }

    /// The devices to try: the one named, or every one present.
    fn candidates(named: Option<&str>) -> Result<Vec<DeviceInfo>, CliError> {
        let all = warpfs_fido2::devices().map_err(|e| fail("listing devices", e))?;
        if let Some(socks) = warpfs_fido2::testdev::sockets() {
            eprintln!(
                "warpfs: FIDO2 devices are the test authenticators {} names ({}), not USB keys",
                warpfs_fido2::testdev::TEST_ENV,
                socks
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if let Some(p) = named {
            let product = all.iter().find(|d| d.path == p).and_then(|d| d.product.clone());
            return Ok(vec![DeviceInfo {
                path: p.to_owned(),
                product,
            }]);
        }
        if all.is_empty() {
            return Err(CliError::new(
                DEVICE_UNREACHABLE,
                "no FIDO2 security key found: plug one in (or name it with --fido2-device)",
            ));
        }
        Ok(all)
    }

    fn open(d: &DeviceInfo) -> Result<Device, CliError> {
        Device::open(&d.path).map_err(|e| fail("opening the device", e))
    }

    fn name(d: &DeviceInfo) -> String {
        match &d.product {
            Some(p) => format!("{p} ({})", d.path),
            None => d.path.clone(),
        }
    }

    /// The PIN of the key at `d`, read like a password by `read`.
    fn read_pin(read: PinReader, d: &DeviceInfo) -> Result<Pin, CliError> {
        let pw = read(&format!("PIN of the security key {}: ", name(d)))?;
        Pin::new(pw.bytes()).map_err(|e| fail("reading the PIN", e))
    }

    fn touch(d: &DeviceInfo, why: &str) {
        eprintln!("warpfs: touch your security key {} {why}", name(d));
    }

    /// Find a device holding the credential of one of `cfg`'s FIDO2 slots
    /// (only slot `only` when given), and get its hmac-secret output for
    /// that slot: no device, no such credential on any (another key), a
    /// wrong PIN or no touch each end with their own message and code.
    pub fn unlock(cfg: &Config, named: Option<&str>, pin: PinReader, only: Option<u32>) -> Result<Unlocked, CliError> {
        let slots: Vec<_> = cfg
            .slots()
            .iter()
            .filter(|s| only.is_none_or(|o| o == s.id))
            .filter_map(|s| Some((s.id, s.fido2()?)))
            .collect();
        if slots.is_empty() {
            return Err(CliError::new(
                WRONG_PASSWORD,
                match only {
                    Some(id) => format!("keyslot {id} is not a fido2 slot"),
                    None => "this volume has no fido2 keyslot (warpfs key list shows its slots)".to_string(),
                },
            ));
        }
        let mut opened = 0;
        let mut last_err = None;
        for d in candidates(named)? {
            let dev = match open(&d) {
                Ok(dev) => dev,
                Err(e) => {
                    last_err = Some(e);
                    continue;
                }
            };
            opened += 1;
            for (id, f) in &slots {
                let found = dev
                    .has_credential(&f.rp_id, &f.credential)
                    .map_err(|e| fail("looking for the volume's credential", e))?;
                if !found {
                    continue;
                }
                let pin = if f.user_verification {
                    Some(read_pin(pin, &d)?)
                } else {
                    None
                };
                touch(&d, &format!("to open keyslot {id}"));
                let output = dev
                    .hmac_secret(&f.rp_id, &f.credential, &f.salt, pin.as_ref())
                    .map_err(|e| fail(&format!("keyslot {id}"), e))?;
                return Ok(Unlocked {
                    credential: f.credential.clone(),
                    output,
                });
            }
        }
        if opened == 0 {
            return Err(
                last_err.unwrap_or_else(|| CliError::new(DEVICE_UNREACHABLE, "no FIDO2 security key could be opened"))
            );
        }
        let ids: Vec<String> = slots.iter().map(|(id, _)| id.to_string()).collect();
        Err(CliError::new(
            WRONG_PASSWORD,
            format!(
                "FIDO2: the security key{} present {} not hold the credential of this volume's fido2 keyslot{} {}: \
                 another key (or one that was reset)",
                if opened == 1 { "" } else { "s" },
                if opened == 1 { "does" } else { "do" },
                if ids.len() == 1 { "" } else { "s" },
                ids.join(", ")
            ),
        ))
    }

    /// Make a new slot's credential on the key `named` (or the only one
    /// plugged in) and get its output for a fresh salt: two touches, and
    /// the key's PIN (from `pin`) when it has one, which the slot then
    /// always needs.
    pub fn enrol(named: Option<&str>, pin: PinReader) -> Result<Enrolled, CliError> {
        let list = candidates(named)?;
        let [d] = list.as_slice() else {
            return Err(CliError::new(
                USAGE,
                format!(
                    "several FIDO2 security keys are plugged in ({}): name one with --fido2-device",
                    list.iter().map(name).collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        let dev = open(d)?;
        let info = dev.info().map_err(|e| fail("reading the key's info", e))?;
        if !info.hmac_secret {
            return Err(fail("this key", Error::NoHmacSecret));
        }
        let pin = if info.pin_set == Some(true) {
            Some(read_pin(pin, d)?)
        } else {
            None
        };
        let user: [u8; 32] = warpfs_crypto::rand::array();
        touch(d, "to make the new keyslot's credential");
        let credential = dev
            .make_credential(FIDO2_RP_ID, &user, "warpfs", pin.as_ref())
            .map_err(|e| fail("making the credential", e))?;
        let hint = d
            .product
            .clone()
            .or_else(|| (!info.aaguid.is_empty()).then(|| format!("AAGUID {}", aaguid_text(&info.aaguid))));
        let params = Fido2::new(FIDO2_RP_ID, &credential, pin.is_some(), hint.as_deref())?;
        touch(d, "again to derive the new keyslot's key");
        let output = dev
            .hmac_secret(FIDO2_RP_ID, &credential, &params.salt, pin.as_ref())
            .map_err(|e| fail("deriving the key", e))?;
        Ok(Enrolled { params, output })
    }

    /// An AAGUID in its usual form (8-4-4-4-12 hex digits).
    fn aaguid_text(a: &[u8]) -> String {
        let hex: String = a.iter().map(|b| format!("{b:02x}")).collect();
        if hex.len() != 32 {
            return hex;
        }
        format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn aaguids_are_written_as_uuids() {
            let a: Vec<u8> = (0..16).collect();
            assert_eq!(aaguid_text(&a), "00010203-0405-0607-0809-0a0b0c0d0e0f");
            assert_eq!(aaguid_text(&[0xab]), "ab");
        }

        #[test]
        fn each_device_error_has_its_code_and_says_what_to_do() {
            assert_eq!(fail("x", Error::NoCredential).code, WRONG_PASSWORD);
            assert_eq!(fail("x", Error::PinInvalid).code, WRONG_PASSWORD);
            let e = fail("keyslot 2", Error::NotTouched);
            assert_eq!(e.code, DEVICE_UNREACHABLE);
            assert!(
                e.msg.contains("not touched in time") && e.msg.contains("keyslot 2"),
                "{}",
                e.msg
            );
            assert_eq!(fail("x", Error::Open("/dev/hidraw9".into())).code, DEVICE_UNREACHABLE);
            assert!(fail("x", Error::PinBlocked(true)).msg.contains("unplug"));
        }
    }
}
