//! Twofish (Schneier, Kelsey, Whiting, Wagner, Hall, Ferguson, 1998) with
//! full keying: the key-dependent S-boxes folded with the MDS matrix into
//! four 256-entry u32 tables computed once per key (`schedule`), and a
//! multi-block path that runs [`LANES`] independent blocks in lock-step
//! (`block`). 128-, 192- and 256-bit keys. The expanded key (4 KiB of
//! tables and 40 subkeys) lives on locked pages and is zeroed on drop.
//!
//! Table lookups are indexed by secret bytes, as in every table-driven
//! Twofish (the reference code, libgcrypt's, TrueCrypt's): cache-timing
//! leaks are the price of its speed in software.

mod block;
mod schedule;

use crate::error::KeyLengthError;
use crate::locked::{Locked, LockedWords};

/// Blocks encrypted in lock-step by [`Twofish::encrypt_blocks`].
pub const LANES: usize = 3;

/// An expanded Twofish key.
pub struct Twofish {
    tables: Locked<schedule::Tables>,
    bits: u32,
}

/// A clone copies the tables page to page (no copy on the stack).
impl Clone for Twofish {
    fn clone(&self) -> Self {
        let mut tables = Locked::new(schedule::Tables::ZERO);
        tables.s.copy_from_slice(&self.tables.s);
        tables.k.copy_from_slice(&self.tables.k);
        Self {
            tables,
            bits: self.bits,
        }
    }
}

impl std::fmt::Debug for Twofish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Twofish-{}(..)", self.bits)
    }
}

impl Twofish {
    /// Expand a 16-, 24- or 32-byte key.
    pub fn new(key: &[u8]) -> Result<Self, KeyLengthError> {
        // Built in place on the locked pages: no copy on the stack.
        let mut tables = Locked::new(schedule::Tables::ZERO);
        if !schedule::expand_into(key, &mut tables) {
            return Err(KeyLengthError);
        }
        Ok(Self {
            tables,
            bits: key.len() as u32 * 8,
        })
    }

    /// Key size in bits (128, 192 or 256).
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Encrypt one block in place.
    pub fn encrypt_block(&self, b: &mut [u8; 16]) {
        block::encrypt::<1>(&self.tables, std::array::from_mut(b));
    }

    /// Decrypt one block in place.
    pub fn decrypt_block(&self, b: &mut [u8; 16]) {
        block::decrypt::<1>(&self.tables, std::array::from_mut(b));
    }

    /// Encrypt independent blocks in place (ECB), [`LANES`] at a time.
    pub fn encrypt_blocks(&self, blocks: &mut [[u8; 16]]) {
        self.encrypt_blocks_n::<LANES>(blocks)
    }

    /// Decrypt independent blocks in place (ECB), [`LANES`] at a time.
    pub fn decrypt_blocks(&self, blocks: &mut [[u8; 16]]) {
        let (groups, rest) = blocks.as_chunks_mut::<LANES>();
        for g in groups {
            block::decrypt::<LANES>(&self.tables, g);
        }
        for b in rest {
            self.decrypt_block(b);
        }
    }

    /// [`encrypt_blocks`](Self::encrypt_blocks) with `N` blocks in
    /// lock-step: for choosing [`LANES`] by measurement.
    #[doc(hidden)]
    pub fn encrypt_blocks_n<const N: usize>(&self, blocks: &mut [[u8; 16]]) {
        let (groups, rest) = blocks.as_chunks_mut::<N>();
        for g in groups {
            block::encrypt::<N>(&self.tables, g);
        }
        for b in rest {
            self.encrypt_block(b);
        }
    }

    /// Number of words of [`device_words`](Self::device_words).
    pub const DEVICE_WORDS: usize = 4 * 256 + 40;

    /// The expanded key as a device kernel takes it: the four MDS-folded
    /// S-box tables (256 words each; `g(X)` = s0[b0] ^ s1[b1] ^ s2[b2] ^
    /// s3[b3] of X's little-endian bytes), then the 40 subkeys. Key
    /// material: on locked pages, zeroed on drop; for uploading to an
    /// OpenCL/CUDA device.
    pub fn device_words(&self) -> LockedWords {
        let mut v = LockedWords::zeroed(Self::DEVICE_WORDS);
        for (dst, t) in v.chunks_exact_mut(256).zip(&self.tables.s) {
            dst.copy_from_slice(t);
        }
        v[4 * 256..].copy_from_slice(&self.tables.k);
        v
    }

    /// The round subkeys K0..K39 (for known-answer tests of the schedule).
    #[cfg(test)]
    pub(crate) fn subkeys(&self) -> [u32; 40] {
        self.tables.k
    }
}

#[cfg(test)]
mod tests;
