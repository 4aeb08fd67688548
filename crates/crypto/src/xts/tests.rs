//! XTS known answers (IEEE 1619-2018 Annex B vectors 1–4, 10, 15–18), short
//! units, round trips and a property test against the `xts-mode` crate.

use super::*;
use proptest::prelude::*;

fn pattern512() -> String {
    let v: Vec<u8> = (0..512).map(|i| i as u8).collect();
    hex::encode(v)
}

/// (vector, key1 ‖ key2, tweak (16 bytes, little-endian unit number), plaintext, ciphertext)
fn vectors() -> Vec<(u32, &'static str, &'static str, String, &'static str)> {
    let ct4 = concat!(
        "27a7479befa1d476489f308cd4cfa6e2a96e4bbe3208ff25287dd3819616e89c",
        "c78cf7f5e543445f8333d8fa7f56000005279fa5d8b5e4ad40e736ddb4d35412",
        "328063fd2aab53e5ea1e0a9f332500a5df9487d07a5c92cc512c8866c7e860ce",
        "93fdf166a24912b422976146ae20ce846bb7dc9ba94a767aaef20c0d61ad0265",
        "5ea92dc4c4e41a8952c651d33174be51a10c421110e6d81588ede82103a252d8",
        "a750e8768defffed9122810aaeb99f9172af82b604dc4b8e51bcb08235a6f434",
        "1332e4ca60482a4ba1a03b3e65008fc5da76b70bf1690db4eae29c5f1badd03c",
        "5ccf2a55d705ddcd86d449511ceb7ec30bf12b1fa35b913f9f747a8afd1b130e",
        "94bff94effd01a91735ca1726acd0b197c4e5b03393697e126826fb6bbde8ecc",
        "1e08298516e2c9ed03ff3c1b7860f6de76d4cecd94c8119855ef5297ca67e9f3",
        "e7ff72b1e99785ca0a7e7720c5b36dc6d72cac9574c8cbbc2f801e23e56fd344",
        "b07f22154beba0f08ce8891e643ed995c94d9a69c9f1b5f499027a78572aeebd",
        "74d20cc39881c213ee770b1010e4bea718846977ae119f7a023ab58cca0ad752",
        "afe656bb3c17256a9f6e9bf19fdd5a38fc82bbe872c5539edb609ef4f79c203e",
        "bb140f2e583cb2ad15b4aa5b655016a8449277dbd477ef2c8d6c017db738b18d",
        "eb4a427d1923ce3ff262735779a418f20a282df920147beabe421ee5319d0568",
    );
    let ct10 = concat!(
        "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b",
        "5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd",
        "5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0",
        "c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca",
        "2a3e7a7d7df7b10355165c8b9a6d0a7de8b062c4500dc4cd120c0f7418dae3d0",
        "b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f",
        "93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec",
        "583e9645e07b8d9670655ba5bbcfecc6dc3966380ad8fecb17b6ba02469a020a",
        "84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1",
        "505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae",
        "9be69a2ffeceb1bec9de244fbe15992b11b77c040f12bd8f6a975a44a0f90c29",
        "a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac",
        "6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f",
        "645e8b7e9bfdef33943054ff84011493c27b3429eaedb4ed5376441a77ed4385",
        "1ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa",
        "773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151",
    );
    let k15 = "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0bfbebdbcbbbab9b8b7b6b5b4b3b2b1b0";
    let t15 = "9a785634120000000000000000000000";
    vec![
        (
            1,
            "0000000000000000000000000000000000000000000000000000000000000000",
            "00000000000000000000000000000000",
            "00".repeat(32),
            "917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e",
        ),
        (
            2,
            "1111111111111111111111111111111122222222222222222222222222222222",
            "33333333330000000000000000000000",
            "44".repeat(32),
            "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0",
        ),
        (
            3,
            "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f022222222222222222222222222222222",
            "33333333330000000000000000000000",
            "44".repeat(32),
            "af85336b597afc1a900b2eb21ec949d292df4c047e0b21532186a5971a227a89",
        ),
        (
            4,
            "2718281828459045235360287471352631415926535897932384626433832795",
            "00000000000000000000000000000000",
            pattern512(),
            ct4,
        ),
        (
            10,
            concat!(
                "2718281828459045235360287471352662497757247093699959574966967627",
                "3141592653589793238462643383279502884197169399375105820974944592"
            ),
            "ff000000000000000000000000000000",
            pattern512(),
            ct10,
        ),
        (
            15,
            k15,
            t15,
            "000102030405060708090a0b0c0d0e0f10".into(),
            "6c1625db4671522d3d7599601de7ca09ed",
        ),
        (
            16,
            k15,
            t15,
            "000102030405060708090a0b0c0d0e0f1011".into(),
            "d069444b7a7e0cab09e24447d24deb1fedbf",
        ),
        (
            17,
            k15,
            t15,
            "000102030405060708090a0b0c0d0e0f101112".into(),
            "e5df1351c0544ba1350b3363cd8ef4beedbf9d",
        ),
        (
            18,
            k15,
            t15,
            "000102030405060708090a0b0c0d0e0f10111213".into(),
            "9d84c813f719aa2c7be3f66171c7c5c2edbf9dac",
        ),
    ]
}

#[test]
fn ieee1619_vectors() {
    for (n, key, tweak, pt, ct) in vectors() {
        let k = XtsKey::new(XtsCipher::Aes, &hex::decode(key).unwrap()).unwrap();
        let t: [u8; 16] = hex::decode(tweak).unwrap().try_into().unwrap();
        let mut buf = hex::decode(&pt).unwrap();
        k.encrypt_unit(&t, &mut buf);
        assert_eq!(hex::encode(&buf), ct, "vector {n} encrypt");
        k.decrypt_unit(&t, &mut buf);
        assert_eq!(hex::encode(&buf), pt, "vector {n} decrypt");
    }
}

#[test]
fn mul_alpha_matches_bytewise_definition() {
    // IEEE 1619 5.2: byte-wise shift with carry, 0x87 into byte 0.
    fn reference(t: [u8; 16]) -> [u8; 16] {
        let mut out = [0u8; 16];
        let mut carry = 0u8;
        for j in 0..16 {
            out[j] = (t[j] << 1) | carry;
            carry = t[j] >> 7;
        }
        if carry == 1 {
            out[0] ^= 0x87;
        }
        out
    }
    for t in [[0u8; 16], [0xff; 16], [0x80; 16], {
        let mut a = [0u8; 16];
        a[15] = 0x80;
        a
    }] {
        assert_eq!(mul_alpha(u128::from_le_bytes(t)).to_le_bytes(), reference(t));
    }
}

#[test]
fn short_units_use_the_alpha_256_pad() {
    let key: Vec<u8> = (0..64).collect();
    let k = XtsKey::new(XtsCipher::Aes, &key).unwrap();
    let tw = [3u8; 16];
    // The pad is E_K1(T·α^256) with T = E_K2(tweak).
    let mut x = k.encrypted_tweak(&tw);
    for _ in 0..256 {
        x = mul_alpha(x);
    }
    let k1 = Aes256::new_from_slice(&key[..32]).unwrap();
    let mut pad = Block::from(x.to_le_bytes());
    k1.encrypt_block(&mut pad);
    for len in 1..16 {
        let pt: Vec<u8> = (0..len as u8).collect();
        let mut buf = pt.clone();
        k.encrypt_unit(&tw, &mut buf);
        let want: Vec<u8> = pt.iter().zip(pad.iter()).map(|(a, b)| a ^ b).collect();
        assert_eq!(buf, want, "len {len}");
        k.decrypt_unit(&tw, &mut buf);
        assert_eq!(buf, pt);
    }
    let mut empty = [];
    k.encrypt_unit(&tw, &mut empty);
}

#[test]
fn key_lengths() {
    assert!(XtsKey::new(XtsCipher::Aes, &[0; 48]).is_err());
    assert!(XtsKey::new(XtsCipher::Aes, &[0; 16]).is_err());
    assert_eq!(XtsKey::new(XtsCipher::Aes, &[0; 32]).unwrap().bits(), 128);
    assert_eq!(XtsKey::new(XtsCipher::Twofish, &[0; 64]).unwrap().bits(), 256);
}

#[test]
fn file_block_tweak_is_id_xor_le_block() {
    let id = [0xf0u8; 16];
    let t = file_block_tweak(&id, 0x0102);
    assert_eq!(t[0], 0xf0 ^ 0x02);
    assert_eq!(t[1], 0xf0 ^ 0x01);
    assert_eq!(&t[2..], &[0xf0; 14]);
    assert_eq!(file_block_tweak(&id, 0), id);
}

#[test]
fn masks_made_ahead_give_the_same_ciphertext() {
    let k = XtsKey::new(XtsCipher::Aes, &[9u8; 64]).unwrap();
    let tw = [1u8; 16];
    let pt: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let mut a = pt.clone();
    k.encrypt_unit(&tw, &mut a);
    let mut masks = [0u128; 256];
    XtsKey::masks(k.encrypted_tweak(&tw), &mut masks);
    let mut b = pt.clone();
    k.encrypt_with_masks(&masks, &mut b);
    assert_eq!(a, b);
}

fn oracle_aes(key: &[u8], tweak: [u8; 16], buf: &mut [u8], enc: bool) {
    use xts_mode::Xts128;
    let h = key.len() / 2;
    if h == 16 {
        let x = Xts128::new(
            aes::Aes128::new_from_slice(&key[..h]).unwrap(),
            aes::Aes128::new_from_slice(&key[h..]).unwrap(),
        );
        if enc {
            x.encrypt_sector(buf, tweak.into())
        } else {
            x.decrypt_sector(buf, tweak.into())
        }
    } else {
        let x = Xts128::new(
            aes::Aes256::new_from_slice(&key[..h]).unwrap(),
            aes::Aes256::new_from_slice(&key[h..]).unwrap(),
        );
        if enc {
            x.encrypt_sector(buf, tweak.into())
        } else {
            x.decrypt_sector(buf, tweak.into())
        }
    }
}

fn oracle_twofish(key: &[u8], tweak: [u8; 16], buf: &mut [u8]) {
    let h = key.len() / 2;
    let x = xts_mode::Xts128::new(
        twofish::Twofish::new_from_slice(&key[..h]).unwrap(),
        twofish::Twofish::new_from_slice(&key[h..]).unwrap(),
    );
    x.encrypt_sector(buf, tweak.into())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(warpfs_testkit::cases(128)))]

    #[test]
    fn matches_xts_mode_crate(
        big in any::<bool>(),
        key in proptest::collection::vec(any::<u8>(), 64),
        tweak in any::<[u8; 16]>(),
        pt in proptest::collection::vec(any::<u8>(), 16..=4096usize),
    ) {
        let key = if big { &key[..] } else { &key[..32] };
        let k = XtsKey::new(XtsCipher::Aes, key).unwrap();
        let mut ours = pt.clone();
        k.encrypt_unit(&tweak, &mut ours);
        let mut theirs = pt.clone();
        oracle_aes(key, tweak, &mut theirs, true);
        prop_assert_eq!(&ours, &theirs);
        oracle_aes(key, tweak, &mut theirs, false);
        prop_assert_eq!(&theirs, &pt);
        k.decrypt_unit(&tweak, &mut ours);
        prop_assert_eq!(&ours, &pt);
    }

    #[test]
    fn twofish_matches_xts_mode_crate(
        big in any::<bool>(),
        key in proptest::collection::vec(any::<u8>(), 64),
        tweak in any::<[u8; 16]>(),
        pt in proptest::collection::vec(any::<u8>(), 16..=4096usize),
    ) {
        let key = if big { &key[..] } else { &key[..32] };
        let k = XtsKey::new(XtsCipher::Twofish, key).unwrap();
        let mut ours = pt.clone();
        k.encrypt_unit(&tweak, &mut ours);
        let mut theirs = pt.clone();
        oracle_twofish(key, tweak, &mut theirs);
        prop_assert_eq!(&ours, &theirs);
        k.decrypt_unit(&tweak, &mut ours);
        prop_assert_eq!(&ours, &pt);
    }
}

#[test]
fn expanded_keys_sit_on_locked_pages() {
    // Where this process may lock memory at all, both ciphers' keys are locked.
    if !crate::locked::Locked::new([0u8; 1]).is_locked() {
        warpfs_testkit::skip("mlock is not allowed here (RLIMIT_MEMLOCK)");
        return;
    }
    for c in [XtsCipher::Aes, XtsCipher::Twofish] {
        assert!(XtsKey::new(c, &[3; 64]).unwrap().is_locked(), "{c:?}");
        assert!(XtsKey::new(c, &[3; 64]).unwrap().clone().is_locked(), "{c:?} clone");
    }
}
