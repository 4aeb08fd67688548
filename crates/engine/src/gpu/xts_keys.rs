//! Key material for the GPU XTS kernels: AES (the encryption and
//! equivalent-inverse-cipher schedules, the Te0/Td0/inverse S-box tables)
//! and Twofish (the MDS-folded S-box tables and subkeys of both keys).

use super::tables::{expand_into, te0, RK_WORDS, SBOX};
use warpfs_crypto::twofish::Twofish;
use warpfs_crypto::{LockedWords, XtsCipher};

/// Words of the AES table buffer: Te0, Td0, inverse S-box.
pub(super) const TAB_WORDS: usize = 768;
/// Words of an expanded XTS key as the kernels take it (the larger of
/// AES's two schedules and Twofish's two tables-and-subkeys).
pub(super) const KEY_WORDS: usize = 2 * Twofish::DEVICE_WORDS;

const fn xtime(x: u8) -> u8 {
    (x << 1) ^ if x & 0x80 != 0 { 0x1b } else { 0 }
}

const fn gmul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        a = xtime(a);
        b >>= 1;
    }
    p
}

fn inv_sbox() -> [u8; 256] {
    let mut inv = [0u8; 256];
    for (x, &s) in SBOX.iter().enumerate() {
        inv[s as usize] = x as u8;
    }
    inv
}

/// Td0[x] = (0e·Si[x], 09·Si[x], 0d·Si[x], 0b·Si[x]) as a big-endian word.
fn td0() -> [u32; 256] {
    let si = inv_sbox();
    let mut t = [0u32; 256];
    for (x, w) in t.iter_mut().enumerate() {
        let s = si[x];
        *w = u32::from_be_bytes([gmul(s, 0x0e), gmul(s, 0x09), gmul(s, 0x0d), gmul(s, 0x0b)]);
    }
    t
}

/// The 768 table words the AES kernel loads: Te0, Td0, inverse S-box.
pub(super) fn tables() -> Vec<u32> {
    let mut v = Vec::with_capacity(TAB_WORDS);
    v.extend_from_slice(&te0());
    v.extend_from_slice(&td0());
    v.extend(inv_sbox().iter().map(|&b| u32::from(b)));
    v
}

/// InvMixColumns of one big-endian column word.
fn inv_mix(w: u32) -> u32 {
    let b = w.to_be_bytes();
    let m = |c: [u8; 4]| gmul(b[0], c[0]) ^ gmul(b[1], c[1]) ^ gmul(b[2], c[2]) ^ gmul(b[3], c[3]);
    u32::from_be_bytes([
        m([0x0e, 0x0b, 0x0d, 0x09]),
        m([0x09, 0x0e, 0x0b, 0x0d]),
        m([0x0d, 0x09, 0x0e, 0x0b]),
        m([0x0b, 0x0d, 0x09, 0x0e]),
    ])
}

/// The equivalent inverse cipher's schedule (FIPS-197 §5.3.5) of `enc`
/// into `d` (`RK_WORDS` words each): round keys in reverse order,
/// InvMixColumns applied to the middle ones.
fn dec_schedule(enc: &[u32], rounds: usize, d: &mut [u32]) {
    for r in 0..=rounds {
        for c in 0..4 {
            let w = enc[4 * (rounds - r) + c];
            d[4 * r + c] = if r == 0 || r == rounds { w } else { inv_mix(w) };
        }
    }
}

/// An XTS key (Key1 ‖ Key2, IEEE 1619) expanded for a kernel, on locked
/// pages and zeroed on drop.
pub struct XtsKeys {
    cipher: XtsCipher,
    /// AES: data key encryption schedule then tweak key schedule (120
    /// words). Twofish: K1's then K2's tables and subkeys (2128 words).
    enc: LockedWords,
    /// AES: data key decryption schedule then tweak key schedule.
    /// Twofish: empty (decryption uses the same tables).
    dec: LockedWords,
    rounds: u32,
}

impl XtsKeys {
    /// Expand a 32-byte (XTS-AES-128) or 64-byte (XTS-AES-256) key: the
    /// first half encrypts the data, the second the tweak.
    pub fn new(key: &[u8]) -> Result<Self, String> {
        Self::with_cipher(XtsCipher::Aes, key)
    }

    /// Expand a 32- or 64-byte XTS key of `cipher` (AES or Twofish).
    pub fn with_cipher(cipher: XtsCipher, key: &[u8]) -> Result<Self, String> {
        if key.len() != 32 && key.len() != 64 {
            return Err(format!("an XTS key is 32 or 64 bytes, not {}", key.len()));
        }
        let (k1, k2) = key.split_at(key.len() / 2);
        if cipher == XtsCipher::Twofish {
            let e = |_| "bad Twofish key length".to_string();
            let mut enc = LockedWords::zeroed(KEY_WORDS);
            let (a, b) = enc.split_at_mut(Twofish::DEVICE_WORDS);
            a.copy_from_slice(&Twofish::new(k1).map_err(e)?.device_words());
            b.copy_from_slice(&Twofish::new(k2).map_err(e)?.device_words());
            return Ok(Self {
                cipher,
                enc,
                dec: LockedWords::zeroed(0),
                rounds: 16,
            });
        }
        // Both schedules expanded in place on the locked pages.
        let mut enc = LockedWords::zeroed(2 * RK_WORDS);
        let mut dec = LockedWords::zeroed(2 * RK_WORDS);
        let (e1, e2) = enc.split_at_mut(RK_WORDS);
        let rounds = expand_into(k1, e1).ok_or("bad data key length")?;
        expand_into(k2, e2).ok_or("bad tweak key length")?;
        let (d1, d2) = dec.split_at_mut(RK_WORDS);
        dec_schedule(e1, rounds as usize, d1);
        d2.copy_from_slice(e2);
        Ok(Self {
            cipher,
            enc,
            dec,
            rounds,
        })
    }

    /// The block cipher.
    pub fn cipher(&self) -> XtsCipher {
        self.cipher
    }

    /// AES rounds (10 or 14; 16 for Twofish, which the kernel fixes).
    pub(super) fn rounds(&self) -> u32 {
        self.rounds
    }

    /// The words to upload for encryption (`dec` false) or decryption.
    pub(super) fn words(&self, dec: bool) -> &[u32] {
        if dec && self.cipher == XtsCipher::Aes {
            &self.dec
        } else {
            &self.enc
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_tables() {
        let si = inv_sbox();
        assert_eq!(si[0x63], 0x00);
        assert_eq!(si[0x16], 0xff);
        // Td0[0] = (0e,09,0d,0b)·Si[0] with Si[0] = 0x52 (FIPS-197 fig. 14).
        assert_eq!(td0()[0], 0x51f4a750);
        assert_eq!(tables().len(), TAB_WORDS);
    }

    #[test]
    fn inv_mix_undoes_mix_columns() {
        // FIPS-197 §5.1.3 example column: db 13 53 45 -> 8e 4d a1 bc.
        assert_eq!(inv_mix(0x8e4da1bc), 0xdb135345);
    }

    #[test]
    fn key_lengths() {
        assert!(XtsKeys::new(&[0u8; 32]).is_ok());
        assert!(XtsKeys::new(&[0u8; 64]).is_ok());
        assert!(XtsKeys::new(&[0u8; 48]).is_err());
        let k = XtsKeys::new(&[7u8; 64]).unwrap();
        assert_eq!(k.rounds, 14);
        // The decryption schedule starts with the last encryption round key.
        assert_eq!(k.dec[0..4], k.enc[56..60]);
        assert_eq!(k.dec[60..], k.enc[60..]);
    }

    #[test]
    fn twofish_keys_are_both_keys_tables_and_subkeys() {
        let k = XtsKeys::with_cipher(XtsCipher::Twofish, &[7u8; 64]).unwrap();
        assert_eq!(k.words(false).len(), KEY_WORDS);
        assert_eq!(k.words(true), k.words(false));
        let k1 = Twofish::new(&[7u8; 32]).unwrap().device_words();
        assert_eq!(&k.words(false)[..Twofish::DEVICE_WORDS], &k1[..]);
        assert!(XtsKeys::with_cipher(XtsCipher::Twofish, &[0u8; 48]).is_err());
    }
}
