//! GPU XTS-AES (OpenCL kernel) against IEEE 1619 vectors and, byte for
//! byte, the independent `xts-mode` crate. Runs wherever an OpenCL platform
//! exists (pocl in CI, where WARPFS_REQUIRE_OPENCL=1 turns a missing
//! platform into a failure); elsewhere it is counted as skipped
//! (`warpfs_testkit::skip`). The CUDA test is `#[ignore]`d: it needs an
//! NVIDIA GPU (`scripts/test.sh` runs it where `nvidia-smi` lists one).
#![cfg(feature = "gpu")]

use aes::cipher::KeyInit;
use aes::{Aes128, Aes256};
use proptest::prelude::*;
use std::sync::{Mutex, OnceLock};
use warpfs_engine::gpu::{XtsCudaDevice, XtsDevice, XtsKeys};
use xts_mode::{get_tweak_default, Xts128};

fn require_opencl() -> bool {
    std::env::var("WARPFS_REQUIRE_OPENCL").is_ok_and(|v| v == "1")
}

/// One device for the test binary (pocl costs a kernel build per open).
fn device() -> Option<&'static Mutex<XtsDevice>> {
    static D: OnceLock<Result<Mutex<XtsDevice>, String>> = OnceLock::new();
    match D.get_or_init(|| XtsDevice::opencl(true, warpfs_engine::gpu::XTS_CHUNK).map(Mutex::new)) {
        Ok(d) => Some(d),
        Err(e) if require_opencl() => panic!("WARPFS_REQUIRE_OPENCL=1 but no OpenCL XTS device: {e}"),
        Err(e) => {
            warpfs_testkit::skip(format!("no OpenCL platform ({e})"));
            None
        }
    }
}

fn pattern() -> Vec<u8> {
    (0..512).map(|i| i as u8).collect()
}

const V4_CT: &str = "27a7479befa1d476489f308cd4cfa6e2a96e4bbe3208ff25287dd3819616e89cc78cf7f5e543445f8333d8fa7f56000005279fa5d8b5e4ad40e736ddb4d35412328063fd2aab53e5ea1e0a9f332500a5df9487d07a5c92cc512c8866c7e860ce93fdf166a24912b422976146ae20ce846bb7dc9ba94a767aaef20c0d61ad02655ea92dc4c4e41a8952c651d33174be51a10c421110e6d81588ede82103a252d8a750e8768defffed9122810aaeb99f9172af82b604dc4b8e51bcb08235a6f4341332e4ca60482a4ba1a03b3e65008fc5da76b70bf1690db4eae29c5f1badd03c5ccf2a55d705ddcd86d449511ceb7ec30bf12b1fa35b913f9f747a8afd1b130e94bff94effd01a91735ca1726acd0b197c4e5b03393697e126826fb6bbde8ecc1e08298516e2c9ed03ff3c1b7860f6de76d4cecd94c8119855ef5297ca67e9f3e7ff72b1e99785ca0a7e7720c5b36dc6d72cac9574c8cbbc2f801e23e56fd344b07f22154beba0f08ce8891e643ed995c94d9a69c9f1b5f499027a78572aeebd74d20cc39881c213ee770b1010e4bea718846977ae119f7a023ab58cca0ad752afe656bb3c17256a9f6e9bf19fdd5a38fc82bbe872c5539edb609ef4f79c203ebb140f2e583cb2ad15b4aa5b655016a8449277dbd477ef2c8d6c017db738b18deb4a427d1923ce3ff262735779a418f20a282df920147beabe421ee5319d0568";
const V10_CT: &str = "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca2a3e7a7d7df7b10355165c8b9a6d0a7de8b062c4500dc4cd120c0f7418dae3d0b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec583e9645e07b8d9670655ba5bbcfecc6dc3966380ad8fecb17b6ba02469a020a84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae9be69a2ffeceb1bec9de244fbe15992b11b77c040f12bd8f6a975a44a0f90c29a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f645e8b7e9bfdef33943054ff84011493c27b3429eaedb4ed5376441a77ed43851ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151";

/// (name, Key1 || Key2, data unit number, plaintext, ciphertext).
type Vector = (&'static str, Vec<u8>, u128, Vec<u8>, Vec<u8>);

/// IEEE 1619 Annex B vectors 1, 2, 4 and 10.
fn vectors() -> Vec<Vector> {
    let h = |s: &str| hex::decode(s).unwrap();
    vec![
        (
            "vector 1 (XTS-AES-128)",
            vec![0u8; 32],
            0,
            vec![0u8; 32],
            h("917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e"),
        ),
        (
            "vector 2 (XTS-AES-128)",
            h("1111111111111111111111111111111122222222222222222222222222222222"),
            0x3333333333,
            vec![0x44u8; 32],
            h("c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0"),
        ),
        (
            "vector 4 (XTS-AES-128)",
            h("2718281828459045235360287471352631415926535897932384626433832795"),
            0,
            pattern(),
            h(V4_CT),
        ),
        (
            "vector 10 (XTS-AES-256)",
            h("27182818284590452353602874713526624977572470936999595749669676273141592653589793238462643383279502884197169399375105820974944592"),
            0xff,
            pattern(),
            h(V10_CT),
        ),
    ]
}

/// The `xts-mode` crate's XTS over whole units (IEEE tweak: unit number LE).
fn reference(key: &[u8], unit: usize, first: u128, data: &mut [u8], dec: bool) {
    let (k1, k2) = key.split_at(key.len() / 2);
    macro_rules! go {
        ($c:ty) => {{
            let x = Xts128::<$c>::new(<$c>::new_from_slice(k1).unwrap(), <$c>::new_from_slice(k2).unwrap());
            if dec {
                x.decrypt_area(data, unit, first, get_tweak_default);
            } else {
                x.encrypt_area(data, unit, first, get_tweak_default);
            }
        }};
    }
    if key.len() == 32 {
        go!(Aes128)
    } else {
        go!(Aes256)
    }
}

#[test]
fn ieee1619_vectors_encrypt_and_decrypt() {
    let Some(dev) = device() else { return };
    let dev = dev.lock().unwrap_or_else(|e| e.into_inner());
    for (name, key, n, pt, ct) in vectors() {
        // The independent implementation agrees with the published answer.
        let mut r = pt.clone();
        reference(&key, pt.len(), n, &mut r, false);
        assert_eq!(r, ct, "{name}: xts-mode");
        let keys = XtsKeys::new(&key).unwrap();
        let mut buf = pt.clone();
        dev.encrypt(&keys, pt.len(), n, [0; 16], &mut buf).unwrap();
        assert_eq!(hex::encode(&buf), hex::encode(&ct), "{name}: GPU encrypt");
        dev.decrypt(&keys, pt.len(), n, [0; 16], &mut buf).unwrap();
        assert_eq!(buf, pt, "{name}: GPU decrypt");
    }
}

#[test]
fn base_tweak_xor_form_equals_ieee_tweak() {
    // warpfs form: tweak = file ID XOR unit number; with base = ID the
    // kernel must equal IEEE XTS whose unit number is ID XOR n.
    let Some(dev) = device() else { return };
    let dev = dev.lock().unwrap_or_else(|e| e.into_inner());
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
    let keys = XtsKeys::new(&key).unwrap();
    let id: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
    let data: Vec<u8> = (0..3 * 4096).map(|i| (i * 7 + 3) as u8).collect();
    let mut gpu = data.clone();
    dev.encrypt(&keys, 4096, 5, id.to_le_bytes(), &mut gpu).unwrap();
    for u in 0..3usize {
        let mut r = data[u * 4096..(u + 1) * 4096].to_vec();
        reference(&key, 4096, id ^ (5 + u as u128), &mut r, false);
        assert!(gpu[u * 4096..(u + 1) * 4096] == r[..], "unit {u} differs");
    }
}

#[test]
fn equals_the_mount_xts_mode_cipher() {
    // The warpfs xts mode (warpfs_crypto::XtsKey, tweak = file ID XOR the
    // 4 KiB block number): the GPU with base tweak = file ID gives the
    // same bytes, both directions.
    let Some(dev) = device() else { return };
    let dev = dev.lock().unwrap_or_else(|e| e.into_inner());
    for key_len in [32usize, 64] {
        let key: Vec<u8> = (0..key_len as u8).map(|i| i.wrapping_mul(91).wrapping_add(1)).collect();
        let cpu = warpfs_crypto::XtsKey::new(warpfs_crypto::XtsCipher::Aes, &key).unwrap();
        let keys = XtsKeys::new(&key).unwrap();
        let id: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(17).wrapping_add(5));
        let data: Vec<u8> = (0..9 * 4096).map(|i| (i * 13 % 255) as u8).collect();
        let mut want = data.clone();
        for (b, unit) in want.chunks_mut(4096).enumerate() {
            cpu.encrypt_unit(&warpfs_crypto::file_block_tweak(&id, 100 + b as u64), unit);
        }
        let mut gpu = data.clone();
        dev.encrypt(&keys, 4096, 100, id, &mut gpu).unwrap();
        assert!(gpu == want, "GPU differs from the mount's XTS ({key_len}-byte key)");
        dev.decrypt(&keys, 4096, 100, id, &mut gpu).unwrap();
        assert!(gpu == data, "GPU decrypt of the mount's XTS");
    }
}

#[test]
fn unit_number_carries_across_words() {
    let Some(dev) = device() else { return };
    let dev = dev.lock().unwrap_or_else(|e| e.into_inner());
    let key = [0x5au8; 32];
    let keys = XtsKeys::new(&key).unwrap();
    let first = (1u128 << 96) - 2; // units cross 2^32, 2^64 limb borders
    let data: Vec<u8> = (0..4 * 512).map(|i| (i % 251) as u8).collect();
    let mut gpu = data.clone();
    dev.encrypt(&keys, 512, first, [0; 16], &mut gpu).unwrap();
    let mut r = data.clone();
    reference(&key, 512, first, &mut r, false);
    assert!(gpu == r, "units across limb borders differ");
}

#[test]
fn rejects_partial_units_and_bad_keys() {
    assert!(XtsKeys::new(&[0u8; 16]).is_err());
    assert!(XtsKeys::new(&[0u8; 48]).is_err());
    let Some(dev) = device() else { return };
    let dev = dev.lock().unwrap_or_else(|e| e.into_inner());
    let keys = XtsKeys::new(&[1u8; 32]).unwrap();
    let mut d = vec![0u8; 4096 + 16];
    assert!(dev.encrypt(&keys, 4096, 0, [0; 16], &mut d).is_err());
    assert!(dev.encrypt(&keys, 24, 0, [0; 16], &mut d[..48]).is_err());
    assert!(dev.encrypt(&keys, 0, 0, [0; 16], &mut d[..0]).is_err());
    // Rejected calls leave the data alone.
    assert!(d.iter().all(|&b| b == 0));
    dev.encrypt(&keys, 4096, 0, [0; 16], &mut []).unwrap();
}

/// CUDA (NVRTC, same kernel source): needs libcuda, libnvrtc and a device.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA; scripts/test.sh runs it where nvidia-smi lists one"]
fn cuda_equals_vectors_and_xts_mode() {
    let dev = XtsCudaDevice::open(64 * 1024).unwrap_or_else(|e| panic!("no CUDA XTS device ({e})"));
    for (name, key, n, pt, ct) in vectors() {
        let keys = XtsKeys::new(&key).unwrap();
        let mut buf = pt.clone();
        dev.encrypt(&keys, pt.len(), n, [0; 16], &mut buf).unwrap();
        assert_eq!(hex::encode(&buf), hex::encode(&ct), "{name}: CUDA encrypt");
        dev.decrypt(&keys, pt.len(), n, [0; 16], &mut buf).unwrap();
        assert_eq!(buf, pt, "{name}: CUDA decrypt");
    }
    let key: Vec<u8> = (0..64u8).map(|i| i ^ 0xa5).collect();
    let keys = XtsKeys::new(&key).unwrap();
    let data: Vec<u8> = (0..37 * 4096).map(|i| (i % 253) as u8).collect();
    let mut gpu = data.clone();
    dev.encrypt(&keys, 4096, 1 << 40, [0; 16], &mut gpu).unwrap();
    let mut r = data.clone();
    reference(&key, 4096, 1 << 40, &mut r, false);
    assert!(gpu == r, "CUDA differs from xts-mode");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: warpfs_testkit::cases(24), ..ProptestConfig::default() })]
    /// Random 256/512-bit keys, unit sizes, unit counts, launch chunk sizes
    /// and first unit numbers: GPU == xts-mode, and decrypt inverts.
    #[test]
    fn gpu_equals_xts_mode(
        key in prop_oneof![prop::collection::vec(any::<u8>(), 32), prop::collection::vec(any::<u8>(), 64)],
        unit_blocks in prop_oneof![Just(256usize), Just(32usize), 1usize..300],
        units in 1usize..40,
        chunk_units in 1usize..12,
        first in any::<u64>(),
        seed in any::<u8>(),
    ) {
        let Some(dev) = device() else { return Ok(()) };
        let mut dev = dev.lock().unwrap_or_else(|e| e.into_inner());
        let unit = unit_blocks * 16;
        dev.set_chunk(chunk_units * unit);
        let data: Vec<u8> = (0..units * unit).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        let keys = XtsKeys::new(&key).unwrap();
        let mut gpu = data.clone();
        dev.encrypt(&keys, unit, first as u128, [0; 16], &mut gpu).unwrap();
        let mut r = data.clone();
        reference(&key, unit, first as u128, &mut r, false);
        prop_assert!(gpu == r, "encrypt differs from xts-mode");
        let mut back = gpu.clone();
        dev.decrypt(&keys, unit, first as u128, [0; 16], &mut back).unwrap();
        prop_assert!(back == data, "decrypt did not invert");
        reference(&key, unit, first as u128, &mut gpu, true);
        prop_assert!(gpu == data);
        dev.set_chunk(warpfs_engine::gpu::XTS_CHUNK);
    }
}
