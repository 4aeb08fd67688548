//! A device for whole XTS requests, attached to the engine beside its mask
//! backend (`--engine opencl|cuda` on an `xts` volume or a container): the
//! engine hands it raw XTS keys and counts what it ran. The device side
//! (the fused kernels, the size threshold, the fallback) is
//! `gpu::XtsRoute`.

use std::sync::Arc;
use warpfs_crypto::XtsCipher;
use warpfs_keystream::XtsOffload;

/// What a device ran for XTS so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XtsCounts {
    /// Requests the device ran.
    pub requests: u64,
    /// Bytes of those requests.
    pub bytes: u64,
    /// Requests handed to the device that it gave back to the CPU (a
    /// failed launch, or the device dropped after repeated failures).
    pub fallbacks: u64,
}

/// A device that runs whole XTS requests.
pub trait XtsDevicePort: Send + Sync {
    /// The device, for stats and logs.
    fn name(&self) -> String;
    /// The device's handle for one XTS key (`raw` = Key1 ‖ Key2, 32 or 64
    /// bytes), expanded for the kernels on locked pages.
    fn key(&self, cipher: XtsCipher, raw: &[u8]) -> Result<Arc<dyn XtsOffload>, String>;
    /// The counters.
    fn counts(&self) -> XtsCounts;
}
