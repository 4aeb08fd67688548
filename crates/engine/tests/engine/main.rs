//! Engine behaviour: random concurrent define/apply against direct AES-CTR,
//! priorities, tickets, the write pool and read windows. Shared helpers
//! here; the tests in one module per part of the engine.

mod concurrent;
mod contexts;
mod lifecycle;
mod retire;
mod window;
mod write_pool;
mod xchacha;

use proptest::prelude::*;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use warpfs_crypto::ContentKey;
use warpfs_engine::*;
use warpfs_keystream::{Direct, Keystream};

/// xorshift64*: a small deterministic generator for the thread schedules.
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next() as u8;
        }
    }
}

fn engine(threads: usize, speculation: bool) -> Arc<Engine> {
    Engine::new(EngineConfig {
        threads,
        speculation,
        ..EngineConfig::default()
    })
    .unwrap()
}

/// Reference keystream bytes [offset, offset+len) from `counter`.
fn reference(raw: &[u8], nonce: &Nonce, counter: u32, offset: usize, len: usize) -> Vec<u8> {
    let mut ks = vec![0u8; offset + len];
    ContentKey::new(raw).unwrap().keystream(nonce, counter, &mut ks);
    ks.split_off(offset)
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

fn nonce_of(i: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[..8].copy_from_slice(&0x5eed_0000_0000_0001u64.to_be_bytes());
    n[8..].copy_from_slice(&(i as u32).to_be_bytes());
    n
}

/// A deterministic nonce supply for comparing runs.
struct Counting(Mutex<u64>);
impl NonceSupply for Counting {
    fn next_nonce(&self) -> Nonce {
        let mut n = self.0.lock().unwrap();
        *n += 1;
        nonce_of(*n)
    }
    fn live_epoch(&self) -> u64 {
        // Every nonce of `nonce_of` is of this one epoch, which never ends.
        0x5eed_0000_0000_0001
    }
}

/// A key id the engine has not handed out.
fn unknown_key(e: &Engine) -> KeyId {
    let other = Engine::new(EngineConfig {
        speculation: false,
        ..EngineConfig::default()
    })
    .unwrap();
    let mut k = other.add_raw_key(&[1; 16]).unwrap();
    while !matches!(e.cipher(k), Err(EngineError::UnknownKey(_))) {
        k = other.add_raw_key(&[1; 16]).unwrap();
    }
    k
}
