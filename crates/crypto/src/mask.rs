//! Where a content block's masks lie: the tag mask and the data keystream
//! of one nonce, for each content cipher (FORMAT.md 3.5, 11 and 15). A
//! leaf: it uses no other module of this crate.

/// Bytes of a tag mask: the most any cipher needs (XChaCha20's Poly1305
/// one-time key, 32 bytes; a 128-bit block cipher's E(J0) fills the first
/// 16 and leaves the rest zero).
pub const TAG_MASK_LEN: usize = 32;

/// The tag mask of one nonce: E(J0) in the first 16 bytes for AES and
/// Twofish (GCM), the Poly1305 one-time key `r ‖ s` for XChaCha20.
pub type TagMask = [u8; TAG_MASK_LEN];

/// How one nonce's mask is laid out: keystream from block counter
/// `first`, the tag mask in its first `tag_len` bytes, the block's data
/// keystream from byte `data_at`. Mask offsets count keystream bytes from
/// the start of block `first` (blocks of 16 bytes for a block cipher, of 64
/// bytes for ChaCha20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MaskLayout {
    /// Block counter at mask offset 0.
    pub first: u32,
    /// Bytes of the tag mask (at offset 0).
    pub tag_len: usize,
    /// Offset of the data keystream.
    pub data_at: usize,
}

impl MaskLayout {
    /// AES and Twofish (GCM counter layout): E(J0) at counter 1 (bytes
    /// 0..16), the data from counter 2 (byte 16).
    pub const BLOCK: MaskLayout = MaskLayout {
        first: 1,
        tag_len: 16,
        data_at: 16,
    };

    /// XChaCha20 (RFC 8439 2.6 and 2.8): the Poly1305 key is the first 32
    /// bytes of ChaCha20 block 0 (bytes 32..64 are not used), the data
    /// from block 1 (byte 64).
    pub const XCHACHA: MaskLayout = MaskLayout {
        first: 0,
        tag_len: 32,
        data_at: 64,
    };

    /// Mask bytes for the tag mask and `data` bytes of data keystream.
    pub const fn len_for(self, data: usize) -> usize {
        self.data_at + data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_hold_their_tag_mask_before_the_data() {
        for l in [MaskLayout::BLOCK, MaskLayout::XCHACHA] {
            assert!(l.tag_len <= TAG_MASK_LEN && l.tag_len <= l.data_at);
            assert_eq!(l.len_for(4096), l.data_at + 4096);
        }
        assert_eq!(MaskLayout::BLOCK.len_for(4096), 16 + 4096);
        assert_eq!(MaskLayout::XCHACHA.len_for(4096), 64 + 4096);
    }
}
