//! warpfs layer 5: the keystream engine. The content layer asks it for the
//! mask of a block (AES-CTR keystream from counter 1: the first 16 bytes are
//! the GCM tag mask E(J0), the rest XORs the data) and never touches AES itself.
//! This crate holds the seam (`Keystream`), the nonce source and the direct
//! (non-speculative) backend; the speculative engine plugs in behind the same trait.

pub mod direct;
pub mod nonce;

pub use direct::Direct;
pub use nonce::NonceSource;
pub use warpfs_crypto::Nonce;

/// Masks for content blocks. Implementations must be safe to call from many
/// threads at once.
pub trait Keystream: Send + Sync {
    /// Encrypt `buf` (one block's plaintext, at most one content block long)
    /// in place under a fresh nonce that is never returned again. Returns the
    /// nonce and the tag mask E(J0).
    fn seal(&self, buf: &mut [u8]) -> (Nonce, [u8; 16]);

    /// Decrypt (XOR) `buf` in place with the keystream of `nonce`. Returns the
    /// tag mask E(J0) so the caller can check a GCM tag.
    fn open(&self, nonce: &Nonce, buf: &mut [u8]) -> [u8; 16];

    /// The tag mask E(J0) alone (to verify a tag before decrypting).
    fn tag_mask(&self, nonce: &Nonce) -> [u8; 16];
}
