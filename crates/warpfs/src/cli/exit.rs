//! Exit codes (documented in README.md) and the CLI's error type.

/// Success.
pub const OK: i32 = 0;
/// Any other failure.
pub const ERROR: i32 = 1;
/// Bad command line (clap's own code).
pub const USAGE: i32 = 2;
/// Wrong password.
pub const WRONG_PASSWORD: i32 = 10;
/// Missing, corrupt, tampered or unsupported config.
pub const BAD_CONFIG: i32 = 11;
/// `init` on a non-empty directory.
pub const NOT_EMPTY: i32 = 12;
/// The mount itself failed.
pub const MOUNT_FAILED: i32 = 13;
/// A rekey to a new volume key is unfinished: only `warpfs rekey` opens
/// the volume, to finish it.
pub const REKEY_UNFINISHED: i32 = 14;
/// A hardware keyslot's device is not reachable: no TPM on the TCTI, no
/// FIDO2 security key found or answering (not touched in time, PIN
/// blocked, request refused).
pub const DEVICE_UNREACHABLE: i32 = 15;
/// The device refused to give the slot key (a TPM2 slot's PCRs changed).
pub const DEVICE_REFUSED: i32 = 16;
/// The slot is not of this device (sealed by another TPM, or the TPM was
/// cleared since).
pub const DEVICE_FOREIGN: i32 = 17;
/// An upgrade to file summaries is unfinished: mount, fsck and rekey
/// refuse the volume until `warpfs upgrade` finishes it.
pub const UPGRADE_UNFINISHED: i32 = 18;
/// `fsck`: problems found (some not repaired).
pub const FSCK_PROBLEMS: i32 = 20;
/// `fsck`: every problem found was repaired.
pub const FSCK_REPAIRED: i32 = 21;
/// `fsck`: refused, the volume is mounted.
pub const FSCK_MOUNTED: i32 = 22;

/// A failed command: one line for the user and an exit code.
#[derive(Debug)]
pub struct CliError {
    /// Exit code.
    pub code: i32,
    /// One clear line.
    pub msg: String,
}

impl CliError {
    /// An error with a code.
    pub fn new(code: i32, msg: impl Into<String>) -> Self {
        Self { code, msg: msg.into() }
    }
}

impl From<warpfs_config::ConfigError> for CliError {
    fn from(e: warpfs_config::ConfigError) -> Self {
        use warpfs_config::ConfigError as E;
        let code = match &e {
            E::WrongPassword => WRONG_PASSWORD,
            // No config at all: not a warpfs volume (or a wrong --config).
            E::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => BAD_CONFIG,
            E::Io { .. } => ERROR,
            E::AlreadyExists { .. } => NOT_EMPTY,
            E::Slots(_) => ERROR,
            E::Device(d) => device_code(d.failure),
            _ => BAD_CONFIG,
        };
        CliError::new(code, e.to_string())
    }
}

/// The exit code of a hardware keyslot device's failure (TPM2, FIDO2).
pub fn device_code(f: warpfs_config::DeviceFailure) -> i32 {
    use warpfs_config::DeviceFailure as F;
    match f {
        F::Unreachable => DEVICE_UNREACHABLE,
        F::Refused => DEVICE_REFUSED,
        F::Foreign => DEVICE_FOREIGN,
        F::Other => ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpfs_config::DeviceFailure as F;

    #[test]
    fn each_device_failure_has_its_exit_code() {
        let codes = [F::Unreachable, F::Refused, F::Foreign, F::Other].map(device_code);
        assert_eq!(codes, [15, 16, 17, 1]);
    }
}
