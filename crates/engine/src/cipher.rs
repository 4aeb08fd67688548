//! The cipher part of mask making: keystream from a (key, nonce, counter)
//! with the NIST counter layout (counter block = nonce(12) ‖ u32 big-endian
//! counter, wrapping like GCM's inc32), on warpfs-crypto's VAES-512 kernel
//! (counter blocks in registers, the mask written in place) when the CPU
//! has it, else on AES-NI through the `aes` 0.9 crate, or on a software AES
//! chosen at run time; Twofish the same way; and XChaCha20 (FORMAT.md 15:
//! the counter counts 64-byte ChaCha20 blocks of the nonce's stream) on
//! warpfs-crypto's `XChaChaKey`. [`MaskCipher::layout`] says where a
//! block's tag mask and data lie in a mask.
//!
//! Why two crates: `aes` 0.9 selects its portable backend only at compile
//! time (`RUSTFLAGS='--cfg aes_backend="soft"'`, which then applies to the
//! whole build), and exposes no runtime switch. `aes` 0.7 with its
//! `force-soft` feature is a separate, software-only build of the same
//! constant-time fixsliced implementation that links beside 0.9, so one
//! binary can run the papers' "AES-NI off" experiments by setting
//! `WARPFS_NO_AESNI=1` (or `EngineConfig::software_aes`). aes 0.7 has no
//! `zeroize` feature, so its round keys live in a `warpfs_crypto::Locked`,
//! which locks them in RAM and zeroes them on drop.
//!
//! Every copy of key material a `MaskCipher` holds is on locked pages,
//! left out of core dumps and zeroed on drop: the expanded keys (in
//! `ContentKey` or `Locked`), the raw key kept for a device backend and a
//! Twofish key's device tables (`LockedBytes`, `LockedWords`).

use crate::EngineError;
use aes::Block;
use aes07::cipher::{BlockEncrypt, NewBlockCipher};
use warpfs_crypto::{ContentCipher, ContentKey, LockedBytes, LockedWords, MaskLayout, Nonce, XChaChaKey, XtsCipher};

/// Counter blocks per inner step of the software loop (on the stack).
const SOFT_CHUNK: usize = 64;

/// The `aes` 0.9 path where the CPU has AES instructions (detected at run
/// time by the crate: AES-NI/VAES on x86-64, ARMv8 AES on aarch64).
#[cfg(target_arch = "aarch64")]
const HARDWARE_AES: &str = "armv8 aes (aes 0.9 encrypt_blocks)";
#[cfg(not(target_arch = "aarch64"))]
const HARDWARE_AES: &str = "aes-ni/vaes (aes 0.9 encrypt_blocks)";

type SoftBlock = aes07::Block;

// One per key, built once and shared behind an `Arc`: size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Soft {
    A128(aes07::Aes128),
    A256(aes07::Aes256),
}

#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Inner {
    /// warpfs-crypto's `ContentKey`: its VAES-512 kernel when the CPU has
    /// it, else `aes` 0.9 (AES-NI detected at run time, software if absent).
    Hw(ContentKey),
    /// The same key on the `aes` 0.9 crate's `encrypt_blocks` only, even
    /// where the kernel could run: the baseline the benchmarks compare with.
    AesCrate(ContentKey),
    /// Forced software AES (`aes` 0.7, `force-soft`).
    /// On locked pages, zeroed on drop (aes 0.7 has no zeroize of its own).
    Soft(warpfs_crypto::Locked<Soft>),
    /// XChaCha20 (its key on locked pages); never sent to a device.
    XChaCha(XChaChaKey),
}

/// An expanded content key that makes masks: AES-128/256, Twofish or XChaCha20.
#[derive(Clone)]
pub struct MaskCipher {
    inner: Inner,
    /// The raw key when it was added as bytes: what a device backend
    /// uploads (it expands the key itself). On locked pages, zeroed on
    /// drop.
    raw: Option<LockedBytes>,
    /// Twofish keys added as bytes: the tables and subkeys a device
    /// backend uploads (`Twofish::device_words`), expanded once here. On
    /// locked pages, zeroed on drop.
    device: Option<LockedWords>,
    /// How long one 4 KiB mask takes on this cpu (measured once, on first
    /// use: [`mask_time`](Self::mask_time)).
    mask_time: std::sync::Arc<std::sync::OnceLock<std::time::Duration>>,
}

impl std::fmt::Debug for MaskCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MaskCipher({}-{}, {})",
            self.cipher().as_str(),
            self.bits(),
            self.implementation()
        )
    }
}

impl MaskCipher {
    /// Wrap a content key: always the `aes` 0.9 path (it cannot be switched
    /// to software at run time, see the module docs).
    pub fn from_content_key(key: ContentKey) -> Self {
        Self {
            inner: Inner::Hw(key),
            raw: None,
            device: None,
            mask_time: Default::default(),
        }
    }

    /// Expand a raw 16- or 32-byte key on the `aes` 0.9 crate's
    /// `encrypt_blocks` only (never the VAES kernel), for benchmarks that
    /// compare the two.
    pub fn new_aes_crate(raw: &[u8]) -> Result<Self, EngineError> {
        let k = ContentKey::new(raw).map_err(|_| EngineError::KeyLength)?;
        Ok(Self {
            inner: Inner::AesCrate(k),
            raw: Some(LockedBytes::from_slice(raw)),
            device: None,
            mask_time: Default::default(),
        })
    }

    /// Expand a raw 16- or 32-byte key, on the forced software AES when
    /// `software` is set.
    pub fn new(raw: &[u8], software: bool) -> Result<Self, EngineError> {
        if !software {
            let k = ContentKey::new(raw).map_err(|_| EngineError::KeyLength)?;
            return Ok(Self {
                inner: Inner::Hw(k),
                raw: Some(LockedBytes::from_slice(raw)),
                device: None,
                mask_time: Default::default(),
            });
        }
        let soft = match raw.len() {
            16 => Soft::A128(aes07::Aes128::new_from_slice(raw).map_err(|_| EngineError::KeyLength)?),
            32 => Soft::A256(aes07::Aes256::new_from_slice(raw).map_err(|_| EngineError::KeyLength)?),
            _ => return Err(EngineError::KeyLength),
        };
        Ok(Self {
            inner: Inner::Soft(warpfs_crypto::Locked::new(soft)),
            raw: Some(LockedBytes::from_slice(raw)),
            device: None,
            mask_time: Default::default(),
        })
    }

    /// Expand a raw 16- or 32-byte key of `cipher`: AES as [`new`](Self::new);
    /// Twofish (FORMAT.md 11) on warpfs-crypto's own implementation, with
    /// the tables a device backend uploads expanded once
    /// ([`twofish_device_words`](Self::twofish_device_words)); XChaCha20
    /// (FORMAT.md 15, 32 bytes only), which keeps no raw key for a device:
    /// its masks are always made on the cpu.
    pub fn with_cipher(cipher: impl Into<ContentCipher>, raw: &[u8], software: bool) -> Result<Self, EngineError> {
        match cipher.into() {
            ContentCipher::Aes => Self::new(raw, software),
            ContentCipher::XChaCha20 => Ok(Self {
                inner: Inner::XChaCha(XChaChaKey::new(raw).map_err(|_| EngineError::KeyLength)?),
                raw: None,
                device: None,
                mask_time: Default::default(),
            }),
            ContentCipher::Twofish => {
                let k = ContentKey::with_cipher(XtsCipher::Twofish, raw).map_err(|_| EngineError::KeyLength)?;
                let tf = warpfs_crypto::twofish::Twofish::new(raw).map_err(|_| EngineError::KeyLength)?;
                Ok(Self {
                    inner: Inner::Hw(k),
                    raw: Some(LockedBytes::from_slice(raw)),
                    device: Some(tf.device_words()),
                    mask_time: Default::default(),
                })
            }
        }
    }

    /// A Twofish key's tables and subkeys as the device mask kernel takes
    /// them (`Twofish::device_words`); `None` for AES keys.
    pub fn twofish_device_words(&self) -> Option<&[u32]> {
        self.device.as_deref()
    }

    /// The cipher.
    pub fn cipher(&self) -> ContentCipher {
        match &self.inner {
            Inner::Hw(k) | Inner::AesCrate(k) => k.cipher().into(),
            Inner::Soft(_) => ContentCipher::Aes,
            Inner::XChaCha(_) => ContentCipher::XChaCha20,
        }
    }

    /// Where a block's tag mask and data keystream lie in this key's masks
    /// (counter 1 on for a block cipher, ChaCha20 block 0 on for XChaCha20).
    pub fn layout(&self) -> MaskLayout {
        match &self.inner {
            Inner::XChaCha(_) => MaskLayout::XCHACHA,
            _ => MaskLayout::BLOCK,
        }
    }

    /// Whether this key's cipher runs in software (forced software AES, AES
    /// on a CPU without AES-NI, Twofish, XChaCha20): where masks made ahead pay.
    pub fn is_slow(&self) -> bool {
        self.is_software() || self.cipher() != ContentCipher::Aes || !aes::hardware_accelerated()
    }

    /// How long this key takes to make one 4 KiB mask on this cpu: the
    /// faster of two timed fills, measured on first use and kept. What an
    /// apply that finds a worker making its mask may wait before making
    /// the bytes itself (a slow cipher's worker needs this long; a fast
    /// one's far less).
    pub fn mask_time(&self) -> std::time::Duration {
        *self.mask_time.get_or_init(|| {
            let mut buf = zeroize::Zeroizing::new(vec![0u8; 4096]);
            let nonce: Nonce = [0u8; warpfs_crypto::aes_ctr::NONCE_LEN];
            (0..2)
                .map(|_| {
                    let t0 = std::time::Instant::now();
                    self.fill(&nonce, 0, &mut buf);
                    t0.elapsed()
                })
                .min()
                .unwrap_or_default()
        })
    }

    /// The raw key bytes, when the key was added as bytes (a device backend
    /// needs them; keys wrapped from a `ContentKey` stay on the cpu).
    pub fn raw_key(&self) -> Option<&[u8]> {
        self.raw.as_deref()
    }

    /// Key size in bits (128 or 256).
    pub fn bits(&self) -> u32 {
        match &self.inner {
            Inner::Hw(k) | Inner::AesCrate(k) => k.bits(),
            Inner::XChaCha(k) => k.bits(),
            Inner::Soft(s) => match **s {
                Soft::A128(_) => 128,
                Soft::A256(_) => 256,
            },
        }
    }

    /// Whether this key runs on the forced software AES.
    pub fn is_software(&self) -> bool {
        matches!(self.inner, Inner::Soft(_))
    }

    /// Which implementation runs this key, in words.
    pub fn implementation(&self) -> &'static str {
        match &self.inner {
            Inner::XChaCha(_) => warpfs_crypto::xchacha::backend(),
            Inner::Hw(k) if k.cipher() == XtsCipher::Twofish => {
                "twofish (warpfs-crypto, full keying, 3 blocks in lock-step)"
            }
            Inner::Soft(_) => "software (aes 0.7 fixslice, forced)",
            Inner::Hw(k) if k.is_vaes() => "vaes-512 kernel (warpfs-crypto)",
            Inner::Hw(_) | Inner::AesCrate(_) if aes::hardware_accelerated() => HARDWARE_AES,
            Inner::Hw(_) | Inner::AesCrate(_) => {
                "software (aes 0.9, no AES instructions on this CPU or --cfg aes_backend=\"soft\")"
            }
        }
    }

    /// Write the keystream for `nonce` from block counter `counter` into
    /// `out` (any length; a partial last block is cut).
    pub fn fill(&self, nonce: &Nonce, counter: u32, out: &mut [u8]) {
        match &self.inner {
            Inner::XChaCha(k) => k.keystream(nonce, counter, out),
            Inner::Hw(k) if k.is_vaes() => k.keystream(nonce, counter, out),
            Inner::Hw(k) | Inner::AesCrate(k) => hw_fill(k, nonce, counter, out),
            Inner::Soft(s) => soft_walk(s, nonce, counter, out, |d, k| d.copy_from_slice(k)),
        }
    }

    /// XOR keystream bytes `[pos, pos + buf.len())` of the stream that starts
    /// at block counter `counter` into `buf`. `pos` need not be a multiple of
    /// the block. The caller keeps `pos + len` within 2^32 blocks.
    pub fn xor_at(&self, nonce: &Nonce, counter: u32, pos: u64, buf: &mut [u8]) {
        if let Inner::XChaCha(k) = &self.inner {
            return k.xor_at(nonce, counter, pos, buf);
        }
        let mut ctr = counter.wrapping_add((pos / 16) as u32);
        let skip = (pos % 16) as usize;
        let mut rest = buf;
        if skip != 0 {
            let mut ks = [0u8; 16];
            self.fill(nonce, ctr, &mut ks);
            let n = rest.len().min(16 - skip);
            let (head, tail) = rest.split_at_mut(n);
            warpfs_crypto::aes_ctr::xor_in_place(head, &ks[skip..skip + n]);
            rest = tail;
            ctr = ctr.wrapping_add(1);
        }
        if rest.is_empty() {
            return;
        }
        match &self.inner {
            Inner::Hw(k) => k.xor_keystream(nonce, ctr, rest),
            Inner::AesCrate(k) => k.keystream_portable(nonce, ctr, rest, true),
            Inner::Soft(s) => soft_walk(s, nonce, ctr, rest, warpfs_crypto::aes_ctr::xor_in_place),
            Inner::XChaCha(_) => unreachable!("XChaCha20 returned above"),
        }
    }

    /// Encrypt `data` in place as independent blocks (ECB); `data.len()`
    /// must be a multiple of 16 (a partial tail is left alone). Only for
    /// measuring the cipher's ceiling of the same implementation (XChaCha20,
    /// a stream cipher, XORs its stream of an all-zero nonce instead).
    pub fn ecb_in_place(&self, data: &mut [u8]) {
        match &self.inner {
            Inner::XChaCha(k) => k.xor_at(&[0u8; 12], 0, 0, data),
            Inner::Hw(k) | Inner::AesCrate(k) => {
                let (blocks, _) = Block::slice_as_chunks_mut(data);
                k.encrypt_blocks(blocks);
            }
            Inner::Soft(s) => {
                let mut tmp = [SoftBlock::default(); SOFT_CHUNK];
                for chunk in data.chunks_mut(SOFT_CHUNK * 16) {
                    let n = chunk.len() / 16;
                    for (b, c) in tmp[..n].iter_mut().zip(chunk.chunks_exact(16)) {
                        b.copy_from_slice(c);
                    }
                    soft_encrypt(s, &mut tmp[..n]);
                    for (b, c) in tmp[..n].iter().zip(chunk.chunks_exact_mut(16)) {
                        c.copy_from_slice(b);
                    }
                }
            }
        }
    }
}

/// Counter blocks encrypted per `encrypt_blocks` call of the hardware loop
/// (4 KiB: written and encrypted while still in L1).
const HW_CHUNK: usize = 256;

/// The mask loop of the `aes` 0.9 path: write the counter blocks straight
/// into `out` and encrypt them in place, so the keystream is never copied
/// (`ContentKey::keystream` builds blocks on the stack and copies them out).
fn hw_fill(k: &ContentKey, nonce: &Nonce, counter: u32, out: &mut [u8]) {
    let (blocks, tail) = Block::slice_as_chunks_mut(out);
    let mut ctr = counter;
    // The block's first 8 bytes are fixed; the last 8 are nonce[8..12] ‖ ctr
    // (big-endian), built as one integer so each block is two stores.
    let head: [u8; 8] = nonce[..8].try_into().expect("12-byte nonce");
    let mid = u64::from(u32::from_be_bytes(nonce[8..].try_into().expect("12-byte nonce"))) << 32;
    for chunk in blocks.chunks_mut(HW_CHUNK) {
        for b in chunk.iter_mut() {
            b[..8].copy_from_slice(&head);
            b[8..].copy_from_slice(&(mid | u64::from(ctr)).to_be_bytes());
            ctr = ctr.wrapping_add(1);
        }
        k.encrypt_blocks(chunk);
    }
    if !tail.is_empty() {
        let mut b = Block::default();
        counter_block(&mut b, nonce, ctr);
        k.encrypt_blocks(std::slice::from_mut(&mut b));
        let n = tail.len();
        tail.copy_from_slice(&b[..n]);
    }
}

#[inline(always)]
fn counter_block(b: &mut [u8], nonce: &Nonce, ctr: u32) {
    b[..12].copy_from_slice(nonce);
    b[12..16].copy_from_slice(&ctr.to_be_bytes());
}

fn soft_encrypt(s: &Soft, blocks: &mut [SoftBlock]) {
    match s {
        Soft::A128(c) => c.encrypt_blocks(blocks),
        Soft::A256(c) => c.encrypt_blocks(blocks),
    }
}

/// The software twin of `ContentKey::keystream`: fill counter blocks,
/// encrypt them, hand each chunk of keystream to `f`.
fn soft_walk(s: &Soft, nonce: &Nonce, counter: u32, buf: &mut [u8], mut f: impl FnMut(&mut [u8], &[u8])) {
    let mut blocks = [SoftBlock::default(); SOFT_CHUNK];
    let mut ks = [0u8; SOFT_CHUNK * 16];
    let mut ctr = counter;
    for chunk in buf.chunks_mut(SOFT_CHUNK * 16) {
        let n = chunk.len().div_ceil(16);
        for b in blocks[..n].iter_mut() {
            counter_block(b, nonce, ctr);
            ctr = ctr.wrapping_add(1);
        }
        soft_encrypt(s, &mut blocks[..n]);
        for (dst, b) in ks.chunks_exact_mut(16).zip(&blocks[..n]) {
            dst.copy_from_slice(b);
        }
        f(chunk, &ks[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // NIST SP 800-38A F.5.1 / F.5.5: initial counter block f0f1..fbfcfdfeff.
    const PT: &str = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";
    const K128: &str = "2b7e151628aed2a6abf7158809cf4f3c";
    const C128: &str = "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee";
    const K256: &str = "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4";
    const C256: &str = "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c52b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6";

    fn nonce() -> Nonce {
        hex::decode("f0f1f2f3f4f5f6f7f8f9fafb").unwrap().try_into().unwrap()
    }

    #[test]
    fn nist_ctr_vectors_on_both_implementations() {
        for software in [false, true] {
            for (k, c) in [(K128, C128), (K256, C256)] {
                let m = MaskCipher::new(&hex::decode(k).unwrap(), software).unwrap();
                assert_eq!(m.is_software(), software);
                let mut buf = hex::decode(PT).unwrap();
                m.xor_at(&nonce(), 0xfcfd_feff, 0, &mut buf);
                assert_eq!(hex::encode(&buf), c, "software={software}");
                // Unaligned pieces give the same stream.
                let mut buf = hex::decode(PT).unwrap();
                let (a, b) = buf.split_at_mut(21);
                m.xor_at(&nonce(), 0xfcfd_feff, 0, a);
                m.xor_at(&nonce(), 0xfcfd_feff, 21, b);
                assert_eq!(hex::encode(&buf), c);
            }
        }
    }

    #[test]
    fn software_and_hardware_agree_on_long_masks_and_ecb() {
        for key in [[7u8; 16].as_slice(), [9u8; 32].as_slice()] {
            let hw = MaskCipher::new(key, false).unwrap();
            let sw = MaskCipher::new(key, true).unwrap();
            let ac = MaskCipher::new_aes_crate(key).unwrap();
            let n = [3u8; 12];
            let (mut a, mut b) = (vec![0u8; 4096 + 16 + 5], vec![0u8; 4096 + 16 + 5]);
            hw.fill(&n, u32::MAX - 3, &mut a);
            sw.fill(&n, u32::MAX - 3, &mut b);
            assert_eq!(a, b);
            let mut c = vec![0u8; a.len()];
            ac.fill(&n, u32::MAX - 3, &mut c);
            assert_eq!(a, c);
            let (mut x1, mut x2) = (vec![0x77u8; 5000], vec![0x77u8; 5000]);
            hw.xor_at(&n, u32::MAX - 1, 7, &mut x1);
            ac.xor_at(&n, u32::MAX - 1, 7, &mut x2);
            assert_eq!(x1, x2);
            let mut ref_ks = vec![0u8; a.len()];
            ContentKey::new(key).unwrap().keystream(&n, u32::MAX - 3, &mut ref_ks);
            assert_eq!(a, ref_ks);
            let (mut e1, mut e2) = (vec![1u8; 16 * 100], vec![1u8; 16 * 100]);
            hw.ecb_in_place(&mut e1);
            sw.ecb_in_place(&mut e2);
            assert_eq!(e1, e2);
        }
    }

    #[test]
    fn twofish_masks_are_twofish_ctr() {
        for key in [[7u8; 16].as_slice(), [9u8; 32].as_slice()] {
            let m = MaskCipher::with_cipher(XtsCipher::Twofish, key, false).unwrap();
            assert_eq!(
                (m.cipher(), m.raw_key(), m.is_slow()),
                (ContentCipher::Twofish, Some(key), true)
            );
            let dev = warpfs_crypto::twofish::Twofish::new(key).unwrap().device_words();
            assert_eq!(m.twofish_device_words(), Some(&dev[..]));
            let reference = ContentKey::with_cipher(XtsCipher::Twofish, key).unwrap();
            let n = [3u8; 12];
            let (mut a, mut b) = (vec![0u8; 4096 + 21], vec![0u8; 4096 + 21]);
            m.fill(&n, u32::MAX - 3, &mut a);
            reference.keystream(&n, u32::MAX - 3, &mut b);
            assert_eq!(a, b);
            // Against the twofish-crate definition for the first block.
            let mut cb = [0u8; 16];
            cb[..12].copy_from_slice(&n);
            cb[12..].copy_from_slice(&(u32::MAX - 3).to_be_bytes());
            warpfs_crypto::twofish::Twofish::new(key)
                .unwrap()
                .encrypt_block(&mut cb);
            assert_eq!(&a[..16], &cb);
            let (mut x1, mut x2) = (vec![0x77u8; 5000], vec![0x77u8; 5000]);
            m.xor_at(&n, 5, 7, &mut x1);
            let mut ks = vec![0u8; 5007];
            reference.keystream(&n, 5, &mut ks);
            for (x, k) in x2.iter_mut().zip(&ks[7..]) {
                *x ^= k;
            }
            assert_eq!(x1, x2);
        }
        assert!(MaskCipher::new(&[1u8; 16], false).unwrap().cipher() == ContentCipher::Aes);
    }

    #[test]
    fn xchacha_masks_are_the_xchacha20_stream_and_stay_on_the_cpu() {
        let raw = [0x3cu8; 32];
        let m = MaskCipher::with_cipher(ContentCipher::XChaCha20, &raw, true).unwrap();
        assert_eq!(
            (m.cipher(), m.layout(), m.bits()),
            (ContentCipher::XChaCha20, MaskLayout::XCHACHA, 256)
        );
        assert!(m.is_slow() && !m.is_software());
        // No raw bytes for a device, no device tables.
        assert!(m.raw_key().is_none() && m.twofish_device_words().is_none());
        let reference = XChaChaKey::new(&raw).unwrap();
        let n = [0x11u8; 12];
        let (mut a, mut b) = (vec![0u8; 4160], vec![0u8; 4160]);
        m.fill(&n, 0, &mut a);
        reference.keystream(&n, 0, &mut b);
        assert_eq!(a, b);
        // Unaligned XOR at any offset is the same stream.
        let mut x = vec![0x77u8; 1000];
        m.xor_at(&n, 0, 101, &mut x);
        let want: Vec<u8> = a[101..1101].iter().map(|k| k ^ 0x77).collect();
        assert_eq!(x, want);
        assert!(MaskCipher::with_cipher(ContentCipher::XChaCha20, &[0u8; 16], false).is_err());
    }

    #[test]
    fn bad_key_lengths_are_errors() {
        for software in [false, true] {
            assert_eq!(
                MaskCipher::new(&[0u8; 24], software).unwrap_err(),
                EngineError::KeyLength
            );
            assert_eq!(MaskCipher::new(&[], software).unwrap_err(), EngineError::KeyLength);
        }
    }

    #[test]
    fn mask_time_is_measured_once_and_shared_by_clones() {
        let tf = MaskCipher::with_cipher(XtsCipher::Twofish, &[7u8; 32], false).unwrap();
        assert!(tf.is_slow());
        let t = tf.mask_time();
        assert!(t > std::time::Duration::ZERO);
        assert_eq!(tf.mask_time(), t);
        assert_eq!(tf.clone().mask_time(), t);
    }
}
