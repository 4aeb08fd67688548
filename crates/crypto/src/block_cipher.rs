//! Which cipher a volume uses (AES, Twofish, or XChaCha20): a plain
//! choice, named here so that every cipher module can take it without
//! depending on another. A leaf: it uses no other module of this crate.

/// The 128-bit block cipher of a volume: under XTS, and (FORMAT.md
/// section 11) under CTR and GCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XtsCipher {
    /// AES (FIPS 197), hardware-accelerated where the CPU has AES-NI/VAES.
    Aes,
    /// Twofish (as TrueCrypt offers it): warpfs-crypto's own table-driven
    /// implementation (module `twofish`).
    Twofish,
}

impl XtsCipher {
    /// The name used in configs and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            XtsCipher::Aes => "aes",
            XtsCipher::Twofish => "twofish",
        }
    }
}

/// The cipher of a volume's content: a 128-bit block cipher (under XTS,
/// CTR or GCM) or the XChaCha20 stream cipher (FORMAT.md section 15, in
/// the `ctr` and authenticated layouts only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentCipher {
    /// AES.
    Aes,
    /// Twofish.
    Twofish,
    /// XChaCha20 (with Poly1305 tags in the authenticated mode).
    XChaCha20,
}

impl ContentCipher {
    /// The name used on the command line (`--cipher`).
    pub fn as_str(self) -> &'static str {
        match self {
            ContentCipher::Aes => "aes",
            ContentCipher::Twofish => "twofish",
            ContentCipher::XChaCha20 => "xchacha20",
        }
    }

    /// The name people know it by: `AES`, `Twofish`, `XChaCha20`.
    pub fn name(self) -> &'static str {
        match self {
            ContentCipher::Aes => "AES",
            ContentCipher::Twofish => "Twofish",
            ContentCipher::XChaCha20 => "XChaCha20",
        }
    }

    /// The 128-bit block cipher, if it is one.
    pub fn block_cipher(self) -> Option<XtsCipher> {
        match self {
            ContentCipher::Aes => Some(XtsCipher::Aes),
            ContentCipher::Twofish => Some(XtsCipher::Twofish),
            ContentCipher::XChaCha20 => None,
        }
    }
}

impl From<XtsCipher> for ContentCipher {
    fn from(c: XtsCipher) -> Self {
        match c {
            XtsCipher::Aes => ContentCipher::Aes,
            XtsCipher::Twofish => ContentCipher::Twofish,
        }
    }
}
