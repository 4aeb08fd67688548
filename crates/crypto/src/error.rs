//! Errors of the crypto primitives. Messages are one line and never contain
//! key material or plaintext. A leaf: it uses no other module of this crate.

/// A key of the wrong length was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid key length")]
pub struct KeyLengthError;

/// Errors from name encryption, sealing, key handling and the password KDF.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A key of the wrong length was given.
    #[error("invalid key length")]
    KeyLength,
    /// A plaintext name that cannot be stored (empty, `.`/`..`, contains
    /// `/` or NUL). The string says which rule it broke.
    #[error("invalid name: {0}")]
    InvalidName(&'static str),
    /// A plaintext name longer than 255 bytes (`names::MAX_NAME`).
    #[error("name is longer than 255 bytes")]
    NameTooLong,
    /// Stored ciphertext that is not even well-formed (bad base64, too short,
    /// too long). The string says what is wrong.
    #[error("malformed ciphertext: {0}")]
    Malformed(&'static str),
    /// The authentication tag did not verify: wrong key, or the data (or
    /// its associated data, e.g. the directory IV) was changed.
    #[error("authentication failed: wrong key or tampered data")]
    Auth,
    /// A KDF parameter outside the accepted bounds.
    #[error("{}", kdf_bounds_message(field, *value, *min, *max))]
    KdfBounds {
        /// Field name as written in `warpfs.conf` (`memory_kib`, `iterations`, `parallelism`).
        field: &'static str,
        /// The value found.
        value: u32,
        /// Lowest accepted value.
        min: u32,
        /// Highest accepted value.
        max: u32,
    },
    /// The KDF itself failed (in practice: not enough memory).
    #[error("key derivation failed: {0}")]
    Kdf(String),
    /// A recovery key that cannot be parsed.
    #[error("invalid recovery key: {0}")]
    RecoveryText(&'static str),
}

impl Error {
    /// For [`Error::KdfBounds`]: true when the value is below the minimum,
    /// i.e. the parameters are weaker than allowed (a tampered config).
    pub fn is_kdf_too_weak(&self) -> bool {
        matches!(self, Error::KdfBounds { value, min, .. } if value < min)
    }
}

impl From<KeyLengthError> for Error {
    fn from(_: KeyLengthError) -> Self {
        Error::KeyLength
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn kdf_bounds_message(field: &str, value: u32, min: u32, max: u32) -> String {
    if value > max {
        format!(
            "kdf {field} = {value} asks for more than warpfs spends on one unlock (at most {max}; \
             1 GiB of memory and 10 passes keep an unlock within seconds on a desktop): \
             the config was edited, or written for another machine"
        )
    } else {
        format!("kdf {field} = {value} is outside the accepted range {min}..={max}")
    }
}
