//! The Twofish rounds over the full-keying tables: one block, and `N`
//! independent blocks in lock-step (their table lookups and additions
//! interleave, hiding each other's load latency). Two rounds per loop step
//! with the halves swapped by naming, not by moves.

use super::schedule::Tables;

#[inline(always)]
fn g0(s: &[[u32; 256]; 4], x: u32) -> u32 {
    s[0][x as u8 as usize] ^ s[1][(x >> 8) as u8 as usize] ^ s[2][(x >> 16) as u8 as usize] ^ s[3][(x >> 24) as usize]
}

/// g(ROL(x, 8)) without the rotation.
#[inline(always)]
fn g1(s: &[[u32; 256]; 4], x: u32) -> u32 {
    s[0][(x >> 24) as usize] ^ s[1][x as u8 as usize] ^ s[2][(x >> 8) as u8 as usize] ^ s[3][(x >> 16) as u8 as usize]
}

#[inline(always)]
fn load(b: &[u8; 16]) -> [u32; 4] {
    let w = |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
    [w(0), w(1), w(2), w(3)]
}

#[inline(always)]
fn store(b: &mut [u8; 16], w: [u32; 4]) {
    for (i, v) in w.iter().enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
}

/// Encrypt `N` blocks in place, interleaved.
#[inline(always)]
pub(crate) fn encrypt<const N: usize>(t: &Tables, blocks: &mut [[u8; 16]; N]) {
    let (s, k) = (&t.s, &t.k);
    let mut a = [0u32; N];
    let mut b = [0u32; N];
    let mut c = [0u32; N];
    let mut d = [0u32; N];
    for i in 0..N {
        let w = load(&blocks[i]);
        a[i] = w[0] ^ k[0];
        b[i] = w[1] ^ k[1];
        c[i] = w[2] ^ k[2];
        d[i] = w[3] ^ k[3];
    }
    for r in 0..8 {
        let rk = &k[8 + 4 * r..12 + 4 * r];
        for i in 0..N {
            let t0 = g0(s, a[i]);
            let t1 = g1(s, b[i]);
            c[i] = (c[i] ^ t0.wrapping_add(t1).wrapping_add(rk[0])).rotate_right(1);
            d[i] = d[i].rotate_left(1) ^ t0.wrapping_add(t1.wrapping_mul(2)).wrapping_add(rk[1]);
        }
        for i in 0..N {
            let t0 = g0(s, c[i]);
            let t1 = g1(s, d[i]);
            a[i] = (a[i] ^ t0.wrapping_add(t1).wrapping_add(rk[2])).rotate_right(1);
            b[i] = b[i].rotate_left(1) ^ t0.wrapping_add(t1.wrapping_mul(2)).wrapping_add(rk[3]);
        }
    }
    for i in 0..N {
        store(&mut blocks[i], [c[i] ^ k[4], d[i] ^ k[5], a[i] ^ k[6], b[i] ^ k[7]]);
    }
}

/// Decrypt `N` blocks in place, interleaved.
#[inline(always)]
pub(crate) fn decrypt<const N: usize>(t: &Tables, blocks: &mut [[u8; 16]; N]) {
    let (s, k) = (&t.s, &t.k);
    let mut a = [0u32; N];
    let mut b = [0u32; N];
    let mut c = [0u32; N];
    let mut d = [0u32; N];
    for i in 0..N {
        let w = load(&blocks[i]);
        c[i] = w[0] ^ k[4];
        d[i] = w[1] ^ k[5];
        a[i] = w[2] ^ k[6];
        b[i] = w[3] ^ k[7];
    }
    for r in (0..8).rev() {
        let rk = &k[8 + 4 * r..12 + 4 * r];
        for i in 0..N {
            let t0 = g0(s, c[i]);
            let t1 = g1(s, d[i]);
            a[i] = a[i].rotate_left(1) ^ t0.wrapping_add(t1).wrapping_add(rk[2]);
            b[i] = (b[i] ^ t0.wrapping_add(t1.wrapping_mul(2)).wrapping_add(rk[3])).rotate_right(1);
        }
        for i in 0..N {
            let t0 = g0(s, a[i]);
            let t1 = g1(s, b[i]);
            c[i] = c[i].rotate_left(1) ^ t0.wrapping_add(t1).wrapping_add(rk[0]);
            d[i] = (d[i] ^ t0.wrapping_add(t1.wrapping_mul(2)).wrapping_add(rk[1])).rotate_right(1);
        }
    }
    for i in 0..N {
        store(&mut blocks[i], [a[i] ^ k[0], b[i] ^ k[1], c[i] ^ k[2], d[i] ^ k[3]]);
    }
}
