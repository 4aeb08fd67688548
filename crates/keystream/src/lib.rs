//! warpfs layer 5: the keystream engine. The content layer asks it for the
//! mask of a block (AES-CTR keystream from counter 1: the first 16 bytes are
//! the GCM tag mask E(J0), the rest XORs the data) and never touches AES itself.
//! This crate holds the seam ([`Keystream`] for a volume, [`BlockReader`] for
//! the reads of one open file), the nonce source and the direct
//! (non-speculative) backend; the speculative engine (`warpfs-engine`) plugs
//! in behind the same traits.

pub mod direct;
pub mod nonce;
pub mod reader;
pub mod split;

pub use direct::Direct;
pub use nonce::{epoch_of, Clock, EpochPolicy, NonceSource, SystemClock};
pub use reader::{BlockReader, OnDemand};
pub use split::{Inline, Splitter};
pub use warpfs_crypto::Nonce;

use std::sync::Arc;

/// Masks for content blocks. Implementations must be safe to call from many
/// threads at once.
pub trait Keystream: Send + Sync + 'static {
    /// Encrypt `buf` (one block's plaintext, at most one content block long)
    /// in place under a fresh nonce that is never returned again. Returns the
    /// nonce and the tag mask E(J0).
    fn seal(&self, buf: &mut [u8]) -> (Nonce, [u8; 16]);

    /// Decrypt (XOR) `buf` in place with the keystream of `nonce`. Returns the
    /// tag mask E(J0) so the caller can check a GCM tag.
    fn open(&self, nonce: &Nonce, buf: &mut [u8]) -> [u8; 16];

    /// The tag mask E(J0) alone (to verify a tag before decrypting).
    fn tag_mask(&self, nonce: &Nonce) -> [u8; 16];

    /// A reader for one open file (call once per open file and keep it).
    /// The default makes every mask on demand through [`open`](Self::open);
    /// a speculative backend returns a read window that makes masks ahead
    /// of the reader.
    fn reader(self: Arc<Self>) -> Box<dyn BlockReader> {
        Box::new(OnDemand::new(self))
    }
}
