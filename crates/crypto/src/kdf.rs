//! Password key derivation: Argon2id (version 0x13) with stored,
//! bounds-checked parameters and a 32-byte random salt.

use crate::error::{Error, Result};
use argon2::{Algorithm, Argon2, Params, Version};
use zeroize::Zeroizing;

/// Length of the KDF salt.
pub const SALT_LEN: usize = 32;

/// Argon2id cost parameters, as stored in `warpfs.conf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KdfParams {
    /// Memory in KiB.
    pub memory_kib: u32,
    /// Number of passes (Argon2 `t`).
    pub iterations: u32,
    /// Lanes (Argon2 `p`).
    pub parallelism: u32,
}

impl Default for KdfParams {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl KdfParams {
    /// What `warpfs init` uses: 64 MiB, 3 passes, 1 lane.
    pub const DEFAULT: KdfParams = KdfParams {
        memory_kib: 65536,
        iterations: 3,
        parallelism: 1,
    };
    /// The weakest parameters accepted (32 MiB, 2 passes, 1 lane). A config
    /// below any of these is refused, so it cannot be edited to be weaker.
    pub const MIN: KdfParams = KdfParams {
        memory_kib: 32768,
        iterations: 2,
        parallelism: 1,
    };
    /// The most expensive parameters accepted (1 GiB, 10 passes, 16
    /// lanes: a few seconds on a desktop), so a hostile config cannot make
    /// each unlock attempt exhaust the machine's memory or time.
    pub const MAX: KdfParams = KdfParams {
        memory_kib: 1024 * 1024,
        iterations: 10,
        parallelism: 16,
    };

    /// Check every field against [`Self::MIN`] and [`Self::MAX`]; the error
    /// names the first field out of bounds ([`Error::KdfBounds`]).
    pub fn validate(&self) -> Result<()> {
        let check = |field: &'static str, value: u32, min: u32, max: u32| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(Error::KdfBounds { field, value, min, max })
            }
        };
        check(
            "memory_kib",
            self.memory_kib,
            Self::MIN.memory_kib,
            Self::MAX.memory_kib,
        )?;
        check(
            "iterations",
            self.iterations,
            Self::MIN.iterations,
            Self::MAX.iterations,
        )?;
        check(
            "parallelism",
            self.parallelism,
            Self::MIN.parallelism,
            Self::MAX.parallelism,
        )
    }
}

/// Derive a 32-byte key-encryption key from `password` with Argon2id.
/// Refuses parameters outside the bounds.
pub fn derive(password: &[u8], salt: &[u8; SALT_LEN], params: &KdfParams) -> Result<Zeroizing<[u8; 32]>> {
    params.validate()?;
    derive_unchecked(password, salt, params)
}

/// Argon2id without the bounds check (any salt length ≥ 8); used by
/// [`derive`] and by the reference-vector test.
fn derive_unchecked(password: &[u8], salt: &[u8], params: &KdfParams) -> Result<Zeroizing<[u8; 32]>> {
    let p = Params::new(params.memory_kib, params.iterations, params.parallelism, Some(32))
        .map_err(|e| Error::Kdf(e.to_string()))?;
    let mut out = Zeroizing::new([0u8; 32]);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, p)
        .hash_password_into(password, salt, &mut *out)
        .map_err(|e| Error::Kdf(e.to_string()))?;
    Ok(out)
}

/// HKDF info string of the keyfile combination.
pub const INFO_KEYFILE: &[u8] = b"warpfs v1 keyfile";
/// Largest keyfile read (1 MiB).
pub const MAX_KEYFILE_LEN: usize = 1 << 20;

/// The secret that replaces the password when a keyfile is used (FORMAT.md
/// 2.5): `HKDF-SHA256(salt = SHA-256(keyfile), IKM = password, info =
/// "warpfs v1 keyfile")`, 32 bytes; `password` is empty with
/// `--keyfile-only`. The result goes into Argon2id like a password.
pub fn combine_keyfile(password: &[u8], keyfile: &[u8]) -> Zeroizing<[u8; 32]> {
    use sha2::{Digest, Sha256};
    let salt = Zeroizing::new(<[u8; 32]>::from(Sha256::digest(keyfile)));
    let mut out = Zeroizing::new([0u8; 32]);
    hkdf::Hkdf::<Sha256>::new(Some(&salt[..]), password)
        .expand(INFO_KEYFILE, &mut out[..])
        .expect("32 bytes is a valid HKDF-SHA256 length");
    out
}

#[cfg(test)]
mod keyfile_tests {
    use super::*;

    #[test]
    fn keyfile_combination_depends_on_both_and_matches_hkdf() {
        let a = combine_keyfile(b"pw", b"key bytes");
        assert_ne!(*a, *combine_keyfile(b"pw", b"key bytez"));
        assert_ne!(*a, *combine_keyfile(b"pv", b"key bytes"));
        assert_ne!(*combine_keyfile(b"", b"key bytes"), *a);
        // Independent: HMAC-based HKDF steps by hand.
        use hkdf::hmac::{Hmac, KeyInit, Mac};
        use sha2::{Digest, Sha256};
        let salt = Sha256::digest(b"key bytes");
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&salt).unwrap();
        m.update(b"pw");
        let prk = m.finalize().into_bytes();
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&prk).unwrap();
        m.update(INFO_KEYFILE);
        m.update(&[1]);
        assert_eq!(&a[..], &m.finalize().into_bytes()[..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vector_argon2id() {
        // Argon2 reference implementation (phc-winner-argon2 test.c),
        // Argon2id v0x13, t=2, m=2^16 KiB, p=1, "password" / "somesalt".
        let k = derive_unchecked(
            b"password",
            b"somesalt",
            &KdfParams {
                memory_kib: 65536,
                iterations: 2,
                parallelism: 1,
            },
        )
        .unwrap();
        assert_eq!(
            hex::encode(*k),
            "09316115d5cf24ed5a15a31a3ba326e5cf32edc24702987c02b6566f61913cf7"
        );
    }

    #[test]
    fn deterministic_and_salted() {
        let p = KdfParams::MIN;
        let a = derive(b"pw", &[1; 32], &p).unwrap();
        assert_eq!(*a, *derive(b"pw", &[1; 32], &p).unwrap());
        assert_ne!(*a, *derive(b"pw", &[2; 32], &p).unwrap());
        assert_ne!(*a, *derive(b"pX", &[1; 32], &p).unwrap());
        let q = KdfParams { iterations: 3, ..p };
        assert_ne!(*a, *derive(b"pw", &[1; 32], &q).unwrap());
    }

    #[test]
    fn bounds() {
        assert!(KdfParams::DEFAULT.validate().is_ok());
        assert!(KdfParams::MIN.validate().is_ok());
        assert!(KdfParams::MAX.validate().is_ok());
        assert_eq!(KdfParams::MAX.memory_kib, 1_048_576);
        assert_eq!(KdfParams::MAX.iterations, 10);
        // Above the ceiling: a message that says so and why.
        let e = KdfParams {
            memory_kib: 4 * 1024 * 1024,
            ..KdfParams::DEFAULT
        }
        .validate()
        .unwrap_err();
        assert!(!e.is_kdf_too_weak());
        let m = e.to_string();
        assert!(m.contains("more than warpfs spends") && m.contains("1048576"), "{m}");
        let weak = KdfParams {
            memory_kib: 1024,
            ..KdfParams::DEFAULT
        };
        let e = weak.validate().unwrap_err();
        assert!(e.is_kdf_too_weak());
        assert!(e.to_string().contains("memory_kib"), "{e}");
        let e = KdfParams {
            iterations: 1,
            ..KdfParams::DEFAULT
        }
        .validate()
        .unwrap_err();
        assert!(e.is_kdf_too_weak() && e.to_string().contains("iterations"));
        let e = KdfParams {
            parallelism: 17,
            ..KdfParams::DEFAULT
        }
        .validate()
        .unwrap_err();
        assert!(!e.is_kdf_too_weak() && e.to_string().contains("parallelism"));
        let e = KdfParams {
            parallelism: 0,
            ..KdfParams::DEFAULT
        }
        .validate()
        .unwrap_err();
        assert!(e.is_kdf_too_weak());
        assert!(derive(b"pw", &[0; 32], &weak).is_err());
        assert!(KdfParams {
            memory_kib: u32::MAX,
            ..KdfParams::DEFAULT
        }
        .validate()
        .is_err());
    }
}
