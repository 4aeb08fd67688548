//! GPU mask backends (GipherFS §3.2.2, EncFS++ §2/§5): the OpenCL and CUDA
//! host glue around shared kernels (`kernels/aes_ctr.cl`, and
//! `kernels/twofish_ctr.cl` for Twofish keys), and the [`DeviceBackend`]
//! that packs the engine's batches into launches.
//!
//! A launch serves up to [`MAX_CONTEXTS`] contexts of one block cipher in
//! the order the engine
//! hands them (priority order). Each driver has two lanes (queues/streams
//! with their own buffers); the engine runs one driver thread per lane, so
//! one batch computes while the other copies back. Only masks cross the
//! bus. A launch that fails is made on the CPU instead; after
//! [`MAX_FAILURES`] failures the device is dropped and the backend makes
//! every mask on the CPU, never crashing the mount.

mod cuda;
mod device;
mod opencl;
mod plan;
mod select;
mod signals;
mod tables;
mod xts;
mod xts_cuda;
mod xts_keys;
mod xts_route;

pub use device::{MAX_BLOCKS, MAX_CONTEXTS, MAX_KEYS};
pub use select::{select_backend, EngineKind, Selected};
pub use xts::{XtsDevice, TF_KERNEL_SRC, XTS_CHUNK, XTS_GROUP, XTS_KERNEL_SRC};
pub use xts_cuda::XtsCudaDevice;
pub use xts_keys::XtsKeys;
pub use xts_route::{XtsRoute, ENV_XTS_DEVICE_MIN, XTS_DEVICE_MIN};

use crate::backend::{Backend, CpuBackend, DeviceCounts, MaskJob};
use crate::MaskCipher;
use device::Device;
use plan::{eligible, plan, scatter};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use warpfs_crypto::LockedWords;

/// Failed launches after which the device is dropped (cpu only).
pub const MAX_FAILURES: usize = 3;

/// A backend that makes masks on a GPU (or any OpenCL device).
pub struct DeviceBackend {
    kind: &'static str,
    dev: Box<dyn Device>,
    busy: Vec<AtomicBool>,
    /// Per lane: the key table of the launch under way, staged on locked
    /// pages (grown to the largest table a launch needed, zeroed on drop).
    staging: Vec<Mutex<LockedWords>>,
    next_lane: AtomicUsize,
    failures: AtomicUsize,
    dropped: AtomicBool,
    launches: AtomicU64,
    cpu_masks: AtomicU64,
    device_masks: AtomicU64,
}

impl DeviceBackend {
    /// Open an OpenCL device: any device (`any`, pocl included) or only a
    /// real GPU; checked against the cpu backend before it is returned.
    pub fn opencl(any: bool) -> Result<Self, String> {
        let want = if any { opencl::Want::Any } else { opencl::Want::RealGpu };
        let dev = std::panic::catch_unwind(|| opencl::OpenClDevice::open(want))
            .unwrap_or_else(|_| Err("the OpenCL driver panicked while opening".into()))?;
        Self::checked("opencl", Box::new(dev))
    }

    /// Open CUDA device 0 (needs libcuda and libnvrtc), self-tested.
    pub fn cuda() -> Result<Self, String> {
        Self::checked("cuda", Box::new(cuda::CudaDevice::open()?))
    }

    /// Whether libcuda and libnvrtc are present (no device opened).
    pub fn cuda_present() -> bool {
        cuda::libraries_present()
    }

    fn checked(kind: &'static str, dev: Box<dyn Device>) -> Result<Self, String> {
        let lanes = dev.lanes().max(1);
        let b = Self {
            kind,
            dev,
            busy: (0..lanes).map(|_| AtomicBool::new(false)).collect(),
            staging: (0..lanes).map(|_| Mutex::new(LockedWords::zeroed(0))).collect(),
            next_lane: AtomicUsize::new(0),
            failures: AtomicUsize::new(0),
            dropped: AtomicBool::new(false),
            launches: AtomicU64::new(0),
            cpu_masks: AtomicU64::new(0),
            device_masks: AtomicU64::new(0),
        };
        b.self_test()?;
        Ok(b)
    }

    /// Make masks for a fixed set of keys (AES and Twofish, 128 and 256
    /// bits), nonces, counters (the 32-bit wrap included) and lengths on
    /// every lane and compare with the cpu.
    fn self_test(&self) -> Result<(), String> {
        use warpfs_crypto::XtsCipher::{Aes, Twofish};
        let keys: Vec<MaskCipher> = [
            (Aes, &[0x2bu8; 16][..]),
            (Aes, &[0x60u8; 32][..]),
            (Twofish, &[0x2bu8; 16][..]),
            (Twofish, &[0x60u8; 32][..]),
        ]
        .iter()
        .map(|&(c, k)| MaskCipher::with_cipher(c, k, false).expect("valid key"))
        .collect();
        let lens = [16usize, 4112, 1, 33, 4096 * 3 + 7, 4112, 20, 4096 * 2 + 9];
        let counters = [1u32, u32::MAX - 2, 0, 77, 1 << 31, u32::MAX - 1, 1, 9];
        let key_of = |i: usize| &keys[i % keys.len()];
        for lane in 0..self.busy.len() {
            let mut outs: Vec<Vec<u8>> = lens.iter().map(|&n| vec![0u8; n]).collect();
            let mut jobs: Vec<MaskJob<'_>> = outs
                .iter_mut()
                .enumerate()
                .map(|(i, o)| MaskJob {
                    cipher: key_of(i),
                    nonce: [i as u8 ^ 0xa5; 12],
                    counter: counters[i],
                    out: &mut o[..],
                })
                .collect();
            let mut staging = self.staging(lane);
            for p in plan(&jobs) {
                let l = p.launch(&mut staging);
                self.dev
                    .launch(lane, &l, &mut |bytes| scatter(&mut jobs[p.range.clone()], bytes))
                    .map_err(|e| format!("self-test launch: {e}"))?;
            }
            drop(staging);
            drop(jobs);
            for (i, o) in outs.iter().enumerate() {
                let mut want = vec![0u8; o.len()];
                key_of(i).fill(&[i as u8 ^ 0xa5; 12], counters[i], &mut want);
                if *o != want {
                    return Err(format!("self-test: lane {lane} mask {i} differs from the cpu backend"));
                }
            }
        }
        Ok(())
    }

    /// Whether the device was dropped after repeated failures.
    pub fn dropped(&self) -> bool {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Launches run so far.
    pub fn launches(&self) -> u64 {
        self.launches.load(Ordering::Relaxed)
    }

    /// Masks this backend made on the CPU (no raw key, too long, failures).
    pub fn cpu_masks(&self) -> u64 {
        self.cpu_masks.load(Ordering::Relaxed)
    }

    /// Masks made on the device (by launches that succeeded).
    pub fn device_masks(&self) -> u64 {
        self.device_masks.load(Ordering::Relaxed)
    }

    /// Lane `lane`'s staging buffer (a lane shared by two threads stages
    /// one launch at a time).
    fn staging(&self, lane: usize) -> std::sync::MutexGuard<'_, LockedWords> {
        self.staging[lane % self.staging.len()]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn take_lane(&self) -> (usize, bool) {
        for (i, b) in self.busy.iter().enumerate() {
            if b.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return (i, true);
            }
        }
        (self.next_lane.fetch_add(1, Ordering::Relaxed) % self.busy.len(), false)
    }

    fn cpu(&self, jobs: &mut [MaskJob<'_>]) {
        self.cpu_masks.fetch_add(jobs.len() as u64, Ordering::Relaxed);
        CpuBackend.make(jobs);
    }

    fn fail(&self, why: &str) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(
            "{} backend: {why}; masks made on the cpu ({n} of {MAX_FAILURES} failures)",
            self.kind
        );
        if n >= MAX_FAILURES && !self.dropped.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "{} backend: device dropped after {n} failures; the cpu makes every mask now",
                self.kind
            );
        }
    }
}

impl Backend for DeviceBackend {
    fn name(&self) -> String {
        let base = format!("{} ({})", self.kind, self.dev.name());
        if self.dropped() {
            format!("{base}, dropped after {MAX_FAILURES} failures: cpu")
        } else {
            base
        }
    }

    fn chunk(&self) -> usize {
        MAX_CONTEXTS
    }

    fn driver_threads(&self) -> Option<usize> {
        Some(self.busy.len())
    }

    fn is_device(&self) -> bool {
        true
    }

    fn device_counts(&self) -> Option<DeviceCounts> {
        Some(DeviceCounts {
            launches: self.launches(),
            device_masks: self.device_masks(),
            cpu_masks: self.cpu_masks(),
        })
    }

    fn make(&self, jobs: &mut [MaskJob<'_>]) {
        if self.dropped() {
            return self.cpu(jobs);
        }
        // Jobs the device cannot take (keys added as expanded ContentKeys,
        // masks longer than a lane's buffer) go to the cpu first.
        let mut idx: Vec<usize> = Vec::with_capacity(jobs.len());
        for (i, j) in jobs.iter_mut().enumerate() {
            if eligible(j) {
                idx.push(i);
            } else {
                self.cpu(std::slice::from_mut(j));
            }
        }
        if idx.is_empty() {
            return;
        }
        // Re-borrow the eligible jobs as one contiguous list.
        let mut dev_jobs: Vec<MaskJob<'_>> = Vec::with_capacity(idx.len());
        let mut rest: &mut [MaskJob<'_>] = jobs;
        let mut base = 0;
        for &i in &idx {
            let (_, tail) = rest.split_at_mut(i - base);
            let (one, tail) = tail.split_at_mut(1);
            let j = &mut one[0];
            dev_jobs.push(MaskJob {
                cipher: j.cipher,
                nonce: j.nonce,
                counter: j.counter,
                out: &mut *j.out,
            });
            rest = tail;
            base = i + 1;
        }
        let (lane, owned) = self.take_lane();
        let mut staging = self.staging(lane);
        for p in plan(&dev_jobs) {
            let range = p.range.clone();
            if self.dropped() {
                self.cpu(&mut dev_jobs[range]);
                continue;
            }
            let l = p.launch(&mut staging);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.dev
                    .launch(lane, &l, &mut |bytes| scatter(&mut dev_jobs[range.clone()], bytes))
            }))
            .unwrap_or_else(|_| Err("the driver panicked during a launch".into()));
            self.launches.fetch_add(1, Ordering::Relaxed);
            match r {
                Ok(()) => {
                    self.device_masks.fetch_add(range.len() as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    self.fail(&e);
                    self.cpu(&mut dev_jobs[range]);
                }
            }
        }
        drop(staging);
        if owned {
            self.busy[lane].store(false, Ordering::Release);
        }
    }
}

impl std::fmt::Debug for DeviceBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&Backend::name(self))
    }
}

/// Share a backend between engines or a bench and an engine.
impl Backend for Arc<DeviceBackend> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn chunk(&self) -> usize {
        (**self).chunk()
    }
    fn driver_threads(&self) -> Option<usize> {
        (**self).driver_threads()
    }
    fn is_device(&self) -> bool {
        true
    }
    fn device_counts(&self) -> Option<DeviceCounts> {
        (**self).device_counts()
    }
    fn make(&self, jobs: &mut [MaskJob<'_>]) {
        (**self).make(jobs)
    }
}

#[cfg(test)]
mod tests {
    use super::device::Launch;
    use super::tables::{self, RK_WORDS};
    use super::*;

    /// A device whose every launch fails.
    struct Broken;
    impl Device for Broken {
        fn name(&self) -> String {
            "broken".into()
        }
        fn lanes(&self) -> usize {
            2
        }
        fn launch(&self, _: usize, _: &Launch<'_>, _: &mut dyn FnMut(&[u8])) -> Result<(), String> {
            Err("launch failed".into())
        }
    }

    fn backend(dev: Box<dyn Device>) -> DeviceBackend {
        DeviceBackend {
            kind: "test",
            dev,
            busy: (0..2).map(|_| AtomicBool::new(false)).collect(),
            staging: (0..2).map(|_| Mutex::new(LockedWords::zeroed(0))).collect(),
            next_lane: AtomicUsize::new(0),
            failures: AtomicUsize::new(0),
            dropped: AtomicBool::new(false),
            launches: AtomicU64::new(0),
            cpu_masks: AtomicU64::new(0),
            device_masks: AtomicU64::new(0),
        }
    }

    #[test]
    fn failed_launches_fall_back_to_the_cpu_and_drop_the_device() {
        assert!(
            DeviceBackend::checked("test", Box::new(Broken)).is_err(),
            "the self-test fails"
        );
        let b = backend(Box::new(Broken));
        let key = MaskCipher::new(&[5u8; 16], false).unwrap();
        for round in 0..5u32 {
            let mut out = vec![0u8; 100];
            b.make(&mut [MaskJob {
                cipher: &key,
                nonce: [1; 12],
                counter: round,
                out: &mut out,
            }]);
            let mut want = vec![0u8; 100];
            key.fill(&[1; 12], round, &mut want);
            assert_eq!(out, want, "round {round}: the cpu made the mask");
            assert_eq!(b.dropped(), round + 1 >= MAX_FAILURES as u32);
        }
        assert_eq!(b.launches(), MAX_FAILURES as u64, "no launch once dropped");
        assert_eq!(b.cpu_masks(), 5);
        assert!(Backend::name(&b).contains("dropped"));
    }

    /// A device that records where each launch's key table lies and what
    /// it holds, then fails (the cpu makes the masks).
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<Vec<(usize, Vec<u32>)>>);
    impl Device for Arc<Recorder> {
        fn name(&self) -> String {
            "recorder".into()
        }
        fn lanes(&self) -> usize {
            2
        }
        fn launch(&self, _: usize, l: &Launch<'_>, _: &mut dyn FnMut(&[u8])) -> Result<(), String> {
            self.0.lock().unwrap().push((l.rk.as_ptr() as usize, l.rk.to_vec()));
            Err("recorded".into())
        }
    }

    #[test]
    fn launch_key_tables_are_staged_on_the_lanes_locked_pages() {
        let rec = Arc::new(Recorder::default());
        let b = backend(Box::new(rec.clone()));
        let keys = [
            MaskCipher::new(&[7; 32], false).unwrap(),
            MaskCipher::with_cipher(warpfs_crypto::XtsCipher::Twofish, &[7; 32], false).unwrap(),
        ];
        for k in &keys {
            let mut out = vec![0u8; 64];
            b.make(&mut [MaskJob {
                cipher: k,
                nonce: [2; 12],
                counter: 1,
                out: &mut out,
            }]);
        }
        let seen = rec.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        let (aes, _) = tables::expand(&[7; 32]).unwrap();
        assert_eq!(&seen[0].1[..], &aes[..RK_WORDS]);
        assert_eq!(&seen[1].1[..], keys[1].twofish_device_words().unwrap());
        // Both tables were read from a lane's staging buffer, whose pages
        // are locked (where mlock is allowed).
        let lane = |addr: usize| {
            (0..2).find(|&i| {
                let s = b.staging(i);
                let base = s.as_ptr() as usize;
                (base..base + s.len() * 4).contains(&addr)
            })
        };
        for (addr, _) in &seen {
            let i = lane(*addr).expect("a key table outside the lanes' staging buffers");
            if may_lock() {
                assert!(b.staging(i).is_locked(), "lane {i}'s staging buffer is not locked");
            }
        }
    }

    /// Whether this process may lock pages in RAM (root, or a large
    /// enough RLIMIT_MEMLOCK).
    fn may_lock() -> bool {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain getrlimit into a local.
        unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
        // SAFETY: no preconditions.
        let euid = unsafe { libc::geteuid() };
        euid == 0 || lim.rlim_cur >= 1 << 20
    }
}
