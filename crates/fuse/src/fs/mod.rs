//! The two file systems a mount serves through the operations layer
//! ([`crate::ops`]): [`forward`] (plaintext over CIPHERDIR, `warpfs mount`)
//! and [`reverse`] (a read-only encrypted view of a plaintext directory,
//! `warpfs mount --reverse`).

pub mod forward;
pub mod reverse;
