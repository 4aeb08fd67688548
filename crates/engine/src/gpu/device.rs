//! What a GPU driver (OpenCL or CUDA host glue) provides to the device
//! backend: lanes that each run one launch of a shared mask kernel (AES or
//! Twofish) at a time, with buffers allocated once.

/// Words per context descriptor (see kernels/aes_ctr.cl).
pub const DESC_WORDS: usize = 8;
/// Counter blocks per work item (BPW in the kernel).
pub const BLOCKS_PER_ITEM: usize = 4;
/// Work items per group (the kernel loads one Te0 entry per work item).
pub const GROUP: usize = 256;
/// Most contexts one launch serves.
pub const MAX_CONTEXTS: usize = 512;
/// Most distinct keys one launch carries.
pub const MAX_KEYS: usize = 64;
/// Most counter blocks one launch makes (16 MiB of masks per lane).
pub const MAX_BLOCKS: usize = 1 << 20;

use std::sync::Mutex;

/// The kernel source shared by OpenCL and NVRTC.
pub const KERNEL_SRC: &str = include_str!("../../kernels/aes_ctr.cl");
/// The kernel's entry point.
pub const KERNEL_NAME: &str = "warpfs_aes_ctr";
/// The Twofish mask kernel (same arguments and descriptors), after the
/// Twofish round function it shares with the XTS-Twofish kernel.
pub const TF_CTR_SRC: &str = concat!(
    include_str!("../../kernels/twofish_round.cl"),
    include_str!("../../kernels/twofish_ctr.cl")
);
/// The Twofish mask kernel's entry point.
pub const TF_CTR_NAME: &str = "warpfs_twofish_ctr";
/// Key words per Twofish key slot (`TF_WORDS` in the kernel).
pub const TF_WORDS: usize = warpfs_crypto::twofish::Twofish::DEVICE_WORDS;
/// Words of a lane's key buffer: `MAX_KEYS` slots of the larger kind.
pub const KEY_BUF_WORDS: usize = MAX_KEYS * TF_WORDS;

/// One launch, ready to upload: round keys, descriptors, sizes.
pub struct Launch<'a> {
    /// Whether the keys are Twofish (the Twofish kernel runs) or AES.
    pub twofish: bool,
    /// `MAX_KEYS`-bounded key table: `RK_WORDS` per AES key, `TF_WORDS`
    /// per Twofish key. Staged on the lane's locked pages.
    pub rk: &'a [u32],
    /// `DESC_WORDS` per context.
    pub desc: &'a [u32],
    /// Number of contexts.
    pub ndesc: u32,
    /// Work items with work (the global size is this rounded up to `GROUP`).
    pub items: u32,
    /// Counter blocks written (the output is `blocks * 16` bytes).
    pub blocks: usize,
}

/// A GPU driver: `lanes()` independent queues/streams, each with its own
/// device and pinned host buffers.
pub trait Device: Send + Sync {
    /// Platform and device, in words.
    fn name(&self) -> String;
    /// Number of lanes (queues / streams).
    fn lanes(&self) -> usize;
    /// Run `l` on lane `lane`, copy the masks back into the lane's pinned
    /// buffer and hand its first `l.blocks * 16` bytes to `take`.
    fn launch(&self, lane: usize, l: &Launch<'_>, take: &mut dyn FnMut(&[u8])) -> Result<(), String>;
}

/// The checks and lane handling every driver's [`Device::launch`] shares:
/// refuse a launch larger than the buffers allocated at open, lock lane
/// `lane` (modulo the lane count; a poisoned lock is taken over, since a
/// lane's buffers stay valid), answer an empty launch with no bytes, and
/// otherwise hand the locked lane to the driver's `run`.
pub fn launch_on<L>(
    lanes: &[Mutex<L>],
    lane: usize,
    l: &Launch<'_>,
    take: &mut dyn FnMut(&[u8]),
    run: impl FnOnce(&mut L, &mut dyn FnMut(&[u8])) -> Result<(), String>,
) -> Result<(), String> {
    if l.blocks > MAX_BLOCKS
        || l.desc.len() > MAX_CONTEXTS * DESC_WORDS
        || l.rk.len() > MAX_KEYS * if l.twofish { TF_WORDS } else { super::tables::RK_WORDS }
    {
        return Err("launch larger than the lane's buffers".into());
    }
    let mut guard = lanes[lane % lanes.len()].lock().unwrap_or_else(|e| e.into_inner());
    if l.items == 0 {
        take(&[]);
        return Ok(());
    }
    run(&mut guard, take)
}
