//! Engine configuration.

/// Default number of write-pool contexts (Z). The 64 gave ~39% hits
/// on sequential writes with the workers sharing one CPU with the FUSE
/// threads; 1024 (4 MiB of masks, ~4 MiB of memory per volume) gives 99%+
/// (ARCHITECTURE.md, "Hit rates").
pub const DEFAULT_POOL_SIZE: usize = 1024;
/// Default largest read window, in blocks (W max). 256 blocks = 1 MiB of
/// look-ahead per open file (the 64 gave ~45% hits on sequential reads).
pub const DEFAULT_WINDOW_MAX: usize = 256;
/// Contexts the write pool redefines at once (one queue lock per batch).
pub const REFILL_BATCH: usize = 32;
/// Reads shorter than this many blocks that are not sequential get their
/// masks computed on the reading thread, without opening a window.
pub const SMALL_RANDOM_READ: u64 = 32;
/// Default nice value of the engine's workers (applied only when allowed,
/// i.e. as root): -19, so a worker runs as soon as masks are queued instead
/// of waiting behind the FUSE threads on a shared CPU.
pub const DEFAULT_ENGINE_NICE: i32 = -19;
/// Default mask length: E(J0) (16 bytes) then one 4 KiB content block.
pub const DEFAULT_MASK_LEN: usize = 16 + 4096;
/// Default largest number of contexts one worker takes per work unit.
pub const DEFAULT_BATCH_MAX: usize = 32;
/// Environment variable that forces software AES when set to `1`, `true` or `yes`.
pub const ENV_NO_AESNI: &str = "WARPFS_NO_AESNI";

/// How an [`Engine`](crate::Engine) runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// Worker threads of the cpu backend; 0 means one per available core.
    pub threads: usize,
    /// Make masks ahead of need. Off: no worker threads, every `define` only
    /// records the nonce and the `apply` that needs the mask makes it on the
    /// calling thread; write pools and read windows keep the same code path
    /// but look no further ahead than the request.
    pub speculation: bool,
    /// Write-pool size Z: masks kept ready for the next Z nonces.
    pub pool_size: usize,
    /// Largest read window W, in blocks.
    pub window_max: usize,
    /// Length of one context's mask in bytes (keystream from the initial
    /// counter; with the warpfs layout: E(J0) then the block's data).
    pub mask_len: usize,
    /// Contexts one worker takes from the queue per work unit (at most).
    pub batch_max: usize,
    /// Force software AES for keys added as raw bytes (also set by
    /// `WARPFS_NO_AESNI=1`), to reproduce the papers' AES-NI-off runs.
    pub software_aes: bool,
    /// Nice value for the worker threads (`None`: inherit). Lowering it
    /// needs root; when refused the workers run at the inherited value.
    pub nice: Option<i32>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            threads: 0,
            speculation: true,
            pool_size: DEFAULT_POOL_SIZE,
            window_max: DEFAULT_WINDOW_MAX,
            mask_len: DEFAULT_MASK_LEN,
            batch_max: DEFAULT_BATCH_MAX,
            software_aes: false,
            nice: None,
        }
    }
}

impl EngineConfig {
    /// The worker count `threads` stands for (0 = available cores).
    pub fn effective_threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    /// `software_aes`, or the environment asks for it (`WARPFS_NO_AESNI`).
    pub fn effective_software_aes(&self) -> bool {
        self.software_aes || env_flag(ENV_NO_AESNI)
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}
