//! Engine configuration: sizes, worker count, priority and placement of the
//! workers (`cpus`, parsed from a `taskset`-style list).

/// Default number of write-pool contexts (Z). A pool of 64 gave ~39% hits
/// on sequential writes with the workers sharing one CPU with the FUSE
/// threads; 1024 (4 MiB of masks, ~4 MiB of memory per volume) gives 99%+
/// (docs/decisions/0041-speculation-sizes.md).
pub const DEFAULT_POOL_SIZE: usize = 1024;
/// Default largest read window, in blocks (W max). 256 blocks = 1 MiB of
/// look-ahead per open file (a window of 64 gave ~45% hits on sequential reads).
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
/// Default time an idle worker polls the queue before sleeping (µs): none.
/// Before decrypt-ahead, 50 µs raised sequential 128 KiB reads by ~15% (the
/// reader's next batch of masks often came within that time). Sequential
/// reads now come from decrypt-ahead and hardly use the workers, while the
/// spin burned the CPU the workers share with the client: with 50 µs a
/// random 128 KiB reader's CPU ran at 70–73% instead of 46–47% for the same
/// throughput, and random 128 KiB writes went 401–430 MiB/s instead of
/// 436–461 (docs/decisions/0043-idle-workers-do-not-spin.md).
/// `--engine-spin-us` sets it.
pub const DEFAULT_SPIN_US: u32 = 0;
/// Default mask length: E(J0) (16 bytes) then one 4 KiB content block.
pub const DEFAULT_MASK_LEN: usize = 16 + 4096;
/// Default largest number of contexts one worker takes per work unit.
pub const DEFAULT_BATCH_MAX: usize = 32;
/// Default decrypt-ahead depth: requests of a sequential reader read and
/// decrypted ahead on the engine's CPUs (docs/decisions/0042).
pub const DEFAULT_READ_AHEAD: usize = 2;
/// Nice value of the decrypt-ahead threads: 19, so they run only on time
/// the client and the FUSE threads leave idle (the technique's premise).
/// Measured on 2 vCPUs (ctr, sequential 128 KiB reads, threads on the
/// client's CPU): nice 19 beat 0 and -19, which took CPU from the client
/// (docs/decisions/0042-decrypt-ahead.md).
pub const AHEAD_NICE: i32 = 19;
/// How long a read waits for a decrypt-ahead thread to finish a chunk it
/// has started before taking the chunk over (reading it itself into another
/// buffer). A running thread needs ~30 µs for a 128 KiB chunk; one still
/// busy after this was preempted (nice 19, on a CPU the client keeps busy),
/// and waiting for it stalled reads ~0.9 ms each (docs/decisions/
/// 0042-decrypt-ahead.md).
pub const AHEAD_STEAL_AFTER: std::time::Duration = std::time::Duration::from_micros(100);
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
    /// CPUs the worker threads may run on (Linux `sched_setaffinity` of each
    /// worker; empty: inherit the daemon's). The technique's premise is that
    /// masks are made on cores the file system's own threads leave idle:
    /// e.g. FUSE threads on CPU 1 and `cpus = [0]`. With `threads == 0` the
    /// engine starts one worker per listed CPU.
    pub cpus: Vec<usize>,
    /// How long an idle worker polls the queue before it sleeps, in
    /// microseconds (0: sleep at once). See [`DEFAULT_SPIN_US`].
    pub spin_us: u32,
    /// Decrypt-ahead depth: how many requests past a sequential reader's
    /// current one are read and decrypted ahead, on decrypt-ahead threads
    /// placed like the workers (0: none). Only with `speculation`, or with
    /// `ahead_without_speculation`.
    pub read_ahead: usize,
    /// Start the decrypt-ahead threads with `speculation` off too: a
    /// sequential reader's next requests are decrypted on another core
    /// while the reader copies the current one, whatever makes the masks.
    pub ahead_without_speculation: bool,
    /// Why `speculation` is what it is (the mount's `--speculation` policy,
    /// shown by `warpfs stats`); empty when nobody said.
    pub speculation_why: String,
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
            cpus: Vec::new(),
            spin_us: DEFAULT_SPIN_US,
            read_ahead: DEFAULT_READ_AHEAD,
            ahead_without_speculation: false,
            speculation_why: String::new(),
        }
    }
}

impl EngineConfig {
    /// The worker count `threads` stands for (0 = one per CPU of `cpus`,
    /// or, without a list, one per core available to the process).
    pub fn effective_threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else if !self.cpus.is_empty() {
            self.cpus.len()
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    /// `software_aes`, or the environment asks for it (`WARPFS_NO_AESNI`).
    pub fn effective_software_aes(&self) -> bool {
        self.software_aes || env_flag(ENV_NO_AESNI)
    }
}

/// What the `--speculation auto` policy looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyInput {
    /// The volume's content cipher.
    pub cipher: warpfs_crypto::ContentCipher,
    /// The CPU runs AES in hardware (AES-NI) and nobody forced software AES.
    pub aes_ni: bool,
    /// Cores available to the daemon.
    pub cores: usize,
}

/// The `--speculation auto` policy: speculation pays where the cipher
/// costs more than the FUSE round trip, so masks made on idle cores save
/// the request real time: Twofish (software only, ~0.3 GB/s per core) and
/// AES without AES-NI (~0.1 GB/s). With AES-NI a 4 KiB mask costs ~0.4 µs,
/// less than fetching one made on another core, and on 2 cores the workers
/// take CPU from the FUSE threads: off there, on with 4+ cores
/// (docs/decisions/0040 and 0013). XChaCha20 (~1.4 GB/s per
/// core, its Poly1305 tag on the FUSE thread either way) lies between:
/// on 2 cores its workers cost more than they save, and decrypt-ahead
/// alone keeps the second core busy for readers (decision 0081): off
/// below 4 cores. Decrypt-ahead itself is the mount's (2+ cores). Returns
/// the decision and why, for the log and `warpfs stats`.
pub fn speculation_policy(p: PolicyInput) -> (bool, String) {
    use warpfs_crypto::ContentCipher;
    if p.cipher == ContentCipher::XChaCha20 && p.cores < 4 {
        return (
            false,
            format!(
                "auto: XChaCha20 makes a mask about as fast as another core hands it over, and {} cores have \
                 none idle (decrypt-ahead keeps the other core busy)",
                p.cores
            ),
        );
    }
    if p.cipher != ContentCipher::Aes {
        return (
            true,
            format!(
                "auto: the volume's cipher is {}, made in software and slower than a FUSE round trip",
                p.cipher.name()
            ),
        );
    }
    if !p.aes_ni {
        return (
            true,
            "auto: AES runs in software here (no AES-NI, or WARPFS_NO_AESNI=1), slower than a FUSE round trip".into(),
        );
    }
    if p.cores >= 4 {
        return (
            true,
            format!("auto: AES-NI, but {} cores leave some idle for masks", p.cores),
        );
    }
    (
        false,
        format!(
            "auto: AES-NI makes a mask faster than another core hands it over, and {} cores have none idle",
            p.cores
        ),
    )
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speculation_policy_follows_cipher_and_cpu() {
        use warpfs_crypto::ContentCipher::{Aes, Twofish, XChaCha20};
        let p = |cipher, aes_ni, cores| speculation_policy(PolicyInput { cipher, aes_ni, cores });
        // Twofish: on, whatever the CPU.
        assert!(p(Twofish, true, 2).0 && p(Twofish, false, 1).0 && p(Twofish, true, 64).0);
        assert!(p(Twofish, true, 2).1.contains("Twofish"));
        // XChaCha20: off below 4 cores (decrypt-ahead instead), on with 4+.
        assert!(!p(XChaCha20, true, 2).0 && !p(XChaCha20, false, 1).0 && !p(XChaCha20, false, 3).0);
        assert!(p(XChaCha20, true, 2).1.contains("XChaCha20") && p(XChaCha20, true, 2).1.contains("decrypt-ahead"));
        assert!(p(XChaCha20, false, 4).0 && p(XChaCha20, true, 64).0);
        assert!(p(XChaCha20, true, 4).1.contains("XChaCha20"));
        // Software AES: on.
        assert!(p(Aes, false, 2).0);
        assert!(p(Aes, false, 2).1.contains("software"));
        // AES-NI: off on 2 cores, on with 4+.
        assert!(!p(Aes, true, 2).0);
        assert!(p(Aes, true, 2).1.contains("AES-NI"));
        assert!(p(Aes, true, 4).0);
    }

    #[test]
    fn threads_default_to_one_per_listed_cpu() {
        let c = EngineConfig {
            cpus: vec![0, 2, 5],
            ..EngineConfig::default()
        };
        assert_eq!(c.effective_threads(), 3);
        let c = EngineConfig {
            cpus: vec![0, 2, 5],
            threads: 1,
            ..EngineConfig::default()
        };
        assert_eq!(c.effective_threads(), 1);
    }
}
