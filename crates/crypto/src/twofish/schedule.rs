//! Twofish key schedule (Schneier et al., "Twofish: A 128-Bit Block
//! Cipher", sections 4.2–4.3): the fixed permutations q0/q1, the MDS and RS
//! matrices, the function h, the 40 round subkeys, and full keying: the
//! key-dependent S-boxes folded with the MDS matrix into four 256-entry
//! u32 tables, so that g(X) is four lookups and three XORs.

/// The expanded key: round subkeys and the four MDS-folded S-box tables.
/// Inline arrays only (no pointers), so it can live in a `Locked`.
#[derive(Clone)]
pub(crate) struct Tables {
    /// `s[j][x]` = column j of MDS times the keyed S-box j applied to x.
    pub(crate) s: [[u32; 256]; 4],
    /// K0..K39: input whitening (0–3), output whitening (4–7), rounds (8–39).
    pub(crate) k: [u32; 40],
}

/// The 4-bit tables of q0 and q1 (paper, section 4.3.5).
const Q0_T: [[u8; 16]; 4] = [
    [
        0x8, 0x1, 0x7, 0xD, 0x6, 0xF, 0x3, 0x2, 0x0, 0xB, 0x5, 0x9, 0xE, 0xC, 0xA, 0x4,
    ],
    [
        0xE, 0xC, 0xB, 0x8, 0x1, 0x2, 0x3, 0x5, 0xF, 0x4, 0xA, 0x6, 0x7, 0x0, 0x9, 0xD,
    ],
    [
        0xB, 0xA, 0x5, 0xE, 0x6, 0xD, 0x9, 0x0, 0xC, 0x8, 0xF, 0x3, 0x2, 0x4, 0x7, 0x1,
    ],
    [
        0xD, 0x7, 0xF, 0x4, 0x1, 0x2, 0x6, 0xE, 0x9, 0xB, 0x3, 0x0, 0x8, 0x5, 0xC, 0xA,
    ],
];
const Q1_T: [[u8; 16]; 4] = [
    [
        0x2, 0x8, 0xB, 0xD, 0xF, 0x7, 0x6, 0xE, 0x3, 0x1, 0x9, 0x4, 0x0, 0xA, 0xC, 0x5,
    ],
    [
        0x1, 0xE, 0x2, 0xB, 0x4, 0xC, 0x3, 0x7, 0x6, 0xD, 0xA, 0x5, 0xF, 0x9, 0x0, 0x8,
    ],
    [
        0x4, 0xC, 0x7, 0x5, 0x1, 0x6, 0x9, 0xA, 0x0, 0xE, 0xD, 0x8, 0x2, 0xB, 0x3, 0xF,
    ],
    [
        0xB, 0x9, 0x5, 0x1, 0xC, 0x3, 0xD, 0xE, 0x6, 0x4, 0x7, 0xF, 0x2, 0x0, 0x8, 0xA,
    ],
];

const fn ror4(x: u8) -> u8 {
    ((x >> 1) | (x << 3)) & 0xF
}

/// One of the permutations q0/q1 on a byte, from its 4-bit tables.
const fn q_of(t: &[[u8; 16]; 4], x: u8) -> u8 {
    let (a0, b0) = (x >> 4, x & 0xF);
    let a1 = a0 ^ b0;
    let b1 = a0 ^ ror4(b0) ^ ((a0 << 3) & 0xF);
    let (a2, b2) = (t[0][a1 as usize], t[1][b1 as usize]);
    let a3 = a2 ^ b2;
    let b3 = a2 ^ ror4(b2) ^ ((a2 << 3) & 0xF);
    let (a4, b4) = (t[2][a3 as usize], t[3][b3 as usize]);
    (b4 << 4) | a4
}

const fn q_table(t: &[[u8; 16]; 4]) -> [u8; 256] {
    let mut q = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        q[i] = q_of(t, i as u8);
        i += 1;
    }
    q
}

/// The fixed permutations q0 and q1, computed at compile time.
pub(crate) const Q0: [u8; 256] = q_table(&Q0_T);
pub(crate) const Q1: [u8; 256] = q_table(&Q1_T);

/// Multiply in GF(2^8) modulo the primitive polynomial `poly` (with x^8).
const fn gf_mul(mut a: u8, mut b: u8, poly: u16) -> u8 {
    let mut r: u8 = 0;
    while b != 0 {
        if b & 1 != 0 {
            r ^= a;
        }
        let hi = a & 0x80 != 0;
        a <<= 1;
        if hi {
            a ^= (poly & 0xFF) as u8;
        }
        b >>= 1;
    }
    r
}

/// The MDS matrix (GF(2^8) modulo x^8+x^6+x^5+x^3+1 = 0x169).
const MDS: [[u8; 4]; 4] = [
    [0x01, 0xEF, 0x5B, 0x5B],
    [0x5B, 0xEF, 0xEF, 0x01],
    [0xEF, 0x5B, 0x01, 0xEF],
    [0xEF, 0x01, 0xEF, 0x5B],
];
const MDS_POLY: u16 = 0x169;

/// The RS matrix (GF(2^8) modulo x^8+x^6+x^3+x^2+1 = 0x14D).
const RS: [[u8; 8]; 4] = [
    [0x01, 0xA4, 0x55, 0x87, 0x5A, 0x58, 0xDB, 0x9E],
    [0xA4, 0x56, 0x82, 0xF3, 0x1E, 0xC6, 0x68, 0xE5],
    [0x02, 0xA1, 0xFC, 0xC1, 0x47, 0xAE, 0x3D, 0x19],
    [0xA4, 0x55, 0x87, 0x5A, 0x58, 0xDB, 0x9E, 0x03],
];
const RS_POLY: u16 = 0x14D;

/// Column `j` of MDS times byte `y`, as a little-endian word.
#[inline]
fn mds_col(j: usize, y: u8) -> u32 {
    u32::from_le_bytes([
        gf_mul(MDS[0][j], y, MDS_POLY),
        gf_mul(MDS[1][j], y, MDS_POLY),
        gf_mul(MDS[2][j], y, MDS_POLY),
        gf_mul(MDS[3][j], y, MDS_POLY),
    ])
}

/// The keyed byte permutation of position `j` (the q chain of h with the
/// key words `l`, k = l.len() of them, before the MDS multiply).
#[inline]
fn sbox(j: usize, x: u8, l: &[[u8; 4]]) -> u8 {
    // Per position: the q applied before each key byte, from the deepest
    // (k = 4) to the shallowest, then the final q (paper, figure 2).
    const QS: [[bool; 5]; 4] = [
        // q used at stages 4,3,2,1,0 (true = q1): y0: q1 q1 q0 q0 q1
        [true, true, false, false, true],
        [false, true, true, false, false],
        [false, false, false, true, true],
        [true, false, true, true, false],
    ];
    let q = |one: bool, v: u8| if one { Q1[v as usize] } else { Q0[v as usize] };
    let k = l.len();
    let mut y = x;
    // Stages k-1 .. 0: y = q(y) ^ l[stage][j].
    for stage in (0..k).rev() {
        y = q(QS[j][4 - (stage + 1)], y) ^ l[stage][j];
    }
    q(QS[j][4], y)
}

/// h(X, L) of the paper (X given as its four bytes).
fn h(x: [u8; 4], l: &[[u8; 4]]) -> u32 {
    (0..4).fold(0, |acc, j| acc ^ mds_col(j, sbox(j, x[j], l)))
}

/// The S vector entry of 8 key bytes (RS matrix times the bytes).
fn rs(m: &[u8]) -> [u8; 4] {
    let mut out = [0u8; 4];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (0..8).fold(0, |acc, c| acc ^ gf_mul(RS[i][c], m[c], RS_POLY));
    }
    out
}

impl Tables {
    /// All zeros (to be filled in place by [`expand_into`]).
    pub(crate) const ZERO: Tables = Tables {
        s: [[0; 256]; 4],
        k: [0; 40],
    };
}

/// Expand a 16-, 24- or 32-byte key (any other length: `None`).
#[cfg(test)]
pub(crate) fn expand(key: &[u8]) -> Option<Tables> {
    let mut t = Tables::ZERO;
    expand_into(key, &mut t).then_some(t)
}

/// Expand a 16-, 24- or 32-byte key into `t` where it lies (on locked
/// pages: no copy of the tables is left on the stack); `false` for any
/// other length.
pub(crate) fn expand_into(key: &[u8], t: &mut Tables) -> bool {
    if !matches!(key.len(), 16 | 24 | 32) {
        return false;
    }
    let k = key.len() / 8;
    // Me = even words, Mo = odd words; S = RS rows in reverse order.
    let mut me = [[0u8; 4]; 4];
    let mut mo = [[0u8; 4]; 4];
    let mut s = [[0u8; 4]; 4];
    for i in 0..k {
        me[i].copy_from_slice(&key[8 * i..8 * i + 4]);
        mo[i].copy_from_slice(&key[8 * i + 4..8 * i + 8]);
        s[k - 1 - i] = rs(&key[8 * i..8 * i + 8]);
    }
    for i in 0..20u32 {
        let a = h((2 * i * 0x0101_0101).to_le_bytes(), &me[..k]);
        let b = h(((2 * i + 1) * 0x0101_0101).to_le_bytes(), &mo[..k]).rotate_left(8);
        t.k[2 * i as usize] = a.wrapping_add(b);
        t.k[2 * i as usize + 1] = a.wrapping_add(b.wrapping_mul(2)).rotate_left(9);
    }
    for j in 0..4 {
        for x in 0..256 {
            t.s[j][x] = mds_col(j, sbox(j, x as u8, &s[..k]));
        }
    }
    // Scrub the key-derived locals (the tables themselves go to locked pages).
    zeroize::Zeroize::zeroize(&mut me);
    zeroize::Zeroize::zeroize(&mut mo);
    zeroize::Zeroize::zeroize(&mut s);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_permutations_match_the_paper() {
        // First entries of q0 and q1 as printed in the reference code's tables.
        assert_eq!(&Q0[..8], &[0xA9, 0x67, 0xB3, 0xE8, 0x04, 0xFD, 0xA3, 0x76]);
        assert_eq!(&Q1[..8], &[0x75, 0xF3, 0xC6, 0xF4, 0xDB, 0x7B, 0xFB, 0xC8]);
        // Both are permutations.
        for q in [Q0, Q1] {
            let mut seen = [false; 256];
            for v in q {
                assert!(!seen[v as usize]);
                seen[v as usize] = true;
            }
        }
    }

    #[test]
    fn bad_key_lengths_expand_to_nothing() {
        for n in [0, 8, 15, 17, 23, 31, 33, 64] {
            assert!(expand(&vec![0u8; n]).is_none(), "{n}");
        }
    }
}
