//! Counters of the speculation machinery, kept with relaxed atomics so that
//! counting never adds a lock to the data path.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Number of batch-size buckets: bucket i counts work units that made
/// between 2^i and 2^(i+1) - 1 masks; the last bucket takes everything larger.
pub const BATCH_BUCKETS: usize = 12;

/// The counters, in two groups on separate cache lines: those the reading
/// and writing threads bump per block, and those the workers bump per work
/// unit. Sharing a line made every apply and every batch move it between
/// CPUs when the workers run on their own core.
#[derive(Debug, Default)]
#[repr(C, align(128))]
pub(crate) struct Stats {
    pub defines: AtomicU64,
    pub applies: AtomicU64,
    pub ready_hits: AtomicU64,
    pub waits: AtomicU64,
    pub wait_ns: AtomicU64,
    pub inline: AtomicU64,
    pub direct: AtomicU64,
    _pad0: [u64; 9],
    pub made: AtomicU64,
    pub wasted: AtomicU64,
    pub stale: AtomicU64,
    pub batches: AtomicU64,
    pub batch_hist: [AtomicU64; BATCH_BUCKETS],
    _pad1: [u64; 16],
    pub window_resets: AtomicU64,
    pub window_reused: AtomicU64,
    pub window_defined: AtomicU64,
    pub software_keys: AtomicU64,
    pub hardware_keys: AtomicU64,
    pub ahead_served: AtomicU64,
    pub ahead_wasted: AtomicU64,
    pub ahead_waits: AtomicU64,
    pub ahead_wait_ns: AtomicU64,
    pub ahead_inline: AtomicU64,
    pub ahead_stolen: AtomicU64,
    pub split_requests: AtomicU64,
    pub split_parts_workers: AtomicU64,
    pub split_parts_caller: AtomicU64,
    pub twofish_keys: AtomicU64,
    pub xchacha_keys: AtomicU64,
    pub keys_retired: AtomicU64,
    pub keys_released: AtomicU64,
    /// Mask buffers held by contexts (up and down).
    pub masks_held: AtomicU64,
}

impl Stats {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    pub fn batch(&self, size: usize) {
        if size == 0 {
            return;
        }
        let bucket = (usize::BITS - 1 - size.leading_zeros()) as usize;
        self.batches.fetch_add(1, Relaxed);
        self.batch_hist[bucket.min(BATCH_BUCKETS - 1)].fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self, backend: String, threads: usize, speculation: bool) -> StatsSnapshot {
        let g = |c: &AtomicU64| c.load(Relaxed);
        StatsSnapshot {
            backend,
            threads,
            speculation,
            defines: g(&self.defines),
            applies: g(&self.applies),
            ready_hits: g(&self.ready_hits),
            waits: g(&self.waits),
            wait_ns: g(&self.wait_ns),
            inline: g(&self.inline),
            direct: g(&self.direct),
            made_by_workers: g(&self.made),
            wasted: g(&self.wasted),
            stale: g(&self.stale),
            batches: g(&self.batches),
            batch_hist: std::array::from_fn(|i| g(&self.batch_hist[i])),
            window_resets: g(&self.window_resets),
            window_reused: g(&self.window_reused),
            window_defined: g(&self.window_defined),
            software_keys: g(&self.software_keys),
            hardware_keys: g(&self.hardware_keys),
            ahead_served: g(&self.ahead_served),
            ahead_wasted: g(&self.ahead_wasted),
            ahead_waits: g(&self.ahead_waits),
            ahead_wait_ns: g(&self.ahead_wait_ns),
            ahead_inline: g(&self.ahead_inline),
            ahead_stolen: g(&self.ahead_stolen),
            worker_cpus: Vec::new(),
            split_requests: g(&self.split_requests),
            split_parts_workers: g(&self.split_parts_workers),
            split_parts_caller: g(&self.split_parts_caller),
            twofish_keys: g(&self.twofish_keys),
            xchacha_keys: g(&self.xchacha_keys),
            keys_live: (g(&self.software_keys)
                + g(&self.hardware_keys)
                + g(&self.twofish_keys)
                + g(&self.xchacha_keys))
            .saturating_sub(g(&self.keys_retired)),
            keys_retired: g(&self.keys_retired),
            keys_released: g(&self.keys_released),
            masks_held: g(&self.masks_held),
            speculation_why: String::new(),
            ahead_threads: 0,
            read_ahead: 0,
            device_launches: 0,
            device_masks: 0,
            device_cpu_masks: 0,
            xts_device: String::new(),
            xts_device_requests: 0,
            xts_device_bytes: 0,
            xts_device_fallbacks: 0,
        }
    }
}

/// A copy of the engine's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Backend name (with the AES implementation).
    pub backend: String,
    /// Worker threads.
    pub threads: usize,
    /// Whether look-ahead is on.
    pub speculation: bool,
    /// Context definitions.
    pub defines: u64,
    /// Successful `apply` calls (a failed one touched nothing and is not counted).
    pub applies: u64,
    /// Applies that found the mask ready.
    pub ready_hits: u64,
    /// Applies that waited for a worker to finish the mask.
    pub waits: u64,
    /// Total time spent in those waits, in nanoseconds.
    pub wait_ns: u64,
    /// Applies whose mask nobody had started, so the caller made it.
    pub inline: u64,
    /// Blocks made directly on the caller's thread without a context (no
    /// window, beyond a mask's length, or a fallback).
    pub direct: u64,
    /// Masks made by worker threads.
    pub made_by_workers: u64,
    /// Masks made but never applied (redefined or dropped first).
    pub wasted: u64,
    /// Masks a worker finished after the context had been redefined (counted in `wasted` too).
    pub stale: u64,
    /// Work units (batches) the workers ran.
    pub batches: u64,
    /// Batch sizes: bucket i counts batches of 2^i ..= 2^(i+1)-1 masks.
    pub batch_hist: [u64; BATCH_BUCKETS],
    /// Read-window moves that kept nothing of the previous window.
    pub window_resets: u64,
    /// Window masks kept across a move (overlap reuse).
    pub window_reused: u64,
    /// Window contexts (re)defined.
    pub window_defined: u64,
    /// Keys on the forced software AES.
    pub software_keys: u64,
    /// Keys on the `aes` 0.9 path (AES-NI/VAES when the CPU has them).
    pub hardware_keys: u64,
    /// Blocks a read got already decrypted by a decrypt-ahead thread (the
    /// read made no keystream and applied none: not in `applies`, but a
    /// ready hit in [`hit_rate`](Self::hit_rate)).
    #[serde(default)]
    pub ahead_served: u64,
    /// Blocks decrypted ahead but never served (the reader went elsewhere,
    /// the file changed, or the job lost the race with the read).
    #[serde(default)]
    pub ahead_wasted: u64,
    /// Reads that waited for a decrypt-ahead job already running.
    #[serde(default)]
    pub ahead_waits: u64,
    /// Total time of those waits, in nanoseconds.
    #[serde(default)]
    pub ahead_wait_ns: u64,
    /// Blocks of a sequential reader's requests that the reading thread
    /// decrypted itself: taken back before a decrypt-ahead thread started
    /// them, taken over from a stalled one, read again after the file
    /// changed, or in a request nobody had planned. Misses in
    /// [`hit_rate`](Self::hit_rate).
    #[serde(default)]
    pub ahead_inline: u64,
    /// Chunks a read took over from a decrypt-ahead thread that had not
    /// finished them within [`AHEAD_STEAL_AFTER`](crate::AHEAD_STEAL_AFTER)
    /// (it was preempted: it runs at nice 19).
    #[serde(default)]
    pub ahead_stolen: u64,
    /// The CPUs the worker threads run on (the union of their affinity
    /// masks; `--engine-cpus`, or the daemon's own mask), sorted. Empty
    /// without workers or off Linux.
    #[serde(default)]
    pub worker_cpus: Vec<usize>,
    /// XTS requests split across the workers (the caller doing a share).
    #[serde(default)]
    pub split_requests: u64,
    /// Parts (64 KiB of data units) of split requests run by workers.
    #[serde(default)]
    pub split_parts_workers: u64,
    /// Parts run by the requesting thread (all of them without workers).
    #[serde(default)]
    pub split_parts_caller: u64,
    /// Keys on Twofish (FORMAT.md 11; masks made by the cpu or a device).
    #[serde(default)]
    pub twofish_keys: u64,
    /// Keys on XChaCha20 (FORMAT.md 15; masks made by the cpu).
    #[serde(default)]
    pub xchacha_keys: u64,
    /// Keys registered and not retired (`Engine::retire_key`).
    #[serde(default)]
    pub keys_live: u64,
    /// Keys retired (an old key generation after an online rekey).
    #[serde(default)]
    pub keys_retired: u64,
    /// Retired keys whose expanded key the engine has dropped (zeroized).
    #[serde(default)]
    pub keys_released: u64,
    /// Mask buffers (on locked pages) held by contexts now.
    #[serde(default)]
    pub masks_held: u64,
    /// Why speculation is on or off (the `--speculation` policy's reason).
    #[serde(default)]
    pub speculation_why: String,
    /// Decrypt-ahead threads (0: none).
    #[serde(default)]
    pub ahead_threads: usize,
    /// Decrypt-ahead depth in requests (0: none).
    #[serde(default)]
    pub read_ahead: usize,
    /// A device backend's launches (0 on the cpu backend).
    #[serde(default)]
    pub device_launches: u64,
    /// Masks a device backend made on the device.
    #[serde(default)]
    pub device_masks: u64,
    /// Masks a device backend left to the cpu (keys without raw bytes,
    /// masks too long for a launch, failed launches).
    #[serde(default)]
    pub device_cpu_masks: u64,
    /// The device whole XTS requests go to (empty: none, all XTS on the cpu).
    #[serde(default)]
    pub xts_device: String,
    /// XTS requests the device ran (`xts` volumes and containers with
    /// `--engine opencl|cuda`).
    #[serde(default)]
    pub xts_device_requests: u64,
    /// Bytes of those requests.
    #[serde(default)]
    pub xts_device_bytes: u64,
    /// XTS requests handed to the device that it gave back to the cpu.
    #[serde(default)]
    pub xts_device_fallbacks: u64,
}

impl StatsSnapshot {
    /// The snapshot as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain counters always serialise")
    }

    /// Parse [`to_json`](Self::to_json)'s output.
    pub fn from_json(s: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(s)
    }

    /// One line for a log: hit rate, waits, inline, wasted, decrypt-ahead, batches.
    pub fn summary(&self) -> String {
        let mut hist = String::new();
        for (i, n) in self.batch_hist.iter().enumerate().filter(|(_, n)| **n > 0) {
            if !hist.is_empty() {
                hist.push(' ');
            }
            hist.push_str(&format!("{}:{}", 1u64 << i, n));
        }
        format!(
            "engine {} x{} speculation {}: applies {}, ready-hits {} ({:.1}%), waits {} ({:.3} ms), \
             inline {}, direct {}, made by workers {}, wasted {}, decrypted ahead: served {} wasted {} \
             waits {} inline {} stolen {}, batches {} [{}]",
            self.backend,
            self.threads,
            if self.speculation { "on" } else { "off" },
            self.applies,
            self.ready_hits,
            100.0 * self.hit_rate(),
            self.waits,
            self.wait_ns as f64 / 1e6,
            self.inline,
            self.direct,
            self.made_by_workers,
            self.wasted,
            self.ahead_served,
            self.ahead_wasted,
            self.ahead_waits,
            self.ahead_inline,
            self.ahead_stolen,
            self.batches,
            hist
        )
    }

    /// Share of blocks whose keystream was ready when a request needed it:
    /// applies that found their mask ready, plus blocks served already
    /// decrypted ahead, over all applies plus the blocks of sequential
    /// reads (served ahead, or decrypted by the reading thread itself).
    /// What the engine does ahead of need, in words: `speculation and
    /// decrypt-ahead`, `speculation`, `decrypt-ahead` or `none`.
    pub fn policy(&self) -> &'static str {
        match (self.speculation, self.read_ahead > 0 && self.ahead_threads > 0) {
            (true, true) => "speculation and decrypt-ahead",
            (true, false) => "speculation",
            (false, true) => "decrypt-ahead",
            (false, false) => "none",
        }
    }

    pub fn hit_rate(&self) -> f64 {
        let total = self.ready_hits + self.waits + self.inline + self.ahead_served + self.ahead_inline;
        if total == 0 {
            0.0
        } else {
            (self.ready_hits + self.ahead_served) as f64 / total as f64
        }
    }
}

impl fmt::Display for StatsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "engine: {} x{} ({}{}{})",
            self.backend,
            self.threads,
            if self.speculation {
                "speculation on"
            } else {
                "speculation off"
            },
            if self.speculation_why.is_empty() {
                String::new()
            } else {
                format!(": {}", self.speculation_why)
            },
            if self.worker_cpus.is_empty() {
                String::new()
            } else {
                format!(
                    ", workers on CPUs {}",
                    crate::placement::format_cpu_list(&self.worker_cpus)
                )
            }
        )?;
        writeln!(
            f,
            "  ahead of need: {} ({} decrypt-ahead thread(s), depth {})",
            self.policy(),
            self.ahead_threads,
            self.read_ahead
        )?;
        let avg_wait = self.wait_ns.checked_div(self.waits).unwrap_or(0);
        writeln!(
            f,
            "  applies {}: ready {} ({:.1}%), waited {} (total {:.3} ms, avg {} ns), inline {}; direct {}",
            self.applies,
            self.ready_hits,
            100.0 * self.hit_rate(),
            self.waits,
            self.wait_ns as f64 / 1e6,
            avg_wait,
            self.inline,
            self.direct
        )?;
        writeln!(
            f,
            "  defines {}, made by workers {}, wasted {} (stale {})",
            self.defines, self.made_by_workers, self.wasted, self.stale
        )?;
        if self.device_launches + self.device_masks + self.device_cpu_masks > 0 {
            writeln!(
                f,
                "  device: {} launch(es), {} mask(s) made on the device, {} left to the cpu",
                self.device_launches, self.device_masks, self.device_cpu_masks
            )?;
        }
        writeln!(
            f,
            "  decrypt-ahead: served {} blocks, read by the reader {}, wasted {}, waited {} time(s) (total {:.3} ms), \
             took over {} chunk(s)",
            self.ahead_served,
            self.ahead_inline,
            self.ahead_wasted,
            self.ahead_waits,
            self.ahead_wait_ns as f64 / 1e6,
            self.ahead_stolen
        )?;
        write!(f, "  batches {}:", self.batches)?;
        for (i, n) in self.batch_hist.iter().enumerate().filter(|(_, n)| **n > 0) {
            write!(f, " [{}..{}]={}", 1u64 << i, (1u64 << (i + 1)) - 1, n)?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  xts split: {} request(s), parts by workers {}, by the caller {}",
            self.split_requests, self.split_parts_workers, self.split_parts_caller
        )?;
        if !self.xts_device.is_empty() {
            writeln!(
                f,
                "  xts device {}: {} request(s), {} bytes, {} given back to the cpu",
                self.xts_device, self.xts_device_requests, self.xts_device_bytes, self.xts_device_fallbacks
            )?;
        }
        write!(
            f,
            "  windows: resets {}, reused {}, defined {}; keys: {} software AES, {} AES-NI/VAES, {} Twofish, \
             {} XChaCha20; {} live, {} retired ({} released); {} masks held",
            self.window_resets,
            self.window_reused,
            self.window_defined,
            self.software_keys,
            self.hardware_keys,
            self.twofish_keys,
            self.xchacha_keys,
            self.keys_live,
            self.keys_retired,
            self.keys_released,
            self.masks_held
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_buckets_are_powers_of_two() {
        let s = Stats::default();
        for n in [1, 2, 3, 4, 7, 8, 1 << 20] {
            s.batch(n);
        }
        s.batch(0);
        let snap = s.snapshot("cpu".into(), 1, true);
        assert_eq!(snap.batches, 7);
        assert_eq!(&snap.batch_hist[..4], &[1, 2, 2, 1]);
        assert_eq!(snap.batch_hist[BATCH_BUCKETS - 1], 1);
        let j: serde_json::Value = serde_json::from_str(&snap.to_json()).unwrap();
        assert_eq!(j["batches"], 7);
        assert!(snap.to_string().contains("[2..3]=2"));
        assert_eq!(StatsSnapshot::from_json(&snap.to_json()).unwrap(), snap);
        assert!(
            snap.summary().contains("batches 7 [1:1 2:2 4:2 8:1 2048:1]"),
            "{}",
            snap.summary()
        );
    }

    #[test]
    fn hit_rate_counts_blocks_served_decrypted_ahead_as_hits() {
        let s = Stats::default();
        Stats::add(&s.applies, 10);
        Stats::add(&s.ready_hits, 6);
        Stats::add(&s.inline, 4);
        assert!((s.snapshot("cpu".into(), 1, true).hit_rate() - 0.6).abs() < 1e-9);
        Stats::add(&s.ahead_served, 90);
        Stats::add(&s.ahead_wasted, 3);
        let snap = s.snapshot("cpu".into(), 1, true);
        assert!((snap.hit_rate() - 0.96).abs() < 1e-9, "{}", snap.hit_rate());
        // Blocks the reader decrypted itself are misses.
        Stats::add(&s.ahead_inline, 100);
        Stats::add(&s.ahead_stolen, 2);
        let snap = s.snapshot("cpu".into(), 1, true);
        assert!((snap.hit_rate() - 0.48).abs() < 1e-9, "{}", snap.hit_rate());
        assert!(
            snap.to_string()
                .contains("decrypt-ahead: served 90 blocks, read by the reader 100, wasted 3"),
            "{snap}"
        );
        assert!(snap.to_string().contains("took over 2 chunk(s)"), "{snap}");
        assert!(snap.summary().contains("inline 100 stolen 2"), "{}", snap.summary());
        assert_eq!(StatsSnapshot::from_json(&snap.to_json()).unwrap(), snap);
        // Stats from before decrypt-ahead (no such fields) still parse.
        let mut old: serde_json::Value = serde_json::from_str(&snap.to_json()).unwrap();
        for k in [
            "ahead_served",
            "ahead_wasted",
            "ahead_waits",
            "ahead_wait_ns",
            "ahead_inline",
            "ahead_stolen",
        ] {
            old.as_object_mut().unwrap().remove(k);
        }
        let old = StatsSnapshot::from_json(&old.to_string()).unwrap();
        assert_eq!((old.ahead_served, old.ahead_inline, old.ahead_stolen), (0, 0, 0));
    }
}
