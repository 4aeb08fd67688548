//! Micro benchmark of mask generation, printed as JSON:
//!
//!     cargo run --release -p warpfs-engine --bin engine-bench -- [--secs S] [--threads N]
//!
//! For AES-128 and AES-256, 4 KiB and 1 MiB masks, on the path the mount
//! uses (warpfs-crypto's VAES-512 kernel when the CPU has it, else the
//! `aes` 0.9 crate), on the `aes` 0.9 crate's `encrypt_blocks` alone (AES-NI
//! /VAES when present; the kernel's baseline) and on the forced software
//! AES: GB/s (10^9
//! bytes per second) of keystream on one core and on N threads at once,
//! next to the AES-ECB ceiling of the same implementation (encrypting a
//! buffer in place, no counter blocks to build). Then the engine end to
//! end: its N workers making 4 KiB masks from the queue
//! (`engine_workers_make_masks`), and one thread sealing 4 KiB blocks
//! through a `WritePool` with speculation on (N workers, and N-1 workers so
//! the caller keeps a core; workers make masks, the caller XORs) and off
//! (the caller makes each mask inline).
//!
//! Timings from a shared 2-vCPU VM move with neighbours and core placement:
//! pin with `taskset` and compare runs made side by side.

use serde_json::{json, Value};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use warpfs_engine::{Engine, EngineConfig, MaskCipher, WritePool};
use warpfs_keystream::Keystream;

#[derive(Clone, Copy)]
enum Op {
    Mask,
    Ecb,
}

fn usage() -> ! {
    eprintln!("usage: engine-bench [--secs SECONDS_PER_MEASUREMENT] [--threads N]");
    std::process::exit(2)
}

fn main() {
    let mut secs = 0.3f64;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--secs" => secs = v.parse().unwrap_or_else(|_| usage()),
            "--threads" => threads = v.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let threads = threads.max(1);
    let dur = Duration::from_secs_f64(secs.max(0.01));

    let mut rows = Vec::new();
    for imp in 0..3 {
        for bits in [128usize, 256] {
            let key = vec![0x5a; bits / 8];
            let cipher = Arc::new(
                match imp {
                    0 => MaskCipher::new(&key, false),
                    1 => MaskCipher::new_aes_crate(&key),
                    _ => MaskCipher::new(&key, true),
                }
                .expect("valid key length"),
            );
            if imp == 1 && !cipher_differs(&cipher, &key) {
                continue; // no kernel on this CPU: row 0 already is the aes crate
            }
            for size in [4096usize, 1 << 20] {
                let mut row = json!({
                    "aes": cipher.implementation(),
                    "key_bits": bits,
                    "bytes": size,
                });
                for (name, op) in [("mask", Op::Mask), ("ecb", Op::Ecb)] {
                    row[format!("{name}_gbps_1core")] = round(run(&cipher, op, size, 1, dur));
                    row[format!("{name}_gbps_{threads}threads")] = round(run(&cipher, op, size, threads, dur));
                }
                rows.push(row);
            }
        }
    }

    let mut engine_rows = Vec::new();
    engine_rows.push(seal_bench(true, threads, dur));
    if threads > 1 {
        // One worker leaves a core to the sealing thread.
        engine_rows.push(seal_bench(true, threads - 1, dur));
    }
    engine_rows.push(seal_bench(false, threads, dur));

    let workers = json!({
        "aes_256": true,
        "mask_bytes": 16 + 4096,
        "gbps": round(workers_bench(threads, dur)),
    });

    let out = json!({
        "bench": "engine-bench",
        "unit": "GB/s (1e9 bytes/s)",
        "secs_per_measurement": secs,
        "threads": threads,
        "aes_hardware_accelerated": aes::hardware_accelerated(),
        "cpu": cpu_model(),
        "masks": rows,
        "engine_workers_make_masks": workers,
        "write_pool_seal_4k_one_caller": engine_rows,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

/// Whether the mount's path for `key` is another implementation than `c`'s.
fn cipher_differs(c: &MaskCipher, key: &[u8]) -> bool {
    MaskCipher::new(key, false).is_ok_and(|m| m.implementation() != c.implementation())
}

fn round(x: f64) -> Value {
    json!((x * 1000.0).round() / 1000.0)
}

/// Aggregate GB/s of `threads` threads each repeating `op` on its own
/// `size`-byte buffer for `dur`.
fn run(cipher: &Arc<MaskCipher>, op: Op, size: usize, threads: usize, dur: Duration) -> f64 {
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (cipher, start) = (cipher.clone(), start.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; size];
                let mut nonce = [0u8; 12];
                nonce[0] = t as u8;
                // Warm up (page faults, frequency) before timing.
                cipher.fill(&nonce, 1, &mut buf);
                start.wait();
                let t0 = Instant::now();
                let mut bytes = 0u64;
                let mut n = 0u32;
                while t0.elapsed() < dur {
                    for _ in 0..4 {
                        match op {
                            Op::Mask => {
                                nonce[8..].copy_from_slice(&n.to_be_bytes());
                                cipher.fill(&nonce, 1, &mut buf);
                            }
                            Op::Ecb => cipher.ecb_in_place(&mut buf),
                        }
                        n = n.wrapping_add(1);
                        bytes += size as u64;
                    }
                }
                std::hint::black_box(&buf);
                (bytes, t0.elapsed())
            })
        })
        .collect();
    let mut total = 0u64;
    let mut longest = Duration::ZERO;
    for h in handles {
        let (b, d) = h.join().expect("bench thread");
        total += b;
        longest = longest.max(d);
    }
    total as f64 / longest.as_secs_f64() / 1e9
}

/// One thread sealing 4 KiB blocks through a write pool.
fn seal_bench(speculation: bool, threads: usize, dur: Duration) -> Value {
    let engine = Engine::new(EngineConfig {
        threads,
        speculation,
        ..EngineConfig::default()
    })
    .expect("engine");
    let key = engine.add_raw_key(&[0x33; 32]).expect("key");
    let pool = WritePool::new(engine.clone(), key).expect("pool");
    let mut buf = vec![0u8; 4096];
    for _ in 0..256 {
        pool.seal(&mut buf);
    }
    engine.quiesce();
    let before = engine.stats();
    let t0 = Instant::now();
    let mut bytes = 0u64;
    while t0.elapsed() < dur {
        for _ in 0..16 {
            std::hint::black_box(pool.seal(&mut buf));
            bytes += 4096;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let s = engine.stats();
    json!({
        "speculation": speculation,
        "aes_256": true,
        "workers": engine.threads(),
        "gbps": round(bytes as f64 / secs / 1e9),
        "seals": s.applies - before.applies,
        "ready_hits": s.ready_hits - before.ready_hits,
        "waits": s.waits - before.waits,
        "inline": s.inline - before.inline,
        "made_by_workers": s.made_by_workers - before.made_by_workers,
        "batch_hist": s.batch_hist.iter().zip(before.batch_hist.iter()).map(|(a, b)| a - b).collect::<Vec<_>>(),
    })
}

/// GB/s of masks the engine's workers make: define 512 contexts, wait for
/// the queue to drain, repeat.
fn workers_bench(threads: usize, dur: Duration) -> f64 {
    let engine = Engine::new(EngineConfig {
        threads,
        ..EngineConfig::default()
    })
    .expect("engine");
    let key = engine.add_raw_key(&[0x44; 32]).expect("key");
    let ctxs: Vec<_> = (0..512).map(|_| engine.context()).collect();
    let mut nonce = [0u8; 12];
    let mut n = 0u32;
    let t0 = Instant::now();
    while t0.elapsed() < dur {
        for (i, c) in ctxs.iter().enumerate() {
            nonce[8..].copy_from_slice(&n.to_be_bytes());
            n = n.wrapping_add(1);
            engine.define(c, key, &nonce, (i % 64) as i32).expect("define");
        }
        engine.quiesce();
    }
    let secs = t0.elapsed().as_secs_f64();
    let s = engine.stats();
    s.made_by_workers as f64 * (16.0 + 4096.0) / secs / 1e9
}

fn cpu_model() -> String {
    warpfs_backing::host::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default()
}
