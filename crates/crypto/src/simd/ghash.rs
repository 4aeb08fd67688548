//! GHASH on VPCLMULQDQ-512: 64 blocks (1 KiB) per step, sixteen 512-bit
//! vectors of four blocks, multiplied by the precomputed powers H^64..H^1
//! without reduction (Karatsuba, three CLMULs per block), folded, and
//! reduced once per step. The running sum enters each step through its own
//! product with H^64, so only that product and the reduction are serial;
//! 16 and 32 blocks per step were measured slower (the serial part then
//! dominates): 16.2 / 19.1 / 21.2 GB/s for 16 / 32 / 64 on one Zen 4 core
//! (`examples/hot_speed`).
//!
//! The arithmetic is POLYVAL's (RFC 8452): GHASH_H(X_1..X_n) =
//! ByteReverse(POLYVAL_{mulX(ByteReverse(H))}(ByteReverse(X_1), ...)), RFC
//! 8452 appendix A. Byte reversal is one shuffle per vector on load, so
//! blocks are multiplied as little-endian polynomials; a product of 256 bits
//! is brought back to 128 by Montgomery reduction (two carry-less
//! multiplications by x^63 + x^62 + x^57, the low part of
//! x^128 + x^127 + x^126 + x^121 + 1), which also divides by x^128: the
//! powers are Montgomery powers K_1 = H', K_(i+1) = K_i · H' · x^-128.
//!
//! Checked against the GCM spec's test vectors (through `gcm`'s tests) and,
//! by property tests, against the `ghash` crate.

#![allow(unsafe_op_in_unsafe_fn)]

use core::arch::x86_64::*;

/// Blocks per step of the wide loop (see the module docs for why 64).
const STEP: usize = 64;
/// 512-bit vectors per step.
const VECS: usize = STEP / 4;

/// The reduction constant x^63 + x^62 + x^57 (high qword; the low one is unused).
const POLY_HI: i64 = 0xC200_0000_0000_0000_u64 as i64;

/// A GHASH key for the VPCLMULQDQ path: the Montgomery powers of H'. Only
/// built when the CPU has the features, so holding one is the proof that
/// [`GhashKey::ghash`] may run. Key material: the caller keeps it in a `Locked`.
#[derive(Clone)]
pub(crate) struct GhashKey {
    /// K_(i+1) as little-endian 128-bit values.
    pow: [[u8; 16]; STEP],
    /// The wide step's multipliers: vector j, lane l holds K_(STEP - 4j - l).
    wide: [[u8; 64]; VECS],
}

/// Whether this CPU runs the VPCLMULQDQ path.
pub(crate) fn available() -> bool {
    super::has_vpclmul512()
}

impl GhashKey {
    /// Set up from GHASH's H = E_K(0^128) (as GCM's bytes); `None` without
    /// the CPU features.
    pub(crate) fn new(h: &[u8; 16]) -> Option<Self> {
        if !available() {
            return None;
        }
        // mulX_POLYVAL(ByteReverse(H)), without a branch on the key.
        let v = u128::from_be_bytes(*h);
        let carry = 0u128.wrapping_sub(v >> 127);
        let hp = (v << 1) ^ (carry & ((0xC2u128 << 120) | 1));
        let mut k = Self {
            pow: [[0u8; 16]; STEP],
            wide: [[0u8; 64]; VECS],
        };
        k.pow[0] = hp.to_le_bytes();
        for i in 1..STEP {
            // SAFETY: `available()` checked PCLMULQDQ.
            k.pow[i] = unsafe { dot_bytes(&k.pow[i - 1], &k.pow[0]) };
        }
        for j in 0..VECS {
            for l in 0..4 {
                k.wide[j][16 * l..16 * l + 16].copy_from_slice(&k.pow[STEP - 1 - 4 * j - l]);
            }
        }
        Some(k)
    }

    /// GHASH_H(A, C) with the lengths block: the raw S of GCM, before the
    /// XOR with E(J0).
    pub(crate) fn ghash(&self, aad: &[u8], data: &[u8]) -> [u8; 16] {
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&((aad.len() as u64) * 8).to_be_bytes());
        lens[8..].copy_from_slice(&((data.len() as u64) * 8).to_be_bytes());
        let mut out = [0u8; 16];
        // SAFETY: a GhashKey exists only when `available()` held.
        unsafe {
            let s = _mm_setzero_si128();
            let s = self.update(s, aad);
            let s = self.update(s, data);
            let s = self.update(s, &lens);
            _mm_storeu_si128(out.as_mut_ptr().cast(), _mm_shuffle_epi8(s, rev128()));
        }
        out
    }

    /// Absorb `bytes`, zero-padded to whole blocks.
    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
    unsafe fn update(&self, mut s: __m128i, bytes: &[u8]) -> __m128i {
        let groups = bytes.len() / (16 * STEP);
        if groups > 0 {
            s = self.wide_steps(s, bytes.as_ptr(), groups);
        }
        let rest = &bytes[groups * 16 * STEP..];
        if !rest.is_empty() {
            s = self.narrow(s, rest);
        }
        s
    }

    /// `groups` steps of 16 blocks from `p`. Karatsuba: each block product
    /// is lo·lo, hi·hi and (lo ⊕ hi)·(lo ⊕ hi), three CLMULs instead of four.
    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
    unsafe fn wide_steps(&self, mut s: __m128i, p: *const u8, groups: usize) -> __m128i {
        let rev = _mm512_broadcast_i32x4(rev128());
        let k: [__m512i; VECS] = core::array::from_fn(|j| _mm512_loadu_si512(self.wide[j].as_ptr().cast()));
        // lo ⊕ hi of each power, in both qwords.
        let kf: [__m512i; VECS] = core::array::from_fn(|j| _mm512_xor_si512(k[j], _mm512_shuffle_epi32::<0x4e>(k[j])));
        let ktop = _mm_loadu_si128(self.pow[STEP - 1].as_ptr().cast());
        for g in 0..groups {
            let q = p.add(16 * STEP * g);
            let x: [__m512i; VECS] =
                core::array::from_fn(|j| _mm512_shuffle_epi8(_mm512_loadu_si512(q.add(64 * j).cast()), rev));
            let mut lo = _mm512_clmulepi64_epi128::<0x00>(x[0], k[0]);
            let mut hi = _mm512_clmulepi64_epi128::<0x11>(x[0], k[0]);
            let mut mid =
                _mm512_clmulepi64_epi128::<0x00>(_mm512_xor_si512(x[0], _mm512_shuffle_epi32::<0x4e>(x[0])), kf[0]);
            for j in 1..VECS {
                lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128::<0x00>(x[j], k[j]));
                hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128::<0x11>(x[j], k[j]));
                mid = _mm512_xor_si512(
                    mid,
                    _mm512_clmulepi64_epi128::<0x00>(_mm512_xor_si512(x[j], _mm512_shuffle_epi32::<0x4e>(x[j])), kf[j]),
                );
            }
            mid = _mm512_ternarylogic_epi64::<0x96>(mid, lo, hi);
            let l = _mm512_xor_si512(lo, _mm512_bslli_epi128::<8>(mid));
            let h = _mm512_xor_si512(hi, _mm512_bsrli_epi128::<8>(mid));
            // The running sum joins block 0: (S ⊕ X_0)·K_STEP = S·K_STEP ⊕ X_0·K_STEP,
            // so the data products above do not wait for S.
            let (sl, sh) = mul_unreduced(s, ktop);
            s = reduce(_mm_xor_si128(hxor(l), sl), _mm_xor_si128(hxor(h), sh));
        }
        s
    }

    /// The last `rest.len()` (< 256) bytes, zero-padded to n ≤ 16 blocks,
    /// in one aggregated step: block i times K_(n - i), one reduction.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    unsafe fn narrow(&self, s: __m128i, rest: &[u8]) -> __m128i {
        debug_assert!(!rest.is_empty() && rest.len() < 16 * STEP);
        let rev = rev128();
        let n = rest.len().div_ceil(16);
        let (mut l, mut h) = (_mm_setzero_si128(), _mm_setzero_si128());
        for i in 0..n {
            let raw = if 16 * i + 16 <= rest.len() {
                _mm_loadu_si128(rest.as_ptr().add(16 * i).cast())
            } else {
                let mut pad = [0u8; 16];
                pad[..rest.len() - 16 * i].copy_from_slice(&rest[16 * i..]);
                _mm_loadu_si128(pad.as_ptr().cast())
            };
            let mut x = _mm_shuffle_epi8(raw, rev);
            if i == 0 {
                x = _mm_xor_si128(x, s);
            }
            let k = _mm_loadu_si128(self.pow[n - 1 - i].as_ptr().cast());
            let (pl, ph) = mul_unreduced(x, k);
            l = _mm_xor_si128(l, pl);
            h = _mm_xor_si128(h, ph);
        }
        reduce(l, h)
    }
}

/// The byte-reversal shuffle of one 128-bit lane.
#[target_feature(enable = "sse2")]
#[inline]
unsafe fn rev128() -> __m128i {
    _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
}

/// XOR of the four 128-bit lanes.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn hxor(v: __m512i) -> __m128i {
    let t = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
    _mm_xor_si128(_mm256_castsi256_si128(t), _mm256_extracti128_si256::<1>(t))
}

/// The 256-bit carry-less product a·b as (low 128, high 128).
#[target_feature(enable = "pclmulqdq,sse2")]
#[inline]
unsafe fn mul_unreduced(a: __m128i, b: __m128i) -> (__m128i, __m128i) {
    let lo = _mm_clmulepi64_si128::<0x00>(a, b);
    let hi = _mm_clmulepi64_si128::<0x11>(a, b);
    let mid = _mm_xor_si128(_mm_clmulepi64_si128::<0x01>(a, b), _mm_clmulepi64_si128::<0x10>(a, b));
    (
        _mm_xor_si128(lo, _mm_slli_si128::<8>(mid)),
        _mm_xor_si128(hi, _mm_srli_si128::<8>(mid)),
    )
}

/// Montgomery reduction: (l + h·x^128) · x^-128 mod x^128 + x^127 + x^126 + x^121 + 1.
/// Each step cancels the lowest 64 bits by adding that limb times the
/// polynomial (the limb times x^63 + x^62 + x^57, one CLMUL, plus the limb
/// itself two limbs up, which the qword swap places).
#[target_feature(enable = "pclmulqdq,sse2")]
#[inline]
unsafe fn reduce(l: __m128i, h: __m128i) -> __m128i {
    let c = _mm_set_epi64x(POLY_HI, 0);
    let x = _mm_xor_si128(_mm_shuffle_epi32::<0x4e>(l), _mm_clmulepi64_si128::<0x10>(l, c));
    let y = _mm_xor_si128(_mm_shuffle_epi32::<0x4e>(x), _mm_clmulepi64_si128::<0x10>(x, c));
    _mm_xor_si128(h, y)
}

/// POLYVAL's dot(a, b) = a·b·x^-128 of two little-endian field elements.
#[target_feature(enable = "pclmulqdq,sse2")]
unsafe fn dot_bytes(a: &[u8; 16], b: &[u8; 16]) -> [u8; 16] {
    let (l, h) = mul_unreduced(_mm_loadu_si128(a.as_ptr().cast()), _mm_loadu_si128(b.as_ptr().cast()));
    let mut out = [0u8; 16];
    _mm_storeu_si128(out.as_mut_ptr().cast(), reduce(l, h));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ghash::universal_hash::UniversalHash;

    fn crate_ghash(h: &[u8; 16], aad: &[u8], data: &[u8]) -> [u8; 16] {
        let mut g = ghash::GHash::new(&(*h).into());
        g.update_padded(aad);
        g.update_padded(data);
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&((aad.len() as u64) * 8).to_be_bytes());
        lens[8..].copy_from_slice(&((data.len() as u64) * 8).to_be_bytes());
        g.update(&[lens.into()]);
        g.finalize().into()
    }

    /// Whether the kernel runs here; else (with a `note:`) the tests check
    /// the portable path `GcmTagger` takes on such a CPU.
    fn kernel_runs() -> bool {
        crate::simd::kernel_runs(
            available(),
            "VPCLMULQDQ-512 GHASH",
            "PCLMULQDQ, VPCLMULQDQ, AVX-512F/BW or SSSE3",
        )
    }

    /// GHASH of `aad` and `data` on the portable path, keyed with
    /// H = AES-128_`key`(0) (a `GcmTagger` derives its H so), and that H.
    fn portable_ghash(key: &[u8; 16], aad: &[u8], data: &[u8]) -> ([u8; 16], [u8; 16]) {
        let k = crate::aes_ctr::ContentKey::new(key).unwrap();
        let t = crate::gcm::GcmTagger::new(&k);
        assert!(!t.is_vpclmul(), "the kernel cannot run, yet a tagger uses it");
        let mut h = [0u8; 16];
        k.encrypt_block(&mut h);
        (t.ghash(aad, data), h)
    }

    #[test]
    fn polyval_rfc8452_vector() {
        // RFC 8452 appendix A: POLYVAL(H, X_1, X_2) with
        // H = 25629347589242761d31f826ba4b757b, X_1 = 4f4f95668c83dfb6401762bb2d01a262,
        // X_2 = d1a24ddd2721d006bbe45f20d3c9f362 -> f7a3b47b846119fae5b7866cf5e5b77e.
        if !kernel_runs() {
            // The portable path on a published GHASH value instead: SP
            // 800-38D (GCM spec) test case 2, K = 0^128, C = 0388dace
            // 60b6a392f328c2b971b2fe78: GHASH = its tag ab6e47d4...bddf
            // XOR E_K(J0) (test case 1's tag, 58e2fcce...455a).
            let c = hex::decode("0388dace60b6a392f328c2b971b2fe78").unwrap();
            let (s, h) = portable_ghash(&[0u8; 16], &[], &c);
            assert_eq!(hex::encode(h), "66e94bd4ef8a2c3b884cfa59ca342b2e", "H of test case 2");
            assert_eq!(
                hex::encode(s),
                "f38cbb1ad69223dcc3457ae5b6b0f885",
                "GHASH of test case 2"
            );
            return;
        }
        let h: [u8; 16] = hex::decode("25629347589242761d31f826ba4b757b")
            .unwrap()
            .try_into()
            .unwrap();
        let x1: [u8; 16] = hex::decode("4f4f95668c83dfb6401762bb2d01a262")
            .unwrap()
            .try_into()
            .unwrap();
        let x2: [u8; 16] = hex::decode("d1a24ddd2721d006bbe45f20d3c9f362")
            .unwrap()
            .try_into()
            .unwrap();
        // S_1 = dot(X_1, H), S_2 = dot(S_1 ⊕ X_2, H).
        // SAFETY: `available()` above: the CPU has PCLMULQDQ.
        let s1 = unsafe { dot_bytes(&x1, &h) };
        let mut t = s1;
        for (a, b) in t.iter_mut().zip(x2) {
            *a ^= b;
        }
        // SAFETY: as for S_1.
        let s2 = unsafe { dot_bytes(&t, &h) };
        assert_eq!(hex::encode(s2), "f7a3b47b846119fae5b7866cf5e5b77e");
    }

    #[test]
    fn every_length_around_the_step_matches_the_crate() {
        let fast = kernel_runs();
        let data: Vec<u8> = (0..2400u32).map(|i| (i * 7 + 3) as u8).collect();
        // Zero to two steps and a bit: every tail length, step boundaries.
        for n in 0..(2 * 16 * STEP + 40) {
            for aad in [&data[..0], &data[..24], &data[..17]] {
                let (got, h) = if fast {
                    let h = [0x5au8; 16];
                    (GhashKey::new(&h).unwrap().ghash(aad, &data[..n]), h)
                } else {
                    portable_ghash(&[0x5a; 16], aad, &data[..n])
                };
                assert_eq!(got, crate_ghash(&h, aad, &data[..n]), "n={n}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn matches_the_ghash_crate(h in proptest::array::uniform16(0u8..),
                                   aad in proptest::collection::vec(0u8.., 0..80),
                                   data in proptest::collection::vec(0u8.., 0..5000)) {
            if kernel_runs() {
                let k = GhashKey::new(&h).unwrap();
                proptest::prop_assert_eq!(k.ghash(&aad, &data), crate_ghash(&h, &aad, &data));
            } else {
                // `h` as an AES key: the portable path's H is E_h(0).
                let (got, hk) = portable_ghash(&h, &aad, &data);
                proptest::prop_assert_eq!(got, crate_ghash(&hk, &aad, &data));
            }
        }
    }
}
