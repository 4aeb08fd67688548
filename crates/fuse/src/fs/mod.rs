//! The two file systems a mount serves through the operations layer
//! ([`crate::ops`]): [`forward`] (plaintext over CIPHERDIR, `warpfs mount`)
//! and [`reverse`] (a read-only encrypted view of a plaintext directory,
//! `warpfs mount --reverse`).

pub mod forward;
pub mod reverse;

use crate::ops::ReadOut;
use warpfs_volume::ReadSink;

/// A kernel read reply takes a handle's bytes as they come (both file
/// systems' handles read through decrypt-ahead into it).
impl ReadSink for dyn ReadOut + '_ {
    fn buf(&mut self, size: usize) -> &mut [u8] {
        ReadOut::buf(self, size)
    }
    fn filled(&mut self, n: usize) {
        ReadOut::filled(self, n);
    }
    fn bytes(&mut self, b: &[u8]) {
        ReadOut::bytes(self, b);
    }
}
