//! Engine behaviour: random concurrent define/apply against direct AES-CTR,
//! priorities, tickets, the write pool and read windows.

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

/// Run one random schedule: `nthreads` threads share `nctx` contexts and
/// define/apply at random. Every successful apply must equal direct
/// AES-CTR for the ticket it was given; a failed one must leave the buffer
/// untouched. Returns (successful applies, stale-ticket refusals). Idle
/// workers poll the queue for `spin_us` before sleeping.
fn random_schedule(seed: u64, nthreads: usize, software: bool, batch_max: usize, spin_us: u32) -> (u64, u64) {
    let engine = Engine::new(EngineConfig {
        threads: 2,
        software_aes: software,
        batch_max,
        spin_us,
        ..EngineConfig::default()
    })
    .unwrap();
    let raws: Vec<Vec<u8>> = vec![vec![0x11; 16], vec![0x22; 32]];
    let keys: Vec<KeyId> = raws.iter().map(|r| engine.add_raw_key(r).unwrap()).collect();
    let lens = [16usize, 100, 4112, 4112, 64, 4112];
    let ctxs: Arc<Vec<Ctx>> = Arc::new(lens.iter().map(|&l| engine.context_with_len(l)).collect());
    let last: Arc<Mutex<Vec<Option<Defined>>>> = Arc::new(Mutex::new(vec![None; lens.len()]));
    let handles: Vec<_> = (0..nthreads)
        .map(|t| {
            let (engine, ctxs, last, raws, keys) =
                (engine.clone(), ctxs.clone(), last.clone(), raws.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let (mut ok, mut stale) = (0u64, 0u64);
                for _ in 0..120 {
                    let c = rng.below(ctxs.len() as u64) as usize;
                    match rng.below(10) {
                        3 => {
                            // A batch of 1..=3 definitions (a context may repeat:
                            // the later definition wins).
                            let n = 1 + rng.below(3) as usize;
                            let picks: Vec<(usize, usize, Nonce, i32)> = (0..n)
                                .map(|_| {
                                    (
                                        rng.below(ctxs.len() as u64) as usize,
                                        rng.below(keys.len() as u64) as usize,
                                        nonce_of(rng.below(4)),
                                        rng.below(100) as i32 - 50,
                                    )
                                })
                                .collect();
                            let items: Vec<(&Ctx, KeyId, Nonce, Priority)> =
                                picks.iter().map(|&(c, k, n, p)| (&ctxs[c], keys[k], n, p)).collect();
                            let ts = engine.define_batch(&items).unwrap();
                            let mut l = last.lock().unwrap();
                            for (&(c, ..), t) in picks.iter().zip(ts) {
                                assert_eq!(t.counter(), 1);
                                l[c] = Some(t);
                            }
                        }
                        0..=2 => {
                            let k = rng.below(keys.len() as u64) as usize;
                            // Few nonces, so the same nonce under new generations is common.
                            let nonce = nonce_of(rng.below(4));
                            let counter = if rng.below(2) == 0 { 1 } else { rng.next() as u32 };
                            let prio = match rng.below(3) {
                                0 => None,
                                _ => Some(rng.below(100) as i32 - 50),
                            };
                            let d = engine.define_at(&ctxs[c], keys[k], &nonce, counter, prio).unwrap();
                            last.lock().unwrap()[c] = Some(d);
                        }
                        _ => {
                            let Some(d) = last.lock().unwrap()[c] else { continue };
                            let raw = &raws[keys.iter().position(|k| *k == d.key()).unwrap()];
                            let offset = rng.below(4200) as usize;
                            let len = rng.below(300) as usize;
                            let mut buf = vec![0u8; len];
                            rng.fill(&mut buf);
                            let orig = buf.clone();
                            let block = rng.below(4) == 0;
                            let res = if block {
                                engine.apply_block(&ctxs[c], &d, &mut buf).map(Some)
                            } else {
                                engine.apply(&ctxs[c], &d, &mut buf, offset).map(|_| None)
                            };
                            match res {
                                Ok(ej0) => {
                                    let off = if block { 16 } else { offset };
                                    let ks = reference(raw, d.nonce(), d.counter(), off, len);
                                    assert_eq!(buf, xor(&orig, &ks), "wrong bytes for {d:?} at {off}+{len}");
                                    if let Some(e) = ej0 {
                                        assert_eq!(e.to_vec(), reference(raw, d.nonce(), d.counter(), 0, 16));
                                    }
                                    ok += 1;
                                }
                                Err(EngineError::Redefined) => {
                                    assert_eq!(buf, orig, "a refused apply touched the buffer");
                                    stale += 1;
                                }
                                Err(e) => panic!("unexpected {e}"),
                            }
                        }
                    }
                }
                (ok, stale)
            })
        })
        .collect();
    let (mut ok, mut stale) = (0, 0);
    for h in handles {
        let (a, b) = h.join().unwrap();
        ok += a;
        stale += b;
    }
    let s = engine.stats();
    assert_eq!(s.applies, ok);
    assert_eq!(s.ready_hits + s.waits + s.inline, ok);
    if std::env::var("ENGINE_TEST_VERBOSE").is_ok() {
        eprintln!("seed {seed:x} threads {nthreads} sw {software} batch {batch_max}: ok {ok} stale {stale}\n{s}");
    }
    (ok, stale)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn interleaved_define_apply_equals_direct_ctr(
        seed in any::<u64>(),
        nthreads in 2usize..6,
        software in any::<bool>(),
        batch_max in 1usize..9,
        spin_us in prop::sample::select(vec![0u32, 50]),
    ) {
        let (ok, _) = random_schedule(seed, nthreads, software, batch_max, spin_us);
        prop_assert!(ok > 0);
    }
}

#[test]
fn priorities_are_served_highest_first() {
    let e = Engine::new(EngineConfig {
        threads: 1,
        batch_max: 4,
        ..EngineConfig::default()
    })
    .unwrap();
    let k = e.add_key(ContentKey::new(&[1u8; 32]).unwrap());
    e.pause();
    let mut rng = Rng::new(42);
    let mut prios: Vec<i32> = (0..24).collect();
    for i in (1..prios.len()).rev() {
        prios.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let ctxs: Vec<(Ctx, i32)> = prios
        .iter()
        .map(|&p| {
            let c = e.context();
            e.define(&c, k, &nonce_of(p as u64), p).unwrap();
            (c, p)
        })
        .collect();
    // Two equal-priority contexts: served in definition order.
    let (t1, t2) = (e.context(), e.context());
    e.define(&t1, k, &nonce_of(100), -5).unwrap();
    e.define(&t2, k, &nonce_of(101), -5).unwrap();
    assert_eq!(e.ctx_info(&ctxs[0].0).state, CtxState::Pending);
    e.resume();
    e.quiesce();
    let mut done: Vec<(u64, i32)> = ctxs
        .iter()
        .map(|(c, p)| {
            let info = e.ctx_info(c);
            assert_eq!(info.state, CtxState::Ready);
            assert!(info.made_by_worker);
            (info.made_seq, *p)
        })
        .collect();
    done.sort();
    let order: Vec<i32> = done.iter().map(|d| d.1).collect();
    let mut expect = order.clone();
    expect.sort_by(|a, b| b.cmp(a));
    assert_eq!(order, expect);
    assert!(e.ctx_info(&t1).made_seq < e.ctx_info(&t2).made_seq);
    assert!(e.ctx_info(&t2).made_seq > done.last().unwrap().0);
    let s = e.stats();
    assert_eq!(s.made_by_workers, 26);
    // 26 masks in batches of at most 4.
    assert!(s.batches >= 7, "{s}");
}

#[test]
fn pending_mask_is_made_inline_ready_mask_is_a_hit() {
    let e = engine(1, true);
    let raw = [9u8; 16];
    let k = e.add_raw_key(&raw).unwrap();
    e.pause();
    let c = e.context();
    let d = e.define(&c, k, &nonce_of(7), 10).unwrap();
    let mut buf = vec![0u8; 4096];
    e.apply(&c, &d, &mut buf, 16).unwrap();
    assert_eq!(buf, reference(&raw, &nonce_of(7), 1, 16, 4096));
    let s = e.stats();
    assert_eq!((s.inline, s.ready_hits, s.made_by_workers), (1, 0, 0));
    // Applied again: ready.
    let mut again = vec![0u8; 16];
    e.apply(&c, &d, &mut again, 0).unwrap();
    assert_eq!(e.stats().ready_hits, 1);
    // The worker later finds nothing to do for it.
    e.resume();
    e.quiesce();
    assert_eq!(e.stats().made_by_workers, 0);
}

#[test]
fn stale_tickets_never_apply() {
    let e = engine(1, true);
    let raw = [5u8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    let c = e.context();
    let a = e.define(&c, k, &nonce_of(1), 0).unwrap();
    let b = e.define(&c, k, &nonce_of(1), 0).unwrap(); // same nonce, new definition
    assert_ne!(a, b);
    e.quiesce();
    let mut buf = vec![0xaa; 64];
    assert_eq!(e.apply(&c, &a, &mut buf, 0), Err(EngineError::Redefined));
    assert_eq!(buf, vec![0xaa; 64]);
    // A ticket of another context does not fit either.
    let other = e.context();
    assert_eq!(e.apply(&other, &b, &mut buf, 0), Err(EngineError::Redefined));
    assert_eq!(buf, vec![0xaa; 64]);
    e.apply(&c, &b, &mut buf, 0).unwrap();
    assert_eq!(buf, xor(&[0xaa; 64], &reference(&raw, &nonce_of(1), 1, 0, 64)));
    assert_eq!(e.defined(&c), Some(b));
    // Unknown keys and out-of-range requests are errors, not panics.
    let e2 = engine(1, true);
    assert!(matches!(
        e2.define(&e2.context(), k, &nonce_of(1), 0),
        Err(EngineError::UnknownKey(0))
    ));
    assert_eq!(e.apply(&c, &b, &mut buf, usize::MAX), Err(EngineError::OutOfRange));
    assert_eq!(e.apply(&c, &b, &mut buf, 16 << 32), Err(EngineError::OutOfRange));
}

#[test]
fn unapplied_masks_count_as_wasted() {
    let e = engine(2, true);
    let k = e.add_key(ContentKey::new(&[3u8; 16]).unwrap());
    let c1 = e.context();
    let c2 = e.context();
    e.define(&c1, k, &nonce_of(1), 0).unwrap();
    let d2 = e.define(&c2, k, &nonce_of(2), 0).unwrap();
    e.quiesce();
    e.apply(&c2, &d2, &mut [0u8; 16], 0).unwrap();
    e.define(&c2, k, &nonce_of(3), 0).unwrap(); // applied before: not wasted
    e.quiesce();
    drop(c1); // made, never applied
    drop(c2); // made, never applied
    let s = e.stats();
    assert_eq!(s.wasted, 2, "{s}");
    assert_eq!(s.made_by_workers, 3);
}

#[test]
fn write_pool_concurrent_seals_use_distinct_nonces_and_match_direct() {
    for speculation in [true, false] {
        let e = Engine::new(EngineConfig {
            threads: 2,
            speculation,
            pool_size: 16,
            ..EngineConfig::default()
        })
        .unwrap();
        let key = ContentKey::new(&[0x42; 32]).unwrap();
        let pool = Arc::new(WritePool::new(e.clone(), e.add_key(key.clone())).unwrap());
        let per_thread = 48;
        let results: Vec<_> = (0..8u64)
            .map(|t| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    let mut rng = Rng::new(t + 1);
                    (0..per_thread)
                        .map(|i| {
                            let len = match i % 4 {
                                0 => 4096,
                                1 => 1 + rng.below(4096) as usize,
                                2 => 5000, // longer than a mask: the tail is made directly
                                _ => 0,
                            };
                            let mut pt = vec![0u8; len];
                            rng.fill(&mut pt);
                            let mut ct = pt.clone();
                            let (nonce, ej0) = pool.seal(&mut ct);
                            (nonce, ej0, pt, ct)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let direct = Direct::new(key.clone());
        let mut seen = HashSet::new();
        for (nonce, ej0, pt, ct) in &results {
            assert!(seen.insert(*nonce), "nonce used twice");
            let mut back = ct.clone();
            assert_eq!(direct.open(nonce, &mut back), *ej0);
            assert_eq!(&back, pt);
            if !pt.is_empty() {
                assert_ne!(ct, pt);
            }
            // The pool's own open path agrees.
            let mut again = ct.clone();
            assert_eq!(pool.open(nonce, &mut again), *ej0);
            assert_eq!(&again, pt);
            assert_eq!(pool.tag_mask(nonce), *ej0);
        }
        assert_eq!(results.len(), 8 * per_thread);
        // Nonces come from each epoch in order: within an epoch (a new one
        // may begin by time) the counters are consecutive.
        let mut by_epoch: std::collections::HashMap<[u8; 8], Vec<u32>> = Default::default();
        for r in &results {
            let ep: [u8; 8] = r.0[..8].try_into().unwrap();
            by_epoch
                .entry(ep)
                .or_default()
                .push(u32::from_be_bytes(r.0[8..].try_into().unwrap()));
        }
        for ctrs in by_epoch.values_mut() {
            ctrs.sort_unstable();
            let base = ctrs[0];
            assert!(ctrs.iter().enumerate().all(|(i, c)| *c == base + i as u32));
        }
        let s = e.stats();
        assert_eq!(s.applies, 8 * per_thread as u64);
        if !speculation {
            assert_eq!((s.made_by_workers, s.ready_hits + s.waits), (0, 0), "{s}");
        }
    }
}

/// A deterministic nonce supply for comparing runs.
struct Counting(Mutex<u64>);
impl NonceSupply for Counting {
    fn next_nonce(&self) -> Nonce {
        let mut n = self.0.lock().unwrap();
        *n += 1;
        nonce_of(*n)
    }
}

#[test]
fn speculation_off_gives_identical_output() {
    let raw = [0x77u8; 16];
    let mut outs = Vec::new();
    for speculation in [true, false] {
        let e = Engine::new(EngineConfig {
            threads: 2,
            speculation,
            pool_size: 8,
            ..EngineConfig::default()
        })
        .unwrap();
        let k = e.add_raw_key(&raw).unwrap();
        let pool = WritePool::with_nonces(e.clone(), k, Box::new(Counting(Mutex::new(0)))).unwrap();
        let mut rng = Rng::new(9);
        let mut out = Vec::new();
        for i in 0..40 {
            let mut buf = vec![0u8; 1 + (i * 97) % 4096];
            rng.fill(&mut buf);
            let (n, ej0) = pool.seal(&mut buf);
            out.push((n, ej0, buf));
        }
        // Read the same blocks back through a window.
        let win = ReadWindow::new(e.clone(), k).unwrap();
        let mut plain = Vec::new();
        for (b, (n, _, ct)) in out.iter().enumerate() {
            let b = b as u64;
            let r = win.plan(b, 1);
            let blocks: Vec<(u64, Nonce)> = r
                .filter(|x| (*x as usize) < out.len())
                .map(|x| (x, out[x as usize].0))
                .collect();
            win.prefetch(&blocks);
            let mut buf = ct.clone();
            let ej0 = win.open(b, n, &mut buf);
            win.finish(b, 1);
            plain.push((ej0, buf));
        }
        outs.push((out, plain));
    }
    assert_eq!(outs[0], outs[1]);
}

#[test]
fn window_sequential_reads_hit_and_grow_far_jump_resets() {
    let e = Engine::new(EngineConfig {
        threads: 2,
        window_max: 16,
        ..EngineConfig::default()
    })
    .unwrap();
    let raw = [0x31u8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    let nonce = |b: u64| nonce_of(1000 + b);
    let ct = |b: u64| reference(&raw, &nonce(b), 2, 0, 4096); // ciphertext of an all-zero block
    let w = ReadWindow::new(e.clone(), k).unwrap();
    let mut sizes = Vec::new();
    for b in 0..32u64 {
        let r = w.plan(b, 1);
        let blocks: Vec<_> = r.map(|x| (x, nonce(x))).collect();
        w.prefetch(&blocks);
        sizes.push(w.size());
        e.quiesce();
        let mut buf = ct(b);
        let ej0 = w.open(b, &nonce(b), &mut buf);
        w.finish(b, 1);
        assert_eq!(buf, vec![0u8; 4096]);
        assert_eq!(ej0.to_vec(), reference(&raw, &nonce(b), 1, 0, 16));
    }
    assert_eq!(&sizes[..4], &[4, 8, 16, 16]);
    let s = e.stats();
    assert_eq!((s.ready_hits, s.inline, s.direct), (32, 0, 0), "{s}");
    assert!(s.window_reused > 100, "{s}");
    assert_eq!(s.window_resets, 0);
    // Each block was defined once: the first window (the block + W = 4),
    // then 1 + 8 and 1 + 16 blocks from the next positions, then one new
    // block per step.
    assert_eq!(s.window_defined, 5 + 5 + 9 + 29, "{s}");

    // A small random read (< SMALL_RANDOM_READ blocks) leaves the window
    // alone and is decrypted on the reading thread.
    let held = w.cached_blocks();
    assert!(!held.is_empty());
    let r = w.plan(5_000, 2);
    assert_eq!(r, 5_000..5_002);
    w.prefetch(&r.clone().map(|x| (x, nonce(x))).collect::<Vec<_>>());
    assert_eq!(w.cached_blocks(), held);
    let mut buf = ct(5_001);
    w.open(5_001, &nonce(5_001), &mut buf);
    w.finish(5_000, 2);
    assert_eq!(buf, vec![0u8; 4096]);
    let s1 = e.stats();
    assert_eq!((s1.direct, s1.window_defined), (s.direct + 1, s.window_defined), "{s1}");

    // Far jump of a large read: nothing kept, W shrinks to the request size.
    let n = SMALL_RANDOM_READ;
    let r = w.plan(10_000, n);
    assert_eq!(r, 10_000..10_000 + n);
    w.prefetch(&r.map(|x| (x, nonce(x))).collect::<Vec<_>>());
    assert_eq!(w.cached_blocks(), (10_000..10_000 + n).collect::<Vec<_>>());
    assert_eq!(w.size(), 16);
    let s2 = e.stats();
    assert_eq!(s2.window_resets, 1);
    assert_eq!(s2.window_reused, s.window_reused);
    let mut buf = ct(10_001);
    w.open(10_001, &nonce(10_001), &mut buf);
    assert_eq!(buf, vec![0u8; 4096]);
}

#[test]
fn window_overlap_backwards_reuses_and_rewritten_block_is_never_misapplied() {
    let e = Engine::new(EngineConfig {
        threads: 2,
        window_max: 8,
        ..EngineConfig::default()
    })
    .unwrap();
    let raw = [0x99u8; 16];
    let k = e.add_raw_key(&raw).unwrap();
    let w = ReadWindow::new(e.clone(), k).unwrap();
    let old = |b: u64| nonce_of(b);
    // Random reads of 32 blocks (large enough to use the window).
    w.plan(100, 32);
    w.prefetch(&(100..132).map(|b| (b, old(b))).collect::<Vec<_>>());
    w.finish(100, 32);
    e.quiesce();
    // Move back by 16: 100..116 overlap and stay.
    w.plan(84, 32);
    w.prefetch(&(84..116).map(|b| (b, old(b))).collect::<Vec<_>>());
    assert_eq!(w.cached_blocks(), (84..116).collect::<Vec<_>>());
    let s = e.stats();
    assert_eq!((s.window_reused, s.window_defined, s.window_resets), (16, 48, 0), "{s}");
    e.quiesce();

    // Block 101 is rewritten under a new nonce after the prefetch.
    let new = nonce_of(5_000_101);
    let pt: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
    let mut ct = xor(&pt, &reference(&raw, &new, 2, 0, 4096));
    let before = e.stats();
    let ej0 = w.open(101, &new, &mut ct);
    assert_eq!(ct, pt, "the old nonce's mask must not be used");
    assert_eq!(ej0.to_vec(), reference(&raw, &new, 1, 0, 16));
    let after = e.stats();
    assert_eq!(after.ready_hits, before.ready_hits);
    assert_eq!(after.direct, before.direct + 1);
    // Prefetching the new nonce replaces the entry; the old ticket is gone.
    w.prefetch(&[(84, old(84)), (101, new)]);
    e.quiesce();
    let mut ct = xor(&pt, &reference(&raw, &new, 2, 0, 4096));
    w.open(101, &new, &mut ct);
    assert_eq!(ct, pt);
    assert_eq!(e.stats().ready_hits, after.ready_hits + 1);
}

#[test]
fn window_requests_in_flight_out_of_order_keep_each_others_masks() {
    let e = Engine::new(EngineConfig {
        threads: 2,
        window_max: 64,
        ..EngineConfig::default()
    })
    .unwrap();
    let raw = [0x5au8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    let nonce = |b: u64| nonce_of(7_000 + b);
    let w = ReadWindow::new(e.clone(), k).unwrap();
    let pf = |r: std::ops::Range<u64>| w.prefetch(&r.map(|x| (x, nonce(x))).collect::<Vec<_>>());
    let read = |r: std::ops::Range<u64>| {
        for b in r {
            let mut buf = reference(&raw, &nonce(b), 2, 0, 4096);
            w.open(b, &nonce(b), &mut buf);
            assert_eq!(buf, vec![0u8; 4096], "block {b}");
        }
    };
    // A request larger than window_max still gets W blocks of look-ahead.
    let r = w.plan(0, 256);
    assert_eq!(r, 0..320);
    pf(r);
    e.quiesce();
    read(0..256);
    w.finish(0, 256);
    // Applied masks are released; the look-ahead stays.
    assert_eq!(w.cached_blocks(), (256..320).collect::<Vec<_>>());
    // The kernel's read-ahead: 512.. reaches the file system before 256..
    let rb = w.plan(512, 256);
    assert_eq!(rb, 512..768, "not known to be sequential yet: no look-ahead");
    pf(rb);
    let ra = w.plan(256, 256);
    assert_eq!(ra, 256..576, "starts where a recent read ended");
    pf(ra);
    e.quiesce();
    let before = e.stats();
    read(256..512);
    w.finish(256, 256);
    read(512..768);
    w.finish(512, 256);
    let s = e.stats();
    assert_eq!(s.ready_hits - before.ready_hits, 512, "{s}");
    assert_eq!((s.direct, s.window_resets), (0, 0), "{s}");
    assert_eq!(s.wasted, 0, "{s}");
    // Both earlier requests ended somewhere: the next one is sequential.
    assert_eq!(w.plan(768, 256), 768..1088);
    w.finish(768, 256);
}

#[test]
fn window_without_speculation_computes_inline_on_the_same_path() {
    let e = engine(0, false);
    assert_eq!(e.threads(), 0);
    let raw = [0x13u8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    let w = ReadWindow::new(e.clone(), k).unwrap();
    for b in 0..10u64 {
        let r = w.plan(b, 1);
        assert_eq!(r, b..b + 1, "no look-ahead");
        w.prefetch(&[(b, nonce_of(b))]);
        let mut buf = reference(&raw, &nonce_of(b), 2, 0, 100);
        w.open(b, &nonce_of(b), &mut buf);
        w.finish(b, 1);
        assert_eq!(buf, vec![0u8; 100]);
    }
    let s = e.stats();
    assert_eq!(
        (s.inline, s.ready_hits, s.made_by_workers, e.queued()),
        (10, 0, 0, 0),
        "{s}"
    );
}

#[test]
fn stats_render_as_text_and_json() {
    let e = engine(1, true);
    let k = e.add_raw_key(&[1u8; 16]).unwrap();
    let c = e.context();
    let d = e.define(&c, k, &nonce_of(1), 0).unwrap();
    e.quiesce();
    e.apply(&c, &d, &mut [0u8; 32], 0).unwrap();
    let s = e.stats();
    let j: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
    assert_eq!(j["ready_hits"], 1);
    assert_eq!(j["made_by_workers"], 1);
    assert_eq!(j["batch_hist"][0], 1);
    let text = s.to_string();
    assert!(text.contains("ready 1 (100.0%)"), "{text}");
}

#[test]
fn engines_start_and_stop_cleanly() {
    for _ in 0..20 {
        let e = engine(2, true);
        let k = e.add_raw_key(&[2u8; 16]).unwrap();
        let cs: Vec<Ctx> = (0..8).map(|_| e.context()).collect();
        for (i, c) in cs.iter().enumerate() {
            e.define(c, k, &nonce_of(i as u64), i as i32).unwrap();
        }
        drop(e); // joins the workers even with work queued
    }
}

#[test]
fn write_pool_masks_are_made_ahead() {
    let e = Engine::new(EngineConfig {
        threads: 1,
        pool_size: 8,
        ..EngineConfig::default()
    })
    .unwrap();
    let k = e.add_raw_key(&[0x21; 16]).unwrap();
    let pool = WritePool::with_nonces(e.clone(), k, Box::new(Counting(Mutex::new(0)))).unwrap();
    e.quiesce();
    assert_eq!(e.stats().made_by_workers, 8);
    for i in 1..=8u64 {
        let mut buf = [0u8; 4096];
        let (n, _) = pool.seal(&mut buf);
        assert_eq!(n, nonce_of(i), "nonces are consumed in order");
    }
    let s = e.stats();
    assert_eq!((s.ready_hits, s.waits, s.inline), (8, 0, 0), "{s}");
    // Each seal queued the refill for nonce y + Z.
    e.quiesce();
    assert_eq!(e.stats().made_by_workers, 16);
    let (n, _) = pool.seal(&mut [0u8; 16]);
    assert_eq!(n, nonce_of(9));
    drop(pool);
    // The 7 unconsumed masks (nonces 10..=16) and the refill made for 17 are never used.
    e.quiesce();
    assert!(e.stats().wasted >= 7);
}

#[test]
fn reprioritize_moves_a_pending_mask_forward() {
    let e = Engine::new(EngineConfig {
        threads: 1,
        batch_max: 1,
        ..EngineConfig::default()
    })
    .unwrap();
    let k = e.add_raw_key(&[0x55; 32]).unwrap();
    e.pause();
    let (a, b) = (e.context(), e.context());
    let ta = e.define(&a, k, &nonce_of(1), 0).unwrap();
    e.define(&b, k, &nonce_of(2), 5).unwrap();
    e.reprioritize(&a, &ta, 10);
    e.resume();
    e.quiesce();
    assert!(e.ctx_info(&a).made_seq < e.ctx_info(&b).made_seq);
    assert_eq!(e.stats().made_by_workers, 2, "the old queue entry of `a` is skipped");
}

#[test]
fn define_batch_keeps_priority_order_and_every_byte_is_ctr() {
    let e = Engine::new(EngineConfig {
        threads: 1,
        batch_max: 3,
        ..EngineConfig::default()
    })
    .unwrap();
    let raw = [0x6bu8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    e.pause();
    let mut rng = Rng::new(7);
    // 40 contexts, priorities with ties, shuffled.
    let mut prios: Vec<i32> = (0..40).map(|i| (i % 13) - 6).collect();
    for i in (1..prios.len()).rev() {
        prios.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let ctxs: Vec<Ctx> = prios.iter().map(|_| e.context()).collect();
    let items: Vec<(&Ctx, KeyId, Nonce, Priority)> = ctxs
        .iter()
        .zip(&prios)
        .enumerate()
        .map(|(i, (c, &p))| (c, k, nonce_of(9_000 + i as u64), p))
        .collect();
    let tickets = e.define_batch(&items).unwrap();
    assert_eq!(e.queued(), 40, "one queue entry per context");
    e.resume();
    e.quiesce();
    // Made highest priority first; equal priorities in the order given.
    let mut done: Vec<(u64, i32, usize)> = ctxs
        .iter()
        .zip(&prios)
        .enumerate()
        .map(|(i, (c, &p))| {
            let info = e.ctx_info(c);
            assert_eq!(info.state, CtxState::Ready);
            assert!(info.made_by_worker);
            (info.made_seq, p, i)
        })
        .collect();
    done.sort();
    for pair in done.windows(2) {
        let ((_, p1, i1), (_, p2, i2)) = (pair[0], pair[1]);
        assert!(p1 > p2 || (p1 == p2 && i1 < i2), "{:?} before {:?}", pair[0], pair[1]);
    }
    // Every byte equals AES-CTR of its own nonce (E(J0) then the data).
    for (i, (c, t)) in ctxs.iter().zip(&tickets).enumerate() {
        assert_eq!(t.nonce(), &nonce_of(9_000 + i as u64));
        let mut buf = vec![0u8; 4096];
        let ej0 = e.apply_block(c, t, &mut buf).unwrap();
        assert_eq!(ej0.to_vec(), reference(&raw, t.nonce(), 1, 0, 16));
        assert_eq!(buf, reference(&raw, t.nonce(), 2, 0, 4096));
    }
    assert_eq!(e.stats().ready_hits, 40);
    // An unknown key fails before anything is defined.
    let c = e.context();
    let defines = e.stats().defines;
    assert!(e
        .define_batch(&[(&c, k, nonce_of(1), 0), (&c, unknown_key(&e), nonce_of(2), 0)])
        .is_err());
    assert_eq!(e.stats().defines, defines);
}

/// A key id the engine has not handed out.
fn unknown_key(e: &Engine) -> KeyId {
    let other = Engine::new(EngineConfig {
        speculation: false,
        ..EngineConfig::default()
    })
    .unwrap();
    let mut k = other.add_raw_key(&[1; 16]).unwrap();
    while e.cipher(k).is_ok() {
        k = other.add_raw_key(&[1; 16]).unwrap();
    }
    k
}

#[test]
fn window_grows_to_the_default_cap_of_256_blocks() {
    assert_eq!(DEFAULT_WINDOW_MAX, 256);
    let e = engine(2, true);
    let raw = [0x42u8; 16];
    let k = e.add_raw_key(&raw).unwrap();
    let w = ReadWindow::new(e.clone(), k).unwrap();
    let nonce = |b: u64| nonce_of(77_000 + b);
    let mut sizes = Vec::new();
    // Sequential 128 KiB reads (32 blocks each), as the kernel sends them.
    for req in 0..6u64 {
        let start = req * 32;
        let r = w.plan(start, 32);
        sizes.push(w.size());
        assert!(r.end - r.start <= 32 + 256);
        w.prefetch(&r.map(|b| (b, nonce(b))).collect::<Vec<_>>());
        e.quiesce();
        for b in start..start + 32 {
            let mut buf = reference(&raw, &nonce(b), 2, 0, 4096);
            w.open(b, &nonce(b), &mut buf);
            assert_eq!(buf, vec![0u8; 4096]);
        }
        w.finish(start, 32);
    }
    assert_eq!(sizes, vec![128, 256, 256, 256, 256, 256]);
    let s = e.stats();
    assert_eq!((s.ready_hits, s.inline, s.direct), (6 * 32, 0, 0), "{s}");
}

#[test]
fn write_pool_refills_in_batches_of_32_and_never_repeats_a_nonce() {
    assert_eq!(REFILL_BATCH, 32);
    let e = Engine::new(EngineConfig {
        threads: 1,
        pool_size: 100,
        ..EngineConfig::default()
    })
    .unwrap();
    let raw = [0x3cu8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    let pool = WritePool::with_nonces(e.clone(), k, Box::new(Counting(Mutex::new(0)))).unwrap();
    e.quiesce();
    assert_eq!(e.stats().defines, 100);
    let mut seen = HashSet::new();
    for i in 1..=250u64 {
        let pt = vec![(i % 251) as u8; 4096];
        let mut buf = pt.clone();
        let (n, ej0) = pool.seal(&mut buf);
        assert!(seen.insert(n), "nonce used twice");
        assert_eq!(n, nonce_of(i), "nonces are consumed in order");
        assert_eq!(xor(&buf, &pt), reference(&raw, &n, 2, 0, 4096));
        assert_eq!(ej0.to_vec(), reference(&raw, &n, 1, 0, 16));
        // Refills come 32 at a time: never one define per seal.
        let extra = e.stats().defines - 100;
        assert_eq!(extra % 32, 0, "after {i} seals: {extra} refills");
        assert_eq!(extra, i / 32 * 32);
        if i % 50 == 0 {
            e.quiesce();
        }
    }
}

#[test]
fn workers_run_on_the_listed_cpus() {
    // Every Linux machine has CPU 0; the workers' mask must become exactly it.
    let e = Engine::new(EngineConfig {
        cpus: vec![0],
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(e.threads(), 1, "one worker per listed CPU");
    let t0 = std::time::Instant::now();
    while e.worker_cpus().is_empty() && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    if cfg!(target_os = "linux") {
        assert_eq!(e.worker_cpus(), vec![0]);
        assert_eq!(e.stats().worker_cpus, vec![0]);
        assert!(e.stats().to_string().contains("workers on CPUs 0"));
    }
    // Masks still come out right.
    let raw = [0x21u8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    let c = e.context();
    let t = e.define(&c, k, &nonce_of(7), PRIORITY_HIGHEST).unwrap();
    e.quiesce();
    let mut buf = vec![0u8; 64];
    e.apply(&c, &t, &mut buf, 16).unwrap();
    assert_eq!(buf, reference(&raw, &nonce_of(7), 2, 0, 64));
}

#[test]
fn on_demand_masks_go_straight_into_the_buffer_every_time() {
    // Speculation off: a definition is never queued, so an apply XORs the
    // keystream into the caller's buffer without storing a mask; applying
    // again gives the same bytes (inline again), and nothing is wasted.
    let e = engine(0, false);
    let raw = [0x6du8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    let c = e.context();
    let t = e.define(&c, k, &nonce_of(9), PRIORITY_HIGHEST).unwrap();
    let pt: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let mut a = pt.clone();
    let ej0 = e.apply_block(&c, &t, &mut a).unwrap();
    assert_eq!(xor(&a, &pt), reference(&raw, &nonce_of(9), 2, 0, 4096));
    assert_eq!(ej0.to_vec(), reference(&raw, &nonce_of(9), 1, 0, 16));
    let mut b = pt.clone();
    assert_eq!(e.apply_block(&c, &t, &mut b).unwrap(), ej0);
    assert_eq!(a, b);
    assert_eq!(e.ctx_info(&c).state, CtxState::Pending, "no mask is stored");
    // Unaligned parts and offsets past the mask agree with the definition too.
    let mut p = vec![0u8; 100];
    e.apply(&c, &t, &mut p, 4100).unwrap();
    assert_eq!(p, reference(&raw, &nonce_of(9), 1, 4100, 100));
    let s = e.stats();
    assert_eq!(
        (s.applies, s.inline, s.ready_hits, s.made_by_workers),
        (3, 3, 0, 0),
        "{s}"
    );
    drop(c);
    assert_eq!(e.stats().wasted, 0);
    // A stale ticket still touches nothing.
    let c = e.context();
    let t1 = e.define_on_demand(&c, k, &nonce_of(1)).unwrap();
    e.define_on_demand(&c, k, &nonce_of(2)).unwrap();
    let mut z = vec![0u8; 32];
    assert_eq!(e.apply(&c, &t1, &mut z, 0), Err(EngineError::Redefined));
    assert_eq!(z, vec![0u8; 32]);
}

/// A cpu-like backend whose worker stops inside `make` until the test lets
/// it go (a worker that lost its CPU): it says when it got there, then
/// waits for the gate.
struct GatedBackend {
    inside: Mutex<std::sync::mpsc::Sender<()>>,
    gate: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Backend for GatedBackend {
    fn name(&self) -> String {
        "gated cpu (test)".into()
    }
    fn make(&self, jobs: &mut [MaskJob<'_>]) {
        let _ = self.inside.lock().unwrap().send(());
        let _ = self.gate.lock().unwrap().recv();
        CpuBackend.make(jobs);
    }
}

#[test]
fn apply_makes_the_bytes_itself_when_a_worker_is_slow() {
    let (inside_tx, inside) = std::sync::mpsc::channel();
    let (open, gate) = std::sync::mpsc::channel();
    let e = Engine::with_backend(
        EngineConfig {
            threads: 1,
            ..EngineConfig::default()
        },
        Box::new(GatedBackend {
            inside: Mutex::new(inside_tx),
            gate: Mutex::new(gate),
        }),
    )
    .unwrap();
    let raw = [0x4au8; 16];
    let k = e.add_raw_key(&raw).unwrap();
    let c = e.context();
    let t = e.define(&c, k, &nonce_of(3), PRIORITY_HIGHEST).unwrap();
    // The worker has claimed the mask and is stuck making it.
    inside.recv().unwrap();
    assert_eq!(e.ctx_info(&c).state, CtxState::Making);
    let mut buf = vec![0u8; 4096];
    e.apply(&c, &t, &mut buf, 16).unwrap();
    assert_eq!(buf, reference(&raw, &nonce_of(3), 1, 16, 4096));
    let s = e.stats();
    assert_eq!((s.applies, s.inline, s.ready_hits), (1, 1, 0), "{s}");
    // The worker's mask still lands in the context, for later applies.
    open.send(()).unwrap();
    drop(open); // later masks, if any, pass the gate at once
    e.quiesce();
    let info = e.ctx_info(&c);
    assert_eq!((info.state, info.made_by_worker), (CtxState::Ready, true));
    let mut again = vec![0u8; 4096];
    e.apply(&c, &t, &mut again, 16).unwrap();
    assert_eq!(again, buf);
}

/// Decrypt-ahead threads exist only with speculation on and a depth: jobs
/// run there, and are refused otherwise.
#[test]
fn decrypt_ahead_follows_speculation_and_depth() {
    let (tx, rx) = std::sync::mpsc::channel();
    let on = engine(1, true);
    assert_eq!(on.read_ahead(), warpfs_engine::DEFAULT_READ_AHEAD);
    assert!(on.ahead_threads() >= 1);
    for i in 0..8 {
        let tx = tx.clone();
        assert!(on.run_ahead(Box::new(move || tx.send(i).unwrap())));
    }
    let mut got: Vec<i32> = (0..8).map(|_| rx.recv().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, (0..8).collect::<Vec<_>>());
    on.count_ahead(5, 2, Some(1000));
    let s = on.stats();
    assert_eq!(
        (s.ahead_served, s.ahead_wasted, s.ahead_waits, s.ahead_wait_ns),
        (5, 2, 1, 1000)
    );
    let off = engine(1, false);
    assert_eq!((off.read_ahead(), off.ahead_threads()), (0, 0));
    assert!(!off.run_ahead(Box::new(|| panic!("must not run"))));
    let none = Engine::new(EngineConfig {
        threads: 1,
        speculation: true,
        read_ahead: 0,
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!((none.read_ahead(), none.ahead_threads()), (0, 0));
    assert!(!none.run_ahead(Box::new(|| panic!("must not run"))));
}
