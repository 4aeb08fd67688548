//! warpfs layer 6: crypto primitives. AES counter-mode masks, GCM tags,
//! name encryption, password KDF and key wrapping. Everything above this
//! crate treats keys as opaque types that zeroize on drop.

pub mod aes_ctr;
pub mod gcm;
pub mod keys;
pub mod rand;

pub use aes_ctr::{ContentKey, Nonce, NONCE_LEN};
pub use gcm::{GcmTagger, TAG_LEN};
