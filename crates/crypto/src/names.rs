//! File-name encryption: AES-SIV (RFC 5297, AES-CMAC-SIV with a 64-byte key)
//! under a per-directory IV as associated data, encoded as base64url without
//! padding; hashed long names with sidecars; encrypted xattr names.

use crate::error::{Error, Result};
use aes_siv::siv::Aes256Siv;
use aes_siv::KeyInit;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// Longest backing name (bytes) stored as is; longer encrypted names go to a
/// `warpfs.long.*` file plus sidecar. Also the longest plaintext name.
pub const MAX_NAME: usize = 255;
/// Length of a directory IV.
pub const DIRIV_LEN: usize = 16;
/// File holding a directory's IV, in every backing directory.
pub const DIRIV_FILE: &str = "warpfs.diriv";
/// Prefix of every name warpfs reserves in a backing directory.
pub const RESERVED_PREFIX: &str = "warpfs.";
/// Prefix of a long-name backing entry.
pub const LONG_PREFIX: &str = "warpfs.long.";
/// Suffix of a long-name sidecar.
pub const SIDECAR_SUFFIX: &str = ".name";
/// Associated data of xattr-name encryption.
pub const XATTR_NAME_AD: &[u8] = b"warpfs xattr name";
/// Longest xattr name (bytes) accepted, as Linux's XATTR_NAME_MAX.
pub const MAX_XATTR_NAME: usize = 255;

const SIV_TAG: usize = 16;
/// The longest encoded form of a valid name: base64url(16 + 255 bytes).
pub const MAX_ENCODED_NAME: usize = ((SIV_TAG + MAX_NAME) * 4).div_ceil(3);

/// Deterministic authenticated encryption of names (AES-SIV, 64-byte key).
/// Same name + same directory IV → same encrypted name; any change of the
/// ciphertext or IV fails authentication.
#[derive(Clone)]
pub struct NameCipher {
    /// The AES-SIV key, on locked pages zeroed on drop.
    key: crate::locked::Locked<[u8; 64]>,
}

impl std::fmt::Debug for NameCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NameCipher(..)")
    }
}

/// Where an entry lives in its backing directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackingName {
    /// The encrypted name fits: the backing entry has this name.
    Short(String),
    /// The encrypted name is longer than [`MAX_NAME`]: the entry is `file`
    /// (`warpfs.long.<base64url(sha256(encoded))>`), and the sidecar
    /// [`long_sidecar`]`(file)` holds `encoded`.
    Long {
        /// Backing entry name.
        file: String,
        /// The full encrypted name, stored in the sidecar.
        encoded: String,
    },
}

impl BackingName {
    /// The backing entry's name (the short name or the `warpfs.long.*` file).
    pub fn file(&self) -> &str {
        match self {
            BackingName::Short(s) => s,
            BackingName::Long { file, .. } => file,
        }
    }
}

/// Check a plaintext file name: 1..=255 bytes, no `/` or NUL, not `.`/`..`.
pub fn validate_name(name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidName("empty"));
    }
    if name.len() > MAX_NAME {
        return Err(Error::NameTooLong);
    }
    if name == b"." || name == b".." {
        return Err(Error::InvalidName("`.` and `..` are not file names"));
    }
    if name.contains(&b'/') {
        return Err(Error::InvalidName("contains '/'"));
    }
    if name.contains(&0) {
        return Err(Error::InvalidName("contains NUL"));
    }
    Ok(())
}

/// True for names warpfs keeps for itself in a backing directory (anything
/// starting with `warpfs.`). Encrypted names never contain `.`.
pub fn is_reserved(name: impl AsRef<[u8]>) -> bool {
    name.as_ref().starts_with(RESERVED_PREFIX.as_bytes())
}

/// True for a long-name backing entry (`warpfs.long.*`, not its sidecar).
pub fn is_long_file(name: impl AsRef<[u8]>) -> bool {
    let n = name.as_ref();
    n.starts_with(LONG_PREFIX.as_bytes()) && !n.ends_with(SIDECAR_SUFFIX.as_bytes())
}

/// True for a long-name sidecar (`warpfs.long.*.name`).
pub fn is_sidecar(name: impl AsRef<[u8]>) -> bool {
    let n = name.as_ref();
    n.starts_with(LONG_PREFIX.as_bytes()) && n.ends_with(SIDECAR_SUFFIX.as_bytes())
}

/// The sidecar of a long-name entry: `file` + `.name`.
pub fn long_sidecar(file: &str) -> String {
    format!("{file}{SIDECAR_SUFFIX}")
}

/// The long-name entry for an encrypted name:
/// `warpfs.long.` + base64url(SHA-256(encoded)). A reader compares this with
/// the entry's name to check that a sidecar belongs to its entry.
pub fn long_file_name(encoded: &str) -> String {
    let h = Sha256::digest(encoded.as_bytes());
    format!("{LONG_PREFIX}{}", URL_SAFE_NO_PAD.encode(h))
}

impl NameCipher {
    /// A name cipher from its 64-byte AES-SIV key (first half CMAC key,
    /// second half CTR key, as RFC 5297).
    pub fn new(key: &[u8; 64]) -> Self {
        Self {
            key: crate::locked::Locked::new(*key),
        }
    }

    fn siv(&self) -> Aes256Siv {
        Aes256Siv::new((&*self.key).into())
    }

    fn seal_det(&self, ad: &[u8], pt: &[u8]) -> String {
        let ct = self
            .siv()
            .encrypt([ad], pt)
            .expect("one AES-SIV header is within MAX_HEADERS");
        URL_SAFE_NO_PAD.encode(ct)
    }

    fn open_det(&self, ad: &[u8], encoded: &str) -> Result<Vec<u8>> {
        if encoded.len() > MAX_ENCODED_NAME {
            return Err(Error::Malformed("encrypted name is too long"));
        }
        let ct = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| Error::Malformed("encrypted name is not base64url"))?;
        if ct.len() <= SIV_TAG {
            return Err(Error::Malformed("encrypted name is too short"));
        }
        self.siv().decrypt([ad], &ct).map_err(|_| Error::Auth)
    }

    /// Encrypt one file name for the directory with IV `diriv`:
    /// base64url(AES-SIV(key, AD = [diriv], name)), no padding.
    pub fn encrypt_name(&self, diriv: &[u8; DIRIV_LEN], name: &[u8]) -> Result<String> {
        validate_name(name)?;
        Ok(self.seal_det(diriv, name))
    }

    /// Decrypt a backing name (hostile input). Errors on bad base64, short
    /// input, a failed tag, or a result that is not a valid file name.
    pub fn decrypt_name(&self, diriv: &[u8; DIRIV_LEN], encoded: &str) -> Result<Vec<u8>> {
        let name = self.open_det(diriv, encoded)?;
        validate_name(&name)?;
        Ok(name)
    }

    /// The backing entry for `name`: the encrypted name itself, or a hashed
    /// long name (plus sidecar content) when it is longer than [`MAX_NAME`].
    pub fn backing_name(&self, diriv: &[u8; DIRIV_LEN], name: &[u8]) -> Result<BackingName> {
        let encoded = self.encrypt_name(diriv, name)?;
        if encoded.len() <= MAX_NAME {
            Ok(BackingName::Short(encoded))
        } else {
            Ok(BackingName::Long {
                file: long_file_name(&encoded),
                encoded,
            })
        }
    }

    /// The backing entry name an encrypted name is stored under: itself if
    /// it fits in [`MAX_NAME`], else [`long_file_name`]. `None` for an empty
    /// or impossibly long (> [`MAX_ENCODED_NAME`]) input. A reader of a
    /// long-name sidecar checks that this equals the entry's name.
    pub fn backing_name_of_encoded(&self, encoded: &str) -> Option<String> {
        if encoded.is_empty() || encoded.len() > MAX_ENCODED_NAME {
            None
        } else if encoded.len() > MAX_NAME {
            Some(long_file_name(encoded))
        } else {
            Some(encoded.to_owned())
        }
    }

    /// Encrypt an xattr name (1..=255 bytes, no NUL) deterministically with
    /// AD [`XATTR_NAME_AD`]; base64url without padding. The caller adds the
    /// backing namespace prefix (e.g. `user.`).
    pub fn encrypt_xattr_name(&self, name: &[u8]) -> Result<String> {
        validate_xattr_name(name)?;
        Ok(self.seal_det(XATTR_NAME_AD, name))
    }

    /// Decrypt an xattr name made by [`Self::encrypt_xattr_name`] (hostile input).
    pub fn decrypt_xattr_name(&self, encoded: &str) -> Result<Vec<u8>> {
        let name = self.open_det(XATTR_NAME_AD, encoded)?;
        validate_xattr_name(&name)?;
        Ok(name)
    }
}

fn validate_xattr_name(name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidName("empty xattr name"));
    }
    if name.len() > MAX_XATTR_NAME {
        return Err(Error::NameTooLong);
    }
    if name.contains(&0) {
        return Err(Error::InvalidName("xattr name contains NUL"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn nc() -> NameCipher {
        let mut k = [0u8; 64];
        for (i, b) in k.iter_mut().enumerate() {
            *b = i as u8;
        }
        NameCipher::new(&k)
    }

    const IV: [u8; 16] = [0x11; 16];

    #[test]
    fn round_trip_and_deterministic() {
        let c = nc();
        let e = c.encrypt_name(&IV, b"hello.txt").unwrap();
        assert_eq!(e, c.encrypt_name(&IV, b"hello.txt").unwrap());
        assert_eq!(e.len(), 34); // base64url of 16 + 9 bytes
        assert!(e.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(c.decrypt_name(&IV, &e).unwrap(), b"hello.txt");
        assert_ne!(e, c.encrypt_name(&IV, b"hello.txy").unwrap());
    }

    #[test]
    fn encoded_length() {
        let c = nc();
        for n in 1..=MAX_NAME {
            let e = c.encrypt_name(&IV, &vec![b'a'; n]).unwrap();
            assert_eq!(e.len(), ((16 + n) * 4).div_ceil(3));
        }
        assert_eq!(MAX_ENCODED_NAME, 362);
    }

    #[test]
    fn directory_iv_is_bound() {
        let c = nc();
        let e = c.encrypt_name(&IV, b"a").unwrap();
        let other = [0x12; 16];
        assert_ne!(e, c.encrypt_name(&other, b"a").unwrap());
        assert_eq!(c.decrypt_name(&other, &e), Err(Error::Auth));
    }

    #[test]
    fn other_key_fails() {
        let e = nc().encrypt_name(&IV, b"a").unwrap();
        let c2 = NameCipher::new(&[9; 64]);
        assert_eq!(c2.decrypt_name(&IV, &e), Err(Error::Auth));
    }

    #[test]
    fn invalid_plaintext_names() {
        let c = nc();
        for bad in [&b""[..], b".", b"..", b"a/b", b"/", b"a\0b"] {
            assert!(
                matches!(c.encrypt_name(&IV, bad), Err(Error::InvalidName(_))),
                "{bad:?}"
            );
        }
        assert_eq!(c.encrypt_name(&IV, &[b'x'; 256]), Err(Error::NameTooLong));
        assert!(c.encrypt_name(&IV, b"...").is_ok());
        assert!(c.encrypt_name(&IV, &[0xff, 0xfe]).is_ok()); // not UTF-8: fine
    }

    #[test]
    fn hostile_encoded_names() {
        let c = nc();
        assert!(matches!(c.decrypt_name(&IV, ""), Err(Error::Malformed(_))));
        assert!(matches!(c.decrypt_name(&IV, "a.b"), Err(Error::Malformed(_))));
        assert!(matches!(c.decrypt_name(&IV, "AAAA===="), Err(Error::Malformed(_))));
        // 16 bytes: a tag with nothing after it.
        assert!(matches!(
            c.decrypt_name(&IV, &URL_SAFE_NO_PAD.encode([0u8; 16])),
            Err(Error::Malformed(_))
        ));
        assert_eq!(
            c.decrypt_name(&IV, &URL_SAFE_NO_PAD.encode([0u8; 17])),
            Err(Error::Auth)
        );
        assert!(matches!(
            c.decrypt_name(&IV, &"A".repeat(100_000)),
            Err(Error::Malformed(_))
        ));
        // Non-canonical trailing bits are refused, so each name has one encoding.
        let e = c.encrypt_name(&IV, b"ab").unwrap(); // 18 bytes → 24 chars, no slack
        let e3 = c.encrypt_name(&IV, b"abc").unwrap(); // 19 bytes → 26 chars, 4 slack bits
        assert_eq!(e.len(), 24);
        let last = e3.as_bytes()[25];
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let pos = alphabet.iter().position(|&a| a == last).unwrap();
        let mut tweaked = e3.clone().into_bytes();
        tweaked[25] = alphabet[pos ^ 1];
        let tweaked = String::from_utf8(tweaked).unwrap();
        assert!(matches!(c.decrypt_name(&IV, &tweaked), Err(Error::Malformed(_))));
    }

    #[test]
    fn decrypted_invalid_names_are_refused() {
        // A valid ciphertext of "." / ".." / "a/b" (made with the raw SIV)
        // must still be refused.
        let c = nc();
        for bad in [&b"."[..], b"..", b"a/b", b"a\0"] {
            let e = c.seal_det(&IV, bad);
            assert!(matches!(c.decrypt_name(&IV, &e), Err(Error::InvalidName(_))));
        }
        // 256 bytes: already refused by the encoded-length cap.
        let e = c.seal_det(&IV, &[b'x'; 256]);
        assert!(matches!(c.decrypt_name(&IV, &e), Err(Error::Malformed(_))));
    }

    #[test]
    fn long_names() {
        let c = nc();
        // 16 + n bytes encode to more than 255 chars from n = 176.
        let short = c.backing_name(&IV, &[b'a'; 175]).unwrap();
        assert!(matches!(&short, BackingName::Short(s) if s.len() == 255));
        let long = c.backing_name(&IV, &[b'a'; 176]).unwrap();
        let BackingName::Long { file, encoded } = &long else {
            panic!("expected a long name")
        };
        assert_eq!(encoded.len(), 256);
        assert!(file.starts_with(LONG_PREFIX));
        assert_eq!(file.len(), LONG_PREFIX.len() + 43);
        assert_eq!(file, &long_file_name(encoded));
        assert_eq!(c.backing_name_of_encoded(encoded).as_ref(), Some(file));
        let BackingName::Short(s) = &short else { unreachable!() };
        assert_eq!(c.backing_name_of_encoded(s).as_ref(), Some(s));
        assert_eq!(c.backing_name_of_encoded(""), None);
        assert_eq!(c.backing_name_of_encoded(&"A".repeat(363)), None);
        assert_eq!(long.file(), file);
        assert_eq!(long_sidecar(file), format!("{file}.name"));
        assert!(is_reserved(file) && is_long_file(file) && !is_sidecar(file));
        assert!(is_sidecar(long_sidecar(file)) && !is_long_file(long_sidecar(file)));
        assert_eq!(c.decrypt_name(&IV, encoded).unwrap(), vec![b'a'; 176]);
        let max = c.backing_name(&IV, &[b'a'; 255]).unwrap();
        assert!(matches!(max, BackingName::Long { .. }));
    }

    #[test]
    fn reserved_names() {
        assert!(is_reserved("warpfs.conf"));
        assert!(is_reserved(DIRIV_FILE));
        assert!(is_reserved(b"warpfs.long.x".as_slice()));
        assert!(!is_reserved("warpfs"));
        assert!(!is_reserved("Warpfs.conf"));
        assert!(!is_reserved(nc().encrypt_name(&IV, b"warpfs.conf").unwrap()));
    }

    #[test]
    fn xattr_names() {
        let c = nc();
        let e = c.encrypt_xattr_name(b"user.comment").unwrap();
        assert_eq!(e, c.encrypt_xattr_name(b"user.comment").unwrap());
        assert_eq!(c.decrypt_xattr_name(&e).unwrap(), b"user.comment");
        // Different AD from file names: a file name's ciphertext is not an xattr name.
        let f = c.encrypt_name(&IV, b"user.comment").unwrap();
        assert_ne!(e, f);
        assert_eq!(c.decrypt_xattr_name(&f), Err(Error::Auth));
        assert!(c.encrypt_xattr_name(b"").is_err());
        assert!(c.encrypt_xattr_name(b"a\0").is_err());
        assert!(c.encrypt_xattr_name(b"a/b").is_ok());
        assert!(c.decrypt_xattr_name("!!").is_err());
    }

    proptest! {
        #[test]
        fn any_valid_name_round_trips(name in proptest::collection::vec(1u8.., 1..=255), iv in proptest::array::uniform16(0u8..)) {
            prop_assume!(!name.contains(&b'/') && name != b"." && name != b"..");
            let c = nc();
            let b = c.backing_name(&iv, &name).unwrap();
            let enc = match &b { BackingName::Short(s) => s.clone(), BackingName::Long { encoded, .. } => encoded.clone() };
            prop_assert!(!enc.contains('.') && !is_reserved(&enc));
            prop_assert_eq!(c.decrypt_name(&iv, &enc).unwrap(), name);
        }

        #[test]
        fn hostile_input_never_panics(s in "\\PC{0,400}", bytes in proptest::collection::vec(0u8.., 0..300)) {
            let c = nc();
            let _ = c.decrypt_name(&IV, &s);
            let _ = c.decrypt_xattr_name(&s);
            let enc = URL_SAFE_NO_PAD.encode(&bytes);
            prop_assert!(c.decrypt_name(&IV, &enc).is_err());
        }

        #[test]
        fn flipped_bit_fails(name in proptest::collection::vec(b'a'..=b'z', 1..100), bit in 0usize..8, pos in 0usize..1000) {
            let c = nc();
            let enc = c.encrypt_name(&IV, &name).unwrap();
            let mut raw = URL_SAFE_NO_PAD.decode(&enc).unwrap();
            let p = pos % raw.len();
            raw[p] ^= 1 << bit;
            prop_assert_eq!(c.decrypt_name(&IV, &URL_SAFE_NO_PAD.encode(&raw)), Err(Error::Auth));
        }
    }
}
