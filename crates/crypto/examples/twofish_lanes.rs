//! Single-core Twofish ECB throughput by lane count (blocks in lock-step),
//! to choose `twofish::LANES`: `twofish_lanes [MiB] [rounds]`. Variants run
//! interleaved; prints median MB/s per second of
//! the thread's CPU time (robust on a shared machine). Pin with `taskset -c N`.

use warpfs_crypto::twofish::Twofish;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(32);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let k = Twofish::new(&[7u8; 32]).unwrap();
    let mut buf = vec![[0u8; 16]; mib * 65536];
    type F<'a> = Box<dyn Fn(&mut [[u8; 16]]) + 'a>;
    let variants: Vec<(&str, F)> = vec![
        ("1 lane", Box::new(|b| k.encrypt_blocks_n::<1>(b))),
        ("2 lanes", Box::new(|b| k.encrypt_blocks_n::<2>(b))),
        ("3 lanes", Box::new(|b| k.encrypt_blocks_n::<3>(b))),
        ("4 lanes", Box::new(|b| k.encrypt_blocks_n::<4>(b))),
        ("6 lanes", Box::new(|b| k.encrypt_blocks_n::<6>(b))),
        ("decrypt", Box::new(|b| k.decrypt_blocks(b))),
    ];
    let mut rates = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (i, (_, f)) in variants.iter().enumerate() {
            let t = cpu_time();
            for c in buf.chunks_mut(256) {
                f(c);
            }
            rates[i].push((mib << 20) as f64 / (cpu_time() - t) / 1e6);
        }
    }
    for ((name, _), r) in variants.iter().zip(rates.iter_mut()) {
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("{name:<10} median {:>6.0} MB/s", r[r.len() / 2]);
    }
}

fn cpu_time() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: plain clock_gettime into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
