//! Encrypted container (FORMAT.md 9): one image file of XTS-AES sectors,
//! exposed through FUSE as a single plaintext file for any file system or VM.

pub mod fs;
pub mod image;
