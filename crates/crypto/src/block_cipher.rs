//! Which 128-bit block cipher a volume uses (AES or Twofish): a plain
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
