//! AES-CTR on VAES-512 (x86-64 with AVX-512F/BW, VAES and AES-NI): the
//! counter blocks are built in registers (nonce ‖ big-endian 32-bit counter,
//! wrapping like GCM's inc32) and never touch memory, the keystream goes
//! straight into the destination (or is XORed into it in the same pass), so
//! a mask costs one store per byte and nothing else. The round keys come from
//! our own AES-NI key expansion (`aeskeygenassist`, constant time); they sit
//! inside the caller's `Locked` and are zeroed with it.
//!
//! Checked against FIPS-197 and SP 800-38A vectors and, by property tests,
//! against the `aes` crate (module tests and `aes_ctr`'s tests).

#![allow(unsafe_op_in_unsafe_fn)]

use core::arch::x86_64::*;

/// A 96-bit nonce as raw bytes (what `aes_ctr::Nonce` is).
type Nonce = [u8; 12];

/// Expanded AES-128 (10 rounds) or AES-256 (14 rounds) encryption keys for
/// the VAES path. Only built when the CPU has every feature the path needs,
/// so holding one is the proof that [`ctr`] may run.
#[derive(Clone)]
pub(crate) struct RoundKeys {
    rk: [[u8; 16]; 15],
    rounds: usize,
}

/// Whether this CPU runs the VAES-512 path.
pub(crate) fn available() -> bool {
    super::has_vaes512()
}

impl RoundKeys {
    /// Expand a 16- or 32-byte key; `None` when the CPU lacks the features
    /// or the key length is neither.
    pub(crate) fn new(key: &[u8]) -> Option<Self> {
        if !available() || !(key.len() == 16 || key.len() == 32) {
            return None;
        }
        let mut k = Self {
            rk: [[0u8; 16]; 15],
            rounds: 0,
        };
        // SAFETY: `available()` checked AES-NI (and more).
        unsafe {
            if key.len() == 16 {
                expand128(key, &mut k.rk);
                k.rounds = 10;
            } else {
                expand256(key, &mut k.rk);
                k.rounds = 14;
            }
        }
        Some(k)
    }

    /// The round keys (`rounds + 1` of the 15 in use) and the rounds.
    pub(crate) fn round_keys(&self) -> (&[[u8; 16]; 15], usize) {
        (&self.rk, self.rounds)
    }

    /// Encrypt one block (XTS's `E_K2(tweak)`, and tests).
    pub(crate) fn encrypt_block(&self, block: &mut [u8; 16]) {
        // SAFETY: a RoundKeys exists only when AES-NI is present.
        unsafe { encrypt1(self, block) }
    }
}

// Round constants are immediates of `aeskeygenassist`, hence the macro.
macro_rules! assist {
    ($k:expr, $rcon:literal) => {
        _mm_aeskeygenassist_si128::<$rcon>($k)
    };
}

/// w ^ (w << 32) ^ (w << 64) ^ (w << 96): the running XOR of the words of
/// the previous round key, as the key schedule needs.
#[target_feature(enable = "sse2")]
#[inline]
unsafe fn prefix_xor(k: __m128i) -> __m128i {
    let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    _mm_xor_si128(k, _mm_slli_si128::<8>(k))
}

#[target_feature(enable = "aes,sse2")]
unsafe fn expand128(key: &[u8], out: &mut [[u8; 16]; 15]) {
    let mut k = _mm_loadu_si128(key.as_ptr().cast());
    _mm_storeu_si128(out[0].as_mut_ptr().cast(), k);
    macro_rules! step {
        ($i:literal, $rcon:literal) => {
            k = _mm_xor_si128(prefix_xor(k), _mm_shuffle_epi32::<0xff>(assist!(k, $rcon)));
            _mm_storeu_si128(out[$i].as_mut_ptr().cast(), k);
        };
    }
    step!(1, 0x01);
    step!(2, 0x02);
    step!(3, 0x04);
    step!(4, 0x08);
    step!(5, 0x10);
    step!(6, 0x20);
    step!(7, 0x40);
    step!(8, 0x80);
    step!(9, 0x1b);
    step!(10, 0x36);
    k = _mm_setzero_si128();
    let _ = k;
}

#[target_feature(enable = "aes,sse2")]
unsafe fn expand256(key: &[u8], out: &mut [[u8; 16]; 15]) {
    let mut a = _mm_loadu_si128(key.as_ptr().cast());
    let mut b = _mm_loadu_si128(key.as_ptr().add(16).cast());
    _mm_storeu_si128(out[0].as_mut_ptr().cast(), a);
    _mm_storeu_si128(out[1].as_mut_ptr().cast(), b);
    // Even round keys from the previous even one and SubWord(RotWord) of
    // the odd one; odd round keys from the previous odd one and SubWord of
    // the even one (no rotation, no round constant).
    macro_rules! even {
        ($i:literal, $rcon:literal) => {
            a = _mm_xor_si128(prefix_xor(a), _mm_shuffle_epi32::<0xff>(assist!(b, $rcon)));
            _mm_storeu_si128(out[$i].as_mut_ptr().cast(), a);
        };
    }
    macro_rules! odd {
        ($i:literal) => {
            b = _mm_xor_si128(prefix_xor(b), _mm_shuffle_epi32::<0xaa>(assist!(a, 0x00)));
            _mm_storeu_si128(out[$i].as_mut_ptr().cast(), b);
        };
    }
    even!(2, 0x01);
    odd!(3);
    even!(4, 0x02);
    odd!(5);
    even!(6, 0x04);
    odd!(7);
    even!(8, 0x08);
    odd!(9);
    even!(10, 0x10);
    odd!(11);
    even!(12, 0x20);
    odd!(13);
    even!(14, 0x40);
    a = _mm_setzero_si128();
    b = _mm_setzero_si128();
    let _ = (a, b);
}

#[target_feature(enable = "aes,sse2")]
unsafe fn encrypt1(k: &RoundKeys, block: &mut [u8; 16]) {
    let mut x = _mm_xor_si128(_mm_loadu_si128(block.as_ptr().cast()), load(&k.rk[0]));
    for r in 1..k.rounds {
        x = _mm_aesenc_si128(x, load(&k.rk[r]));
    }
    x = _mm_aesenclast_si128(x, load(&k.rk[k.rounds]));
    _mm_storeu_si128(block.as_mut_ptr().cast(), x);
}

#[target_feature(enable = "sse2")]
#[inline]
unsafe fn load(b: &[u8; 16]) -> __m128i {
    _mm_loadu_si128(b.as_ptr().cast())
}

/// Write (`xor` false) or XOR (`xor` true) the keystream of `nonce` from
/// block counter `counter` into `buf` (any length; a partial last block is
/// cut). Counter block = nonce ‖ BE32(counter + i), the counter wrapping
/// modulo 2^32.
pub(crate) fn ctr(k: &RoundKeys, nonce: &Nonce, counter: u32, buf: &mut [u8], xor: bool) {
    // SAFETY: a RoundKeys exists only when `available()` held; the kernels
    // stay within `buf`.
    unsafe {
        match (k.rounds, xor) {
            (10, false) => ctr_kernel::<10, false>(k, nonce, counter, buf),
            (10, true) => ctr_kernel::<10, true>(k, nonce, counter, buf),
            (_, false) => ctr_kernel::<14, false>(k, nonce, counter, buf),
            (_, true) => ctr_kernel::<14, true>(k, nonce, counter, buf),
        }
    }
}

/// 512-bit vectors (4 blocks each) per step of the main loop: 8 keeps the
/// blocks, 15 round keys and the counter state in the 32 registers.
const WIDE: usize = 8;

#[target_feature(enable = "avx512f,avx512bw,vaes,aes")]
unsafe fn ctr_kernel<const NR: usize, const XOR: bool>(k: &RoundKeys, nonce: &Nonce, counter: u32, buf: &mut [u8]) {
    let mut rk = [_mm512_setzero_si512(); 15];
    for (r, key) in rk.iter_mut().enumerate().take(NR + 1) {
        *key = _mm512_broadcast_i32x4(load(&k.rk[r]));
    }
    // nonce ‖ 0 with round key 0 folded in; the counter goes in by XOR.
    let mut nb = [0u8; 16];
    nb[..12].copy_from_slice(nonce);
    let base = _mm512_xor_si512(_mm512_broadcast_i32x4(load(&nb)), rk[0]);
    // Little-endian counters in dword 3 of each lane: c, c+1, c+2, c+3.
    let c = counter as i32;
    let mut ctr = _mm512_set_epi32(
        c.wrapping_add(3),
        0,
        0,
        0,
        c.wrapping_add(2),
        0,
        0,
        0,
        c.wrapping_add(1),
        0,
        0,
        0,
        c,
        0,
        0,
        0,
    );
    let four = _mm512_set_epi32(4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0);
    // Byte-swap dword 3 of each lane into bytes 12..16 (big-endian), zero the rest.
    let bswap = _mm512_set_epi32(
        0x0c0d0e0f, -1, -1, -1, 0x0c0d0e0f, -1, -1, -1, 0x0c0d0e0f, -1, -1, -1, 0x0c0d0e0f, -1, -1, -1,
    );
    macro_rules! next_block {
        () => {{
            let b = _mm512_xor_si512(base, _mm512_shuffle_epi8(ctr, bswap));
            ctr = _mm512_add_epi32(ctr, four);
            b
        }};
    }
    let mut p = buf.as_mut_ptr();
    let mut left = buf.len();
    while left >= 64 * WIDE {
        let mut b = [_mm512_setzero_si512(); WIDE];
        for x in b.iter_mut() {
            *x = next_block!();
        }
        for key in &rk[1..NR] {
            for x in b.iter_mut() {
                *x = _mm512_aesenc_epi128(*x, *key);
            }
        }
        for (i, x) in b.iter().enumerate() {
            let v = _mm512_aesenclast_epi128(*x, rk[NR]);
            let d = p.add(64 * i).cast::<__m512i>();
            if XOR {
                _mm512_storeu_si512(d, _mm512_xor_si512(_mm512_loadu_si512(d), v));
            } else {
                _mm512_storeu_si512(d, v);
            }
        }
        p = p.add(64 * WIDE);
        left -= 64 * WIDE;
    }
    while left > 0 {
        let mut x = next_block!();
        for key in &rk[1..NR] {
            x = _mm512_aesenc_epi128(x, *key);
        }
        x = _mm512_aesenclast_epi128(x, rk[NR]);
        if left >= 64 {
            let d = p.cast::<__m512i>();
            if XOR {
                _mm512_storeu_si512(d, _mm512_xor_si512(_mm512_loadu_si512(d), x));
            } else {
                _mm512_storeu_si512(d, x);
            }
            p = p.add(64);
            left -= 64;
        } else {
            let mut ks = [0u8; 64];
            _mm512_storeu_si512(ks.as_mut_ptr().cast(), x);
            let dst = core::slice::from_raw_parts_mut(p, left);
            if XOR {
                for (d, k) in dst.iter_mut().zip(&ks[..left]) {
                    *d ^= k;
                }
            } else {
                dst.copy_from_slice(&ks[..left]);
            }
            // Keystream on the stack is key-dependent: clear it.
            core::ptr::write_volatile(&mut ks, [0u8; 64]);
            left = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::{BlockCipherEncrypt, KeyInit};

    fn hexb(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    /// Whether the kernel runs here; else (with a `note:`) the tests check
    /// the portable path `ContentKey` takes on such a CPU.
    fn kernel_runs() -> bool {
        crate::simd::kernel_runs(available(), "VAES-512 AES", "AES-NI, VAES or AVX-512F/BW")
    }

    #[test]
    fn fips197_appendix_c() {
        let fast = kernel_runs();
        let pt: [u8; 16] = hexb("00112233445566778899aabbccddeeff").try_into().unwrap();
        for (key, ct) in [
            ("000102030405060708090a0b0c0d0e0f", "69c4e0d86a7b0430d8cdb78070b4c55a"),
            (
                "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                "8ea2b7ca516745bfeafc49904b496089",
            ),
        ] {
            let mut b = pt;
            if fast {
                RoundKeys::new(&hexb(key)).unwrap().encrypt_block(&mut b);
            } else {
                let k = crate::aes_ctr::ContentKey::new(&hexb(key)).unwrap();
                assert!(!k.is_vaes(), "the kernel cannot run, yet a key uses it");
                k.encrypt_block(&mut b);
            }
            assert_eq!(hex::encode(b), ct);
        }
    }

    /// The old definition: counter blocks nonce ‖ BE32(counter + i) in
    /// memory, encrypted with the `aes` crate, copied or XORed out.
    fn reference(key: &[u8], nonce: &Nonce, counter: u32, buf: &mut [u8], xor: bool) {
        let mut ctr = counter;
        for chunk in buf.chunks_mut(16) {
            let mut b = aes::Block::default();
            b[..12].copy_from_slice(nonce);
            b[12..].copy_from_slice(&ctr.to_be_bytes());
            match key.len() {
                16 => aes::Aes128::new_from_slice(key).unwrap().encrypt_block(&mut b),
                _ => aes::Aes256::new_from_slice(key).unwrap().encrypt_block(&mut b),
            }
            for (d, s) in chunk.iter_mut().zip(b.iter()) {
                *d = if xor { *d ^ s } else { *s };
            }
            ctr = ctr.wrapping_add(1);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(warpfs_testkit::cases(300)))]
        #[test]
        fn ctr_equals_the_counter_block_definition(
            long in proptest::bool::ANY,
            key in proptest::collection::vec(0u8.., 32),
            nonce in proptest::array::uniform12(0u8..),
            // Counters near 2^32 cover the wrap inside and across vectors.
            counter in proptest::prop_oneof![0u32..16, (u32::MAX - 300)..=u32::MAX, proptest::num::u32::ANY],
            data in proptest::collection::vec(0u8.., 0..5000),
            xor in proptest::bool::ANY,
        ) {
            let key = if long { &key[..] } else { &key[..16] };
            let mut a = data.clone();
            let mut b = data.clone();
            if kernel_runs() {
                ctr(&RoundKeys::new(key).unwrap(), &nonce, counter, &mut a, xor);
            } else {
                // The path a content key takes without the kernel.
                let k = crate::aes_ctr::ContentKey::new(key).unwrap();
                proptest::prop_assert!(!k.is_vaes());
                if xor {
                    k.xor_keystream(&nonce, counter, &mut a);
                } else {
                    k.keystream(&nonce, counter, &mut a);
                }
            }
            reference(key, &nonce, counter, &mut b, xor);
            proptest::prop_assert_eq!(a, b);
        }
    }
}
