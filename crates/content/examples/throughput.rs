//! Rough content-layer throughput (no FUSE): sequential 1 MiB writes and
//! reads, then 4 KiB random reads, on a file in the given directory.
//! `cargo run --release -p warpfs-content --example throughput -- DIR [MiB] [gcm|ctr]`

use std::sync::Arc;
use std::time::Instant;
use warpfs_content::{Cipher, CipherFile, Mode};
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "/tmp".into());
    let mib: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(256);
    let mode = match args.next().as_deref() {
        Some("ctr") => Mode::Ctr,
        _ => Mode::Gcm,
    };
    let key = ContentKey::new(&[9u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    let c = Arc::new(Cipher::new(mode, Arc::new(Direct::new(key)), tagger));
    let path = std::path::Path::new(&dir).join("warpfs-content-throughput.bin");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let f = CipherFile::open(file, c, "bench".into()).unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    let t = Instant::now();
    for i in 0..mib {
        f.write_at(i << 20, &chunk).unwrap();
    }
    let w = t.elapsed().as_secs_f64();
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    for i in 0..mib {
        f.read_at(i << 20, &mut buf).unwrap();
    }
    let r = t.elapsed().as_secs_f64();
    let mut small = vec![0u8; 4096];
    let n = 20_000u64;
    let t = Instant::now();
    let mut x = 12345u64;
    for _ in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let b = (x >> 20) % (mib * 256);
        f.read_at(b * 4096, &mut small).unwrap();
    }
    let rr = t.elapsed().as_secs_f64();
    println!(
        "{mode:?}: seq write {:.0} MiB/s, seq read {:.0} MiB/s, 4K random read {:.0} IOPS",
        mib as f64 / w,
        mib as f64 / r,
        n as f64 / rr
    );
    drop(f);
    let _ = std::fs::remove_file(&path);
}
