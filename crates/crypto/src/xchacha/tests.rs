//! Known answers from RFC 8439 and draft-irtf-cfrg-xchacha-03, and a
//! cross-check of warpfs's block construction against the
//! `chacha20poly1305` crate's XChaCha20-Poly1305.

use super::*;
use chacha20::cipher::{KeyIvInit, StreamCipher};

fn h(s: &str) -> Vec<u8> {
    hex::decode(s.split_whitespace().collect::<String>()).unwrap()
}

const RFC_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const LADIES: &[u8] = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";

/// RFC 8439 2.4.2: ChaCha20 with counter 1.
#[test]
fn rfc8439_chacha20_encryption() {
    let key: [u8; 32] = h(RFC_KEY).try_into().unwrap();
    let nonce: [u8; 12] = h("000000000000004a00000000").try_into().unwrap();
    let mut c = chacha20::ChaCha20::new(&key.into(), &nonce.into());
    let mut skip = [0u8; 64];
    c.apply_keystream(&mut skip);
    let mut buf = LADIES.to_vec();
    c.apply_keystream(&mut buf);
    assert_eq!(
        hex::encode(&buf),
        "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0bf91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d807ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab77937365af90bbf74a35be6b40b8eedf2785e42874d"
    );
}

/// RFC 8439 2.5.2: Poly1305.
#[test]
fn rfc8439_poly1305() {
    let key: [u8; 32] = h("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
        .try_into()
        .unwrap();
    use poly1305::universal_hash::KeyInit;
    let tag = poly1305::Poly1305::new(&key.into()).compute_unpadded(b"Cryptographic Forum Research Group");
    assert_eq!(hex::encode(tag), "a8061dc1305136c6c22b8baf0c0127a9");
}

const AEAD_KEY: &str = "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f";
const AEAD_AAD: &str = "50515253c0c1c2c3c4c5c6c7";

/// RFC 8439 2.8.2: the AEAD, put together as warpfs puts a block together
/// (one-time key from block 0, data from block 1, [`poly1305_tag`]), over
/// ChaCha20 with the RFC's 96-bit nonce.
#[test]
fn rfc8439_aead_from_our_composition() {
    let key: [u8; 32] = h(AEAD_KEY).try_into().unwrap();
    let nonce: [u8; 12] = h("070000004041424344454647").try_into().unwrap();
    let mut c = chacha20::ChaCha20::new(&key.into(), &nonce.into());
    let mut block0 = [0u8; 64];
    c.apply_keystream(&mut block0);
    let mut buf = LADIES.to_vec();
    c.apply_keystream(&mut buf);
    assert_eq!(
        hex::encode(&buf),
        "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116"
    );
    let otk: TagMask = block0[..32].try_into().unwrap();
    assert_eq!(
        hex::encode(poly1305_tag(&otk, &h(AEAD_AAD), &buf)),
        "1ae10b594f09e26a7e902ecbd0600691"
    );
}

/// draft-irtf-cfrg-xchacha-03 2.2.1: HChaCha20.
#[test]
fn draft_hchacha20() {
    let key: [u8; 32] = h(RFC_KEY).try_into().unwrap();
    let input: [u8; 16] = h("000000090000004a0000000031415927").try_into().unwrap();
    let sub = chacha20::hchacha::<chacha20::R20>(&key.into(), &input.into());
    assert_eq!(
        hex::encode(sub),
        "82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc"
    );
}

/// draft-irtf-cfrg-xchacha-03 A.2: XChaCha20 from block 1, through
/// [`XChaChaKey`] (at an offset that is not a block boundary, too).
#[test]
fn draft_xchacha20_keystream_through_our_key() {
    let k = XChaChaKey::new(&h(AEAD_KEY)).unwrap();
    let xn: [u8; 24] = h("404142434445464748494a4b4c4d4e4f5051525354555658")
        .try_into()
        .unwrap();
    let want = "29624b4b1b140ace53740e405b2168540fd7d630c1f536fecd722fc3cddba7f4cca98cf9e47e5e64d115450f9b125b54449ff76141ca620a1f9cfcab2a1a8a255e766a5266b878846120ea64ad99aa479471e63befcbd37cd1c22a221fe462215cf32c74895bf505863ccddd48f62916dc6521f1ec50a5ae08903aa259d9bf607cd8026fba548604f1b6072d91bc91243a5b845f7fd171b02edc5a0a84cf28dd241146bc376e3f48df5e7fee1d11048c190a3d3deb0feb64b42d9c6fdeee290fa0e6ae2c26c0249ea8c181f7e2ffd100cbe5fd3c4f8271d62b15330cb8fdcf00b3df507ca8c924f7017b7e712d15a2eb5c50484451e54e1b4b995bd8fdd94597bb94d7af0b2c04df10ba0890899ed9293a0f55b8bafa999264035f1d4fbe7fe0aafa109a62372027e50e10cdfecca127";
    let mut ks = vec![0u8; 304];
    k.xor_x(&xn, 1, 0, &mut ks);
    assert_eq!(hex::encode(&ks), want);
    // The same bytes from block 0 at byte 64, and in two unaligned pieces.
    let mut ks = vec![0u8; 304];
    let (a, b) = ks.split_at_mut(77);
    k.xor_x(&xn, 0, 64, a);
    k.xor_x(&xn, 0, 64 + 77, b);
    assert_eq!(hex::encode(&ks), want);
}

/// draft-irtf-cfrg-xchacha-03 A.3.1: XChaCha20-Poly1305, put together as
/// warpfs puts a block together.
#[test]
fn draft_xchacha20_poly1305_from_our_composition() {
    let k = XChaChaKey::new(&h(AEAD_KEY)).unwrap();
    let xn: [u8; 24] = h("404142434445464748494a4b4c4d4e4f5051525354555657")
        .try_into()
        .unwrap();
    let mut otk = [0u8; 32];
    k.xor_x(&xn, 0, 0, &mut otk);
    let mut buf = LADIES.to_vec();
    k.xor_x(&xn, 1, 0, &mut buf);
    assert_eq!(
        hex::encode(&buf),
        "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff921f9664c97637da9768812f615c68b13b52e"
    );
    assert_eq!(
        hex::encode(poly1305_tag(&otk, &h(AEAD_AAD), &buf)),
        "c0875924c1c7987947deafd8780acf49"
    );
}

#[test]
fn the_block_nonce_is_the_first_half_of_the_xchacha_nonce() {
    let n = [0xabu8; 12];
    let x = xnonce(&n);
    assert_eq!(&x[..12], &n);
    assert_eq!(&x[12..], &[0u8; 12]);
    let k = XChaChaKey::new(&[7u8; 32]).unwrap();
    let (mut a, mut b) = ([0u8; 100], [0u8; 100]);
    k.keystream(&n, 1, &mut a);
    k.xor_x(&x, 1, 0, &mut b);
    assert_eq!(a, b);
    assert_eq!(&k.tag_mask(&n)[..], {
        let mut m = [0u8; 32];
        k.xor_x(&x, 0, 0, &mut m);
        m
    });
}

#[test]
fn keys_are_exactly_256_bits_and_never_shown() {
    assert!(XChaChaKey::new(&[0u8; 16]).is_err());
    assert!(XChaChaKey::new(&[0u8; 33]).is_err());
    let k = XChaChaKey::new(&[0x5au8; 32]).unwrap();
    assert_eq!(k.bits(), 256);
    assert_eq!(format!("{k:?}"), "XChaChaKey(..)");
    assert_eq!(k.layout(), MaskLayout::XCHACHA);
}

#[test]
#[should_panic(expected = "32-bit block counter")]
fn a_stream_past_its_counter_is_refused() {
    let k = XChaChaKey::new(&[1u8; 32]).unwrap();
    k.xor_at(&[1u8; 12], u32::MAX - 1, 0, &mut [0u8; 65]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(warpfs_testkit::cases(300)))]
    /// A block as warpfs seals it (mask from block 0: the Poly1305 key,
    /// then the data; tag over AD = file ID ‖ block number) equals the
    /// `chacha20poly1305` crate's XChaCha20-Poly1305 under the nonce
    /// `nonce ‖ 0^96`, ciphertext and tag, for any key, nonce, position and
    /// length up to a block.
    #[test]
    fn blocks_equal_the_chacha20poly1305_crate(
        key in proptest::array::uniform32(0u8..),
        nonce in proptest::array::uniform12(0u8..),
        file_id in proptest::array::uniform16(0u8..),
        block in proptest::num::u64::ANY,
        data in proptest::collection::vec(0u8.., 0..=4096),
    ) {
        use chacha20poly1305::aead::{AeadInOut, KeyInit as _};
        let k = XChaChaKey::new(&key).unwrap();
        let mut aad = [0u8; 24];
        aad[..16].copy_from_slice(&file_id);
        aad[16..].copy_from_slice(&block.to_be_bytes());
        // warpfs: one mask of the layout, as the engine makes it.
        let l = MaskLayout::XCHACHA;
        let mut mask = vec![0u8; l.len_for(data.len())];
        k.keystream(&nonce, l.first, &mut mask);
        let otk: TagMask = mask[..l.tag_len].try_into().unwrap();
        let mut ours = data.clone();
        crate::aes_ctr::xor_in_place(&mut ours, &mask[l.data_at..]);
        let our_tag = poly1305_tag(&otk, &aad, &ours);
        // The oracle.
        let oracle = chacha20poly1305::XChaCha20Poly1305::new(&key.into());
        let mut theirs = data.clone();
        let their_tag = oracle
            .encrypt_inout_detached(&xnonce(&nonce).into(), &aad, theirs.as_mut_slice().into())
            .unwrap();
        proptest::prop_assert_eq!(&ours, &theirs);
        proptest::prop_assert_eq!(&our_tag[..], &their_tag[..]);
        // And the tag mask alone is the mask's first 32 bytes.
        proptest::prop_assert_eq!(k.tag_mask(&nonce), otk);
    }
}

/// RFC 8439 2.4.2 through the sixteen-block AVX-512 kernel alone (counter
/// 1, the vector's plaintext at the start of a 1 KiB run), and the other
/// fifteen blocks of the run equal to the `chacha20` crate's.
#[cfg(target_arch = "x86_64")]
#[test]
fn rfc8439_chacha20_encryption_through_the_avx512_kernel() {
    if !super::chacha_avx512::available() {
        eprintln!("no AVX-512F on this CPU: the kernel is not used here");
        return;
    }
    let key: [u8; 32] = h(RFC_KEY).try_into().unwrap();
    let nonce: [u8; 12] = h("000000000000004a00000000").try_into().unwrap();
    let words: [u32; 8] = std::array::from_fn(|i| u32::from_le_bytes(key[4 * i..4 * i + 4].try_into().unwrap()));
    let nwords: [u32; 3] = std::array::from_fn(|i| u32::from_le_bytes(nonce[4 * i..4 * i + 4].try_into().unwrap()));
    let mut buf = [0u8; super::chacha_avx512::CHUNK];
    buf[..LADIES.len()].copy_from_slice(LADIES);
    // SAFETY: the CPU has AVX-512F (checked above).
    unsafe { super::chacha_avx512::xor16(&words, &nwords, 1, &mut buf) };
    assert_eq!(
        hex::encode(&buf[..LADIES.len()]),
        "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0bf91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d807ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab77937365af90bbf74a35be6b40b8eedf2785e42874d"
    );
    let mut want = [0u8; super::chacha_avx512::CHUNK];
    want[..LADIES.len()].copy_from_slice(LADIES);
    let mut c = chacha20::ChaCha20::new(&key.into(), &nonce.into());
    c.apply_keystream(&mut [0u8; 64]);
    c.apply_keystream(&mut want);
    assert_eq!(buf, want);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(warpfs_testkit::cases(300)))]
    /// Any stretch of any nonce's stream, XORed into a buffer (long ones
    /// through the AVX-512 kernel where the CPU has it, with a head before
    /// the first block boundary and a tail after the last whole run),
    /// equals the `chacha20` crate's XChaCha20 seeked to the same byte,
    /// near the end of the 32-bit counter too.
    #[test]
    fn any_stretch_of_the_stream_equals_the_chacha20_crate(
        key in proptest::array::uniform32(0u8..),
        xn in proptest::array::uniform24(0u8..),
        near_end in proptest::bool::ANY,
        block in 0u32..200,
        pos in 0u64..200,
        data in proptest::collection::vec(0u8.., 0..=5000),
    ) {
        use chacha20::cipher::StreamCipherSeek;
        let k = XChaChaKey::new(&key).unwrap();
        // Near the end: the stretch ends at most 100 blocks before the
        // last block of the stream.
        let block = if near_end { u32::MAX - 1 - 100 - block - (pos + 5000).div_ceil(64) as u32 } else { block };
        let mut ours = data.clone();
        k.xor_x(&xn, block, pos, &mut ours);
        let mut theirs = data.clone();
        let mut c = chacha20::XChaCha20::new(&key.into(), &xn.into());
        c.seek(u64::from(block) * 64 + pos);
        c.apply_keystream(&mut theirs);
        proptest::prop_assert_eq!(ours, theirs);
    }
}

/// The last whole run of sixteen blocks the stream has (counters up to
/// 2^32 − 2) goes through the kernel without wrapping its counters.
#[test]
fn the_last_run_of_the_stream_equals_the_chacha20_crate() {
    use chacha20::cipher::StreamCipherSeek;
    let k = XChaChaKey::new(&[9u8; 32]).unwrap();
    let xn = [3u8; 24];
    let mut ours = vec![0u8; 1024];
    k.xor_x(&xn, u32::MAX - 16, 0, &mut ours);
    let mut theirs = vec![0u8; 1024];
    let mut c = chacha20::XChaCha20::new(&[9u8; 32].into(), &xn.into());
    c.seek(u64::from(u32::MAX - 16) * 64);
    c.apply_keystream(&mut theirs);
    assert_eq!(ours, theirs);
}
