//! Mask throughput and per-batch latency of the backends, for
//! `bench/gpu.sh`:
//!
//!     cargo run --release -p warpfs-engine --bin gpu-bench -- [--secs S] --out DIR
//!
//! For AES-256 and Twofish-256 masks (FORMAT.md 11) of 4 KiB, 64 KiB and
//! 1 MiB and 1, 16, 256 and 4096
//! contexts per call of `Backend::make` (a device backend packs a call into
//! launches of at most 512 contexts / 16 MiB): the median time of one call
//! (per-batch latency) and mask GB/s (10^9 bytes/s). Backends: cpu (one
//! thread), opencl on one lane (one driver thread), opencl on both lanes
//! (two driver threads calling at once, as the engine runs it), and cuda
//! (the row says "not run" without a CUDA device). Calls over 64 MiB of
//! masks are not measured. Writes DIR/gpu.json and DIR/gpu.md.

use serde_json::{json, Value};
use std::sync::Barrier;
use std::time::{Duration, Instant};
use warpfs_crypto::XtsCipher;
use warpfs_engine::gpu::DeviceBackend;
use warpfs_engine::{Backend, CpuBackend, MaskCipher, MaskJob};

const SIZES: [usize; 3] = [4096, 64 << 10, 1 << 20];
const CONTEXTS: [usize; 4] = [1, 16, 256, 4096];
const MAX_CALL_BYTES: usize = 64 << 20;

/// One call of `make` over `n` masks of `len` bytes.
fn call(b: &dyn Backend, key: &MaskCipher, outs: &mut [Vec<u8>], round: u32) {
    let mut jobs: Vec<MaskJob<'_>> = outs
        .iter_mut()
        .enumerate()
        .map(|(i, o)| MaskJob {
            cipher: key,
            nonce: [(i % 256) as u8; 12],
            counter: round.wrapping_mul(7919).wrapping_add(i as u32),
            out: &mut o[..],
        })
        .collect();
    b.make(&mut jobs);
}

/// Median call time over at least 3 calls and `secs` seconds, per thread,
/// with `threads` threads calling at once; returns (median s, GB/s overall).
fn measure(b: &dyn Backend, key: &MaskCipher, len: usize, n: usize, threads: usize, secs: f64) -> (f64, f64) {
    let start = Barrier::new(threads);
    let results: Vec<(Vec<f64>, f64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut outs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; len]).collect();
                    call(b, key, &mut outs, 0); // warm-up
                    start.wait();
                    let t0 = Instant::now();
                    let mut times = Vec::new();
                    while times.len() < 3 || t0.elapsed() < Duration::from_secs_f64(secs) {
                        let t = Instant::now();
                        call(b, key, &mut outs, times.len() as u32 + 1);
                        times.push(t.elapsed().as_secs_f64());
                    }
                    std::hint::black_box(&outs);
                    (times, t0.elapsed().as_secs_f64())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("bench thread")).collect()
    });
    let mut all: Vec<f64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    all.sort_by(f64::total_cmp);
    let median = all[all.len() / 2];
    let bytes: f64 = results.iter().map(|r| (r.0.len() * n * len) as f64).sum();
    let wall = results.iter().map(|r| r.1).fold(0.0, f64::max);
    (median, bytes / wall / 1e9)
}

/// Every size and batch of `b` for each of `keys` (label, key).
fn rows(name: &str, b: &dyn Backend, threads: usize, keys: &[(&str, MaskCipher)], secs: f64) -> Vec<Value> {
    let mut out = Vec::new();
    for (cipher, key) in keys {
        out.extend(rows_of(name, b, threads, cipher, key, secs));
    }
    out
}

fn rows_of(name: &str, b: &dyn Backend, threads: usize, cipher: &str, key: &MaskCipher, secs: f64) -> Vec<Value> {
    let mut out = Vec::new();
    for &len in &SIZES {
        for &n in &CONTEXTS {
            if len * n > MAX_CALL_BYTES {
                continue;
            }
            let (lat, gbps) = measure(b, key, len, n, threads, secs);
            eprintln!(
                "{name:>22} {cipher} {len:>8} B x {n:>4}: {:>10.1} us/call, {gbps:.3} GB/s",
                lat * 1e6
            );
            out.push(
                json!({"backend": name, "cipher": cipher, "threads": threads, "mask_bytes": len, "contexts": n,
                "latency_us": (lat * 1e7).round() / 10.0, "gbps": (gbps * 1000.0).round() / 1000.0}),
            );
        }
    }
    out
}

fn main() {
    let mut secs = 0.3f64;
    // No default: results go in a dated folder (bench/README.md), which
    // bench/gpu.sh names.
    let mut out_dir: Option<std::path::PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--secs" => secs = args.next().and_then(|s| s.parse().ok()).expect("--secs S"),
            "--out" => out_dir = Some(args.next().expect("--out DIR").into()),
            _ => panic!("unknown argument {a} (--secs S, --out DIR)"),
        }
    }
    let Some(out_dir) = out_dir else {
        eprintln!("gpu-bench: --out DIR is required (bash bench/gpu.sh writes bench/results/DATE-gpu)");
        std::process::exit(2);
    };
    let keys = [
        ("aes-256", MaskCipher::new(&[0x5c; 32], false).expect("key")),
        (
            "twofish-256",
            MaskCipher::with_cipher(XtsCipher::Twofish, &[0x5c; 32], false).expect("key"),
        ),
    ];
    let mut results = Vec::new();
    let mut notes = Vec::new();
    let cpu = CpuBackend;
    results.extend(rows(&format!("{}, 1 thread", cpu.name()), &cpu, 1, &keys, secs));
    match DeviceBackend::opencl(true) {
        Ok(b) => {
            let name = b.name();
            results.extend(rows(&format!("{name}, 1 lane"), &b, 1, &keys, secs));
            results.extend(rows(&format!("{name}, 2 lanes"), &b, 2, &keys, secs));
            notes.push(format!("opencl: {name}"));
        }
        Err(e) => notes.push(format!("opencl: not run: {e}")),
    }
    match DeviceBackend::cuda() {
        Ok(b) => {
            let name = b.name();
            results.extend(rows(&format!("{name}, 2 lanes"), &b, 2, &keys, secs));
            notes.push(format!("cuda: {name}"));
        }
        Err(e) => notes.push(format!("cuda: not run: no device ({e})")),
    }
    let doc = json!({
        "bench": "gpu",
        "settings": {"secs": secs, "key_bits": 256, "ciphers": ["aes-256", "twofish-256"], "max_call_bytes": MAX_CALL_BYTES},
        "notes": notes,
        "results": results,
    });
    warpfs_backing::host::create_dir_all(&out_dir).expect("out dir");
    warpfs_backing::host::write(
        out_dir.join("gpu.json"),
        serde_json::to_string_pretty(&doc).expect("json") + "\n",
    )
    .expect("gpu.json");
    let mut md = String::from("# GPU mask backends: throughput and per-batch latency\n\n");
    md += "Generated by `bench/gpu.sh` (`gpu-bench`): AES-256 and Twofish-256 masks (the cpu backend's Twofish is \
           warpfs-crypto's, one core), one `Backend::make` call = one batch of \
           `contexts` masks (a device packs it into launches of at most 512 contexts / 16 MiB). Latency = median \
           time of one call; GB/s = 10^9 mask bytes/s over all calling threads. Shared machine: numbers are noisy, \
           compare rows of one run. pocl is an OpenCL implementation on this machine's CPU cores, not a GPU.\n\n";
    for n in &notes {
        md += &format!("- {n}\n");
    }
    md += "\n| backend | cipher | mask bytes | contexts | latency µs/call | GB/s |\n|---|---|---|---|---|---|\n";
    for r in doc["results"].as_array().expect("array") {
        md += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r["backend"].as_str().unwrap_or("?"),
            r["cipher"].as_str().unwrap_or("?"),
            r["mask_bytes"],
            r["contexts"],
            r["latency_us"],
            r["gbps"]
        );
    }
    if !notes
        .iter()
        .any(|n| n.starts_with("cuda: NVIDIA") || (n.starts_with("cuda:") && !n.contains("not run")))
    {
        md += "| cuda | – | – | – | not run: no device | – |\n";
    }
    warpfs_backing::host::write(out_dir.join("gpu.md"), md).expect("gpu.md");
}
