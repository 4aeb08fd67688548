//! ChaCha20 sixteen blocks at a time with AVX-512 (x86-64): each of the
//! sixteen 512-bit registers holds one word of the state for sixteen
//! consecutive block counters, so the rounds need no shuffles and every
//! rotation is one `vprold`; a 16 × 16 transpose of 32-bit words
//! (unpacks, then 128-bit lane shuffles) turns the registers back into
//! sixteen 64-byte blocks, which are XORed into the caller's buffer.
//! Constant time: no branch or index depends on the key, the nonce or the
//! data. Like the `chacha20` crate's backends, the state (key words
//! included) lives in registers and this call's stack frame only. Checked
//! against the `chacha20` crate and RFC 8439's vectors in `xchacha`'s
//! tests.

use std::arch::x86_64::*;

/// Bytes of keystream one call makes: sixteen 64-byte blocks.
pub(super) const CHUNK: usize = 1024;

/// Whether this CPU runs [`xor16`].
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// "expand 32-byte k".
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// One ChaCha quarter round on four registers of sixteen lanes.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn qr(x: &mut [__m512i; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = _mm512_add_epi32(x[a], x[b]);
    x[d] = _mm512_rol_epi32::<16>(_mm512_xor_si512(x[d], x[a]));
    x[c] = _mm512_add_epi32(x[c], x[d]);
    x[b] = _mm512_rol_epi32::<12>(_mm512_xor_si512(x[b], x[c]));
    x[a] = _mm512_add_epi32(x[a], x[b]);
    x[d] = _mm512_rol_epi32::<8>(_mm512_xor_si512(x[d], x[a]));
    x[c] = _mm512_add_epi32(x[c], x[d]);
    x[b] = _mm512_rol_epi32::<7>(_mm512_xor_si512(x[b], x[c]));
}

/// XOR the keystream of ChaCha20 blocks `ctr` to `ctr + 15` under `key`
/// (eight little-endian words) and `nonce` (RFC 8439's three words) into
/// `buf`. The counters must not wrap: `ctr + 15` fits in 32 bits.
///
/// # Safety
/// The CPU must have AVX-512F ([`available`]).
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn xor16(key: &[u32; 8], nonce: &[u32; 3], ctr: u32, buf: &mut [u8; CHUNK]) {
    debug_assert!(ctr.checked_add(15).is_some());
    let mut init = [_mm512_setzero_si512(); 16];
    for (i, w) in SIGMA.iter().chain(key.iter()).enumerate() {
        init[i] = _mm512_set1_epi32(*w as i32);
    }
    let lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    init[12] = _mm512_add_epi32(_mm512_set1_epi32(ctr as i32), lanes);
    for (i, w) in nonce.iter().enumerate() {
        init[13 + i] = _mm512_set1_epi32(*w as i32);
    }
    let mut x = init;
    for _ in 0..10 {
        qr(&mut x, 0, 4, 8, 12);
        qr(&mut x, 1, 5, 9, 13);
        qr(&mut x, 2, 6, 10, 14);
        qr(&mut x, 3, 7, 11, 15);
        qr(&mut x, 0, 5, 10, 15);
        qr(&mut x, 1, 6, 11, 12);
        qr(&mut x, 2, 7, 8, 13);
        qr(&mut x, 3, 4, 9, 14);
    }
    for (v, i) in x.iter_mut().zip(init.iter()) {
        *v = _mm512_add_epi32(*v, *i);
    }
    // Words 4g..4g+3 of blocks 4L+m in 128-bit lane L of y[m][g].
    let mut y = [[_mm512_setzero_si512(); 4]; 4];
    for g in 0..4 {
        let (a, b, c, d) = (x[4 * g], x[4 * g + 1], x[4 * g + 2], x[4 * g + 3]);
        let (lo_ab, hi_ab) = (_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
        let (lo_cd, hi_cd) = (_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
        y[0][g] = _mm512_unpacklo_epi64(lo_ab, lo_cd);
        y[1][g] = _mm512_unpackhi_epi64(lo_ab, lo_cd);
        y[2][g] = _mm512_unpacklo_epi64(hi_ab, hi_cd);
        y[3][g] = _mm512_unpackhi_epi64(hi_ab, hi_cd);
    }
    let p = buf.as_mut_ptr();
    for (m, [y0, y1, y2, y3]) in y.into_iter().enumerate() {
        let s0 = _mm512_shuffle_i32x4::<0b01_00_01_00>(y0, y1);
        let s1 = _mm512_shuffle_i32x4::<0b11_10_11_10>(y0, y1);
        let s2 = _mm512_shuffle_i32x4::<0b01_00_01_00>(y2, y3);
        let s3 = _mm512_shuffle_i32x4::<0b11_10_11_10>(y2, y3);
        let blocks = [
            _mm512_shuffle_i32x4::<0b10_00_10_00>(s0, s2),
            _mm512_shuffle_i32x4::<0b11_01_11_01>(s0, s2),
            _mm512_shuffle_i32x4::<0b10_00_10_00>(s1, s3),
            _mm512_shuffle_i32x4::<0b11_01_11_01>(s1, s3),
        ];
        for (l, ks) in blocks.into_iter().enumerate() {
            // Block 4l + m of the sixteen, at byte 64 (4l + m) of `buf`.
            // 64 (4l + m) + 64 <= 1024, buf's length; unaligned loads and
            // stores.
            let at = p.add(64 * (4 * l + m));
            let v = _mm512_loadu_si512(at as *const __m512i);
            _mm512_storeu_si512(at as *mut __m512i, _mm512_xor_si512(v, ks));
        }
    }
}
