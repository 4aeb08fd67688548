//! One core's XChaCha20 and Poly1305 on 4 KiB blocks, each part alone:
//! what a write's seal costs (the mask, the XOR, the tag) and where the
//! time goes, and our Poly1305 beside the `poly1305` crate's on the same
//! input (decision record 0080), and our keystream beside the `chacha20`
//! crate's alone (decision record 0108).
//!
//!     cargo run --release -p warpfs-crypto --example xchacha_speed [MS]
//!
//! The crate picks its AVX2 backend at run time where the CPU has AVX2;
//! `RUSTFLAGS='--cfg poly1305_backend="soft"'` forces its portable one.

use std::hint::black_box;
use std::time::{Duration, Instant};
use warpfs_crypto::xchacha::{poly1305_tag, XChaChaKey};

/// MB/s (10^6 bytes) of `f` on 4 KiB for about `t`.
fn rate(t: Duration, mut f: impl FnMut(u64)) -> f64 {
    f(0);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < t {
        for _ in 0..32 {
            f(n);
            n += 1;
        }
    }
    (n * 4096) as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// The tag of FORMAT.md 15 made with the `poly1305` crate.
fn crate_tag(otk: &[u8; 32], aad: &[u8], ct: &[u8]) -> [u8; 16] {
    use poly1305::universal_hash::{KeyInit, UniversalHash};
    let mut m = poly1305::Poly1305::new(otk.into());
    m.update_padded(aad);
    m.update_padded(ct);
    let mut lens = [0u8; 16];
    lens[..8].copy_from_slice(&(aad.len() as u64).to_le_bytes());
    lens[8..].copy_from_slice(&(ct.len() as u64).to_le_bytes());
    m.update(&[lens.into()]);
    m.finalize().into()
}

fn main() {
    let ms: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(300);
    let t = Duration::from_millis(ms);
    let key = XChaChaKey::new(&[0x42; 32]).expect("32 bytes");
    let mut buf = vec![0x5au8; 4096];
    let mut mask = vec![0u8; 64 + 4096];
    let nonce = |n: u64| {
        let mut x = [0u8; 12];
        x[4..].copy_from_slice(&(n + 1).to_be_bytes());
        x
    };
    println!("backend: {}", warpfs_crypto::xchacha::backend());
    assert_eq!(
        crate_tag(&[7; 32], &[1; 24], &buf),
        poly1305_tag(&[7; 32], &[1; 24], &buf),
        "our Poly1305 and the crate's disagree"
    );
    let r = rate(t, |n| key.keystream(&nonce(n), 0, black_box(&mut mask)));
    println!("mask (block 0 + 4 KiB, HChaCha20 included): {r:8.0} MB/s");
    let r = rate(t, |n| {
        use chacha20::cipher::{KeyIvInit, StreamCipher};
        mask.fill(0);
        let xn = warpfs_crypto::xchacha::xnonce(&nonce(n));
        chacha20::XChaCha20::new(&[0x42; 32].into(), &xn.into()).apply_keystream(black_box(&mut mask));
    });
    println!("the same mask with the chacha20 crate alone: {r:8.0} MB/s");
    let r = rate(t, |n| key.xor_at(&nonce(n), 1, 0, black_box(&mut buf)));
    println!("XOR of 4 KiB keystream in place:             {r:8.0} MB/s");
    let otk = [7u8; 32];
    let aad = [1u8; 24];
    let r = rate(t, |_| {
        black_box(poly1305_tag(&otk, &aad, black_box(&buf)));
    });
    println!("Poly1305 tag of 4 KiB (24-byte AD), ours:    {r:8.0} MB/s");
    let r = rate(t, |_| {
        black_box(crate_tag(&otk, &aad, black_box(&buf)));
    });
    println!("the same with the poly1305 crate:            {r:8.0} MB/s");
    let r = rate(t, |_| {
        warpfs_crypto::aes_ctr::xor_in_place(black_box(&mut buf), &mask[64..]);
    });
    println!("XOR of a ready mask into 4 KiB:              {r:8.0} MB/s");
}
