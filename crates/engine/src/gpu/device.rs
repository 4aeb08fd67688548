//! What a GPU driver (OpenCL or CUDA host glue) provides to the device
//! backend: lanes that each run one launch of the shared mask kernel at a
//! time, with buffers allocated once.

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

/// The kernel source shared by OpenCL and NVRTC.
pub const KERNEL_SRC: &str = include_str!("../../kernels/aes_ctr.cl");
/// The kernel's entry point.
pub const KERNEL_NAME: &str = "warpfs_aes_ctr";

/// One launch, ready to upload: round keys, descriptors, sizes.
pub struct Launch {
    /// `MAX_KEYS`-bounded round-key table, `RK_WORDS` per key.
    pub rk: zeroize::Zeroizing<Vec<u32>>,
    /// `DESC_WORDS` per context.
    pub desc: Vec<u32>,
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
    fn launch(&self, lane: usize, l: &Launch, take: &mut dyn FnMut(&[u8])) -> Result<(), String>;
}
