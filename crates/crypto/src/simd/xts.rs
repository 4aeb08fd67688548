//! AES-XTS on VAES-512 (x86-64 with AVX-512F/BW, VAES and AES-NI): four
//! blocks per 512-bit register, eight registers per step, each block XORed
//! with its tweak mask `T·α^j` before and after the block cipher. The masks
//! are made in registers too: a register holds `T·α^j .. T·α^(j+3)`; the
//! eight of a step start `·α^4` apart and each moves on `·α^32` per step
//! (lane-wise shifts, the bits shifted out folded back with
//! x^7 + x^2 + x + 1), so a data unit costs one load and one store per
//! byte. Decryption runs the
//! equivalent inverse cipher (`aesimc` of the encryption round keys). The
//! round keys come from [`super::aes::RoundKeys`] and sit inside the
//! caller's `Locked`.
//!
//! Only whole groups of four blocks go through here; the caller does the
//! rest of a unit (up to three blocks and ciphertext stealing) with the
//! mask this returns. Checked against the caller's portable path and, by
//! the caller's tests, IEEE 1619 vectors and the `xts-mode` crate.

#![allow(unsafe_op_in_unsafe_fn)]

use super::aes::RoundKeys;
use core::arch::x86_64::*;

/// Bytes of one group: four 16-byte blocks, one 512-bit register.
pub(crate) const GROUP: usize = 64;

/// Registers per step of the main loop: 8 blocks in flight hide the
/// latency of `vaesenc` (as in the CTR kernel); with their 8 masks, the 15
/// round keys and the running mask that is all 32 registers (measured
/// 1.13x 4 per step on 4 KiB units here).
const WIDE: usize = 8;

/// An XTS key expanded for the kernel: the data key `K1` for both
/// directions, the tweak key `K2` for encryption. Like [`RoundKeys`], it
/// lives inside the caller's `Locked`, which wipes it when freed.
#[derive(Clone)]
pub(crate) struct XtsRoundKeys {
    enc: RoundKeys,
    /// Decryption round keys in the order `aesdec` takes them.
    dec: [[u8; 16]; 15],
    k2: RoundKeys,
}

impl XtsRoundKeys {
    /// Expand 16- or 32-byte keys `K1` and `K2`; `None` when the CPU lacks
    /// the features (see [`super::aes::available`]) or a length is neither.
    pub(crate) fn new(k1: &[u8], k2: &[u8]) -> Option<Self> {
        let k2 = RoundKeys::new(k2)?;
        let enc = RoundKeys::new(k1)?;
        let (rk, nr) = enc.round_keys();
        let mut dec = [[0u8; 16]; 15];
        dec[0] = rk[nr];
        dec[nr] = rk[0];
        for i in 1..nr {
            // SAFETY: a RoundKeys exists only when AES-NI is present.
            unsafe { _mm_storeu_si128(dec[i].as_mut_ptr().cast(), _mm_aesimc_si128(load(&rk[nr - i]))) };
        }
        Some(Self { enc, dec, k2 })
    }

    /// `T = E_K2(tweak)` as a little-endian integer (AES-NI, one block).
    pub(crate) fn encrypted_tweak(&self, tweak: &[u8; 16]) -> u128 {
        let mut b = *tweak;
        self.k2.encrypt_block(&mut b);
        u128::from_le_bytes(b)
    }
}

/// Encrypt (`enc`) or decrypt the whole groups of four blocks at the start
/// of `buf` in place, block `j` with mask `T·α^j` (`t` = `T` as a
/// little-endian integer). Returns the bytes done (`buf.len()` rounded
/// down to [`GROUP`]) and the mask of the block after them.
pub(crate) fn xex(k: &XtsRoundKeys, t: u128, buf: &mut [u8], enc: bool) -> (usize, u128) {
    let done = buf.len() / GROUP * GROUP;
    if done == 0 {
        return (0, t);
    }
    let buf = &mut buf[..done];
    let (ek, nr) = k.enc.round_keys();
    let rk = if enc { ek } else { &k.dec };
    // SAFETY: an XtsRoundKeys exists only when `available()` held; the
    // kernels stay within `buf`.
    let next = unsafe {
        match (nr, enc) {
            (10, true) => kernel::<10, true>(rk, t, buf),
            (10, false) => kernel::<10, false>(rk, t, buf),
            (_, true) => kernel::<14, true>(rk, t, buf),
            (_, false) => kernel::<14, false>(rk, t, buf),
        }
    };
    (done, next)
}

/// Multiply by α (IEEE 1619's little-endian order), for the first register.
fn mul_alpha(t: u128) -> u128 {
    (t << 1) ^ ((t >> 127).wrapping_neg() & 0x87)
}

/// `c·(x^7 + x^2 + x + 1)` in each 64-bit lane, for `c` below 2^57: the
/// bits shifted out of the top of a 128-bit lane, folded back.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn fold(c: __m512i) -> __m512i {
    _mm512_xor_si512(
        _mm512_xor_si512(c, _mm512_slli_epi64::<1>(c)),
        _mm512_xor_si512(_mm512_slli_epi64::<2>(c), _mm512_slli_epi64::<7>(c)),
    )
}

/// Each 128-bit lane times α^4: shifted left by four, the four bits that
/// leave the top folded back.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn times_alpha4(t: __m512i) -> __m512i {
    let s = _mm512_srli_epi64::<60>(t);
    // Low qword's top bits into the high qword; the high qword's out.
    let carry_in = _mm512_bslli_epi128::<8>(s);
    let c = _mm512_bsrli_epi128::<8>(s);
    _mm512_xor_si512(_mm512_xor_si512(_mm512_slli_epi64::<4>(t), carry_in), fold(c))
}

/// Each 128-bit lane times α^32: shifted left by four bytes, the 32 bits
/// that leave the top folded back.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn times_alpha32(t: __m512i) -> __m512i {
    _mm512_xor_si512(_mm512_bslli_epi128::<4>(t), fold(_mm512_bsrli_epi128::<12>(t)))
}

#[target_feature(enable = "avx512f,avx512bw,vaes,aes")]
unsafe fn kernel<const NR: usize, const ENC: bool>(rk: &[[u8; 16]; 15], t: u128, buf: &mut [u8]) -> u128 {
    let mut keys = [_mm512_setzero_si512(); 15];
    for (r, key) in keys.iter_mut().enumerate().take(NR + 1) {
        *key = _mm512_broadcast_i32x4(load(&rk[r]));
    }
    let t1 = mul_alpha(t);
    let t2 = mul_alpha(t1);
    let t3 = mul_alpha(t2);
    let mut lanes = [0u8; 64];
    for (i, m) in [t, t1, t2, t3].iter().enumerate() {
        lanes[16 * i..16 * i + 16].copy_from_slice(&m.to_le_bytes());
    }
    let mut tw = _mm512_loadu_si512(lanes.as_ptr().cast());
    // The masks of the first step: register i holds blocks 4i..4i+3; each
    // step moves every register on by 32 blocks (α^32), eight independent
    // multiplies rather than one chain.
    let mut masks = [tw; WIDE];
    for i in 1..WIDE {
        masks[i] = times_alpha4(masks[i - 1]);
    }
    macro_rules! round {
        ($x:expr, $k:expr) => {
            if ENC {
                _mm512_aesenc_epi128($x, $k)
            } else {
                _mm512_aesdec_epi128($x, $k)
            }
        };
    }
    macro_rules! last {
        ($x:expr, $k:expr) => {
            if ENC {
                _mm512_aesenclast_epi128($x, $k)
            } else {
                _mm512_aesdeclast_epi128($x, $k)
            }
        };
    }
    let mut p = buf.as_mut_ptr();
    let mut left = buf.len() / GROUP;
    while left >= WIDE {
        let mut b = [_mm512_setzero_si512(); WIDE];
        for (i, (m, x)) in masks.iter().zip(b.iter_mut()).enumerate() {
            let d = _mm512_loadu_si512(p.add(GROUP * i).cast());
            *x = _mm512_xor_si512(_mm512_xor_si512(d, *m), keys[0]);
        }
        for key in &keys[1..NR] {
            for x in b.iter_mut() {
                *x = round!(*x, *key);
            }
        }
        for (i, (m, x)) in masks.iter_mut().zip(b.iter()).enumerate() {
            let v = _mm512_xor_si512(last!(*x, keys[NR]), *m);
            _mm512_storeu_si512(p.add(GROUP * i).cast(), v);
            *m = times_alpha32(*m);
        }
        p = p.add(GROUP * WIDE);
        left -= WIDE;
    }
    tw = masks[0];
    while left > 0 {
        let m = tw;
        tw = times_alpha4(tw);
        let mut x = _mm512_xor_si512(_mm512_xor_si512(_mm512_loadu_si512(p.cast()), m), keys[0]);
        for key in &keys[1..NR] {
            x = round!(x, *key);
        }
        _mm512_storeu_si512(p.cast(), _mm512_xor_si512(last!(x, keys[NR]), m));
        p = p.add(GROUP);
        left -= 1;
    }
    // The next block's mask is lane 0 of the running register.
    _mm512_storeu_si512(lanes.as_mut_ptr().cast(), tw);
    let next = u128::from_le_bytes(lanes[..16].try_into().expect("16 bytes"));
    // Masks derive from the tweak key: clear the copy on the stack.
    core::ptr::write_volatile(&mut lanes, [0u8; 64]);
    next
}

#[target_feature(enable = "sse2")]
#[inline]
unsafe fn load(b: &[u8; 16]) -> __m128i {
    _mm_loadu_si128(b.as_ptr().cast())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};

    fn kernel_runs() -> bool {
        crate::simd::kernel_runs(
            super::super::aes::available(),
            "VAES-512 XTS",
            "AES-NI, VAES or AVX-512F/BW",
        )
    }

    /// The definition, block by block with the `aes` crate.
    fn reference(k1: &[u8], mut t: u128, buf: &mut [u8], enc: bool) -> u128 {
        for b in buf.chunks_exact_mut(16) {
            let mut blk = aes::Block::default();
            for (d, (x, m)) in blk.iter_mut().zip(b.iter().zip(t.to_le_bytes())) {
                *d = x ^ m;
            }
            match (k1.len(), enc) {
                (16, true) => aes::Aes128::new_from_slice(k1).unwrap().encrypt_block(&mut blk),
                (16, false) => aes::Aes128::new_from_slice(k1).unwrap().decrypt_block(&mut blk),
                (_, true) => aes::Aes256::new_from_slice(k1).unwrap().encrypt_block(&mut blk),
                (_, false) => aes::Aes256::new_from_slice(k1).unwrap().decrypt_block(&mut blk),
            }
            for (d, (x, m)) in b.iter_mut().zip(blk.iter().zip(t.to_le_bytes())) {
                *d = x ^ m;
            }
            t = mul_alpha(t);
        }
        t
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(warpfs_testkit::cases(300)))]
        /// Whole groups through the kernel equal the definition, both
        /// directions and key sizes, any mask (all-ones ones too, whose
        /// every multiply folds), and the mask handed back is the next
        /// block's; the bytes past the last whole group are left alone.
        #[test]
        fn xex_equals_the_definition(
            long in proptest::bool::ANY,
            key in proptest::collection::vec(0u8.., 32),
            t in proptest::prop_oneof![proptest::num::u128::ANY, proptest::strategy::Just(u128::MAX)],
            data in proptest::collection::vec(0u8.., 0..4200),
            enc in proptest::bool::ANY,
        ) {
            if !kernel_runs() {
                return Ok(());
            }
            let k1 = if long { &key[..] } else { &key[..16] };
            let k = XtsRoundKeys::new(k1, k1).unwrap();
            let mut ours = data.clone();
            let (done, next) = xex(&k, t, &mut ours, enc);
            proptest::prop_assert_eq!(done, data.len() / 64 * 64);
            let mut theirs = data.clone();
            let want_next = reference(k1, t, &mut theirs[..done], enc);
            proptest::prop_assert_eq!(&ours, &theirs);
            proptest::prop_assert_eq!(next, want_next);
        }
    }

    #[test]
    fn decryption_undoes_encryption() {
        if !kernel_runs() {
            return;
        }
        for k1 in [&[7u8; 16][..], &[9u8; 32][..]] {
            let k = XtsRoundKeys::new(k1, k1).unwrap();
            let pt: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
            let mut buf = pt.clone();
            xex(&k, 0x1234_5678_9abc_def0_0fed_cba9_8765_4321, &mut buf, true);
            assert_ne!(buf, pt);
            xex(&k, 0x1234_5678_9abc_def0_0fed_cba9_8765_4321, &mut buf, false);
            assert_eq!(buf, pt);
        }
    }
}
