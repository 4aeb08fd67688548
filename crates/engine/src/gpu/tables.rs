//! Host half of the mask kernel's AES: the S-box and Te0 table it uploads
//! once, and the FIPS-197 key expansion into the big-endian round-key words
//! the kernel reads (checked against FIPS-197 appendix A and, through the
//! kernel, against the cpu backend).

#[cfg(test)]
use zeroize::Zeroizing;

/// Round-key words per key slot (AES-256: 15 round keys of 4 words).
pub const RK_WORDS: usize = 60;

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

/// The AES S-box, computed (multiplicative inverse, then the affine map).
pub const fn sbox() -> [u8; 256] {
    let mut s = [0u8; 256];
    let mut x = 0usize;
    while x < 256 {
        // Inverse by search (x^254 would do too); 0 maps to 0.
        let mut inv = 0u8;
        if x != 0 {
            let mut y = 1usize;
            while y < 256 {
                if gmul(x as u8, y as u8) == 1 {
                    inv = y as u8;
                    break;
                }
                y += 1;
            }
        }
        let b = inv;
        s[x] = b ^ b.rotate_left(1) ^ b.rotate_left(2) ^ b.rotate_left(3) ^ b.rotate_left(4) ^ 0x63;
        x += 1;
    }
    s
}

/// The S-box, built at compile time.
pub const SBOX: [u8; 256] = sbox();

/// Te0[x] = (2·S[x], S[x], S[x], 3·S[x]) as a big-endian word.
pub fn te0() -> [u32; 256] {
    let mut t = [0u32; 256];
    for (x, w) in t.iter_mut().enumerate() {
        let s = SBOX[x];
        *w = u32::from_be_bytes([gmul(s, 2), s, s, gmul(s, 3)]);
    }
    t
}

fn sub_word(w: u32) -> u32 {
    let b = w.to_be_bytes();
    u32::from_be_bytes([
        SBOX[b[0] as usize],
        SBOX[b[1] as usize],
        SBOX[b[2] as usize],
        SBOX[b[3] as usize],
    ])
}

/// Expand a 16- or 32-byte key into `RK_WORDS` big-endian words (unused
/// tail zero) and the round count (10 or 14). `None` for other lengths.
#[cfg(test)]
pub fn expand(key: &[u8]) -> Option<(Zeroizing<[u32; RK_WORDS]>, u32)> {
    let mut w = Zeroizing::new([0u32; RK_WORDS]);
    let rounds = expand_into(key, &mut w[..])?;
    Some((w, rounds))
}

/// [`expand`] straight into `w` (at least `RK_WORDS` words, e.g. a lane's
/// locked staging buffer), so the schedule is never copied on the way.
/// Returns the round count; `None` (and `w` untouched) for a key of
/// another length.
pub fn expand_into(key: &[u8], w: &mut [u32]) -> Option<u32> {
    let nk = match key.len() {
        16 => 4,
        32 => 8,
        _ => return None,
    };
    let rounds = nk + 6;
    let w = &mut w[..RK_WORDS];
    w.fill(0);
    for (i, c) in key.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes(c.try_into().expect("4 bytes"));
    }
    let mut rcon = 1u8;
    for i in nk..4 * (rounds + 1) {
        let mut t = w[i - 1];
        if i % nk == 0 {
            t = sub_word(t.rotate_left(8)) ^ (u32::from(rcon) << 24);
            rcon = xtime(rcon);
        } else if nk > 6 && i % nk == 4 {
            t = sub_word(t);
        }
        w[i] = w[i - nk] ^ t;
    }
    Some(rounds as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbox_known_entries() {
        assert_eq!(SBOX[0x00], 0x63);
        assert_eq!(SBOX[0x01], 0x7c);
        assert_eq!(SBOX[0x53], 0xed);
        assert_eq!(SBOX[0xff], 0x16);
        let mut seen = [false; 256];
        for s in SBOX {
            assert!(!seen[s as usize], "the S-box is a permutation");
            seen[s as usize] = true;
        }
        assert_eq!(te0()[0], 0xc66363a5);
    }

    #[test]
    fn fips197_key_expansion() {
        // FIPS-197 A.1 and A.3: last round-key words.
        let k128 = hex::decode("2b7e151628aed2a6abf7158809cf4f3c").unwrap();
        let (w, r) = expand(&k128).unwrap();
        assert_eq!(r, 10);
        assert_eq!(&w[40..44], &[0xd014f9a8, 0xc9ee2589, 0xe13f0cc8, 0xb6630ca6]);
        let k256 = hex::decode("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4").unwrap();
        let (w, r) = expand(&k256).unwrap();
        assert_eq!(r, 14);
        assert_eq!(&w[56..60], &[0xfe4890d1, 0xe6188d0b, 0x046df344, 0x706c631e]);
        assert!(expand(&[0u8; 24]).is_none());
    }
}
