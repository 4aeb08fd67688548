//! The seam for handing one large XTS request to a device: the fused XTS
//! kernels of the engine's GPU backends take whole data units of a request
//! (the data itself crosses to the device, unlike masks). The content
//! layer and the container call it for runs of at least
//! [`XtsOffload::min_bytes`] and do the request on the CPU whenever it
//! declines.

/// Runs whole XTS data units of one key on a device.
pub trait XtsOffload: Send + Sync {
    /// Requests shorter than this stay on the CPU (a launch costs more
    /// than it saves below it).
    fn min_bytes(&self) -> usize;

    /// Encrypt (`decrypt` false) or decrypt `data` in place: whole data
    /// units of `unit` bytes, unit k with the tweak `base` XOR (`first` +
    /// k) read as a 128-bit little-endian integer. `true`: done, the bytes
    /// equal the CPU's; `false`: the device failed or is gone, `data` is
    /// exactly as it was and the caller does the request on the CPU.
    fn crypt(&self, decrypt: bool, unit: usize, base: [u8; 16], first: u64, data: &mut [u8]) -> bool;
}
