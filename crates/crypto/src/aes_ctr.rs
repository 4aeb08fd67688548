//! Counter-mode keystream ("masks") of a 128-bit block cipher with the NIST
//! GCM counter layout: counter block = 96-bit nonce ‖ 32-bit big-endian
//! block counter. The cipher is AES, or Twofish (FORMAT.md section 11:
//! the same layout, our own `crate::twofish` over counter blocks). On CPUs
//! with VAES-512 the keystream is made by `simd::aes` (counter blocks in
//! registers, written or XORed straight into the caller's buffer); elsewhere
//! by the `aes` crate's `encrypt_blocks` over counter blocks on the stack.

use crate::block_cipher::XtsCipher;
use crate::error::KeyLengthError;
use crate::locked::Locked;
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::{Aes128, Aes256, Block};

/// Length of a block nonce in bytes (96 bits, as GCM uses).
pub const NONCE_LEN: usize = 12;
/// A 96-bit nonce.
pub type Nonce = [u8; NONCE_LEN];

/// Counter blocks encrypted per inner step; large enough for VAES pipelines,
/// small enough to stay on the stack.
const CHUNK_BLOCKS: usize = 64;

#[derive(Clone)]
enum Cipher {
    Aes128(Aes128),
    Aes256(Aes256),
    /// Its tables sit on locked pages of their own.
    Twofish(crate::twofish::Twofish),
}

/// Both expansions of one key: the `aes` crate's (ECB, and CTR without
/// VAES) and, where the CPU has VAES-512, ours for the CTR kernel.
#[derive(Clone)]
struct Keys {
    cipher: Cipher,
    #[cfg(target_arch = "x86_64")]
    fast: Option<crate::simd::aes::RoundKeys>,
}

/// An expanded content key (AES, or Twofish: [`ContentKey::with_cipher`]).
/// Locked in RAM and zeroized on drop (`Locked` overwrites both
/// expansions; the `aes` crate's `zeroize` feature also clears its round
/// keys).
#[derive(Clone)]
pub struct ContentKey {
    keys: Locked<Keys>,
}

impl std::fmt::Debug for ContentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContentKey(..)")
    }
}

impl ContentKey {
    /// Expand a 16-byte (AES-128) or 32-byte (AES-256) key.
    pub fn new(key: &[u8]) -> Result<Self, KeyLengthError> {
        let cipher = match key.len() {
            16 => Cipher::Aes128(Aes128::new_from_slice(key).map_err(|_| KeyLengthError)?),
            32 => Cipher::Aes256(Aes256::new_from_slice(key).map_err(|_| KeyLengthError)?),
            _ => return Err(KeyLengthError),
        };
        Ok(Self {
            keys: Locked::new(Keys {
                cipher,
                #[cfg(target_arch = "x86_64")]
                fast: crate::simd::aes::RoundKeys::new(key),
            }),
        })
    }

    /// Expand a 16- or 32-byte key of `cipher` (AES: as [`new`](Self::new)).
    pub fn with_cipher(cipher: XtsCipher, key: &[u8]) -> Result<Self, KeyLengthError> {
        match cipher {
            XtsCipher::Aes => Self::new(key),
            XtsCipher::Twofish => {
                if !matches!(key.len(), 16 | 32) {
                    return Err(KeyLengthError);
                }
                Ok(Self {
                    keys: Locked::new(Keys {
                        cipher: Cipher::Twofish(crate::twofish::Twofish::new(key)?),
                        #[cfg(target_arch = "x86_64")]
                        fast: None,
                    }),
                })
            }
        }
    }

    /// The block cipher.
    pub fn cipher(&self) -> XtsCipher {
        match self.keys.cipher {
            Cipher::Twofish(_) => XtsCipher::Twofish,
            _ => XtsCipher::Aes,
        }
    }

    /// Whether the keystream runs on the VAES-512 kernel (else the `aes`
    /// crate's `encrypt_blocks`).
    pub fn is_vaes(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.fast.is_some()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Key size in bits.
    pub fn bits(&self) -> u32 {
        match &self.keys.cipher {
            Cipher::Aes128(_) => 128,
            Cipher::Aes256(_) => 256,
            Cipher::Twofish(t) => t.bits(),
        }
    }

    /// Encrypt blocks in place (ECB); the building block of every mask.
    #[inline]
    pub fn encrypt_blocks(&self, blocks: &mut [Block]) {
        match &self.keys.cipher {
            Cipher::Aes128(c) => c.encrypt_blocks(blocks),
            Cipher::Aes256(c) => c.encrypt_blocks(blocks),
            Cipher::Twofish(c) => c.encrypt_blocks(Block::cast_slice_to_core_mut(blocks)),
        }
    }

    /// Encrypt one 16-byte block.
    pub fn encrypt_block(&self, block: &mut [u8; 16]) {
        let mut b = Block::from(*block);
        self.encrypt_blocks(std::slice::from_mut(&mut b));
        *block = b.into();
    }

    /// Write the keystream for `nonce`, starting at block counter `counter`,
    /// into `out` (any length; a partial last block is truncated).
    pub fn keystream(&self, nonce: &Nonce, counter: u32, out: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = &self.keys.fast {
            return crate::simd::aes::ctr(k, nonce, counter, out, false);
        }
        self.walk(nonce, counter, out, |dst, ks| dst.copy_from_slice(ks));
    }

    /// XOR the keystream for `nonce`, starting at block counter `counter`,
    /// into `buf`. Encryption and decryption are the same operation.
    pub fn xor_keystream(&self, nonce: &Nonce, counter: u32, buf: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = &self.keys.fast {
            return crate::simd::aes::ctr(k, nonce, counter, buf, true);
        }
        self.walk(nonce, counter, buf, xor_in_place);
    }

    /// [`keystream`](Self::keystream) / [`xor_keystream`](Self::xor_keystream)
    /// on the portable path only (the `aes` crate), whatever the CPU has:
    /// the reference the fast kernel is tested and measured against.
    pub fn keystream_portable(&self, nonce: &Nonce, counter: u32, buf: &mut [u8], xor: bool) {
        if xor {
            self.walk(nonce, counter, buf, xor_in_place);
        } else {
            self.walk(nonce, counter, buf, |dst, ks| dst.copy_from_slice(ks));
        }
    }

    fn walk(&self, nonce: &Nonce, counter: u32, buf: &mut [u8], mut f: impl FnMut(&mut [u8], &[u8])) {
        let mut blocks = [Block::default(); CHUNK_BLOCKS];
        let mut ctr = counter;
        for chunk in buf.chunks_mut(CHUNK_BLOCKS * 16) {
            let n = chunk.len().div_ceil(16);
            for b in blocks[..n].iter_mut() {
                b[..NONCE_LEN].copy_from_slice(nonce);
                b[NONCE_LEN..].copy_from_slice(&ctr.to_be_bytes());
                ctr = ctr.wrapping_add(1);
            }
            self.encrypt_blocks(&mut blocks[..n]);
            let ks: &[u8] = blocks_as_bytes(&blocks[..n]);
            f(chunk, &ks[..chunk.len()]);
        }
    }
}

fn blocks_as_bytes(blocks: &[Block]) -> &[u8] {
    // `Block` is `Array<u8, U16>`; hybrid-array flattens a slice of them safely.
    Block::slice_as_flattened(blocks)
}

/// `dst ^= src` over the common length: 512-bit vectors where the CPU has
/// AVX-512 (the XOR of a ready mask, the whole of a `ctr` read's crypto),
/// else a loop the compiler vectorises.
#[inline]
pub fn xor_in_place(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if dst.len().min(src.len()) >= 256 && crate::simd::has_vaes512() {
        return crate::simd::xor::xor_in_place(dst, src);
    }
    xor_portable(dst, src);
}

/// [`xor_in_place`] without the AVX-512 path.
fn xor_portable(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (d, s) = (&mut dst[..n], &src[..n]);
    let mut dc = d.chunks_exact_mut(8);
    let mut sc = s.chunks_exact(8);
    for (a, b) in (&mut dc).zip(&mut sc) {
        let x = u64::from_ne_bytes(a.try_into().unwrap()) ^ u64::from_ne_bytes(b.try_into().unwrap());
        a.copy_from_slice(&x.to_ne_bytes());
    }
    for (a, b) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
        *a ^= b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // NIST SP 800-38A F.5.1 (CTR-AES128) and F.5.5 (CTR-AES256): the initial
    // counter block f0f1..fbfc fdfeff splits as nonce f0..fb, counter fcfdfeff.
    const PT: &str = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";

    fn kat(key: &str, ct: &str) {
        let k = ContentKey::new(&hex::decode(key).unwrap()).unwrap();
        let nonce: Nonce = hex::decode("f0f1f2f3f4f5f6f7f8f9fafb").unwrap().try_into().unwrap();
        let mut buf = hex::decode(PT).unwrap();
        // counter fcfdfeff wraps to 0 after the 4th block: covered by wrapping_add.
        k.xor_keystream(&nonce, 0xfcfd_feff, &mut buf);
        assert_eq!(hex::encode(&buf), ct);
        k.xor_keystream(&nonce, 0xfcfd_feff, &mut buf);
        assert_eq!(hex::encode(&buf), PT);
    }

    #[test]
    fn sp800_38a_ctr_aes128() {
        kat(
            "2b7e151628aed2a6abf7158809cf4f3c",
            "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee",
        );
    }

    #[test]
    fn sp800_38a_ctr_aes256() {
        kat(
            "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
            "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c52b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6",
        );
    }

    #[test]
    fn keystream_is_position_consistent() {
        // Keystream from counter c at byte offset 16*i equals keystream from counter c+i.
        let k = ContentKey::new(&[7u8; 32]).unwrap();
        let n = [9u8; 12];
        let mut a = vec![0u8; 4096 + 16];
        k.keystream(&n, 1, &mut a);
        let mut b = vec![0u8; 4096];
        k.keystream(&n, 2, &mut b);
        assert_eq!(&a[16..], &b[..]);
        let mut odd = vec![0u8; 1001];
        k.keystream(&n, 1, &mut odd);
        assert_eq!(&odd[..], &a[..1001]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(warpfs_testkit::cases(200)))]
        /// The key's keystream (VAES kernel where the CPU has it) equals the
        /// definition: counter blocks nonce ‖ BE32(counter + i), wrapping,
        /// each encrypted with the `aes` crate; for any length and counter.
        #[test]
        fn keystream_equals_the_counter_block_definition(
            long in proptest::bool::ANY,
            key in proptest::collection::vec(0u8.., 32),
            nonce in proptest::array::uniform12(0u8..),
            counter in proptest::prop_oneof![0u32..8, (u32::MAX - 300)..=u32::MAX, proptest::num::u32::ANY],
            data in proptest::collection::vec(0u8.., 0..4200),
        ) {
            let key = if long { &key[..] } else { &key[..16] };
            let k = ContentKey::new(key).unwrap();
            let mut want_ks = vec![0u8; data.len()];
            let mut ctr = counter;
            for chunk in want_ks.chunks_mut(16) {
                let mut b = [0u8; 16];
                b[..12].copy_from_slice(&nonce);
                b[12..].copy_from_slice(&ctr.to_be_bytes());
                k.encrypt_block(&mut b);
                chunk.copy_from_slice(&b[..chunk.len()]);
                ctr = ctr.wrapping_add(1);
            }
            let mut ks = vec![0u8; data.len()];
            k.keystream(&nonce, counter, &mut ks);
            proptest::prop_assert_eq!(&ks, &want_ks);
            let mut x = data.clone();
            k.xor_keystream(&nonce, counter, &mut x);
            let want_x: Vec<u8> = data.iter().zip(&want_ks).map(|(a, b)| a ^ b).collect();
            proptest::prop_assert_eq!(&x, &want_x);
            let mut p = data.clone();
            k.keystream_portable(&nonce, counter, &mut p, true);
            proptest::prop_assert_eq!(&p, &want_x);
        }
    }

    #[test]
    fn bad_key_length_is_an_error() {
        assert!(ContentKey::new(&[0u8; 24]).is_err());
        assert!(ContentKey::new(&[]).is_err());
    }
}
