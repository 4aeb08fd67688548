//! Errors of loading, unlocking and writing `warpfs.conf`. Each message is
//! one line and never contains a password or key.

use std::path::PathBuf;

/// Why a config could not be created, loaded, unlocked or rewritten.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Reading or writing the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a regular file with one link (a symlink, FIFO,
    /// device, directory or hard link planted in its place): never read.
    #[error("{}: refused: {why}", path.display())]
    Refused {
        /// The file concerned.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// The file is not a well-formed warpfs config (corrupt or not ours).
    #[error("warpfs.conf is corrupt: {0}")]
    Parse(String),
    /// Well-formed, but needs something this warpfs does not have (newer
    /// version, unknown feature flag, other mode or key size).
    #[error("{0}")]
    Unsupported(String),
    /// KDF parameters weaker than the minimum: refused so that an edited
    /// config cannot make the password cheaper to guess.
    #[error("refusing weak password KDF parameters: {0}")]
    WeakKdf(String),
    /// The password does not unlock the master key (or the config's
    /// authenticated fields were edited).
    #[error("wrong password (or warpfs.conf was modified)")]
    WrongPassword,
    /// A keyslot opened but the config's MAC does not verify under the
    /// volume key: someone without the key edited the config (FORMAT.md
    /// 2.6).
    #[error("warpfs.conf was altered: {0}")]
    Tampered(String),
    /// A keyslot operation that cannot be done (no such slot, the last
    /// slot, too many slots, a slot of another kind).
    #[error("{0}")]
    Slots(String),
    /// A hardware keyslot's device could not give the slot key (no TPM
    /// reachable, the TPM refused, the slot's object is not of this TPM).
    #[error("{0}")]
    Device(DeviceError),
    /// `create` found a `warpfs.conf` already there; nothing was written.
    #[error("{} already exists: this directory already holds a warpfs volume", path.display())]
    AlreadyExists {
        /// The existing config file.
        path: PathBuf,
    },
}

/// Why a device (a TPM) could not give a slot key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceFailure {
    /// No device reachable.
    Unreachable,
    /// The device refused (a TPM's PCR policy no longer holds).
    Refused,
    /// The slot's object is not of this device (sealed by another TPM,
    /// or this one was cleared since).
    Foreign,
    /// Anything else.
    Other,
}

/// A device's failure to give a slot key, and one line for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg}")]
pub struct DeviceError {
    /// What kind of failure.
    pub failure: DeviceFailure,
    /// One line, never a secret.
    pub msg: String,
}

impl DeviceFailure {
    /// How much a failure says about why nothing opened (of several
    /// slots' failures, the most telling is reported).
    pub(crate) fn rank(self) -> u8 {
        match self {
            DeviceFailure::Unreachable => 0,
            DeviceFailure::Other => 1,
            DeviceFailure::Foreign => 2,
            DeviceFailure::Refused => 3,
        }
    }
}

impl ConfigError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ConfigError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn parse(msg: impl Into<String>) -> Self {
        ConfigError::Parse(msg.into())
    }
}

/// Result with [`ConfigError`].
pub type Result<T, E = ConfigError> = std::result::Result<T, E>;
