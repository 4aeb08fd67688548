//! GPU mask backends against published vectors and the cpu backend, AES
//! and Twofish keys (FORMAT.md 11).
//! OpenCL runs wherever a platform exists (pocl in CI, where
//! WARPFS_REQUIRE_OPENCL=1 turns a missing platform into a failure), and is
//! counted as skipped elsewhere (`warpfs_testkit::skip`). The CUDA test is
//! `#[ignore]`d: it needs an NVIDIA GPU, and `scripts/test.sh` runs it
//! (`-- --ignored cuda`) where `nvidia-smi` lists one.
#![cfg(feature = "gpu")]

use proptest::prelude::*;
use std::sync::{Arc, OnceLock};
use warpfs_crypto::XtsCipher;
use warpfs_engine::gpu::{DeviceBackend, MAX_BLOCKS, MAX_CONTEXTS};
use warpfs_engine::{Backend, CpuBackend, Engine, EngineConfig, MaskCipher, MaskJob};

fn require_opencl() -> bool {
    std::env::var("WARPFS_REQUIRE_OPENCL").is_ok_and(|v| v == "1")
}

/// One OpenCL backend for the whole test binary (pocl costs ~50 ms to load).
fn opencl() -> Option<Arc<DeviceBackend>> {
    static B: OnceLock<Result<Arc<DeviceBackend>, String>> = OnceLock::new();
    match B.get_or_init(|| DeviceBackend::opencl(true).map(Arc::new)) {
        Ok(b) => Some(b.clone()),
        Err(e) if require_opencl() => panic!("WARPFS_REQUIRE_OPENCL=1 but no OpenCL backend: {e}"),
        Err(e) => {
            warpfs_testkit::skip(format!("no OpenCL platform ({e})"));
            None
        }
    }
}

/// A backend of its own, for tests that count launches.
fn fresh_opencl() -> Option<DeviceBackend> {
    opencl()?;
    Some(DeviceBackend::opencl(true).expect("a second OpenCL backend"))
}

/// The CUDA backend: only asked for by an `--ignored` run, so a machine
/// without one fails the test.
fn cuda() -> Arc<DeviceBackend> {
    static B: OnceLock<Result<Arc<DeviceBackend>, String>> = OnceLock::new();
    match B.get_or_init(|| DeviceBackend::cuda().map(Arc::new)) {
        Ok(b) => b.clone(),
        Err(e) => panic!("no CUDA backend ({e})"),
    }
}

// NIST SP 800-38A F.5.1 (AES-128-CTR) and F.5.5 (AES-256-CTR).
const PT: &str = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";
const K128: &str = "2b7e151628aed2a6abf7158809cf4f3c";
const C128: &str = "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee";
const K256: &str = "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4";
const C256: &str = "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c52b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6";

fn nist(b: &dyn Backend) {
    let nonce: [u8; 12] = hex::decode("f0f1f2f3f4f5f6f7f8f9fafb").unwrap().try_into().unwrap();
    for (k, c) in [(K128, C128), (K256, C256)] {
        let cipher = MaskCipher::new(&hex::decode(k).unwrap(), false).unwrap();
        let mut mask = vec![0u8; 64];
        b.make(&mut [MaskJob {
            cipher: &cipher,
            nonce,
            counter: 0xfcfd_feff,
            out: &mut mask,
        }]);
        let mut ct = hex::decode(PT).unwrap();
        for (x, m) in ct.iter_mut().zip(&mask) {
            *x ^= m;
        }
        assert_eq!(hex::encode(ct), c);
    }
}

/// Make every (key, nonce, counter, len) on `b` and on the cpu; compare.
fn same_as_cpu(b: &dyn Backend, keys: &[MaskCipher], specs: &[(usize, [u8; 12], u32, usize)]) {
    let mut dev: Vec<Vec<u8>> = specs.iter().map(|s| vec![0xeeu8; s.3]).collect();
    let mut cpu: Vec<Vec<u8>> = specs.iter().map(|s| vec![0u8; s.3]).collect();
    for (outs, be) in [(&mut dev, b), (&mut cpu, &CpuBackend as &dyn Backend)] {
        let mut jobs: Vec<MaskJob<'_>> = specs
            .iter()
            .zip(outs.iter_mut())
            .map(|(s, o)| MaskJob {
                cipher: &keys[s.0],
                nonce: s.1,
                counter: s.2,
                out: &mut o[..],
            })
            .collect();
        be.make(&mut jobs);
    }
    for (i, (d, c)) in dev.iter().zip(&cpu).enumerate() {
        assert!(
            d == c,
            "mask {i} {:?} differs from the cpu backend",
            (specs[i].0, specs[i].2, specs[i].3)
        );
    }
}

#[test]
fn opencl_sp800_38a_vectors() {
    let Some(b) = opencl() else { return };
    nist(&*b);
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA; scripts/test.sh runs it where nvidia-smi lists one"]
fn cuda_sp800_38a_vectors() {
    nist(&*cuda());
}

fn any_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 16),
        prop::collection::vec(any::<u8>(), 32)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: warpfs_testkit::cases(24), ..ProptestConfig::default() })]

    #[test]
    fn opencl_masks_equal_cpu_masks(
        raw in prop::collection::vec(any_key(), 1..4),
        specs in prop::collection::vec(
            (any::<usize>(), any::<[u8; 12]>(), prop_oneof![any::<u32>(), (u32::MAX - 8)..=u32::MAX, 0u32..4], 1usize..9000),
            1..40,
        ),
    ) {
        let Some(b) = opencl() else { return Ok(()) };
        let keys: Vec<MaskCipher> = raw.iter().map(|k| MaskCipher::new(k, false).unwrap()).collect();
        let specs: Vec<_> = specs.into_iter().map(|(k, n, c, l)| (k % keys.len(), n, c, l)).collect();
        same_as_cpu(&*b, &keys, &specs);
    }
}

#[test]
fn opencl_batches_split_across_launches() {
    let Some(b) = fresh_opencl() else { return };
    let keys: Vec<MaskCipher> = (0..3u8).map(|i| MaskCipher::new(&[i; 32], i == 2).unwrap()).collect();
    // More contexts than one launch takes...
    let specs: Vec<_> = (0..MAX_CONTEXTS * 2 + 37)
        .map(|i| (i % 3, [(i % 251) as u8; 12], i as u32 * 7, 16 + (i % 5) * 1000))
        .collect();
    same_as_cpu(&b, &keys, &specs);
    assert_eq!(b.launches(), 3);
    assert_eq!(b.cpu_masks(), 0, "every mask was made on the device");
    // ...and more blocks than one launch holds (two 10 MiB masks, 16 MiB per launch).
    let big = 10 << 20;
    assert!(2 * big / 16 > MAX_BLOCKS);
    let before = b.launches();
    same_as_cpu(&b, &keys, &[(0, [1; 12], 5, big), (1, [2; 12], u32::MAX, big)]);
    assert_eq!(b.launches() - before, 2);
}

#[test]
fn opencl_keys_without_raw_bytes_go_to_the_cpu() {
    let Some(b) = fresh_opencl() else { return };
    let ck = warpfs_crypto::ContentKey::new(&[9u8; 16]).unwrap();
    let keys = [
        MaskCipher::from_content_key(ck),
        MaskCipher::new(&[9u8; 16], false).unwrap(),
    ];
    same_as_cpu(&b, &keys, &[(0, [3; 12], 1, 4112), (1, [3; 12], 1, 4112)]);
    assert_eq!(b.cpu_masks(), 1);
    assert_eq!(b.launches(), 1);
}

#[test]
fn engine_on_opencl_applies_the_same_bytes_as_cpu() {
    let Some(b) = opencl() else { return };
    let e = Engine::with_backend(EngineConfig::default(), Box::new(b)).unwrap();
    assert!(e.is_device());
    assert_eq!(e.threads(), 2, "one driver thread per lane");
    let cpu = Engine::new(EngineConfig {
        speculation: false,
        ..EngineConfig::default()
    })
    .unwrap();
    let (k, kc) = (
        e.add_raw_key(&[0x42; 32]).unwrap(),
        cpu.add_raw_key(&[0x42; 32]).unwrap(),
    );
    let ctxs: Vec<_> = (0..300).map(|_| e.context()).collect();
    let tickets: Vec<_> = ctxs
        .iter()
        .enumerate()
        .map(|(i, c)| e.define(c, k, &[i as u8; 12], i as i32).unwrap())
        .collect();
    e.quiesce();
    for (i, (c, t)) in ctxs.iter().zip(&tickets).enumerate() {
        let mut a = vec![0x5au8; 4096];
        let ej0 = e.apply_block(c, t, &mut a).unwrap();
        let mut want = vec![0x5au8; 4096];
        let ej0_want = cpu.open_direct(kc, &[i as u8; 12], &mut want).unwrap();
        assert_eq!(a, want);
        assert_eq!(ej0, ej0_want);
    }
    let s = e.stats();
    assert!(s.backend.starts_with("opencl"), "{}", s.backend);
    assert!(
        s.made_by_workers >= 300,
        "the device made the masks: {}",
        s.made_by_workers
    );
}

fn twofish(raw: &[u8]) -> MaskCipher {
    MaskCipher::with_cipher(XtsCipher::Twofish, raw, false).unwrap()
}

/// The Twofish paper's first ECB vectors (all-zero key and block): with an
/// all-zero nonce and counter 0 the first counter block is all zero, so the
/// mask's first block is that ciphertext; the second block is E(0^12 || 1).
#[test]
fn opencl_twofish_masks_match_the_papers_vectors() {
    let Some(b) = opencl() else { return };
    for (bytes, ct) in [
        (16, "9f589f5cf6122c32b6bfec2f2ae8c35a"),
        (32, "57ff739d4dc92c1bd7fc01700cc8216f"),
    ] {
        let key = twofish(&vec![0u8; bytes]);
        let mut mask = vec![0u8; 33];
        b.make(&mut [MaskJob {
            cipher: &key,
            nonce: [0; 12],
            counter: 0,
            out: &mut mask,
        }]);
        assert_eq!(hex::encode(&mask[..16]), ct, "Twofish-{}", bytes * 8);
        let mut want = vec![0u8; 33];
        key.fill(&[0; 12], 0, &mut want);
        assert_eq!(mask, want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: warpfs_testkit::cases(16), ..ProptestConfig::default() })]

    /// Random Twofish keys (several per launch, so work groups span
    /// contexts of different keys), nonces, counters near the wrap, lengths.
    #[test]
    fn opencl_twofish_masks_equal_cpu_masks(
        raw in prop::collection::vec(any_key(), 1..5),
        specs in prop::collection::vec(
            (any::<usize>(), any::<[u8; 12]>(), prop_oneof![any::<u32>(), (u32::MAX - 8)..=u32::MAX, 0u32..4], 1usize..9000),
            1..40,
        ),
    ) {
        let Some(b) = opencl() else { return Ok(()) };
        let keys: Vec<MaskCipher> = raw.iter().map(|k| twofish(k)).collect();
        let specs: Vec<_> = specs.into_iter().map(|(k, n, c, l)| (k % keys.len(), n, c, l)).collect();
        same_as_cpu(&*b, &keys, &specs);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA; scripts/test.sh runs it where nvidia-smi lists one"]
fn cuda_twofish_masks_equal_cpu_masks() {
    let keys = [
        twofish(&[1; 16]),
        twofish(&[2; 32]),
        MaskCipher::new(&[3; 16], false).unwrap(),
    ];
    let specs: Vec<_> = (0..300)
        .map(|i| (i % 3, [i as u8; 12], u32::MAX - i as u32, 1 + i * 97))
        .collect();
    same_as_cpu(&*cuda(), &keys, &specs);
}

#[test]
fn opencl_twofish_batches_split_across_launches() {
    let Some(b) = fresh_opencl() else { return };
    let keys = [twofish(&[1; 16]), twofish(&[2; 32]), twofish(&[3; 32])];
    let specs: Vec<_> = (0..MAX_CONTEXTS * 2 + 37)
        .map(|i| (i % 3, [(i % 251) as u8; 12], i as u32 * 7, 16 + (i % 5) * 1000))
        .collect();
    same_as_cpu(&b, &keys, &specs);
    assert_eq!(b.launches(), 3);
    assert_eq!(b.cpu_masks(), 0, "every mask was made on the device");
    assert_eq!(b.device_masks(), specs.len() as u64);
    // More blocks than one launch holds: 10 MiB masks, 16 MiB per launch.
    let big = 10 << 20;
    let before = b.launches();
    same_as_cpu(&b, &keys, &[(0, [1; 12], 5, big), (1, [2; 12], u32::MAX, big)]);
    assert_eq!(b.launches() - before, 2);
    assert_eq!(b.cpu_masks(), 0);
}

#[test]
fn opencl_one_batch_of_aes_and_twofish_keys() {
    let Some(b) = fresh_opencl() else { return };
    let keys = [
        MaskCipher::new(&[4; 16], false).unwrap(),
        twofish(&[4; 16]),
        MaskCipher::new(&[5; 32], false).unwrap(),
        twofish(&[5; 32]),
    ];
    // Runs of one cipher each go to one launch of that cipher's kernel.
    let specs: Vec<_> = (0..40)
        .map(|i| ((i / 10) % 4, [i as u8; 12], u32::MAX - i as u32, 1 + i * 300))
        .collect();
    same_as_cpu(&b, &keys, &specs);
    assert_eq!((b.launches(), b.device_masks(), b.cpu_masks()), (4, 40, 0));
}

#[test]
fn engine_on_opencl_makes_twofish_masks_on_the_device() {
    let Some(b) = fresh_opencl() else { return };
    let e = Engine::with_backend(EngineConfig::default(), Box::new(b)).unwrap();
    let cpu = Engine::new(EngineConfig {
        speculation: false,
        ..EngineConfig::default()
    })
    .unwrap();
    let k = e.add_raw_key_cipher(XtsCipher::Twofish, &[0x42; 32]).unwrap();
    let kc = cpu.add_raw_key_cipher(XtsCipher::Twofish, &[0x42; 32]).unwrap();
    let ctxs: Vec<_> = (0..100).map(|_| e.context()).collect();
    let tickets: Vec<_> = ctxs
        .iter()
        .enumerate()
        .map(|(i, c)| e.define(c, k, &[i as u8; 12], i as i32).unwrap())
        .collect();
    e.quiesce();
    for (i, (c, t)) in ctxs.iter().zip(&tickets).enumerate() {
        let mut a = vec![0x5au8; 4096];
        let ej0 = e.apply_block(c, t, &mut a).unwrap();
        let mut want = vec![0x5au8; 4096];
        let ej0_want = cpu.open_direct(kc, &[i as u8; 12], &mut want).unwrap();
        assert_eq!((a, ej0), (want, ej0_want), "context {i}");
    }
    let s = e.stats();
    assert_eq!(s.twofish_keys, 1);
    assert!(s.device_masks >= 100, "the device made the masks: {s}");
    assert_eq!(s.device_cpu_masks, 0, "none was left to the cpu: {s}");
    assert!(s.device_launches >= 1, "{s}");
}

/// A device backend stand-in whose launches block until the test lets them go.
struct Stalled {
    started: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Backend for Stalled {
    fn name(&self) -> String {
        "stalled device".into()
    }
    fn chunk(&self) -> usize {
        512
    }
    fn driver_threads(&self) -> Option<usize> {
        Some(1)
    }
    fn is_device(&self) -> bool {
        true
    }
    fn make(&self, jobs: &mut [MaskJob<'_>]) {
        let _ = self.started.lock().unwrap().send(());
        // Bounded, so a missing hybrid path fails the test instead of hanging it.
        let _ = self
            .release
            .lock()
            .unwrap()
            .recv_timeout(std::time::Duration::from_secs(30));
        CpuBackend.make(jobs);
    }
}

#[test]
fn apply_on_a_stalled_device_mask_makes_it_inline() {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    let b = Stalled {
        started: std::sync::Mutex::new(started_tx),
        release: std::sync::Mutex::new(release_rx),
    };
    let e = Engine::with_backend(EngineConfig::default(), Box::new(b)).unwrap();
    assert_eq!(e.threads(), 1);
    let k = e.add_raw_key(&[7; 16]).unwrap();
    let ctx = e.context();
    let t = e.define(&ctx, k, &[1; 12], 0).unwrap();
    started_rx.recv().unwrap(); // the device holds the mask now
    let mut got = vec![0u8; 4096];
    let ej0 = e.apply_block(&ctx, &t, &mut got).unwrap();
    let s = e.stats();
    assert_eq!(
        (s.inline, s.waits, s.ready_hits),
        (1, 0, 0),
        "made inline while the device stalled"
    );
    release_tx.send(()).unwrap();
    let mut want = vec![0u8; 4096];
    let ej0_want = e.open_direct(k, &[1; 12], &mut want).unwrap();
    assert_eq!((got, ej0), (want, ej0_want));
    // The device's mask still lands and serves the next apply.
    e.quiesce();
    let mut again = vec![0u8; 4096];
    e.apply_block(&ctx, &t, &mut again).unwrap();
    assert_eq!(e.stats().ready_hits, 1);
}

#[test]
fn engine_shutdown_does_not_wait_for_a_hung_device() {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let b = Stalled {
        started: std::sync::Mutex::new(started_tx),
        release: std::sync::Mutex::new(release_rx),
    };
    let e = Engine::with_backend(EngineConfig::default(), Box::new(b)).unwrap();
    let k = e.add_raw_key(&[7; 16]).unwrap();
    let ctx = e.context();
    e.define(&ctx, k, &[1; 12], 0).unwrap();
    started_rx.recv().unwrap(); // the driver thread is stuck in its launch
    drop(ctx);
    drop(e); // returns although the launch never ends (the backend waits 30 s)
             // The stuck launch was never released: the drop above returned on its own.
    assert!(release_tx.send(()).is_ok(), "the stuck driver thread still waits");
}
