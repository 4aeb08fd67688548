//! Keys and derivations of a reverse view (FORMAT.md 14): deterministic
//! file IDs, directory IVs and symlink seal nonces from the plaintext path
//! (HMAC-SHA256), and the synthetic block nonce, a PRF of the file ID, the
//! block number and the block's plaintext:
//!
//! `N = first 12 bytes of AES-256_Ke(GHASH_H(A = file ID ‖ u64be(block), P))`
//!
//! with `H = AES-256_Kh(0^128)` and GHASH including its lengths block, as
//! GCM computes it. GHASH is an almost-XOR-universal hash keyed by a secret
//! `H` and `Ke` is an independent key, so `N` is a PRF of `(A, P)` (the
//! hash-then-encrypt construction of AES-GCM-SIV's tag): equal plaintext at
//! the same block of the same file gives the same nonce, different
//! plaintext a different, unpredictable one.

use crate::aes_ctr::{ContentKey, Nonce, NONCE_LEN};
use crate::gcm::GcmTagger;
use crate::keys::MasterKey;
use crate::locked::Locked;
use hkdf::hmac::{Hmac, KeyInit, Mac};
use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::Zeroizing;

/// HKDF info of the HMAC key for IDs, directory IVs and seal nonces.
pub const INFO_REVERSE_IDS: &[u8] = b"warpfs v1 reverse ids";
/// HKDF info of the 64 bytes `Kh ‖ Ke` of the synthetic block nonce.
pub const INFO_REVERSE_NONCE: &[u8] = b"warpfs v1 reverse nonce";

/// Domain strings of the HMAC derivations (each followed by a NUL byte).
const DOM_FILE_ID: &[u8] = b"file id";
const DOM_DIR_IV: &[u8] = b"dir iv";
const DOM_SYMLINK: &[u8] = b"symlink";
const DOM_INODE: &[u8] = b"inode";

/// The derivation keys of a reverse view. Zeroized on drop; `Debug` never
/// shows them.
pub struct ReverseKeys {
    ids: Locked<[u8; 32]>,
    hash: GcmTagger,
    enc: ContentKey,
}

impl std::fmt::Debug for ReverseKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReverseKeys(..)")
    }
}

impl ReverseKeys {
    /// Derive the keys from the master key (HKDF-SHA256, no salt).
    pub fn derive(master: &MasterKey) -> Self {
        let hk = Hkdf::<Sha256>::new(None, master.as_bytes());
        let mut ids = Locked::new([0u8; 32]);
        hk.expand(INFO_REVERSE_IDS, &mut *ids)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        let mut okm = Zeroizing::new([0u8; 64]);
        hk.expand(INFO_REVERSE_NONCE, &mut okm[..])
            .expect("64 bytes is a valid HKDF-SHA256 output length");
        let kh = ContentKey::new(&okm[..32]).expect("32-byte key");
        let enc = ContentKey::new(&okm[32..]).expect("32-byte key");
        Self {
            ids,
            hash: GcmTagger::new(&kh),
            enc,
        }
    }

    fn hmac(&self, domain: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&*self.ids).expect("HMAC takes any key length");
        m.update(domain);
        m.update(&[0]);
        for p in parts {
            m.update(&(p.len() as u64).to_be_bytes());
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// The file ID of the regular file at plaintext path `rel` (relative to
    /// the plaintext root, names joined by `/`).
    pub fn file_id(&self, rel: &[u8]) -> [u8; 16] {
        first16(&self.hmac(DOM_FILE_ID, &[rel]))
    }

    /// The name IV of the directory at plaintext path `rel` (empty: the root).
    pub fn dir_iv(&self, rel: &[u8]) -> [u8; 16] {
        first16(&self.hmac(DOM_DIR_IV, &[rel]))
    }

    /// The seal nonce of the symlink at `rel` with target `target`.
    pub fn symlink_nonce(&self, rel: &[u8], target: &[u8]) -> [u8; 16] {
        first16(&self.hmac(DOM_SYMLINK, &[rel, target]))
    }

    /// A 63-bit number for an entry that cannot use its plaintext inode
    /// number (`kind` says which sort of entry), with the top bit set.
    pub fn inode(&self, kind: &[u8], rel: &[u8]) -> u64 {
        let h = self.hmac(DOM_INODE, &[kind, rel]);
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[..8]);
        u64::from_be_bytes(b) | (1 << 63)
    }

    /// The synthetic nonce of block `block` of the file with ID `file_id`
    /// whose plaintext is `plain` (never all zeros: an all-zero entry means
    /// "never written").
    pub fn block_nonce(&self, file_id: &[u8; 16], block: u64, plain: &[u8]) -> Nonce {
        let s = self.hash.ghash(&block_aad(file_id, block), plain);
        let mut x = s;
        self.enc.encrypt_block(&mut x);
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(&x[..NONCE_LEN]);
        if n == [0u8; NONCE_LEN] {
            n[NONCE_LEN - 1] = 1;
        }
        n
    }
}

/// `file ID ‖ u64be(block)`: the GCM associated data of a block (FORMAT.md
/// 3.5) and the hashed prefix of its synthetic nonce.
pub fn block_aad(file_id: &[u8; 16], block: u64) -> [u8; 24] {
    let mut a = [0u8; 24];
    a[..16].copy_from_slice(file_id);
    a[16..].copy_from_slice(&block.to_be_bytes());
    a
}

fn first16(h: &[u8; 32]) -> [u8; 16] {
    let mut o = [0u8; 16];
    o.copy_from_slice(&h[..16]);
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::BlockCipherEncrypt;
    use ghash::universal_hash::UniversalHash;

    fn keys() -> ReverseKeys {
        ReverseKeys::derive(&MasterKey::from_bytes(&[0x42; 32]).unwrap())
    }

    /// The nonce computed with nothing of ours but HKDF: the `aes` crate
    /// and the `ghash` crate, as FORMAT.md 14 writes it.
    fn independent_nonce(master: &[u8; 32], file_id: &[u8; 16], block: u64, plain: &[u8]) -> [u8; 12] {
        let mut okm = [0u8; 64];
        Hkdf::<Sha256>::new(None, master)
            .expand(b"warpfs v1 reverse nonce", &mut okm)
            .unwrap();
        let kh = aes::Aes256::new_from_slice(&okm[..32]).unwrap();
        let ke = aes::Aes256::new_from_slice(&okm[32..]).unwrap();
        let mut h = aes::Block::default();
        kh.encrypt_block(&mut h);
        let mut g = ghash::GHash::new(&h);
        let mut a = file_id.to_vec();
        a.extend_from_slice(&block.to_be_bytes());
        g.update_padded(&a);
        g.update_padded(plain);
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&((a.len() as u64) * 8).to_be_bytes());
        lens[8..].copy_from_slice(&((plain.len() as u64) * 8).to_be_bytes());
        g.update(&[lens.into()]);
        let mut s: aes::Block = g.finalize();
        ke.encrypt_block(&mut s);
        s[..12].try_into().unwrap()
    }

    #[test]
    fn nonce_matches_an_independent_computation() {
        let k = keys();
        for (len, block) in [(0usize, 0u64), (1, 1), (15, 7), (16, 16), (100, 300), (4096, 1 << 40)] {
            let plain: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let id = [len as u8; 16];
            assert_eq!(
                k.block_nonce(&id, block, &plain),
                independent_nonce(&[0x42; 32], &id, block, &plain),
                "len {len} block {block}"
            );
        }
    }

    #[test]
    fn known_answers() {
        // Fixed values of this format: a change here breaks every reverse
        // backup's incrementality (FORMAT.md 14).
        let k = keys();
        let n = k.block_nonce(&[1; 16], 2, b"hello");
        assert_eq!(n, independent_nonce(&[0x42; 32], &[1; 16], 2, b"hello"));
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&{
            let mut ids = [0u8; 32];
            Hkdf::<Sha256>::new(None, &[0x42; 32])
                .expand(b"warpfs v1 reverse ids", &mut ids)
                .unwrap();
            ids
        })
        .unwrap();
        m.update(b"file id\0");
        m.update(&3u64.to_be_bytes());
        m.update(b"a/b");
        let want: [u8; 32] = m.finalize().into_bytes().into();
        assert_eq!(k.file_id(b"a/b"), first16(&want));
    }

    #[test]
    fn every_input_changes_the_nonce() {
        let k = keys();
        let base = k.block_nonce(&[1; 16], 5, &[9; 4096]);
        assert_ne!(base, k.block_nonce(&[2; 16], 5, &[9; 4096]));
        assert_ne!(base, k.block_nonce(&[1; 16], 6, &[9; 4096]));
        let mut p = [9u8; 4096];
        p[4095] = 8;
        assert_ne!(base, k.block_nonce(&[1; 16], 5, &p));
        // A shorter block with the same prefix differs (the lengths block).
        assert_ne!(base, k.block_nonce(&[1; 16], 5, &[9; 4095]));
        assert_eq!(base, k.block_nonce(&[1; 16], 5, &[9; 4096]));
        // Another master key, other nonces.
        let other = ReverseKeys::derive(&MasterKey::from_bytes(&[0x43; 32]).unwrap());
        assert_ne!(base, other.block_nonce(&[1; 16], 5, &[9; 4096]));
    }

    #[test]
    fn derivations_are_separated() {
        let k = keys();
        assert_ne!(k.file_id(b"x"), k.dir_iv(b"x"));
        assert_ne!(k.file_id(b"x"), k.file_id(b"y"));
        assert_ne!(k.symlink_nonce(b"a", b"bc"), k.symlink_nonce(b"ab", b"c"));
        assert!(k.inode(b"f", b"x") >> 63 == 1);
        assert_ne!(k.inode(b"f", b"x"), k.inode(b"d", b"x"));
        assert_eq!(format!("{k:?}"), "ReverseKeys(..)");
    }
}
