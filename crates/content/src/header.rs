//! The 32-byte cipher-file header (FORMAT.md 3.1): magic, version, mode,
//! flags, file ID, key generation and rekey watermark (FORMAT.md 10).

use crate::{ContentError, Mode};

/// Header magic, `WRPF`.
pub const MAGIC: [u8; 4] = *b"WRPF";
/// Format version of a file without a summary.
pub const VERSION: u16 = 1;
/// Format version of a file whose nonce entries carry a summary
/// (FORMAT.md 12; `gcm` only).
pub const VERSION_SUMMARY: u16 = 2;
/// Serialized header length.
pub const LEN: usize = 32;
/// Length of a file ID.
pub const FILE_ID_LEN: usize = 16;

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Content mode of the file.
    pub mode: Mode,
    /// 128 random bits drawn when the header is first written.
    pub file_id: [u8; FILE_ID_LEN],
    /// Key generation of the content key the file's blocks use (FORMAT.md
    /// 10); 0 until the volume is rekeyed. Mid-rekey, only the blocks from
    /// the watermark on.
    pub generation: u32,
    /// Rekey watermark (FORMAT.md 10): the blocks of the first
    /// `rekeyed` segments use generation `generation + 1`. 0 outside a rekey.
    pub rekeyed: u32,
    /// Format version 2: the entries' slots carry the file's summary
    /// (FORMAT.md 12).
    pub summary: bool,
}

impl Header {
    /// A header with a fresh random file ID.
    pub fn new_random(mode: Mode) -> Self {
        Self::new_random_gen(mode, 0)
    }

    /// A header with a fresh random file ID for key generation `generation`.
    pub fn new_random_gen(mode: Mode, generation: u32) -> Self {
        Self {
            mode,
            file_id: warpfs_crypto::rand::array(),
            generation,
            rekeyed: 0,
            summary: false,
        }
    }

    /// Parse and check a header; any deviation from FORMAT.md 3.1 is an error.
    pub fn parse(bytes: &[u8]) -> Result<Self, ContentError> {
        let b: &[u8; LEN] = bytes
            .get(..LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| ContentError::corrupt(format!("header shorter than {LEN} bytes")))?;
        if b[0..4] != MAGIC {
            return Err(ContentError::corrupt("bad header magic"));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        let mode =
            Mode::from_byte(b[6]).ok_or_else(|| ContentError::corrupt(format!("unknown content mode {}", b[6])))?;
        let summary = match version {
            VERSION => false,
            VERSION_SUMMARY if mode == Mode::Gcm => true,
            _ => {
                return Err(ContentError::corrupt(format!(
                    "unsupported cipher file format version {version}"
                )))
            }
        };
        if b[7] != 0 {
            return Err(ContentError::corrupt(format!("unknown header flags {:#x}", b[7])));
        }
        let generation = u32::from_le_bytes([b[24], b[25], b[26], b[27]]);
        let rekeyed = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
        if rekeyed != 0 && generation == u32::MAX {
            return Err(ContentError::corrupt("rekey watermark past the last key generation"));
        }
        let mut file_id = [0u8; FILE_ID_LEN];
        file_id.copy_from_slice(&b[8..24]);
        Ok(Self {
            mode,
            file_id,
            generation,
            rekeyed,
            summary,
        })
    }

    /// The 32 bytes on disk.
    pub fn to_bytes(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..4].copy_from_slice(&MAGIC);
        let v = if self.summary { VERSION_SUMMARY } else { VERSION };
        b[4..6].copy_from_slice(&v.to_le_bytes());
        b[6] = self.mode.to_byte();
        b[7] = 0;
        b[8..24].copy_from_slice(&self.file_id);
        b[24..28].copy_from_slice(&self.generation.to_le_bytes());
        b[28..32].copy_from_slice(&self.rekeyed.to_le_bytes());
        b
    }

    /// Key generation of block `x`'s key: `generation + 1` below the
    /// rekey watermark, `generation` from it on.
    pub fn block_generation(&self, x: u64) -> u32 {
        if x < crate::layout::segment_start(self.rekeyed) {
            self.generation + 1
        } else {
            self.generation
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_byte_exact() {
        let h = Header {
            mode: Mode::Gcm,
            file_id: [0xab; 16],
            generation: 0,
            rekeyed: 0,
            summary: false,
        };
        let b = h.to_bytes();
        assert_eq!(
            hex::encode(b),
            "575250460100020 0abababababababababababababababab0000000000000000".replace(' ', "")
        );
        assert_eq!(Header::parse(&b).unwrap(), h);
        let c = Header::new_random(Mode::Ctr);
        assert_eq!(c.to_bytes()[6], 1);
        assert_eq!(Header::parse(&c.to_bytes()).unwrap(), c);
        assert_ne!(Header::new_random(Mode::Ctr).file_id, c.file_id);
        assert_eq!(Header::new_random(Mode::Xts).to_bytes()[6], 3);
        let g = Header {
            generation: 0x0102_0304,
            ..h
        };
        assert_eq!(&g.to_bytes()[24..32], &[4, 3, 2, 1, 0, 0, 0, 0]);
        assert_eq!(Header::parse(&g.to_bytes()).unwrap().generation, 0x0102_0304);
        let w = Header {
            generation: 2,
            rekeyed: 0x0a0b_0c0d,
            ..h
        };
        assert_eq!(&w.to_bytes()[24..32], &[2, 0, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a]);
        assert_eq!(Header::parse(&w.to_bytes()).unwrap(), w);
    }

    #[test]
    fn blocks_below_the_watermark_use_the_next_generation() {
        let mut h = Header::new_random_gen(Mode::Ctr, 4);
        assert_eq!(h.block_generation(0), 4);
        h.rekeyed = 1; // the nnode segment: blocks 0..16
        assert_eq!(h.block_generation(15), 5);
        assert_eq!(h.block_generation(16), 4);
        h.rekeyed = 3; // nnode + two pages: blocks 0..528
        assert_eq!(h.block_generation(527), 5);
        assert_eq!(h.block_generation(528), 4);
    }

    #[test]
    fn hostile_headers_are_errors() {
        let good = Header::new_random(Mode::Gcm).to_bytes();
        assert!(Header::parse(&good[..31]).is_err());
        assert!(Header::parse(&[]).is_err());
        let bad = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            Header::parse(&b).is_err()
        };
        assert!(bad(0, b'X')); // magic
        assert!(bad(4, 3)); // version 3
        assert!(
            Header::parse(&{
                let mut b = good;
                b[4] = 2;
                b
            })
            .unwrap()
            .summary
        );
        let mut ctr2 = Header::new_random(Mode::Ctr).to_bytes();
        ctr2[4] = 2;
        assert!(Header::parse(&ctr2).is_err(), "version 2 is gcm only");
        assert!(bad(5, 1)); // version 257
        assert!(bad(6, 0)); // mode 0
        assert!(bad(6, 4)); // mode 4
        assert!(bad(7, 1)); // flags
                            // A watermark on the last possible generation has no next key.
        let mut last = Header::new_random_gen(Mode::Gcm, u32::MAX).to_bytes();
        assert!(Header::parse(&last).is_ok());
        last[28] = 1;
        assert!(Header::parse(&last).is_err());
        // Trailing bytes beyond 32 are not the header's business.
        let mut long = good.to_vec();
        long.extend_from_slice(&[9; 10]);
        assert!(Header::parse(&long).is_ok());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Header::parse(&b);
        }
    }
}
