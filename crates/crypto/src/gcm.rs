//! GCM tags over our own counter-mode output: tag = GHASH_H(A, C) ⊕ E(J0),
//! with H = E(0^128) and J0 = nonce ‖ 0x00000001 (NIST SP 800-38D, 96-bit IV).
//! Data keystream starts at counter 2, so the result is standard AES-GCM.
//! GHASH runs on the VPCLMULQDQ-512 kernel (`simd::ghash`) where the CPU has
//! it, else on the `ghash` crate.

use crate::aes_ctr::{ContentKey, Nonce};
use ghash::universal_hash::UniversalHash;
use ghash::GHash;
use subtle::ConstantTimeEq;

/// Length of a GCM tag in bytes.
pub const TAG_LEN: usize = 16;
/// Block counter of J0 (the tag mask E(J0)).
pub const J0_COUNTER: u32 = 1;
/// Block counter of the first data keystream block.
pub const DATA_COUNTER: u32 = 2;

/// Computes GCM tags for one content key.
#[derive(Clone)]
pub struct GcmTagger {
    /// GHASH keyed with H (the portable path; key material: locked, zeroed
    /// on drop, as is every clone made per tag with the `zeroize` feature).
    ghash: crate::locked::Locked<GHash>,
    /// The powers of H for the wide kernel (key material: locked, zeroed on drop).
    #[cfg(target_arch = "x86_64")]
    fast: Option<crate::locked::Locked<crate::simd::ghash::GhashKey>>,
}

impl GcmTagger {
    /// Derive H = E_K(0^128) and set up GHASH.
    pub fn new(key: &ContentKey) -> Self {
        let mut h = [0u8; 16];
        key.encrypt_block(&mut h);
        let ghash = crate::locked::Locked::new(GHash::new(&h.into()));
        #[cfg(target_arch = "x86_64")]
        let fast = crate::simd::ghash::GhashKey::new(&h).map(crate::locked::Locked::new);
        zeroize::Zeroize::zeroize(&mut h);
        Self {
            ghash,
            #[cfg(target_arch = "x86_64")]
            fast,
        }
    }

    /// Whether GHASH runs on the VPCLMULQDQ-512 kernel (else the `ghash` crate).
    pub fn is_vpclmul(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.fast.is_some()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The GCM tag of `ciphertext` with associated data `aad`, given the tag
    /// mask `ej0` = E_K(J0).
    pub fn tag(&self, aad: &[u8], ciphertext: &[u8], ej0: &[u8; 16]) -> [u8; TAG_LEN] {
        let s = self.ghash(aad, ciphertext);
        let mut t = [0u8; TAG_LEN];
        for i in 0..TAG_LEN {
            t[i] = s[i] ^ ej0[i];
        }
        t
    }

    /// The raw GHASH value S = GHASH_H(A, C) (lengths block included), before
    /// the XOR with E(J0). Lets a caller hash the ciphertext first and
    /// decrypt in place afterwards: tag = S ⊕ E(J0).
    pub fn ghash(&self, aad: &[u8], ciphertext: &[u8]) -> [u8; 16] {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = &self.fast {
            return k.ghash(aad, ciphertext);
        }
        self.ghash_portable(aad, ciphertext)
    }

    /// [`ghash`](Self::ghash) on the `ghash` crate whatever the CPU has: the
    /// reference the fast kernel is tested and measured against.
    pub fn ghash_portable(&self, aad: &[u8], ciphertext: &[u8]) -> [u8; 16] {
        let mut g = (*self.ghash).clone();
        g.update_padded(aad);
        g.update_padded(ciphertext);
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&((aad.len() as u64) * 8).to_be_bytes());
        lens[8..].copy_from_slice(&((ciphertext.len() as u64) * 8).to_be_bytes());
        g.update(&[lens.into()]);
        g.finalize().into()
    }

    /// Whether the GHASH key (H, and its powers for the wide kernel) is on
    /// locked pages (false where `mlock` is not allowed).
    pub fn key_is_locked(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Some(f) = &self.fast {
            if !f.is_locked() {
                return false;
            }
        }
        self.ghash.is_locked()
    }

    /// Constant-time comparison of a computed and a stored tag.
    pub fn verify(&self, aad: &[u8], ciphertext: &[u8], ej0: &[u8; 16], stored: &[u8; TAG_LEN]) -> bool {
        self.tag(aad, ciphertext, ej0).ct_eq(stored).into()
    }
}

/// E_K(J0) for a 96-bit nonce.
pub fn tag_mask(key: &ContentKey, nonce: &Nonce) -> [u8; 16] {
    let mut b = [0u8; 16];
    key.keystream(nonce, J0_COUNTER, &mut b);
    b
}

#[cfg(test)]
mod twofish_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn seal(key: &[u8], nonce: &Nonce, aad: &[u8], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
        let k = ContentKey::new(key).unwrap();
        let mut buf = pt.to_vec();
        k.xor_keystream(nonce, DATA_COUNTER, &mut buf);
        let t = GcmTagger::new(&k).tag(aad, &buf, &tag_mask(&k, nonce));
        (buf, t)
    }

    #[test]
    fn the_ghash_key_is_on_locked_pages() {
        let t = GcmTagger::new(&ContentKey::new(&[3u8; 32]).unwrap());
        // Root (CI) may lock; elsewhere RLIMIT_MEMLOCK may forbid it.
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain getrlimit into a local.
        unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
        let may_lock = unsafe { libc::geteuid() } == 0 || lim.rlim_cur >= 1 << 20;
        if !may_lock {
            warpfs_testkit::skip("RLIMIT_MEMLOCK below 1 MiB and not root: mlock is not allowed");
            return;
        }
        assert!(t.key_is_locked());
        let c = t.clone();
        assert!(c.key_is_locked(), "a clone keeps its key on locked pages too");
    }

    #[test]
    fn sp800_38d_test_case_16_aes256() {
        // GCM spec (McGrew & Viega) test case 16: AES-256, 96-bit IV, with AAD.
        let key = hex::decode("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308").unwrap();
        let nonce: Nonce = hex::decode("cafebabefacedbaddecaf888").unwrap().try_into().unwrap();
        let pt = hex::decode("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39").unwrap();
        let aad = hex::decode("feedfacedeadbeeffeedfacedeadbeefabaddad2").unwrap();
        let (ct, tag) = seal(&key, &nonce, &aad, &pt);
        assert_eq!(hex::encode(ct), "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662");
        assert_eq!(hex::encode(tag), "76fc6ece0f4e1768cddf8853bb2d551b");
    }

    #[test]
    fn sp800_38d_test_case_3_aes128() {
        let key = hex::decode("feffe9928665731c6d6a8f9467308308").unwrap();
        let nonce: Nonce = hex::decode("cafebabefacedbaddecaf888").unwrap().try_into().unwrap();
        let pt = hex::decode("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255").unwrap();
        let (ct, tag) = seal(&key, &nonce, &[], &pt);
        assert_eq!(hex::encode(ct), "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985");
        assert_eq!(hex::encode(tag), "4d5c2af327cd64a62cf35abd2ba6fab4");
    }

    #[test]
    fn empty_plaintext_test_case_1() {
        let (ct, tag) = seal(&[0u8; 16], &[0u8; 12], &[], &[]);
        assert!(ct.is_empty());
        assert_eq!(hex::encode(tag), "58e2fccefa7e3061367f1d57a4e7455a");
    }

    proptest::proptest! {
        /// Independent check: our CTR + GHASH equals the `aes-gcm` crate.
        #[test]
        fn matches_aes_gcm_crate(key in proptest::array::uniform32(0u8..), nonce in proptest::array::uniform12(0u8..),
                                 aad in proptest::collection::vec(0u8.., 0..40), pt in proptest::collection::vec(0u8.., 0..5000)) {
            use aes_gcm::aead::{AeadInOut, KeyInit};
            let (ct, tag) = seal(&key, &nonce, &aad, &pt);
            let c = aes_gcm::Aes256Gcm::new_from_slice(&key).unwrap();
            let mut buf = pt.clone();
            let t2 = c.encrypt_inout_detached(&nonce.into(), &aad, buf.as_mut_slice().into()).unwrap();
            proptest::prop_assert_eq!(&ct, &buf);
            proptest::prop_assert_eq!(&tag[..], &t2[..]);
            let k = ContentKey::new(&key).unwrap();
            let g = GcmTagger::new(&k);
            proptest::prop_assert!(g.verify(&aad, &ct, &tag_mask(&k, &nonce), &tag));
            let mut bad = tag; bad[0] ^= 1;
            proptest::prop_assert!(!g.verify(&aad, &ct, &tag_mask(&k, &nonce), &bad));
        }
    }
}
