//! Poly1305 over four blocks at a time with AVX2 (x86-64): the
//! accumulator split over four 64-bit lanes, each holding five 26-bit
//! limbs, lane `j` summing blocks `4k + j` by Horner's rule in `r^4`; at
//! the end each lane is multiplied by the power of `r` its blocks still
//! lack (`r^4`, `r^3`, `r^2`, `r`) and the lanes are added. The sum is
//! the serial computation's (`(h + m1)·r^n + m2·r^(n−1) + …`), with four
//! independent multiply chains instead of one. Constant time: no branch
//! or index depends on the key or the message. Checked against the
//! serial code and the `poly1305` crate in `poly`'s tests.

use std::arch::x86_64::*;

const M26: u64 = (1 << 26) - 1;

/// A value below 2^130 in five 26-bit limbs.
pub(super) type Limbs26 = [u64; 5];

/// The powers of `r` the kernel multiplies by, per lane.
pub(super) struct Powers {
    /// `r^4` in every lane.
    r4: Limbs26,
    /// Lane `j`'s last factor, in the kernel's lane order (blocks 0, 2,
    /// 1, 3 of a group): `r^4`, `r^2`, `r^3`, `r`.
    last: [Limbs26; 4],
}

impl Powers {
    /// From `r`, `r^2`, `r^3`, `r^4` (each below 2^130).
    pub(super) fn new(r: Limbs26, r2: Limbs26, r3: Limbs26, r4: Limbs26) -> Self {
        Self {
            r4,
            last: [r4, r2, r3, r],
        }
    }
}

impl Drop for Powers {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.r4);
        for l in &mut self.last {
            zeroize::Zeroize::zeroize(l);
        }
    }
}

/// Whether this CPU runs [`blocks`].
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Absorb `m` (a multiple of 64 bytes, at least 64; every block full,
/// with 2^128) into `h` (five limbs, each below 2^27): afterwards `h` is
/// the accumulator the serial computation would hold, its limbs below
/// 2^26 but the second (below 2^26 + 2^10).
///
/// # Safety
/// The CPU must have AVX2 ([`available`]).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn blocks(h: &mut Limbs26, p: &Powers, m: &[u8]) {
    debug_assert!(m.len() >= 64 && m.len().is_multiple_of(64));
    let lane = |x: &Limbs26| -> [__m256i; 5] { std::array::from_fn(|i| _mm256_set1_epi64x(x[i] as i64)) };
    let r4 = lane(&p.r4);
    let r4x5 = r4.map(|v| _mm256_add_epi64(v, _mm256_slli_epi64(v, 2)));
    let last: [__m256i; 5] = std::array::from_fn(|i| {
        _mm256_set_epi64x(
            p.last[3][i] as i64,
            p.last[2][i] as i64,
            p.last[1][i] as i64,
            p.last[0][i] as i64,
        )
    });
    let lastx5 = last.map(|v| _mm256_add_epi64(v, _mm256_slli_epi64(v, 2)));
    let mut acc: [__m256i; 5] = std::array::from_fn(|i| _mm256_set_epi64x(0, 0, 0, h[i] as i64));
    for (g, chunk) in m.chunks_exact(64).enumerate() {
        if g > 0 {
            acc = mul(&acc, &r4, &r4x5);
        }
        let msg = load(chunk);
        for i in 0..5 {
            acc[i] = _mm256_add_epi64(acc[i], msg[i]);
        }
    }
    acc = mul(&acc, &last, &lastx5);
    let mut out = [0u64; 5];
    for (i, v) in acc.iter().enumerate() {
        let mut l = [0u64; 4];
        _mm256_storeu_si256(l.as_mut_ptr().cast(), *v);
        out[i] = l[0] + l[1] + l[2] + l[3];
    }
    // Each limb below 2^28.1: carry once around.
    let mut c = out[0] >> 26;
    out[0] &= M26;
    for x in out.iter_mut().skip(1) {
        *x += c;
        c = *x >> 26;
        *x &= M26;
    }
    out[0] += c * 5;
    c = out[0] >> 26;
    out[0] &= M26;
    out[1] += c;
    *h = out;
}

/// Four blocks of 16 bytes as limbs, in lane order 0, 2, 1, 3, with 2^128.
#[target_feature(enable = "avx2")]
unsafe fn load(b: &[u8]) -> [__m256i; 5] {
    debug_assert!(b.len() == 64);
    let a = _mm256_loadu_si256(b.as_ptr().cast());
    let z = _mm256_loadu_si256(b.as_ptr().add(32).cast());
    // Low and high 64 bits of each block: blocks 0, 2 | 1, 3.
    let t0 = _mm256_unpacklo_epi64(a, z);
    let t1 = _mm256_unpackhi_epi64(a, z);
    let m = _mm256_set1_epi64x(M26 as i64);
    [
        _mm256_and_si256(t0, m),
        _mm256_and_si256(_mm256_srli_epi64(t0, 26), m),
        _mm256_and_si256(_mm256_or_si256(_mm256_srli_epi64(t0, 52), _mm256_slli_epi64(t1, 12)), m),
        _mm256_and_si256(_mm256_srli_epi64(t1, 14), m),
        _mm256_or_si256(_mm256_srli_epi64(t1, 40), _mm256_set1_epi64x(1 << 24)),
    ]
}

/// `h · r` mod 2^130 − 5, lane by lane (`r5` = 5·r), partly carried:
/// limbs below 2^26 but the second (below 2^26 + 2^10).
#[target_feature(enable = "avx2")]
unsafe fn mul(h: &[__m256i; 5], r: &[__m256i; 5], r5: &[__m256i; 5]) -> [__m256i; 5] {
    let m = |a: __m256i, b: __m256i| _mm256_mul_epu32(a, b);
    let add = |a: __m256i, b: __m256i| _mm256_add_epi64(a, b);
    let [h0, h1, h2, h3, h4] = *h;
    let d0 = add(
        add(m(h0, r[0]), m(h1, r5[4])),
        add(add(m(h2, r5[3]), m(h3, r5[2])), m(h4, r5[1])),
    );
    let d1 = add(
        add(m(h0, r[1]), m(h1, r[0])),
        add(add(m(h2, r5[4]), m(h3, r5[3])), m(h4, r5[2])),
    );
    let d2 = add(
        add(m(h0, r[2]), m(h1, r[1])),
        add(add(m(h2, r[0]), m(h3, r5[4])), m(h4, r5[3])),
    );
    let d3 = add(
        add(m(h0, r[3]), m(h1, r[2])),
        add(add(m(h2, r[1]), m(h3, r[0])), m(h4, r5[4])),
    );
    let d4 = add(
        add(m(h0, r[4]), m(h1, r[3])),
        add(add(m(h2, r[2]), m(h3, r[1])), m(h4, r[0])),
    );
    let mask = _mm256_set1_epi64x(M26 as i64);
    let mut d = [d0, d1, d2, d3, d4];
    let mut c = _mm256_srli_epi64(d[0], 26);
    d[0] = _mm256_and_si256(d[0], mask);
    for x in d.iter_mut().skip(1) {
        *x = add(*x, c);
        c = _mm256_srli_epi64(*x, 26);
        *x = _mm256_and_si256(*x, mask);
    }
    d[0] = add(d[0], add(c, _mm256_slli_epi64(c, 2)));
    c = _mm256_srli_epi64(d[0], 26);
    d[0] = _mm256_and_si256(d[0], mask);
    d[1] = add(d[1], c);
    d
}
