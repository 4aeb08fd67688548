//! warpfs layer 4: content. One cipher file per plain file (FORMAT.md
//! section 3): the 32-byte header, the block/offset arithmetic of the nnode
//! and nonce pages, nonce entries, block encryption through a [`Keystream`]
//! engine, read–modify–write of partial blocks and per-file block range
//! locks so reads of different blocks run together; the in-place rekey of
//! a file segment by segment with its undo journal (FORMAT.md 10).
//!
//! All keystream comes from the seam in `warpfs-keystream`: writes seal
//! through the volume's `Keystream`, reads open through the open file's
//! `BlockReader` (from `Keystream::reader`; a read window that makes masks
//! ahead when the engine speculates), which each read request first tells
//! what it will read and the nonces of the planned blocks. `GcmTagger` is
//! used only for GHASH. Everything read from the backing file is treated as
//! hostile: a failed check is an error, never a panic.
//!
//! [`Keystream`]: warpfs_keystream::Keystream

pub mod cipher;
pub mod entry;
pub mod error;
pub mod faultlog;
pub mod file;
pub mod header;
pub mod hostlock;
pub mod keyring;
pub mod layout;
mod rangelock;
pub mod rekeystep;
pub mod scan;
mod scratch;
pub mod summary;
mod sysio;
pub mod undo;
pub mod upgrade;
pub mod witness;
pub mod zeroundo;

pub use cipher::Cipher;
pub use error::ContentError;
pub use file::{CipherFile, Seek};
pub use keyring::{IntoKeyring, Keyring};
pub use layout::BLOCK;
pub use witness::Witness;

/// Content mode of a volume (FORMAT.md 3.1, 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// AES-CTR, no integrity; 16-byte nonce entries.
    Ctr,
    /// AES-GCM per block, tag in the entry; 32-byte nonce entries.
    Gcm,
    /// XTS (AES or Twofish) per block, tweak = file ID ⊕ block number; no
    /// nonce entries (FORMAT.md section 7).
    Xts,
}

impl Mode {
    /// Length of one nonce entry in bytes: 16 (`ctr`) or 32 (`gcm`).
    pub const fn entry_len(self) -> usize {
        match self {
            Mode::Ctr => 16,
            Mode::Gcm => 32,
            Mode::Xts => 0,
        }
    }

    /// The header's content-mode byte: 1 = `ctr`, 2 = `gcm`, 3 = `xts`.
    pub const fn to_byte(self) -> u8 {
        match self {
            Mode::Ctr => 1,
            Mode::Gcm => 2,
            Mode::Xts => 3,
        }
    }

    /// The mode for a header byte; `None` for unknown values.
    pub const fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(Mode::Ctr),
            2 => Some(Mode::Gcm),
            3 => Some(Mode::Xts),
            _ => None,
        }
    }
}

/// Plaintext size of a cipher file from its backing length alone (for
/// getattr on files that are not open). A corrupt length (`0 < L < H`)
/// reports 0.
pub fn plain_size_of(mode: Mode, backing_len: u64) -> u64 {
    layout::plain_size(mode, backing_len).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_bytes_round_trip() {
        for m in [Mode::Ctr, Mode::Gcm, Mode::Xts] {
            assert_eq!(Mode::from_byte(m.to_byte()), Some(m));
        }
        assert_eq!(Mode::from_byte(0), None);
        assert_eq!(Mode::from_byte(4), None);
        assert_eq!(Mode::Xts.entry_len(), 0);
        assert_eq!(Mode::Ctr.entry_len(), 16);
        assert_eq!(Mode::Gcm.entry_len(), 32);
    }

    #[test]
    fn plain_size_of_reports_zero_when_corrupt() {
        assert_eq!(plain_size_of(Mode::Gcm, 0), 0);
        assert_eq!(plain_size_of(Mode::Gcm, 100), 0);
        assert_eq!(plain_size_of(Mode::Gcm, 544 + 10), 10);
        assert_eq!(plain_size_of(Mode::Ctr, 288 + 10), 10);
        assert_eq!(plain_size_of(Mode::Xts, 32 + 10), 10);
        assert_eq!(plain_size_of(Mode::Xts, 20), 0);
    }
}
