//! Single-thread throughput of XTS (ours vs the `xts-mode` crate, AES-128/256,
//! Twofish), of XTS with tweak masks made ahead, and of CTR masks, over 4 KiB
//! data units. Usage: `xts_speed [MiB] [rounds]` (default 128 MiB, 5 rounds);
//! prints the best and worst MB/s of the rounds. Pin with `taskset -c N`.

use aes::cipher::KeyInit;
use std::time::Instant;
use warpfs_crypto::{file_block_tweak, ContentKey, XtsCipher, XtsKey};

fn measure(name: &str, mib: usize, rounds: usize, buf: &mut [u8], mut f: impl FnMut(&mut [u8])) {
    let mut rates = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        f(buf);
        rates.push((mib * 1_048_576) as f64 / t.elapsed().as_secs_f64() / 1e6);
    }
    let best = rates.iter().cloned().fold(0.0, f64::max);
    let worst = rates.iter().cloned().fold(f64::MAX, f64::min);
    println!("{name:<44} best {best:>8.0} MB/s  worst {worst:>8.0} MB/s");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(128);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut buf: Vec<u8> = (0..mib * 1_048_576).map(|i| i as u8).collect();
    let id = [0x5au8; 16];
    let key: Vec<u8> = (0..64u8).collect();
    for bits in [256usize, 128] {
        let k = XtsKey::new(XtsCipher::Aes, &key[..bits / 4]).unwrap();
        measure(&format!("warpfs XTS-AES-{bits}"), mib, rounds, &mut buf, |b| {
            for (i, u) in b.chunks_mut(4096).enumerate() {
                k.encrypt_unit(&file_block_tweak(&id, i as u64), u);
            }
        });
        // Tweak masks made ahead (their cost not counted): the most that
        // making them ahead on another core could save.
        let n = buf.len() / 4096;
        let mut masks = vec![[0u128; 256]; n];
        let t0 = Instant::now();
        for (i, m) in masks.iter_mut().enumerate() {
            XtsKey::masks(k.encrypted_tweak(&file_block_tweak(&id, i as u64)), m);
        }
        let tm = t0.elapsed().as_secs_f64();
        println!(
            "{:<44} {:>8.0} MB/s of data ({:.1} ns per 4 KiB unit)",
            format!("  making the tweak masks alone, AES-{bits}"),
            buf.len() as f64 / tm / 1e6,
            tm * 1e9 / n as f64
        );
        measure(
            &format!("warpfs XTS-AES-{bits}, masks made ahead"),
            mib,
            rounds,
            &mut buf,
            |b| {
                for (u, m) in b.chunks_mut(4096).zip(masks.iter()) {
                    k.encrypt_with_masks(m, u);
                }
            },
        );
        let h = bits / 8;
        macro_rules! oracle {
            ($c:ty) => {{
                let x = xts_mode::Xts128::new(
                    <$c>::new_from_slice(&key[..h]).unwrap(),
                    <$c>::new_from_slice(&key[h..2 * h]).unwrap(),
                );
                measure(
                    &format!("xts-mode crate XTS-AES-{bits}"),
                    mib,
                    rounds,
                    &mut buf,
                    |b| {
                        for (i, u) in b.chunks_mut(4096).enumerate() {
                            x.encrypt_sector(u, file_block_tweak(&id, i as u64).into());
                        }
                    },
                );
            }};
        }
        if bits == 256 {
            oracle!(aes::Aes256)
        } else {
            oracle!(aes::Aes128)
        }
        let ck = ContentKey::new(&key[..h]).unwrap();
        measure(
            &format!("CTR masks AES-{bits} (xor_keystream)"),
            mib,
            rounds,
            &mut buf,
            |b| {
                for (i, u) in b.chunks_mut(4096).enumerate() {
                    let mut nonce = [0u8; 12];
                    nonce[..8].copy_from_slice(&(i as u64).to_be_bytes());
                    ck.xor_keystream(&nonce, 2, u);
                }
            },
        );
    }
    // Twofish is slow: measure over at most 16 MiB.
    let tmib = mib.min(16);
    let tbuf = &mut buf[..tmib * 1_048_576];
    for bits in [256usize, 128] {
        let k = XtsKey::new(XtsCipher::Twofish, &key[..bits / 4]).unwrap();
        measure(&format!("warpfs XTS-Twofish-{bits}"), tmib, rounds.min(3), tbuf, |b| {
            for (i, u) in b.chunks_mut(4096).enumerate() {
                k.encrypt_unit(&file_block_tweak(&id, i as u64), u);
            }
        });
    }
}
