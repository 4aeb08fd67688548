//! Whole XTS requests on a device (docs/decisions/0093): an `xts` volume
//! or a container mounted with `--engine opencl|cuda` hands every request
//! of at least [`XTS_DEVICE_MIN`] bytes to the fused XTS kernels
//! ([`XtsDevice`], [`XtsCudaDevice`]); shorter ones, and any the device
//! fails, run on the CPU. A failed request is put back exactly as it was
//! (from a copy taken before the launch), counted, and logged once; after
//! [`MAX_FAILURES`] the device is dropped and every request stays on the
//! CPU, as the mask backends do.

use super::xts_keys::XtsKeys;
use super::{EngineKind, XtsCudaDevice, XtsDevice, MAX_FAILURES, XTS_CHUNK};
use crate::xts_device::{XtsCounts, XtsDevicePort};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use warpfs_crypto::{XtsCipher, XtsKey};
use warpfs_keystream::XtsOffload;
use zeroize::Zeroizing;

/// Requests of at least this many bytes go to the device: 128 KiB, the
/// largest request a sequential reader's data mostly comes in (the
/// decrypt-ahead chunk, `fuse::ahead::CHUNK`, and the kernel's default
/// read-ahead window, which a container keeps); a larger threshold would
/// keep every such read on the CPU. It is half a launch chunk
/// ([`XTS_CHUNK`]): one launch, its copies and kernel start shared by 32
/// data units. On pocl the kernels' rate was flat from 16 KiB up
/// (bench/results/2026-11-27-gpu-xts/), so no measurement argues for more;
/// no GPU crossover has been measured. Tunable with [`ENV_XTS_DEVICE_MIN`].
pub const XTS_DEVICE_MIN: usize = 128 << 10;

/// Environment variable overriding [`XTS_DEVICE_MIN`] (bytes, at least 16).
pub const ENV_XTS_DEVICE_MIN: &str = "WARPFS_XTS_DEVICE_MIN";

/// The host side of the fused XTS kernels (OpenCL or CUDA).
pub(super) trait XtsKernels: Send + Sync {
    fn name(&self) -> String;
    /// Encrypt or decrypt whole units in place (data may be left half
    /// done on an error).
    fn run(
        &self,
        keys: &XtsKeys,
        dec: bool,
        unit: usize,
        first: u128,
        base: [u8; 16],
        data: &mut [u8],
    ) -> Result<(), String>;
}

/// Both devices' kernels take the same calls.
macro_rules! xts_kernels {
    ($($dev:ty),*) => {$(
        impl XtsKernels for $dev {
            fn name(&self) -> String {
                <$dev>::name(self).to_string()
            }
            fn run(
                &self,
                keys: &XtsKeys,
                dec: bool,
                unit: usize,
                first: u128,
                base: [u8; 16],
                data: &mut [u8],
            ) -> Result<(), String> {
                if dec {
                    self.decrypt(keys, unit, first, base, data)
                } else {
                    self.encrypt(keys, unit, first, base, data)
                }
            }
        }
    )*};
}

xts_kernels!(XtsDevice, XtsCudaDevice);

struct Inner {
    kind: &'static str,
    dev: Box<dyn XtsKernels>,
    min: usize,
    requests: AtomicU64,
    bytes: AtomicU64,
    fallbacks: AtomicU64,
    failures: AtomicUsize,
    dropped: AtomicBool,
}

/// A device for whole XTS requests with its threshold, fallback and
/// counters; cheap to clone (one device behind it).
#[derive(Clone)]
pub struct XtsRoute(Arc<Inner>);

/// The threshold: [`ENV_XTS_DEVICE_MIN`] when set to a number of at least
/// 16, else [`XTS_DEVICE_MIN`].
fn threshold() -> usize {
    match std::env::var(ENV_XTS_DEVICE_MIN) {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= 16 => n,
            _ => {
                tracing::warn!("{ENV_XTS_DEVICE_MIN}={v:?} is not a byte count of at least 16; using {XTS_DEVICE_MIN}");
                XTS_DEVICE_MIN
            }
        },
        Err(_) => XTS_DEVICE_MIN,
    }
}

impl XtsRoute {
    /// Open the XTS kernels of the device `kind` names: `opencl` any
    /// OpenCL device (pocl included), `cuda` CUDA device 0, `auto` CUDA if
    /// present, else an OpenCL GPU; self-tested against the CPU's XTS.
    pub fn open(kind: EngineKind) -> Result<Self, String> {
        match kind {
            EngineKind::Cpu => Err("the cpu engine has no XTS device".into()),
            EngineKind::OpenCl => Self::checked("opencl", Box::new(XtsDevice::opencl(true, XTS_CHUNK)?)),
            EngineKind::Cuda => Self::checked("cuda", Box::new(XtsCudaDevice::open(XTS_CHUNK)?)),
            EngineKind::Auto => match XtsCudaDevice::open(XTS_CHUNK) {
                Ok(d) => Self::checked("cuda", Box::new(d)),
                Err(_) => Self::checked("opencl", Box::new(XtsDevice::opencl(false, XTS_CHUNK)?)),
            },
        }
    }

    fn checked(kind: &'static str, dev: Box<dyn XtsKernels>) -> Result<Self, String> {
        let r = Self::with_device(kind, dev, threshold());
        r.self_test()?;
        Ok(r)
    }

    pub(super) fn with_device(kind: &'static str, dev: Box<dyn XtsKernels>, min: usize) -> Self {
        Self(Arc::new(Inner {
            kind,
            dev,
            min: min.max(16),
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            failures: AtomicUsize::new(0),
            dropped: AtomicBool::new(false),
        }))
    }

    /// Both directions of XTS-AES-128, XTS-AES-256 and XTS-Twofish on
    /// three 4 KiB units whose unit numbers carry across a 32-bit word,
    /// compared with the CPU's XTS.
    fn self_test(&self) -> Result<(), String> {
        let base = [0x5au8; 16];
        let first = u64::from(u32::MAX) - 1;
        for (cipher, len) in [(XtsCipher::Aes, 32), (XtsCipher::Aes, 64), (XtsCipher::Twofish, 64)] {
            let raw: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37) ^ 0xc3).collect();
            let cpu = XtsKey::new(cipher, &raw).map_err(|e| e.to_string())?;
            let keys = XtsKeys::with_cipher(cipher, &raw)?;
            let pt: Vec<u8> = (0..3 * 4096u32).map(|i| (i * 7 + i / 4096) as u8).collect();
            let mut want = pt.clone();
            for (k, u) in want.chunks_mut(4096).enumerate() {
                cpu.encrypt_unit(&tweak(base, first + k as u64), u);
            }
            let mut got = pt.clone();
            self.0.dev.run(&keys, false, 4096, first.into(), base, &mut got)?;
            if got != want {
                return Err(format!("self-test: {cipher:?} encryption differs from the cpu"));
            }
            self.0.dev.run(&keys, true, 4096, first.into(), base, &mut got)?;
            if got != pt {
                return Err(format!("self-test: {cipher:?} decryption differs from the cpu"));
            }
        }
        Ok(())
    }

    /// Requests shorter than this stay on the CPU.
    pub fn min_bytes(&self) -> usize {
        self.0.min
    }

    /// Whether the device was dropped after repeated failures.
    pub fn dropped(&self) -> bool {
        self.0.dropped.load(Relaxed)
    }

    fn crypt(&self, keys: &XtsKeys, dec: bool, unit: usize, base: [u8; 16], first: u64, data: &mut [u8]) -> bool {
        let i = &self.0;
        if self.dropped() {
            i.fallbacks.fetch_add(1, Relaxed);
            return false;
        }
        // A failed launch may leave the request half done: keep what it
        // was to put back (zeroed when dropped: it may be plaintext).
        let before = Zeroizing::new(data.to_vec());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            i.dev.run(keys, dec, unit, first.into(), base, data)
        }))
        .unwrap_or_else(|_| Err("the driver panicked during XTS".into()));
        match r {
            Ok(()) => {
                i.requests.fetch_add(1, Relaxed);
                i.bytes.fetch_add(data.len() as u64, Relaxed);
                true
            }
            Err(e) => {
                data.copy_from_slice(&before);
                i.fallbacks.fetch_add(1, Relaxed);
                let n = i.failures.fetch_add(1, Relaxed) + 1;
                if n == 1 {
                    tracing::warn!(
                        "{} XTS device: {e}; the request was done on the cpu (counted in xts_device_fallbacks)",
                        i.kind
                    );
                }
                if n >= MAX_FAILURES && !i.dropped.swap(true, Relaxed) {
                    tracing::warn!(
                        "{} XTS device: dropped after {n} failures; all XTS runs on the cpu now",
                        i.kind
                    );
                }
                false
            }
        }
    }
}

/// The tweak of unit `n` over `base`: `base` XOR `n` (little endian).
fn tweak(base: [u8; 16], n: u64) -> [u8; 16] {
    (u128::from_le_bytes(base) ^ u128::from(n)).to_le_bytes()
}

/// One XTS key expanded for the kernels (on locked pages), on a route.
struct RoutedKey {
    route: XtsRoute,
    keys: XtsKeys,
}

impl XtsOffload for RoutedKey {
    fn min_bytes(&self) -> usize {
        self.route.min_bytes()
    }
    fn crypt(&self, decrypt: bool, unit: usize, base: [u8; 16], first: u64, data: &mut [u8]) -> bool {
        self.route.crypt(&self.keys, decrypt, unit, base, first, data)
    }
}

impl XtsDevicePort for XtsRoute {
    fn name(&self) -> String {
        let base = format!("{} ({})", self.0.kind, self.0.dev.name());
        if self.dropped() {
            format!("{base}, dropped after {MAX_FAILURES} failures: cpu")
        } else {
            base
        }
    }

    fn key(&self, cipher: XtsCipher, raw: &[u8]) -> Result<Arc<dyn XtsOffload>, String> {
        Ok(Arc::new(RoutedKey {
            route: self.clone(),
            keys: XtsKeys::with_cipher(cipher, raw)?,
        }))
    }

    fn counts(&self) -> XtsCounts {
        XtsCounts {
            requests: self.0.requests.load(Relaxed),
            bytes: self.0.bytes.load(Relaxed),
            fallbacks: self.0.fallbacks.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU stand-in for the kernels that breaks on demand: it encrypts
    /// or decrypts the first unit, then fails when `fail` is set (a launch
    /// lost half way).
    struct Fake {
        fail: AtomicBool,
    }

    impl XtsKernels for Fake {
        fn name(&self) -> String {
            "fake".into()
        }
        fn run(
            &self,
            keys: &XtsKeys,
            dec: bool,
            unit: usize,
            first: u128,
            base: [u8; 16],
            data: &mut [u8],
        ) -> Result<(), String> {
            let cpu = XtsKey::new(keys.cipher(), &[9u8; 64]).unwrap();
            for (k, u) in data.chunks_mut(unit).enumerate() {
                let t = tweak(base, first as u64 + k as u64);
                if dec {
                    cpu.decrypt_unit(&t, u);
                } else {
                    cpu.encrypt_unit(&t, u);
                }
                if self.fail.load(Relaxed) {
                    return Err("launch lost".into());
                }
            }
            Ok(())
        }
    }

    fn route(fail: bool) -> XtsRoute {
        XtsRoute::with_device(
            "test",
            Box::new(Fake {
                fail: AtomicBool::new(fail),
            }),
            8192,
        )
    }

    #[test]
    fn a_request_the_device_ran_is_counted_and_equals_the_cpu() {
        let r = route(false);
        let k = r.key(XtsCipher::Aes, &[9u8; 64]).unwrap();
        assert_eq!(k.min_bytes(), 8192);
        let pt = vec![3u8; 3 * 4096];
        let mut buf = pt.clone();
        assert!(k.crypt(false, 4096, [1; 16], 7, &mut buf));
        let cpu = XtsKey::new(XtsCipher::Aes, &[9u8; 64]).unwrap();
        let mut want = pt.clone();
        for (i, u) in want.chunks_mut(4096).enumerate() {
            cpu.encrypt_unit(&tweak([1; 16], 7 + i as u64), u);
        }
        assert_eq!(buf, want);
        assert!(k.crypt(true, 4096, [1; 16], 7, &mut buf));
        assert_eq!(buf, pt);
        let c = r.counts();
        assert_eq!((c.requests, c.bytes, c.fallbacks), (2, 2 * 3 * 4096, 0));
        assert!(r.name().starts_with("test (fake)"), "{}", r.name());
    }

    #[test]
    fn a_failed_request_is_put_back_counted_and_the_device_dropped() {
        let r = route(true);
        let k = r.key(XtsCipher::Twofish, &[9u8; 64]).unwrap();
        let pt: Vec<u8> = (0..3 * 4096u32).map(|i| i as u8).collect();
        for n in 1..=MAX_FAILURES + 2 {
            let mut buf = pt.clone();
            assert!(!k.crypt(false, 4096, [0; 16], 0, &mut buf), "request {n}");
            assert!(buf == pt, "request {n}: the half-done launch was not undone");
            assert_eq!(r.dropped(), n >= MAX_FAILURES);
        }
        let c = r.counts();
        assert_eq!((c.requests, c.bytes, c.fallbacks), (0, 0, MAX_FAILURES as u64 + 2));
        assert!(r.name().contains("dropped"), "{}", r.name());
    }
}
