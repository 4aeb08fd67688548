//! warpfs layer 5: the keystream engine. The content layer asks it for the
//! mask of a block (the keystream of its nonce, laid out as
//! `warpfs_crypto::MaskLayout` says: for AES and Twofish CTR keystream from
//! counter 1, the first 16 bytes the GCM tag mask E(J0), the rest XORs the
//! data; for XChaCha20 the Poly1305 one-time key, then the data from
//! ChaCha20 block 1) and never touches a cipher itself.
//! This crate holds the seam ([`Keystream`] for a volume, [`BlockReader`] for
//! the reads of one open file), the nonce source and the direct
//! (non-speculative) backend; the speculative engine (`warpfs-engine`) plugs
//! in behind the same traits.

pub mod direct;
pub mod nonce;
pub mod offload;
pub mod reader;
pub mod split;

pub use direct::Direct;
pub use nonce::{epoch_of, Clock, EpochPolicy, NonceSource, SystemClock};
pub use offload::XtsOffload;
pub use reader::{BlockReader, OnDemand};
pub use split::{Inline, Splitter};
pub use warpfs_crypto::{Nonce, TagMask};

use std::sync::Arc;

/// Masks for content blocks. Implementations must be safe to call from many
/// threads at once.
pub trait Keystream: Send + Sync + 'static {
    /// Encrypt `buf` (one block's plaintext, at most one content block long)
    /// in place under a fresh nonce that is never returned again. Returns the
    /// nonce and its tag mask (E(J0), or the Poly1305 one-time key).
    fn seal(&self, buf: &mut [u8]) -> (Nonce, TagMask);

    /// Decrypt (XOR) `buf` in place with the keystream of `nonce`. Returns the
    /// tag mask so the caller can check a tag.
    fn open(&self, nonce: &Nonce, buf: &mut [u8]) -> TagMask;

    /// The tag mask alone.
    fn tag_mask(&self, nonce: &Nonce) -> TagMask;

    /// A reader for one open file (call once per open file and keep it).
    /// The default makes every mask on demand through [`open`](Self::open);
    /// a speculative backend returns a read window that makes masks ahead
    /// of the reader.
    fn reader(self: Arc<Self>) -> Box<dyn BlockReader> {
        Box::new(OnDemand::new(self))
    }
}
