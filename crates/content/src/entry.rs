//! Nonce entries (FORMAT.md 3.2): nonce ‖ key generation (‖ GCM tag). An
//! all-zero entry means "never written".

use crate::{ContentError, Mode};
use warpfs_crypto::{Nonce, NONCE_LEN, TAG_LEN};

/// A written block's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The block's nonce (never all zeros).
    pub nonce: Nonce,
    /// The GCM tag (`gcm`); zeros in `ctr`.
    pub tag: [u8; TAG_LEN],
}

/// Parse one entry of `mode.entry_len()` bytes. `Ok(None)`: never written.
/// Errors: wrong length, nonzero key generation, all-zero nonce in an
/// otherwise nonzero entry.
pub fn parse(mode: Mode, bytes: &[u8], block: u64) -> Result<Option<Entry>, ContentError> {
    if bytes.len() != mode.entry_len() {
        return Err(ContentError::corrupt(format!(
            "nonce entry of block {block} has length {}",
            bytes.len()
        )));
    }
    if bytes.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&bytes[..NONCE_LEN]);
    let generation = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    if generation != 0 {
        return Err(ContentError::corrupt(format!(
            "nonce entry of block {block}: unknown key generation {generation}"
        )));
    }
    if nonce == [0u8; NONCE_LEN] {
        return Err(ContentError::corrupt(format!(
            "nonce entry of block {block}: zero nonce"
        )));
    }
    let mut tag = [0u8; TAG_LEN];
    if mode == Mode::Gcm {
        tag.copy_from_slice(&bytes[16..32]);
    }
    Ok(Some(Entry { nonce, tag }))
}

/// Serialize `entry` (or the all-zero "never written" entry for `None`)
/// into `out`, which must be `mode.entry_len()` bytes long.
pub fn write(mode: Mode, entry: Option<&Entry>, out: &mut [u8]) {
    debug_assert_eq!(out.len(), mode.entry_len());
    out.fill(0);
    if let Some(e) = entry {
        out[..NONCE_LEN].copy_from_slice(&e.nonce);
        // key generation 0 (bytes 12..16 stay zero)
        if mode == Mode::Gcm {
            out[16..32].copy_from_slice(&e.tag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_layout() {
        let e = Entry {
            nonce: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
            tag: [0xee; 16],
        };
        let mut g = [0u8; 32];
        write(Mode::Gcm, Some(&e), &mut g);
        assert_eq!(&g[..12], &e.nonce);
        assert_eq!(&g[12..16], &[0, 0, 0, 0]);
        assert_eq!(&g[16..], &[0xee; 16]);
        assert_eq!(parse(Mode::Gcm, &g, 0).unwrap(), Some(e));
        let mut c = [0u8; 16];
        write(Mode::Ctr, Some(&e), &mut c);
        let back = parse(Mode::Ctr, &c, 0).unwrap().unwrap();
        assert_eq!(back.nonce, e.nonce);
        assert_eq!(back.tag, [0; 16]);
        write(Mode::Gcm, None, &mut g);
        assert_eq!(g, [0; 32]);
        assert_eq!(parse(Mode::Gcm, &g, 0).unwrap(), None);
    }

    #[test]
    fn hostile_entries() {
        let mut g = [0u8; 32];
        g[0] = 1;
        g[12] = 1; // key generation 1
        assert!(parse(Mode::Gcm, &g, 7).is_err());
        let mut z = [0u8; 32];
        z[20] = 1; // tag without nonce
        assert!(parse(Mode::Gcm, &z, 7).is_err());
        assert!(parse(Mode::Gcm, &[0u8; 16], 7).is_err());
        assert!(parse(Mode::Ctr, &[0u8; 32], 7).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = parse(Mode::Gcm, &b, 1);
            let _ = parse(Mode::Ctr, &b, 1);
        }
    }
}
