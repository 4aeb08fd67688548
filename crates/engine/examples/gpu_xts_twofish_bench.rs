//! The TrueCrypt GPU XTS paper's Fig. 6 for XTS-Twofish on what we have:
//! throughput by request size of the CPU on one core (the mount's
//! `warpfs_crypto::XtsKey`), the CPU on all cores (the same, split across
//! the keystream engine's workers as the mount splits requests, the caller
//! doing a share) and the OpenCL kernel (`kernels/twofish_xts.cl`, 256 KiB
//! launches, copies included), the crossover size, and a launch-chunk
//! sweep. `cargo run --release -p warpfs-engine --example
//! gpu_xts_twofish_bench -- [--secs S] [--reps N] [--json PATH] [--md PATH]`.
//! Sizes are measured in turn, the three paths side by side per size.

use std::sync::Mutex;
use std::time::Instant;
use warpfs_crypto::{file_block_tweak, XtsCipher, XtsKey};
use warpfs_engine::gpu::{XtsDevice, XtsKeys, XTS_CHUNK};
use warpfs_engine::{Engine, EngineConfig};
use warpfs_keystream::Splitter;

const UNIT: usize = 4096;
const SIZES: [usize; 8] = [
    4 << 10,
    16 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];
const CHUNKS: [usize; 5] = [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];

/// MB/s (10^6 bytes/s) of `f` over `bytes`, median of `reps` runs of `secs`.
fn rate(bytes: usize, secs: f64, reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut v: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            let mut n = 0u64;
            while n == 0 || t.elapsed().as_secs_f64() < secs {
                f();
                n += 1;
            }
            (bytes as f64 * n as f64) / t.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn units(k: &XtsKey, first: u64, buf: &mut [u8]) {
    for (b, unit) in buf.chunks_mut(UNIT).enumerate() {
        k.encrypt_unit(&file_block_tweak(&[0; 16], first + b as u64), unit);
    }
}

/// All cores: parts of about a quarter of the request per thread (at least
/// 4 units), as `warpfs_content::Cipher` splits a run.
fn split(engine: &Engine, k: &XtsKey, buf: &mut [u8]) {
    let blocks = buf.len() / UNIT;
    let pb = blocks.div_ceil((engine.helpers() + 1) * 4).max(4);
    if blocks <= pb {
        return units(k, 0, buf);
    }
    let parts: Vec<Mutex<&mut [u8]>> = buf.chunks_mut(pb * UNIT).map(Mutex::new).collect();
    engine.run(parts.len(), &|i| {
        let mut p = parts[i].lock().unwrap();
        units(k, (i * pb) as u64, &mut p);
    });
}

fn human(b: usize) -> String {
    if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

fn main() {
    let (mut secs, mut reps) = (0.2f64, 3usize);
    let mut json_path = String::from("bench/results/gpu-xts-twofish.json");
    let mut md_path = String::from("bench/results/gpu-xts-twofish.md");
    let args: Vec<String> = std::env::args().skip(1).collect();
    for w in args.chunks(2) {
        let v = w.get(1).cloned().unwrap_or_default();
        match w[0].as_str() {
            "--secs" => secs = v.parse().expect("--secs S"),
            "--reps" => reps = v.parse().expect("--reps N"),
            "--json" => json_path = v,
            "--md" => md_path = v,
            a => panic!("unknown argument {a}"),
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Workers on every core besides the caller's share, as a mount with
    // speculation on (the default for Twofish) has them.
    let engine = Engine::new(EngineConfig {
        threads: cores,
        read_ahead: 0,
        ..EngineConfig::default()
    })
    .expect("engine");
    let t = Instant::now();
    let mut dev = match XtsDevice::opencl(true, XTS_CHUNK) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no OpenCL device: {e}");
            std::process::exit(2);
        }
    };
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    eprintln!("device: {} (opened in {open_ms:.0} ms); {cores} cores", dev.name());
    let (mut rows, mut md, mut crossovers) = (Vec::new(), String::new(), Vec::new());
    for key_len in [32usize, 64] {
        let bits = key_len * 4;
        let name = format!("XTS-Twofish-{bits}");
        let key: Vec<u8> = (0..key_len as u8).map(|b| b.wrapping_mul(29).wrapping_add(3)).collect();
        let keys = XtsKeys::with_cipher(XtsCipher::Twofish, &key).unwrap();
        let k = XtsKey::new(XtsCipher::Twofish, &key).unwrap();
        let mut got = Vec::new();
        for &size in &SIZES {
            let mut buf: Vec<u8> = (0..size).map(|i| (i * 131 % 251) as u8).collect();
            let one = rate(size, secs, reps, || units(&k, 0, &mut buf));
            let all = rate(size, secs, reps, || split(&engine, &k, &mut buf));
            let gpu = rate(size, secs, reps, || {
                dev.encrypt(&keys, UNIT, 0, [0; 16], &mut buf).expect("OpenCL XTS")
            });
            eprintln!("{name} {size:>9} B: one core {one:7.1}, all cores {all:7.1}, opencl {gpu:7.1} MB/s");
            rows.push(format!(
                "{{\"xts\":\"{name}\",\"bytes\":{size},\"cpu_one_core_mb_s\":{one:.1},\"cpu_all_cores_mb_s\":{all:.1},\"opencl_mb_s\":{gpu:.1}}}"
            ));
            got.push((size, one, all, gpu));
        }
        let cross = (0..got.len())
            .find(|&i| got[i..].iter().all(|&(_, o, a, g)| g > o.max(a)))
            .map(|i| got[i].0);
        crossovers.push(format!(
            "{{\"xts\":\"{name}\",\"crossover_bytes\":{}}}",
            cross.map_or("null".into(), |b| b.to_string())
        ));
        md.push_str(&format!(
            "\n### {name}, 4 KiB data units, 256 KiB launches\n\n| request | CPU one core MB/s | CPU all {cores} cores MB/s | OpenCL MB/s (incl. copies) | OpenCL / best CPU |\n|---:|---:|---:|---:|---:|\n"
        ));
        for (size, one, all, gpu) in &got {
            md.push_str(&format!(
                "| {} | {one:.1} | {all:.1} | {gpu:.1} | {:.2} |\n",
                human(*size),
                gpu / one.max(*all)
            ));
        }
        md.push_str(&match cross {
            Some(b) => format!(
                "\nCrossover: OpenCL is faster than the best CPU path from {} on.\n",
                human(b)
            ),
            None => {
                "\nCrossover: **none**: OpenCL never stays ahead of the best CPU path at the sizes measured.\n".into()
            }
        });
    }
    let key = [0x42u8; 64];
    let keys = XtsKeys::with_cipher(XtsCipher::Twofish, &key).unwrap();
    let size = 16 << 20;
    let mut buf = vec![0x5au8; size];
    let mut chunk_rows = Vec::new();
    md.push_str("\n### OpenCL launch chunk size, 16 MiB request, XTS-Twofish-256\n\n| launch chunk | OpenCL MB/s |\n|---:|---:|\n");
    for &c in &CHUNKS {
        dev.set_chunk(c);
        let g = rate(size, secs, reps, || {
            dev.encrypt(&keys, UNIT, 0, [0; 16], &mut buf).expect("OpenCL XTS")
        });
        eprintln!("chunk {c:>8}: opencl {g:7.1} MB/s");
        chunk_rows.push(format!("{{\"chunk_bytes\":{c},\"opencl_mb_s\":{g:.1}}}"));
        md.push_str(&format!("| {} | {g:.1} |\n", human(c)));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let json = format!(
        "{{\n\"device\":{:?},\n\"device_is_pocl\":{},\n\"open_ms\":{open_ms:.1},\n\"cores\":{cores},\n\"unit_bytes\":{UNIT},\n\"launch_chunk_bytes\":{XTS_CHUNK},\n\"secs_per_rep\":{secs},\n\"reps\":{reps},\n\"loadavg_after\":{:?},\n\"rows\":[\n{}\n],\n\"crossover\":[{}],\n\"launch_chunk_sweep_16MiB\":[{}]\n}}\n",
        dev.name(),
        dev.is_pocl(),
        load.trim(),
        rows.join(",\n"),
        crossovers.join(","),
        chunk_rows.join(",")
    );
    std::fs::write(&json_path, json).expect("write json");
    let head = format!(
        "# GPU XTS-Twofish (OpenCL) vs CPU by request size (the paper's Fig. 6)\n\nDevice: **{}**{}. Opening it (discovery + both kernel builds) took {open_ms:.0} ms, paid once.\nCPU one core: the mount's XTS (`warpfs_crypto::XtsKey`, our Twofish). CPU all cores: the same\nsplit across the keystream engine's {cores} workers with the caller doing a share, as the mount\nsplits requests of 64 KiB or more. OpenCL: the fused kernel of `crates/engine/kernels/twofish_xts.cl`,\n256 work items per group, 256 KiB launches, host-to-device and device-to-host copies included.\nMB/s = 10^6 bytes/s, median of {reps} runs of {secs} s each, the three paths measured in turn per size.\n",
        dev.name(),
        if dev.is_pocl() {
            " — pocl, a CPU OpenCL implementation that runs on the same cores as the CPU columns: these are **not GPU figures**"
        } else {
            ""
        }
    );
    let foot = format!(
        "\nProduced by `bash bench/gpu-xts.sh` (`--secs {secs} --reps {reps}`) on a shared machine; load average at the end: `{}`.\n",
        load.trim()
    );
    std::fs::write(&md_path, head + &md + &foot).expect("write md");
}
