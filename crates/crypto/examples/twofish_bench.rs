//! One-core Twofish throughput over 4 KiB units, for `bench/twofish.sh`:
//! warpfs-crypto's own Twofish and the `twofish` crate (the implementation
//! it replaced; XTS through the `xts-mode` crate, CTR over counter blocks),
//! XTS (fresh tweak per unit) and CTR (nonce ‖ BE32(2) per unit), 128- and
//! 256-bit keys. `twofish_bench [SECONDS]`: one JSON line per case with
//! MB/s (10^6 B/s) by wall clock and by the thread's CPU time.

use std::time::Instant;
use twofish::cipher::{BlockCipherEncrypt, KeyInit};
use warpfs_crypto::{file_block_tweak, ContentKey, XtsCipher, XtsKey};

const UNIT: usize = 4096;

fn cpu_time() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: plain clock_gettime into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn run(name: &str, imp: &str, secs: f64, buf: &mut [u8], f: &mut dyn FnMut(u64, &mut [u8])) {
    let (w0, c0) = (Instant::now(), cpu_time());
    let (mut bytes, mut unit) = (0u64, 0u64);
    loop {
        for u in buf.chunks_mut(UNIT) {
            f(unit, u);
            unit += 1;
            bytes += UNIT as u64;
            if unit.is_multiple_of(256) && w0.elapsed().as_secs_f64() >= secs {
                let (w, c) = (w0.elapsed().as_secs_f64(), cpu_time() - c0);
                println!(
                    "{{\"impl\":\"{imp}\",\"cipher\":\"{name}\",\"wall_mbps\":{:.1},\"cpu_mbps\":{:.1}}}",
                    bytes as f64 / w / 1e6,
                    bytes as f64 / c / 1e6
                );
                return;
            }
        }
    }
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let mut buf = vec![0x5au8; 4 << 20];
    let key: Vec<u8> = (0..64).map(|i| (i * 7 + 1) as u8).collect();
    let id = [0u8; 16];
    for bits in [128usize, 256] {
        let n = bits / 8;
        let ours = XtsKey::new(XtsCipher::Twofish, &key[..2 * n]).unwrap();
        run(
            &format!("Twofish-{bits} XTS"),
            "warpfs-crypto",
            secs,
            &mut buf,
            &mut |u, b| ours.encrypt_unit(&file_block_tweak(&id, u), b),
        );
        let ctr = ContentKey::with_cipher(XtsCipher::Twofish, &key[..n]).unwrap();
        run(
            &format!("Twofish-{bits} CTR"),
            "warpfs-crypto",
            secs,
            &mut buf,
            &mut |u, b| {
                let mut nonce = [0u8; 12];
                nonce[..8].copy_from_slice(&u.to_le_bytes());
                ctr.xor_keystream(&nonce, 2, b)
            },
        );
    }
    // The crate warpfs used before: a fraction of the time (it is ~100x slower).
    let old_secs = (secs / 4.0).max(0.2);
    let mut small = vec![0x5au8; 256 * 1024];
    for bits in [128usize, 256] {
        let n = bits / 8;
        let x = xts_mode::Xts128::new(
            twofish::Twofish::new_from_slice(&key[..n]).unwrap(),
            twofish::Twofish::new_from_slice(&key[n..2 * n]).unwrap(),
        );
        run(
            &format!("Twofish-{bits} XTS"),
            "twofish crate 0.8",
            old_secs,
            &mut small,
            &mut |u, b| x.encrypt_sector(b, file_block_tweak(&id, u).into()),
        );
        let c = twofish::Twofish::new_from_slice(&key[..n]).unwrap();
        run(
            &format!("Twofish-{bits} CTR"),
            "twofish crate 0.8",
            old_secs,
            &mut small,
            &mut |u, b| {
                let mut blocks = [twofish::cipher::Block::<twofish::Twofish>::default(); UNIT / 16];
                for (i, cb) in blocks.iter_mut().enumerate() {
                    cb[..8].copy_from_slice(&u.to_le_bytes());
                    cb[12..].copy_from_slice(&(2 + i as u32).to_be_bytes());
                }
                c.encrypt_blocks(&mut blocks);
                for (d, k) in b.chunks_exact_mut(16).zip(&blocks) {
                    for (x, y) in d.iter_mut().zip(k.iter()) {
                        *x ^= y;
                    }
                }
            },
        );
    }
}
