//! Single-thread throughput of XTS (ours vs the `xts-mode` crate, AES-128/256,
//! Twofish), of XTS with tweak masks made ahead, of making the masks alone,
//! and of CTR masks, over 4 KiB data units. Usage: `xts_speed [MiB] [rounds]`
//! (default 128 MiB, 5 rounds). Variants run interleaved (one pass of each
//! per round), so ratios are measured side by side; prints the median, best
//! and worst MB/s of the rounds. Pin with `taskset -c N`.

use aes::cipher::KeyInit;
use std::time::Instant;
use warpfs_crypto::{file_block_tweak, ContentKey, XtsCipher, XtsKey};

type Variant<'a> = (String, usize, Box<dyn FnMut(&mut [u8]) + 'a>);

fn run(variants: &mut [Variant<'_>], buf: &mut [u8], rounds: usize) {
    let mut rates = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (i, (_, mib, f)) in variants.iter_mut().enumerate() {
            let b = &mut buf[..*mib * 1_048_576];
            let t = Instant::now();
            f(b);
            rates[i].push((*mib * 1_048_576) as f64 / t.elapsed().as_secs_f64() / 1e6);
        }
    }
    for ((name, _, _), r) in variants.iter().zip(rates.iter_mut()) {
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "{name:<42} median {:>7.0} MB/s  best {:>7.0}  worst {:>7.0}",
            r[r.len() / 2],
            r[r.len() - 1],
            r[0]
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(128);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut buf: Vec<u8> = (0..mib * 1_048_576).map(|i| i as u8).collect();
    let id = [0x5au8; 16];
    let key: Vec<u8> = (0..64u8).collect();
    let units = buf.len() / 4096;
    let k256 = XtsKey::new(XtsCipher::Aes, &key).unwrap();
    let k128 = XtsKey::new(XtsCipher::Aes, &key[..32]).unwrap();
    let masks = |k: &XtsKey| -> Vec<[u128; 256]> {
        let mut m = vec![[0u128; 256]; units];
        for (i, x) in m.iter_mut().enumerate() {
            XtsKey::masks(k.encrypted_tweak(&file_block_tweak(&id, i as u64)), x);
        }
        m
    };
    let (m256, m128) = (masks(&k256), masks(&k128));
    let o256 = xts_mode::Xts128::new(
        aes::Aes256::new_from_slice(&key[..32]).unwrap(),
        aes::Aes256::new_from_slice(&key[32..]).unwrap(),
    );
    let o128 = xts_mode::Xts128::new(
        aes::Aes128::new_from_slice(&key[..16]).unwrap(),
        aes::Aes128::new_from_slice(&key[16..32]).unwrap(),
    );
    let (c256, c128) = (
        ContentKey::new(&key[..32]).unwrap(),
        ContentKey::new(&key[..16]).unwrap(),
    );
    let tf256 = XtsKey::new(XtsCipher::Twofish, &key).unwrap();
    let tf128 = XtsKey::new(XtsCipher::Twofish, &key[..32]).unwrap();
    let xts = |k: &XtsKey, b: &mut [u8]| {
        for (i, u) in b.chunks_mut(4096).enumerate() {
            k.encrypt_unit(&file_block_tweak(&id, i as u64), u);
        }
    };
    let ahead = |k: &XtsKey, m: &[[u128; 256]], b: &mut [u8]| {
        for (u, m) in b.chunks_mut(4096).zip(m) {
            k.encrypt_with_masks(m, u);
        }
    };
    let masks_only = |k: &XtsKey, b: &mut [u8]| {
        let mut m = [0u128; 256];
        for i in 0..b.len() / 4096 {
            XtsKey::masks(k.encrypted_tweak(&file_block_tweak(&id, i as u64)), &mut m);
            std::hint::black_box(&m);
        }
    };
    let ctr = |k: &ContentKey, b: &mut [u8]| {
        for (i, u) in b.chunks_mut(4096).enumerate() {
            let mut nonce = [0u8; 12];
            nonce[..8].copy_from_slice(&(i as u64).to_be_bytes());
            k.xor_keystream(&nonce, 2, u);
        }
    };
    let tm = mib.min(8);
    let mut v: Vec<Variant<'_>> = vec![
        ("warpfs XTS-AES-256".into(), mib, Box::new(|b| xts(&k256, b))),
        ("warpfs XTS-AES-128".into(), mib, Box::new(|b| xts(&k128, b))),
        (
            "XTS-AES-256, tweak masks made ahead".into(),
            mib,
            Box::new(|b| ahead(&k256, &m256, b)),
        ),
        (
            "XTS-AES-128, tweak masks made ahead".into(),
            mib,
            Box::new(|b| ahead(&k128, &m128, b)),
        ),
        (
            "tweak masks alone (E_K2 + 255 doublings), 256".into(),
            mib,
            Box::new(|b| masks_only(&k256, b)),
        ),
        (
            "xts-mode crate XTS-AES-256".into(),
            mib,
            Box::new(|b| {
                for (i, u) in b.chunks_mut(4096).enumerate() {
                    o256.encrypt_sector(u, file_block_tweak(&id, i as u64).into());
                }
            }),
        ),
        (
            "xts-mode crate XTS-AES-128".into(),
            mib,
            Box::new(|b| {
                for (i, u) in b.chunks_mut(4096).enumerate() {
                    o128.encrypt_sector(u, file_block_tweak(&id, i as u64).into());
                }
            }),
        ),
        (
            "CTR masks AES-256 (xor_keystream)".into(),
            mib,
            Box::new(|b| ctr(&c256, b)),
        ),
        (
            "CTR masks AES-128 (xor_keystream)".into(),
            mib,
            Box::new(|b| ctr(&c128, b)),
        ),
        ("warpfs XTS-Twofish-256".into(), tm, Box::new(|b| xts(&tf256, b))),
        ("warpfs XTS-Twofish-128".into(), tm, Box::new(|b| xts(&tf128, b))),
    ];
    run(&mut v, &mut buf, rounds);
}
