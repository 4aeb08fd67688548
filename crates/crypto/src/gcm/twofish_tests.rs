//! Twofish under the content modes of FORMAT.md section 11: CTR with the
//! NIST counter layout and GCM (GHASH with H = Twofish_K(0^128)), through
//! `ContentKey` and `GcmTagger` exactly as the AES modes run. Known
//! answers computed with libgcrypt 1.10.1 (`bench/twofish/gcry.c kat`, its
//! GCM over GCRY_CIPHER_TWOFISH), and property tests against the `twofish`
//! and `ghash` crates composed by hand.

use super::{tag_mask, GcmTagger, DATA_COUNTER};
use crate::aes_ctr::{ContentKey, Nonce};
use crate::block_cipher::XtsCipher;
use proptest::prelude::*;

fn seal(key: &[u8], nonce: &Nonce, aad: &[u8], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
    let k = ContentKey::with_cipher(XtsCipher::Twofish, key).unwrap();
    assert_eq!(k.cipher(), XtsCipher::Twofish);
    let mut buf = pt.to_vec();
    k.xor_keystream(nonce, DATA_COUNTER, &mut buf);
    let t = GcmTagger::new(&k).tag(aad, &buf, &tag_mask(&k, nonce));
    (buf, t)
}

#[test]
fn twofish_gcm_matches_libgcrypt() {
    let nonce: Nonce = core::array::from_fn(|i| 0xa0 + i as u8);
    let aad: Vec<u8> = (0x30..0x48).collect();
    let pt: Vec<u8> = (0..80u32).map(|i| (i * 3) as u8).collect();
    let key: Vec<u8> = (0..32).collect();
    let cases = [
        (
            16,
            "baace4ff5de9bb385fb87ebdba74c6bf38e56a93395324b2b8bc61b3989145d7e61413a1422e806fd19ee0752cc38e932ea707bde9daaa62c0fe6a2d06d38fa106488eae00c93573701f8f221afbca76",
            "ef5f49f3468435e3a92e33d560053325",
        ),
        (
            32,
            "2f57300abcee475e2414a0a41c221d8518e650547013d20a3c5397a04f63625a7cd43e5f1577e11e71b0136d13e793a2473461c87083bb7ba13f54d3fee69d84107171c87572ee5beb8cf42afc76d07a",
            "19bf0126cedcd9c52da68aa5802ac8c1",
        ),
    ];
    for (klen, ct, tag) in cases {
        let (c, t) = seal(&key[..klen], &nonce, &aad, &pt);
        assert_eq!(hex::encode(&c), ct, "Twofish-{}", klen * 8);
        assert_eq!(hex::encode(t), tag, "Twofish-{}", klen * 8);
    }
}

#[test]
fn twofish_content_keys_refuse_other_lengths() {
    for n in [0usize, 8, 24, 48] {
        assert!(ContentKey::with_cipher(XtsCipher::Twofish, &vec![0; n]).is_err(), "{n}");
    }
    let k = ContentKey::with_cipher(XtsCipher::Twofish, &[1; 16]).unwrap();
    assert_eq!((k.bits(), k.is_vaes()), (128, false));
}

fn oracle_block(c: &twofish::Twofish, b: [u8; 16]) -> [u8; 16] {
    use twofish::cipher::BlockCipherEncrypt;
    let mut x = twofish::cipher::Block::<twofish::Twofish>::from(b);
    c.encrypt_block(&mut x);
    x.into()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(warpfs_testkit::cases(64)))]

    /// CTR keystream and GCM tags equal the definitions over the `twofish`
    /// crate: counter blocks nonce ‖ BE32(2 + i) (wrapping), H = E(0),
    /// tag = GHASH_H(A, C) ⊕ E(nonce ‖ 1), GHASH from the `ghash` crate.
    #[test]
    fn twofish_ctr_and_gcm_match_the_definition(
        long in any::<bool>(),
        key in proptest::collection::vec(any::<u8>(), 32),
        nonce in any::<[u8; 12]>(),
        aad in proptest::collection::vec(any::<u8>(), 0..40),
        pt in proptest::collection::vec(any::<u8>(), 0..4200),
    ) {
        use ghash::universal_hash::UniversalHash;
        use twofish::cipher::KeyInit;
        let key = if long { &key[..] } else { &key[..16] };
        let c = twofish::Twofish::new_from_slice(key).unwrap();
        let mut want = pt.clone();
        for (i, chunk) in want.chunks_mut(16).enumerate() {
            let mut cb = [0u8; 16];
            cb[..12].copy_from_slice(&nonce);
            cb[12..].copy_from_slice(&DATA_COUNTER.wrapping_add(i as u32).to_be_bytes());
            for (d, k) in chunk.iter_mut().zip(oracle_block(&c, cb)) {
                *d ^= k;
            }
        }
        let h = oracle_block(&c, [0; 16]);
        let mut g = ghash::GHash::new(&h.into());
        g.update_padded(&aad);
        g.update_padded(&want);
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&((aad.len() as u64) * 8).to_be_bytes());
        lens[8..].copy_from_slice(&((want.len() as u64) * 8).to_be_bytes());
        g.update(&[lens.into()]);
        let s: [u8; 16] = g.finalize().into();
        let mut j0 = [0u8; 16];
        j0[..12].copy_from_slice(&nonce);
        j0[15] = 1;
        let ej0 = oracle_block(&c, j0);
        let want_tag: Vec<u8> = s.iter().zip(ej0).map(|(a, b)| a ^ b).collect();
        let (ct, tag) = seal(key, &nonce, &aad, &pt);
        prop_assert_eq!(&ct, &want);
        prop_assert_eq!(&tag[..], &want_tag[..]);
    }
}
