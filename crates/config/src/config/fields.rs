//! Small pieces every part of the config shares, below all of them: the
//! printable form of a hostile string, fixed-length base64 fields, and a
//! wrapped key's JSON form (FORMAT.md 2.3, 2.6).

use crate::error::{ConfigError, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use warpfs_crypto::wrap::{Wrapped, WRAPPED_LEN, WRAP_NONCE_LEN};

/// The one key wrapping (2.3).
pub(crate) const WRAP_ALGORITHM: &str = "aes-256-gcm";

/// Printable form of a hostile string for an error message: escaped and cut.
pub(crate) fn show(s: &str) -> String {
    let mut out: String = s.chars().take(64).flat_map(char::escape_debug).collect();
    if s.chars().count() > 64 {
        out.push('…');
    }
    format!("\"{out}\"")
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WrappedJson {
    algorithm: String,
    nonce: String,
    ciphertext: String,
}

impl WrappedJson {
    pub(crate) fn of(w: &Wrapped) -> Self {
        WrappedJson {
            algorithm: WRAP_ALGORITHM.to_owned(),
            nonce: B64.encode(w.nonce),
            ciphertext: B64.encode(&w.ciphertext),
        }
    }

    /// The wrapped key, checked (`field` names it in messages).
    pub(crate) fn parse(&self, field: &str) -> Result<Wrapped> {
        if self.algorithm != WRAP_ALGORITHM {
            return Err(ConfigError::Unsupported(format!(
                "key wrapping {} is not supported (only {WRAP_ALGORITHM})",
                show(&self.algorithm)
            )));
        }
        let nonce = decode_fixed::<WRAP_NONCE_LEN>(&format!("{field}.nonce"), &self.nonce)?;
        let ct = decode_fixed::<WRAPPED_LEN>(&format!("{field}.ciphertext"), &self.ciphertext)?;
        Ok(Wrapped {
            nonce,
            ciphertext: ct.to_vec(),
        })
    }
}

pub(crate) fn decode_fixed<const N: usize>(field: &str, s: &str) -> Result<[u8; N]> {
    // Refuse absurd lengths before decoding.
    if s.len() > 4 * N.div_ceil(3) {
        return Err(ConfigError::parse(format!("{field} must be {N} bytes of base64")));
    }
    let v = B64
        .decode(s)
        .map_err(|_| ConfigError::parse(format!("{field} is not valid base64")))?;
    v.try_into()
        .map_err(|_| ConfigError::parse(format!("{field} must be {N} bytes of base64")))
}
