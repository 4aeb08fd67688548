//! What a key lookup costs on the engine's hot paths (speculation off, one
//! thread), in ns per call:
//!
//!     taskset -c 0 cargo run --release -p warpfs-engine --example lookup_cost [-- CALLS]
//!
//! `define_on_demand` + `apply_block` of a 4 KiB block (what a read or a
//! write costs the engine per block with speculation off: the key is
//! checked at the define and looked up under an epoch pin at the apply) and
//! `xor_direct` of 64 bytes (a lookup with almost no AES behind it). Build
//! it at two commits and run them side by side to compare key tables.

use std::time::Instant;
use warpfs_engine::{Engine, EngineConfig};

fn main() {
    let calls: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let e = Engine::new(EngineConfig {
        speculation: false,
        ..EngineConfig::default()
    })
    .expect("engine");
    let k = e.add_raw_key(&[7u8; 32]).expect("key");
    let ctx = e.context();
    let mut buf = vec![0u8; 4096];
    let nonce = |i: u64| {
        let mut n = [0u8; 12];
        n[..8].copy_from_slice(&i.to_le_bytes());
        n
    };
    for round in 0..5 {
        let t0 = Instant::now();
        for i in 0..calls {
            let t = e.define_on_demand(&ctx, k, &nonce(i)).expect("define");
            e.apply_block(&ctx, &t, &mut buf).expect("apply");
        }
        let block = t0.elapsed().as_nanos() as f64 / calls as f64;
        let t0 = Instant::now();
        for i in 0..calls {
            e.xor_direct(k, &nonce(i), 2, 0, &mut buf[..64]).expect("xor");
        }
        let small = t0.elapsed().as_nanos() as f64 / calls as f64;
        println!("round {round}: define + apply_block 4 KiB {block:.1} ns, xor_direct 64 B {small:.1} ns");
    }
    std::hint::black_box(&buf);
}
