//! Content modes (`content_mode` in `warpfs.conf`, FORMAT.md sections 3, 7,
//! 11 and 15): the block mode and its cipher, AES or Twofish (128-bit block
//! ciphers) or XChaCha20 (a stream cipher, in the `ctr` and authenticated
//! layouts only).

use crate::error::{ConfigError, Result};
use std::fmt;
use warpfs_crypto::{ContentCipher, XtsCipher};

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
    /// XChaCha20 keystream only, in the `ctr` layout (FORMAT.md 15).
    CtrXChaCha20,
    /// XChaCha20-Poly1305 per block, tag in the nonce entry, in the `gcm`
    /// layout (FORMAT.md 15).
    XChaCha20Poly1305,
}

/// Every mode, in the order `--help` and errors list them.
pub const ALL: [ContentMode; 8] = [
    ContentMode::Gcm,
    ContentMode::Ctr,
    ContentMode::Xts,
    ContentMode::XtsTwofish,
    ContentMode::CtrTwofish,
    ContentMode::GcmTwofish,
    ContentMode::XChaCha20Poly1305,
    ContentMode::CtrXChaCha20,
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
            ContentMode::CtrXChaCha20 => "ctr-xchacha20",
            ContentMode::XChaCha20Poly1305 => "xchacha20-poly1305",
        }
    }

    /// The mode with block mode `base` (`Ctr`, `Gcm` or `Xts`) over
    /// `cipher`; `None` for XTS over XChaCha20 (a stream cipher has no XTS).
    pub fn with_cipher(base: ContentMode, cipher: impl Into<ContentCipher>) -> Option<ContentMode> {
        Some(match (base.base(), cipher.into()) {
            (b, ContentCipher::Aes) => b,
            (ContentMode::Ctr, ContentCipher::Twofish) => ContentMode::CtrTwofish,
            (ContentMode::Gcm, ContentCipher::Twofish) => ContentMode::GcmTwofish,
            (_, ContentCipher::Twofish) => ContentMode::XtsTwofish,
            (ContentMode::Ctr, ContentCipher::XChaCha20) => ContentMode::CtrXChaCha20,
            (ContentMode::Gcm, ContentCipher::XChaCha20) => ContentMode::XChaCha20Poly1305,
            (_, ContentCipher::XChaCha20) => return None,
        })
    }

    /// The block mode alone: `Ctr`, `Gcm` or `Xts` (the AES mode of the
    /// same layout).
    pub fn base(self) -> ContentMode {
        match self {
            ContentMode::Ctr | ContentMode::CtrTwofish | ContentMode::CtrXChaCha20 => ContentMode::Ctr,
            ContentMode::Gcm | ContentMode::GcmTwofish | ContentMode::XChaCha20Poly1305 => ContentMode::Gcm,
            ContentMode::Xts | ContentMode::XtsTwofish => ContentMode::Xts,
        }
    }

    /// The content cipher.
    pub fn cipher(self) -> ContentCipher {
        match self {
            ContentMode::XtsTwofish | ContentMode::CtrTwofish | ContentMode::GcmTwofish => ContentCipher::Twofish,
            ContentMode::CtrXChaCha20 | ContentMode::XChaCha20Poly1305 => ContentCipher::XChaCha20,
            _ => ContentCipher::Aes,
        }
    }

    /// The XTS block cipher, for the XTS modes.
    pub fn xts_cipher(self) -> Option<XtsCipher> {
        match self.base() {
            ContentMode::Xts => self.cipher().block_cipher(),
            _ => None,
        }
    }

    /// Whether blocks carry a tag (the `gcm` layout: `gcm`, `gcm-twofish`,
    /// `xchacha20-poly1305`).
    pub fn is_authenticated(self) -> bool {
        self.base() == ContentMode::Gcm
    }

    /// Whether the volume may keep file summaries (`file-summary`,
    /// FORMAT.md 12): `gcm` and `xchacha20-poly1305`.
    pub fn has_file_summaries(self) -> bool {
        matches!(self, ContentMode::Gcm | ContentMode::XChaCha20Poly1305)
    }

    /// The cipher's name: `AES`, `Twofish` or `XChaCha20`.
    pub fn cipher_name(self) -> &'static str {
        self.cipher().name()
    }

    /// One line for `warpfs info`: integrity and the construction.
    pub fn description(self) -> String {
        let c = self.cipher_name();
        match (self.base(), self.cipher()) {
            (ContentMode::Gcm, ContentCipher::XChaCha20) => {
                "authenticated: XChaCha20-Poly1305 tag per block".to_string()
            }
            (ContentMode::Ctr, ContentCipher::XChaCha20) => "not authenticated: XChaCha20 keystream only".to_string(),
            (ContentMode::Gcm, _) => format!("authenticated: {c}-GCM tag per block"),
            (ContentMode::Ctr, _) => format!("not authenticated: {c}-CTR only"),
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
                crate::config::fields::show(s),
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
            assert_eq!(ContentMode::with_cipher(m.base(), m.cipher()), Some(m));
            assert_eq!(ContentMode::from_header_code(m.header_code()), Some(m.base()));
        }
        assert_eq!(ContentMode::CtrTwofish.header_code(), 1);
        assert_eq!(ContentMode::GcmTwofish.header_code(), 2);
        assert_eq!(ContentMode::GcmTwofish.cipher(), ContentCipher::Twofish);
        assert_eq!(ContentMode::GcmTwofish.xts_cipher(), None);
        assert_eq!(ContentMode::XtsTwofish.xts_cipher(), Some(XtsCipher::Twofish));
        assert_eq!(
            ContentMode::GcmTwofish.description(),
            "authenticated: Twofish-GCM tag per block"
        );
        let e = "gcm-serpent".parse::<ContentMode>().unwrap_err().to_string();
        assert!(e.contains("ctr-twofish") && e.contains("gcm-twofish"), "{e}");
    }

    #[test]
    fn xchacha_modes_use_the_ctr_and_gcm_layouts() {
        use ContentMode::{CtrXChaCha20 as C, XChaCha20Poly1305 as P};
        assert_eq!((C.as_str(), P.as_str()), ("ctr-xchacha20", "xchacha20-poly1305"));
        assert_eq!((C.base(), P.base()), (ContentMode::Ctr, ContentMode::Gcm));
        assert_eq!((C.header_code(), P.header_code()), (1, 2));
        assert_eq!(
            (C.cipher(), P.cipher()),
            (ContentCipher::XChaCha20, ContentCipher::XChaCha20)
        );
        assert_eq!((C.xts_cipher(), P.xts_cipher()), (None, None));
        assert!(P.is_authenticated() && !C.is_authenticated());
        assert!(P.has_file_summaries() && !C.has_file_summaries());
        assert!(ContentMode::Gcm.has_file_summaries() && !ContentMode::GcmTwofish.has_file_summaries());
        assert_eq!(
            ContentMode::with_cipher(ContentMode::Xts, ContentCipher::XChaCha20),
            None
        );
        assert_eq!(P.description(), "authenticated: XChaCha20-Poly1305 tag per block");
        assert_eq!(C.description(), "not authenticated: XChaCha20 keystream only");
        assert_eq!(P.cipher_name(), "XChaCha20");
        let e = "xchacha20".parse::<ContentMode>().unwrap_err().to_string();
        assert!(e.contains("xchacha20-poly1305") && e.contains("ctr-xchacha20"), "{e}");
    }
}
