//! `dst ^= src` on AVX-512: four 512-bit vectors per step. Used for the XOR
//! of a mask the engine made ahead (the only crypto of a `ctr` read with a
//! ready mask). Callers check `has_vaes512()` (it includes AVX-512F).

#![allow(unsafe_op_in_unsafe_fn)]

use core::arch::x86_64::*;

/// `dst ^= src` over the common length.
pub(crate) fn xor_in_place(dst: &mut [u8], src: &[u8]) {
    debug_assert!(super::has_vaes512());
    let n = dst.len().min(src.len());
    // SAFETY: the caller checked AVX-512F; the kernel stays within `n`.
    unsafe { kernel(dst.as_mut_ptr(), src.as_ptr(), n) }
    let done = n - n % 64;
    for (d, s) in dst[done..n].iter_mut().zip(&src[done..n]) {
        *d ^= s;
    }
}

/// XOR the first `n - n % 64` bytes.
#[target_feature(enable = "avx512f")]
unsafe fn kernel(d: *mut u8, s: *const u8, n: usize) {
    let mut i = 0;
    while i + 256 <= n {
        let a: [__m512i; 4] = core::array::from_fn(|k| _mm512_loadu_si512(s.add(i + 64 * k).cast()));
        for (k, v) in a.iter().enumerate() {
            let p = d.add(i + 64 * k).cast::<__m512i>();
            _mm512_storeu_si512(p, _mm512_xor_si512(_mm512_loadu_si512(p), *v));
        }
        i += 256;
    }
    while i + 64 <= n {
        let p = d.add(i).cast::<__m512i>();
        _mm512_storeu_si512(
            p,
            _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_loadu_si512(s.add(i).cast())),
        );
        i += 64;
    }
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        #[test]
        fn equals_the_bytewise_xor(a in proptest::collection::vec(0u8.., 0..1200), b in proptest::collection::vec(0u8.., 0..1200)) {
            let mut x = a.clone();
            if crate::simd::kernel_runs(crate::simd::has_vaes512(), "AVX-512 XOR", "AVX-512F (checked with VAES)") {
                super::xor_in_place(&mut x, &b);
            } else {
                // What the callers get without the kernel.
                crate::aes_ctr::xor_in_place(&mut x, &b);
            }
            let n = a.len().min(b.len());
            let mut want = a.clone();
            for i in 0..n {
                want[i] ^= b[i];
            }
            proptest::prop_assert_eq!(x, want);
        }
    }
}
