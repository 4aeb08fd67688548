//! Content modes (`content_mode` in `warpfs.conf`, FORMAT.md sections 3, 7
//! and 11): the block mode and its 128-bit block cipher, AES or Twofish.

use crate::error::{ConfigError, Result};
use std::fmt;
use warpfs_crypto::XtsCipher;

/// How file contents are encrypted (chosen at init).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ContentMode {
    /// AES-CTR, no integrity (the paper's mode, fastest).
    Ctr,
    /// AES-GCM per block, tag in the nonce entry (default).
    #[default]
    Gcm,
    /// XTS-AES per block (IEEE 1619), tweak = file ID ⊕ block number; no
    /// integrity, no nonce table.
    Xts,
    /// XTS-Twofish per block (as TrueCrypt offers it), otherwise as `Xts`.
    XtsTwofish,
    /// Twofish-CTR, otherwise as `Ctr` (FORMAT.md 11).
    CtrTwofish,
    /// Twofish-GCM (GHASH with H = Twofish_K(0^128)), otherwise as `Gcm`
    /// (FORMAT.md 11).
    GcmTwofish,
}

/// Every mode, in the order `--help` and errors list them.
pub const ALL: [ContentMode; 6] = [
    ContentMode::Gcm,
    ContentMode::Ctr,
    ContentMode::Xts,
    ContentMode::XtsTwofish,
    ContentMode::CtrTwofish,
    ContentMode::GcmTwofish,
];

impl ContentMode {
    /// The name used in `warpfs.conf` and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentMode::Ctr => "ctr",
            ContentMode::Gcm => "gcm",
            ContentMode::Xts => "xts",
            ContentMode::XtsTwofish => "xts-twofish",
            ContentMode::CtrTwofish => "ctr-twofish",
            ContentMode::GcmTwofish => "gcm-twofish",
        }
    }

    /// The mode with block mode `base` (`Ctr`, `Gcm` or `Xts`) over `cipher`.
    pub fn with_cipher(base: ContentMode, cipher: XtsCipher) -> ContentMode {
        match (base.base(), cipher) {
            (b, XtsCipher::Aes) => b,
            (ContentMode::Ctr, XtsCipher::Twofish) => ContentMode::CtrTwofish,
            (ContentMode::Gcm, XtsCipher::Twofish) => ContentMode::GcmTwofish,
            (_, XtsCipher::Twofish) => ContentMode::XtsTwofish,
        }
    }

    /// The block mode alone: `Ctr`, `Gcm` or `Xts` (the AES mode of the
    /// same layout).
    pub fn base(self) -> ContentMode {
        match self {
            ContentMode::Ctr | ContentMode::CtrTwofish => ContentMode::Ctr,
            ContentMode::Gcm | ContentMode::GcmTwofish => ContentMode::Gcm,
            ContentMode::Xts | ContentMode::XtsTwofish => ContentMode::Xts,
        }
    }

    /// The 128-bit block cipher.
    pub fn block_cipher(self) -> XtsCipher {
        match self {
            ContentMode::XtsTwofish | ContentMode::CtrTwofish | ContentMode::GcmTwofish => XtsCipher::Twofish,
            _ => XtsCipher::Aes,
        }
    }

    /// The XTS block cipher, for the XTS modes.
    pub fn xts_cipher(self) -> Option<XtsCipher> {
        (self.base() == ContentMode::Xts).then(|| self.block_cipher())
    }

    /// The block cipher's name: `AES` or `Twofish`.
    pub fn cipher_name(self) -> &'static str {
        match self.block_cipher() {
            XtsCipher::Aes => "AES",
            XtsCipher::Twofish => "Twofish",
        }
    }

    /// One line for `warpfs info`: integrity and the construction.
    pub fn description(self) -> String {
        let c = self.cipher_name();
        match self.base() {
            ContentMode::Gcm => format!("authenticated: {c}-GCM tag per block"),
            ContentMode::Ctr => format!("not authenticated: {c}-CTR only"),
            _ => format!("not authenticated: XTS-{c} per 4 KiB block, tweak = file ID ⊕ block number"),
        }
    }

    /// The content-mode byte of a cipher file header (FORMAT.md 3.1): the
    /// block mode's; the block cipher is the config's.
    pub fn header_code(self) -> u8 {
        match self.base() {
            ContentMode::Ctr => 1,
            ContentMode::Gcm => 2,
            _ => 3,
        }
    }

    /// The block mode of a cipher file header's mode byte (1: `Ctr`, 2:
    /// `Gcm`, 3: `Xts`; the block cipher is the config's).
    pub fn from_header_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(ContentMode::Ctr),
            2 => Some(ContentMode::Gcm),
            3 => Some(ContentMode::Xts),
            _ => None,
        }
    }
}

impl fmt::Display for ContentMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ContentMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self> {
        ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = ALL.iter().map(|m| m.as_str()).collect();
            ConfigError::Unsupported(format!(
                "content mode {} is not supported by this warpfs (supported: {})",
                crate::config::show(s),
                names.join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twofish_modes_parse_and_map_to_their_block_modes() {
        for m in ALL {
            assert_eq!(m.as_str().parse::<ContentMode>().unwrap(), m);
            assert_eq!(ContentMode::with_cipher(m.base(), m.block_cipher()), m);
            assert_eq!(ContentMode::from_header_code(m.header_code()), Some(m.base()));
        }
        assert_eq!(ContentMode::CtrTwofish.header_code(), 1);
        assert_eq!(ContentMode::GcmTwofish.header_code(), 2);
        assert_eq!(ContentMode::GcmTwofish.block_cipher(), XtsCipher::Twofish);
        assert_eq!(ContentMode::GcmTwofish.xts_cipher(), None);
        assert_eq!(ContentMode::XtsTwofish.xts_cipher(), Some(XtsCipher::Twofish));
        assert_eq!(
            ContentMode::GcmTwofish.description(),
            "authenticated: Twofish-GCM tag per block"
        );
        let e = "gcm-serpent".parse::<ContentMode>().unwrap_err().to_string();
        assert!(e.contains("ctr-twofish") && e.contains("gcm-twofish"), "{e}");
    }
}
