//! XTS (IEEE 1619-2018) over a 128-bit block cipher (AES or Twofish), with
//! ciphertext stealing, batched ECB calls and a branch-free multiply-by-α;
//! AES units' whole groups of four blocks on the VAES-512 kernel where the
//! CPU has it (`simd::xts`, decision record 0109).
//!
//! A data unit of `L` bytes with tweak `i` (16 bytes, the little-endian
//! 128-bit unit number of IEEE 1619) is processed as the standard says:
//! `T = E_K2(i)`, block `j` uses `T·α^j`; for `L mod 16 ≠ 0` and `L ≥ 16`
//! the last partial block uses ciphertext stealing. IEEE 1619 has no answer
//! for `L < 16`; here such a unit is XORed with `E_K1(T·α^256)` (a mask
//! never used by a data block of a 4 KiB unit, whose blocks use α^0..α^255).
//! That short-unit rule is malleable (flipping a ciphertext bit flips the same
//! plaintext bit) and, like all XTS, deterministic.

pub use crate::block_cipher::XtsCipher;
use crate::error::KeyLengthError;
use crate::locked::Locked;
use crate::twofish::Twofish;
use aes::cipher::consts::U16;
use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, BlockSizeUser, KeyInit};
use aes::{Aes128, Aes256, Block};

/// Blocks per inner batch: one 4 KiB data unit.
const BATCH: usize = 256;
/// Cipher block size.
const BS: usize = 16;

/// Encrypt/decrypt a slice of blocks with one cipher.
trait Ecb {
    fn enc(&self, b: &mut [Block]);
    fn dec(&self, b: &mut [Block]);
}

impl<C> Ecb for C
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + BlockSizeUser<BlockSize = U16>,
{
    #[inline]
    fn enc(&self, b: &mut [Block]) {
        self.encrypt_blocks(b)
    }
    #[inline]
    fn dec(&self, b: &mut [Block]) {
        self.decrypt_blocks(b)
    }
}

impl Ecb for Twofish {
    #[inline]
    fn enc(&self, b: &mut [Block]) {
        self.encrypt_blocks(Block::cast_slice_to_core_mut(b))
    }
    #[inline]
    fn dec(&self, b: &mut [Block]) {
        self.decrypt_blocks(Block::cast_slice_to_core_mut(b))
    }
}

#[derive(Clone)]
#[allow(clippy::large_enum_variant)] // AES keys stay inline: no pointer chase per block
enum Pair {
    Aes128(Aes128, Aes128),
    Aes256(Aes256, Aes256),
    // Each Twofish key keeps its 4 KiB of tables on locked pages of its own.
    Twofish(Twofish, Twofish),
}

/// An XTS key: the data key `K1` and the tweak key `K2`, expanded. On
/// locked pages (never swapped out, left out of core dumps) and zeroed on
/// drop (`Locked`; the `aes` crate's `zeroize` feature clears its round
/// keys too).
#[derive(Clone)]
pub struct XtsKey {
    pair: Locked<Pair>,
    /// `K1` and `K2` for the VAES-512 kernel (AES keys on CPUs that run it).
    #[cfg(target_arch = "x86_64")]
    vaes: Option<Locked<crate::simd::xts::XtsRoundKeys>>,
    bits: u32,
    cipher: XtsCipher,
}

impl std::fmt::Debug for XtsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "XtsKey({}-{}, ..)", self.cipher.as_str(), self.bits)
    }
}

/// Multiply by α in GF(2^128) (x^128 + x^7 + x^2 + x + 1), IEEE 1619's
/// little-endian byte order: a shift of the 128-bit little-endian integer.
#[inline(always)]
fn mul_alpha(t: u128) -> u128 {
    (t << 1) ^ ((t >> 127).wrapping_neg() & 0x87)
}

/// The tweak of block `block` of the file whose ID is `file_id` (FORMAT.md
/// section 7): the file ID XOR the block number as a little-endian u64 in
/// its first 8 bytes.
pub fn file_block_tweak(file_id: &[u8; 16], block: u64) -> [u8; 16] {
    let mut t = *file_id;
    for (a, b) in t[..8].iter_mut().zip(block.to_le_bytes()) {
        *a ^= b;
    }
    t
}

/// View a byte slice whose length is a multiple of 16 as blocks.
fn as_blocks(buf: &mut [u8]) -> &mut [Block] {
    let (chunks, rest) = buf.as_chunks_mut::<BS>();
    debug_assert!(rest.is_empty());
    Block::cast_slice_from_core_mut(chunks)
}

fn xor16(dst: &mut [u8], m: u128) {
    let x = u128::from_le_bytes(dst[..BS].try_into().unwrap()) ^ m;
    dst[..BS].copy_from_slice(&x.to_le_bytes());
}

impl XtsKey {
    /// Expand `key = K1 ‖ K2`: 32 bytes (two 128-bit keys) or 64 bytes (two
    /// 256-bit keys).
    pub fn new(cipher: XtsCipher, key: &[u8]) -> Result<Self, KeyLengthError> {
        let half = key.len() / 2;
        if key.len() != 32 && key.len() != 64 {
            return Err(KeyLengthError);
        }
        let (k1, k2) = key.split_at(half);
        let e = |_| KeyLengthError;
        let pair = match (cipher, half) {
            (XtsCipher::Aes, 16) => Pair::Aes128(
                Aes128::new_from_slice(k1).map_err(e)?,
                Aes128::new_from_slice(k2).map_err(e)?,
            ),
            (XtsCipher::Aes, _) => Pair::Aes256(
                Aes256::new_from_slice(k1).map_err(e)?,
                Aes256::new_from_slice(k2).map_err(e)?,
            ),
            (XtsCipher::Twofish, _) => Pair::Twofish(Twofish::new(k1)?, Twofish::new(k2)?),
        };
        #[cfg(target_arch = "x86_64")]
        let vaes = match cipher {
            XtsCipher::Aes => crate::simd::xts::XtsRoundKeys::new(k1, k2).map(Locked::new),
            XtsCipher::Twofish => None,
        };
        Ok(Self {
            pair: Locked::new(pair),
            #[cfg(target_arch = "x86_64")]
            vaes,
            bits: half as u32 * 8,
            cipher,
        })
    }

    /// Whether whole groups of four blocks go through the VAES-512 kernel
    /// (AES keys on a CPU with VAES and AVX-512F/BW).
    pub fn is_vaes(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.vaes.is_some()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Size of each of the two keys in bits (128 or 256).
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The block cipher.
    pub fn cipher(&self) -> XtsCipher {
        self.cipher
    }

    fn k1(&self) -> &dyn Ecb {
        match &*self.pair {
            Pair::Aes128(a, _) => a,
            Pair::Aes256(a, _) => a,
            Pair::Twofish(a, _) => a,
        }
    }

    fn k2(&self) -> &dyn Ecb {
        match &*self.pair {
            Pair::Aes128(_, b) => b,
            Pair::Aes256(_, b) => b,
            Pair::Twofish(_, b) => b,
        }
    }

    /// Whether the expanded keys sit on pages locked in RAM.
    pub fn is_locked(&self) -> bool {
        self.pair.is_locked()
    }

    /// `T = E_K2(tweak)` as a little-endian integer.
    #[inline]
    pub fn encrypted_tweak(&self, tweak: &[u8; 16]) -> u128 {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = &self.vaes {
            return k.encrypted_tweak(tweak);
        }
        let mut b = Block::from(*tweak);
        self.k2().enc(std::slice::from_mut(&mut b));
        u128::from_le_bytes(b.into())
    }

    /// Encrypt one data unit in place (any length; empty: nothing).
    pub fn encrypt_unit(&self, tweak: &[u8; 16], buf: &mut [u8]) {
        let t = self.encrypted_tweak(tweak);
        self.encrypt_with_t(t, buf);
    }

    /// Decrypt one data unit in place.
    pub fn decrypt_unit(&self, tweak: &[u8; 16], buf: &mut [u8]) {
        let t = self.encrypted_tweak(tweak);
        self.decrypt_with_t(t, buf);
    }

    /// Encrypt given `T = E_K2(tweak)` (made ahead by the caller).
    pub fn encrypt_with_t(&self, t: u128, buf: &mut [u8]) {
        self.run(t, buf, true)
    }

    /// Decrypt given `T = E_K2(tweak)`.
    pub fn decrypt_with_t(&self, t: u128, buf: &mut [u8]) {
        self.run(t, buf, false)
    }

    /// Encrypt full blocks given their tweak masks `T·α^j` made ahead
    /// (`masks.len() * 16 == buf.len()`); for measuring whether tweaks made
    /// ahead would pay.
    pub fn encrypt_with_masks(&self, masks: &[u128], buf: &mut [u8]) {
        assert_eq!(masks.len() * BS, buf.len());
        for (c, m) in buf.chunks_exact_mut(BATCH * BS).zip(masks.chunks(BATCH)) {
            for (b, &x) in c.chunks_exact_mut(BS).zip(m) {
                xor16(b, x);
            }
            self.k1().enc(as_blocks(c));
            for (b, &x) in c.chunks_exact_mut(BS).zip(m) {
                xor16(b, x);
            }
        }
    }

    /// The masks `T·α^j` for `j = 0..out.len()`.
    pub fn masks(t: u128, out: &mut [u128]) {
        let mut x = t;
        for m in out.iter_mut() {
            *m = x;
            x = mul_alpha(x);
        }
    }

    /// XEX over the full blocks of `buf` starting with mask `t`; returns the
    /// mask of the block after the last. Whole groups of four blocks go
    /// through the VAES-512 kernel where the key has one.
    fn xex(&self, t: u128, buf: &mut [u8], enc: bool) -> u128 {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = &self.vaes {
            let (done, next) = crate::simd::xts::xex(k, t, buf, enc);
            if done == buf.len() {
                return next;
            }
            return self.xex_blocks(next, &mut buf[done..], enc);
        }
        self.xex_blocks(t, buf, enc)
    }

    /// [`xex`](Self::xex) with the block cipher's own batched calls.
    fn xex_blocks(&self, mut t: u128, buf: &mut [u8], enc: bool) -> u128 {
        let mut masks = [0u128; BATCH];
        for c in buf.chunks_mut(BATCH * BS) {
            let n = c.len() / BS;
            for (b, m) in c.chunks_exact_mut(BS).zip(masks[..n].iter_mut()) {
                *m = t;
                xor16(b, t);
                t = mul_alpha(t);
            }
            let blocks = as_blocks(c);
            if enc {
                self.k1().enc(blocks);
            } else {
                self.k1().dec(blocks);
            }
            for (b, &m) in c.chunks_exact_mut(BS).zip(masks[..n].iter()) {
                xor16(b, m);
            }
        }
        t
    }

    fn one(&self, m: u128, b: &mut [u8], enc: bool) {
        xor16(b, m);
        let blk = &mut as_blocks(&mut b[..BS])[0];
        if enc {
            self.k1().enc(std::slice::from_mut(blk));
        } else {
            self.k1().dec(std::slice::from_mut(blk));
        }
        xor16(b, m);
    }

    fn run(&self, t: u128, buf: &mut [u8], enc: bool) {
        let len = buf.len();
        let (m, r) = (len / BS, len % BS);
        if m == 0 {
            // 1..15 bytes: XOR with E_K1(T·α^256).
            let mut x = t;
            for _ in 0..BATCH {
                x = mul_alpha(x);
            }
            let mut pad = Block::from(x.to_le_bytes());
            self.k1().enc(std::slice::from_mut(&mut pad));
            for (a, b) in buf.iter_mut().zip(pad.iter()) {
                *a ^= b;
            }
            return;
        }
        if r == 0 {
            self.xex(t, buf, enc);
            return;
        }
        // Ciphertext stealing over the last full block m-1 and the tail.
        let tm1 = self.xex(t, &mut buf[..(m - 1) * BS], enc);
        let tm = mul_alpha(tm1);
        let (last, tail) = buf[(m - 1) * BS..].split_at_mut(BS);
        // Encrypt: CC = E(P_{m-1}, T_{m-1}); decrypt: PP = D(C_{m-1}, T_m).
        self.one(if enc { tm1 } else { tm }, last, enc);
        // Swap the tail with the head of the processed block.
        for (a, b) in last[..r].iter_mut().zip(tail.iter_mut()) {
            std::mem::swap(a, b);
        }
        self.one(if enc { tm } else { tm1 }, last, enc);
    }
}

#[cfg(test)]
mod tests;
