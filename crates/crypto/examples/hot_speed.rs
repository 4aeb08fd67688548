//! One-core speed of the content hot loops, fast kernels vs the portable
//! crates, interleaved: `cargo run --release -p warpfs-crypto --example
//! hot_speed [SECONDS_PER_CASE] [ROUNDS]` (pin it with taskset). Prints
//! GB/s (10^9 bytes/s) per case and round.

use std::hint::black_box;
use std::time::Instant;
use warpfs_crypto::{ContentKey, GcmTagger};

fn measure(secs: f64, bytes: usize, mut f: impl FnMut()) -> f64 {
    f();
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        for _ in 0..64 {
            f();
        }
        n += 64;
    }
    n as f64 * bytes as f64 / t0.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0.3);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let k256 = ContentKey::new(&[7u8; 32]).unwrap();
    let k128 = ContentKey::new(&[7u8; 16]).unwrap();
    let tagger = GcmTagger::new(&k256);
    println!(
        "vaes kernel: {}, vpclmul kernel: {}",
        k256.is_vaes(),
        tagger.is_vpclmul()
    );
    let nonce = [3u8; 12];
    let aad = [9u8; 24];
    let mut buf = vec![0x5au8; 4096 + 16];
    let mut data = vec![0x33u8; 4096];
    for r in 0..rounds {
        for (name, key) in [("AES-256", &k256), ("AES-128", &k128)] {
            let fast = measure(secs, 4112, || key.keystream(&nonce, 1, black_box(&mut buf)));
            let port = measure(secs, 4112, || {
                key.keystream_portable(&nonce, 1, black_box(&mut buf), false)
            });
            let fx = measure(secs, 4096, || key.xor_keystream(&nonce, 2, black_box(&mut data)));
            let px = measure(secs, 4096, || {
                key.keystream_portable(&nonce, 2, black_box(&mut data), true)
            });
            println!(
                "round {r} {name} mask 4112 B: kernel {fast:.2} / portable {port:.2}; xor 4 KiB: kernel {fx:.2} / portable {px:.2}"
            );
        }
        let g = measure(secs, 4096, || {
            black_box(tagger.ghash(&aad, black_box(&data)));
        });
        let gp = measure(secs, 4096, || {
            black_box(tagger.ghash_portable(&aad, black_box(&data)));
        });
        println!("round {r} GHASH 24 B AAD + 4 KiB: kernel {g:.2} / ghash crate {gp:.2}");
        let big = vec![1u8; 65536];
        let gb = measure(secs, 65536, || {
            black_box(tagger.ghash(&[], black_box(&big)));
        });
        let g0 = measure(secs, 4096, || {
            black_box(tagger.ghash(&[], black_box(&data)));
        });
        println!("round {r} GHASH 64 KiB: {gb:.2}; 4 KiB no AAD: {g0:.2}");
        let mask = vec![0x77u8; 4096];
        let x = measure(secs, 4096, || {
            warpfs_crypto::aes_ctr::xor_in_place(black_box(&mut data), &mask)
        });
        println!("round {r} XOR of a 4 KiB mask: {x:.2}");
    }
}
