//! Backends make masks; the engine decides which and when. A backend is
//! driven by the engine's worker threads: each worker takes a batch of the
//! highest-priority pending contexts from the queue (one work unit) and hands
//! them to [`Backend::make`] in groups of [`Backend::chunk`] contexts.
//!
//! This module has the `cpu` backend; the `gpu` module (feature `gpu`) has
//! the OpenCL and CUDA backends, whose chunk is a whole launch and which run
//! one driver thread per lane instead of one worker per core.

use crate::MaskCipher;
use warpfs_crypto::Nonce;

/// One mask to make: the keystream of `cipher` for `nonce` from block
/// counter `counter`, written to `out`.
pub struct MaskJob<'a> {
    /// The expanded key.
    pub cipher: &'a MaskCipher,
    /// The 96-bit nonce.
    pub nonce: Nonce,
    /// Initial 32-bit block counter (1 with the warpfs layout: E(J0) first).
    pub counter: u32,
    /// Where the mask goes (its whole length is filled).
    pub out: &'a mut [u8],
}

/// Something that makes masks.
pub trait Backend: Send + Sync {
    /// Name for stats and logs.
    fn name(&self) -> String;

    /// How many contexts the engine claims per call to [`make`](Self::make).
    /// Claimed contexts make an `apply` wait instead of computing inline, so
    /// the CPU claims one at a time (an `apply` then waits for at most one
    /// mask); a GPU would claim a whole launch.
    fn chunk(&self) -> usize {
        1
    }

    /// Driver threads this backend wants instead of the configured worker
    /// count (a device backend: one per lane). `None`: the configuration's.
    fn driver_threads(&self) -> Option<usize> {
        None
    }

    /// Whether masks are made on a device: the engine then lets an `apply`
    /// wait only briefly for a claimed mask before making it inline, and
    /// only keys added as raw bytes can go to the device.
    fn is_device(&self) -> bool {
        false
    }

    /// A device backend's own counters (`None` for the cpu backend).
    fn device_counts(&self) -> Option<DeviceCounts> {
        None
    }

    /// Fill every job's `out`.
    fn make(&self, jobs: &mut [MaskJob<'_>]);
}

/// What a device backend did so far: launches run, masks made on the
/// device, masks it left to the cpu (keys without raw bytes, masks too long
/// for a launch, failed launches).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCounts {
    /// Launches run (failed ones included).
    pub launches: u64,
    /// Masks made on the device.
    pub device_masks: u64,
    /// Masks the backend made on the cpu instead.
    pub cpu_masks: u64,
}

/// The cpu backend: the calling worker thread runs the AES itself (AES-NI /
/// VAES or ARMv8 AES through `aes` 0.9, or the forced software AES, per key).
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> String {
        if aes::hardware_accelerated() && cfg!(target_arch = "aarch64") {
            "cpu (armv8 aes)".into()
        } else if aes::hardware_accelerated() {
            "cpu (aes-ni)".into()
        } else {
            "cpu (software aes)".into()
        }
    }

    fn make(&self, jobs: &mut [MaskJob<'_>]) {
        for j in jobs {
            j.cipher.fill(&j.nonce, j.counter, j.out);
        }
    }
}
