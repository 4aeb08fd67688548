//! What handing a mask from one core to another costs, without FUSE:
//!
//!     cargo run --release -p warpfs-engine --example handoff [-- SECONDS [LOAD]]
//!
//! Part 1, one 4 KiB block on CPU 1: XOR a mask made on CPU 0, XOR the same
//! mask again (now local), and make the keystream inline (warpfs-crypto's
//! CTR kernel), in ns per block, for rings of 16 to 1024 masks.
//! Part 2, a `ReadWindow` driven like the mount's read path on CPU 1 (1 MiB
//! requests: plan, prefetch, a 1 MiB copy standing for the pread, `open`
//! per block, a 1 MiB copy standing for the reply), GB/s with speculation
//! off, with the workers on CPU 0 (`EngineConfig::cpus`, the mount's
//! `--engine-cpus 0`) and with them on CPU 1 beside the reader. With
//! `LOAD` = 1, a thread on CPU 0 copies 1 MiB every 50 us, standing for a
//! client sharing the workers' core. Needs 2+ CPUs; numbers from a shared
//! VM move between runs: compare the rows of one run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use warpfs_crypto::ContentKey;
use warpfs_engine::{Engine, EngineConfig, Nonce, ReadWindow};

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET on a small index.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn nonce(b: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&b.to_be_bytes());
    n
}

/// Masks shared between the two threads; the rounds hand them over with
/// the `go` / `done` counters, so no two threads touch one at once.
struct Ring(Vec<std::cell::UnsafeCell<Vec<u8>>>);
// SAFETY: access alternates between the threads through go/done (Acquire/Release).
unsafe impl Sync for Ring {}

fn part1(key: &Arc<ContentKey>) {
    println!("part 1: ns per 4 KiB block on CPU 1");
    let mut data = vec![1u8; 4096];
    for k in [16usize, 64, 256, 1024] {
        let ring = Arc::new(Ring(
            (0..k).map(|_| std::cell::UnsafeCell::new(vec![0u8; 4096])).collect(),
        ));
        let rounds = (200_000 / k) as u64;
        let (go, done) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (r2, k2, g2, d2) = (ring.clone(), key.clone(), go.clone(), done.clone());
        let maker = std::thread::spawn(move || {
            pin(0);
            for r in 0..rounds {
                while g2.load(Ordering::Acquire) != r + 1 {
                    std::hint::spin_loop();
                }
                for (i, b) in r2.0.iter().enumerate() {
                    // SAFETY: the reader waits for `done` before reading.
                    unsafe { k2.keystream(&nonce(r * 100_000 + i as u64), 2, &mut *b.get()) };
                }
                d2.store(r + 1, Ordering::Release);
            }
        });
        let (mut remote, mut local, mut inline) = (0f64, 0f64, 0f64);
        for r in 0..rounds {
            go.store(r + 1, Ordering::Release);
            while done.load(Ordering::Acquire) != r + 1 {
                std::hint::spin_loop();
            }
            for pass in 0..2 {
                let t0 = Instant::now();
                for b in ring.0.iter() {
                    // SAFETY: the maker is waiting for the next `go`.
                    warpfs_crypto::aes_ctr::xor_in_place(&mut data, unsafe { &*b.get() });
                }
                let ns = t0.elapsed().as_nanos() as f64;
                if pass == 0 {
                    remote += ns;
                } else {
                    local += ns;
                }
            }
            let t0 = Instant::now();
            for i in 0..k {
                key.xor_keystream(&nonce(i as u64), 2, &mut data);
            }
            inline += t0.elapsed().as_nanos() as f64;
        }
        maker.join().expect("mask maker");
        let n = rounds as f64 * k as f64;
        println!(
            "  ring of {k:4} masks ({:4} KiB): XOR of a mask made on CPU 0 {:.0}, XOR of a local mask {:.0}, inline CTR {:.0}",
            k * 4,
            remote / n,
            local / n,
            inline / n
        );
    }
}

fn window_run(speculation: bool, cpus: Vec<usize>, secs: f64) -> (f64, String) {
    let e = Engine::new(EngineConfig {
        speculation,
        cpus,
        nice: Some(-19),
        ..EngineConfig::default()
    })
    .expect("engine");
    let k = e.add_raw_key(&[7u8; 32]).expect("key");
    let w = ReadWindow::new(e.clone(), k).expect("window");
    let src = vec![5u8; 1 << 20];
    let (mut req, mut out) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let (req_blocks, file_blocks) = (256u64, 65_536u64);
    let s0 = e.stats();
    let t0 = Instant::now();
    let (mut n, mut pos) = (0u64, 0u64);
    while t0.elapsed().as_secs_f64() < secs {
        let end = w.plan(pos, req_blocks).end.min(file_blocks);
        let blocks: Vec<(u64, Nonce)> = (pos..end).map(|b| (b, nonce(b))).collect();
        w.prefetch(&blocks);
        req.copy_from_slice(&src);
        for (i, block) in req.chunks_mut(4096).enumerate() {
            let b = pos + i as u64;
            w.open(b, &nonce(b), block);
        }
        w.finish(pos, req_blocks);
        out.copy_from_slice(&req);
        std::hint::black_box(&out);
        n += req_blocks;
        pos = (pos + req_blocks) % file_blocks;
    }
    let el = t0.elapsed().as_secs_f64();
    let s = e.stats();
    let applies = (s.applies - s0.applies).max(1);
    (
        n as f64 * 4096.0 / el / 1e9,
        format!(
            "ready {:.1}%, inline {}, waits {}",
            100.0 * (s.ready_hits - s0.ready_hits) as f64 / applies as f64,
            s.inline - s0.inline,
            s.waits - s0.waits
        ),
    )
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let load = std::env::args().nth(2).is_some_and(|s| s == "1");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("needs 2 CPUs");
        std::process::exit(2);
    }
    let key = Arc::new(ContentKey::new(&[7u8; 32]).expect("key"));
    pin(1);
    part1(&key);
    if load {
        std::thread::spawn(|| {
            pin(0);
            let a = vec![1u8; 1 << 20];
            let mut b = vec![0u8; 1 << 20];
            loop {
                b.copy_from_slice(&a);
                std::hint::black_box(&b);
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        });
    }
    println!(
        "part 2: read window, 1 MiB requests, reader on CPU 1{}",
        if load { ", load on CPU 0" } else { "" }
    );
    for round in 0..3 {
        for (name, spec, cpus) in [
            ("speculation off", false, vec![]),
            ("workers on CPU 0", true, vec![0]),
            ("workers on CPU 1", true, vec![1]),
        ] {
            let (g, st) = window_run(spec, cpus, secs);
            println!("  round {round} {name:17}: {g:.2} GB/s ({st})");
        }
    }
}
