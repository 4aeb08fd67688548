//! XChaCha20 masks and Poly1305 tags: the content cipher of the
//! `xchacha20-poly1305` and `ctr-xchacha20` modes (FORMAT.md section 15).
//!
//! A block's 96-bit nonce `n` (FORMAT.md 3.5) is the XChaCha20 nonce
//! `n ‖ 0^96` (24 bytes): HChaCha20 turns the key and `n ‖ 0^32` into a
//! subkey of that nonce alone, and ChaCha20 (RFC 8439, 32-bit block
//! counter) runs under the subkey with the nonce `0^32 ‖ 0^64`. The mask
//! of a nonce is that stream from block 0 ([`MaskLayout::XCHACHA`]): the
//! Poly1305 one-time key is the first 32 bytes of block 0, the data
//! keystream starts at block 1, and the tag is RFC 8439's AEAD tag
//! ([`poly1305_tag`]), so a block is exactly XChaCha20-Poly1305
//! (draft-irtf-cfrg-xchacha 2.3) under the nonce `n ‖ 0^96`.
//!
//! The keystream of runs of 1 KiB and more comes from our own kernel,
//! sixteen blocks at a time with AVX-512F where the CPU has it
//! (`chacha_avx512`, decision record 0108); the rest from the RustCrypto
//! `chacha20` crate (AVX2 or SSE2 chosen at run time on x86-64, NEON at
//! compile time on aarch64, portable elsewhere); the tag from our own
//! Poly1305 with 64-bit limbs (`poly`,
//! portable Rust, about twice the `poly1305` crate's speed on 4 KiB
//! blocks here, decision record 0080; the crate is its test oracle), its
//! long runs four blocks at a time with AVX2 where the CPU has it
//! (`poly_avx2`, decision record 0107): [`backend`] names them. The key sits on locked pages, zeroed on drop;
//! the cipher state of one call lives on the caller's stack and is zeroed
//! when it is dropped (the crates' `zeroize` feature).

use crate::aes_ctr::{Nonce, NONCE_LEN};
use crate::error::KeyLengthError;
use crate::locked::Locked;
use crate::mask::{MaskLayout, TagMask};
use chacha20::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use chacha20::XChaCha20;

#[cfg(target_arch = "x86_64")]
mod chacha_avx512;
mod poly;
#[cfg(target_arch = "x86_64")]
mod poly_avx2;

/// Bytes of an XChaCha20 key (only 256-bit keys exist).
pub const KEY_LEN: usize = 32;
/// Bytes of an XChaCha20 nonce.
pub const XNONCE_LEN: usize = 24;
/// Bytes of one ChaCha20 block.
pub const BLOCK_LEN: u64 = 64;
/// Bytes of a Poly1305 tag.
pub const POLY1305_TAG_LEN: usize = 16;
/// The stream of one nonce: 2^32 − 1 blocks (the 32-bit counter; the
/// `chacha20` crate does not hand out the block whose counter is 2^32 − 1).
const STREAM_BLOCKS: u64 = u32::MAX as u64;

/// The XChaCha20 nonce of a block's 96-bit nonce: `nonce ‖ 0^96`.
pub fn xnonce(nonce: &Nonce) -> [u8; XNONCE_LEN] {
    let mut x = [0u8; XNONCE_LEN];
    x[..NONCE_LEN].copy_from_slice(nonce);
    x
}

/// An XChaCha20 content key (256 bits) on locked pages, zeroed on drop.
#[derive(Clone)]
pub struct XChaChaKey {
    key: Locked<[u8; KEY_LEN]>,
}

impl std::fmt::Debug for XChaChaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("XChaChaKey(..)")
    }
}

impl XChaChaKey {
    /// The key of exactly 32 bytes.
    pub fn new(raw: &[u8]) -> Result<Self, KeyLengthError> {
        let raw: &[u8; KEY_LEN] = raw.try_into().map_err(|_| KeyLengthError)?;
        let mut key = Locked::new([0u8; KEY_LEN]);
        key.copy_from_slice(raw);
        Ok(Self { key })
    }

    /// Key size in bits (256).
    pub fn bits(&self) -> u32 {
        (KEY_LEN * 8) as u32
    }

    /// Whether the key is on locked pages (false where `mlock` is refused).
    pub fn is_locked(&self) -> bool {
        self.key.is_locked()
    }

    /// The mask layout of this cipher.
    pub fn layout(&self) -> MaskLayout {
        MaskLayout::XCHACHA
    }

    /// XOR keystream bytes `[pos, pos + buf.len())` of the stream that
    /// starts at ChaCha20 block `block` of `nonce` into `buf`. Encryption
    /// and decryption are the same operation.
    ///
    /// # Panics
    /// When the bytes reach past the 2^32 − 1 blocks of one nonce's stream
    /// (a caller's error: content masks use blocks 0 to 64).
    pub fn xor_at(&self, nonce: &Nonce, block: u32, pos: u64, buf: &mut [u8]) {
        self.xor_x(&xnonce(nonce), block, pos, buf);
    }

    /// [`xor_at`](Self::xor_at) under a whole 24-byte XChaCha20 nonce (the
    /// draft's vectors use nonces of any value).
    pub(crate) fn xor_x(&self, xn: &[u8; XNONCE_LEN], block: u32, pos: u64, buf: &mut [u8]) {
        let start = u64::from(block) * BLOCK_LEN + pos;
        let end = start.saturating_add(buf.len() as u64);
        assert!(
            end <= STREAM_BLOCKS * BLOCK_LEN,
            "XChaCha20 keystream past the 32-bit block counter"
        );
        #[cfg(target_arch = "x86_64")]
        if buf.len() >= chacha_avx512::CHUNK && chacha_avx512::available() {
            return self.xor_wide(xn, start, buf);
        }
        let mut c = XChaCha20::new((&*self.key).into(), xn.into());
        c.seek(start);
        c.apply_keystream(buf);
    }

    /// [`xor_x`](Self::xor_x) from stream byte `start` over a buffer of
    /// at least one [`chacha_avx512::CHUNK`]: HChaCha20 makes the subkey,
    /// the whole runs of sixteen blocks go through the AVX-512 kernel, and
    /// the bytes before the first block boundary and after the last run
    /// through the crate's ChaCha20 under the same subkey and nonce.
    #[cfg(target_arch = "x86_64")]
    fn xor_wide(&self, xn: &[u8; XNONCE_LEN], start: u64, buf: &mut [u8]) {
        use zeroize::{Zeroize, Zeroizing};
        let input: [u8; 16] = xn[..16].try_into().expect("16 of 24 bytes");
        let mut made = chacha20::hchacha::<chacha20::R20>((&*self.key).into(), &input.into());
        let mut sub = Zeroizing::new([0u8; KEY_LEN]);
        sub.copy_from_slice(&made);
        made.as_mut_slice().zeroize();
        let mut words = Zeroizing::new([0u32; 8]);
        for (w, b) in words.iter_mut().zip(sub.chunks_exact(4)) {
            *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        let mut inner_nonce = [0u8; 12];
        inner_nonce[4..].copy_from_slice(&xn[16..]);
        let nonce = [
            0,
            u32::from_le_bytes([xn[16], xn[17], xn[18], xn[19]]),
            u32::from_le_bytes([xn[20], xn[21], xn[22], xn[23]]),
        ];
        let mut inner = chacha20::ChaCha20::new((&*sub).into(), &inner_nonce.into());
        let head = (((BLOCK_LEN - start % BLOCK_LEN) % BLOCK_LEN) as usize).min(buf.len());
        inner.seek(start);
        inner.apply_keystream(&mut buf[..head]);
        let mut block = (start + head as u64) / BLOCK_LEN;
        let mut runs = buf[head..].chunks_exact_mut(chacha_avx512::CHUNK);
        for run in &mut runs {
            // The run ends inside the stream (`xor_x` checked its end), so
            // its sixteen counters fit in 32 bits without wrapping.
            let ctr = u32::try_from(block).expect("within the 32-bit block counter");
            let run: &mut [u8; chacha_avx512::CHUNK] = run.try_into().expect("a whole run");
            // SAFETY: `xor_x` called this only where `available()` holds.
            unsafe { chacha_avx512::xor16(&words, &nonce, ctr, run) };
            block += 16;
        }
        let tail = runs.into_remainder();
        inner.seek(block * BLOCK_LEN);
        inner.apply_keystream(tail);
    }

    /// Write the keystream from block `block` of `nonce` into `out`.
    pub fn keystream(&self, nonce: &Nonce, block: u32, out: &mut [u8]) {
        out.fill(0);
        self.xor_at(nonce, block, 0, out);
    }

    /// The Poly1305 one-time key of `nonce` (the first 32 bytes of block 0).
    pub fn tag_mask(&self, nonce: &Nonce) -> TagMask {
        let mut m = [0u8; crate::mask::TAG_MASK_LEN];
        self.keystream(nonce, 0, &mut m);
        m
    }
}

/// RFC 8439 2.8's tag: Poly1305 under the one-time key `otk` over
/// `aad ‖ pad16 ‖ ciphertext ‖ pad16 ‖ u64le(len aad) ‖ u64le(len ciphertext)`.
pub fn poly1305_tag(otk: &TagMask, aad: &[u8], ciphertext: &[u8]) -> [u8; POLY1305_TAG_LEN] {
    let mut mac = poly::Poly1305::new(otk);
    mac.update_padded(aad);
    mac.update_padded(ciphertext);
    let mut lens = [0u8; 16];
    lens[..8].copy_from_slice(&(aad.len() as u64).to_le_bytes());
    lens[8..].copy_from_slice(&(ciphertext.len() as u64).to_le_bytes());
    mac.update_padded(&lens);
    mac.finish()
}

/// Which implementations run XChaCha20 and Poly1305 on this CPU, in words
/// (runs of 1 KiB and more: our sixteen-block kernel with AVX-512F; else
/// what the `chacha20` crate chooses: on x86-64 AVX2, else SSE2; NEON on
/// aarch64 builds with it, portable elsewhere; Poly1305 is ours, four
/// blocks at a time with AVX2, else 64-bit limbs).
pub fn backend() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if chacha_avx512::available() {
            "chacha20 avx512 16-way (warpfs-crypto), poly1305 avx2 4-way (warpfs-crypto)"
        } else if std::arch::is_x86_feature_detected!("avx2") {
            "chacha20 avx2, poly1305 avx2 4-way (warpfs-crypto)"
        } else {
            "chacha20 sse2, poly1305 64-bit (warpfs-crypto)"
        }
    }
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    {
        "chacha20 neon, poly1305 64-bit (warpfs-crypto)"
    }
    #[cfg(not(any(target_arch = "x86_64", all(target_arch = "aarch64", target_feature = "neon"))))]
    {
        "chacha20 portable, poly1305 64-bit (warpfs-crypto)"
    }
}

#[cfg(test)]
mod tests;
