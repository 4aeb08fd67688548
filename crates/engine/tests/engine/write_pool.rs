//! The write pool: distinct nonces, masks made ahead, refills, and the
//! same bytes with speculation off.

use super::*;

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
        // may begin by time) the counters are consecutive without
        // speculation; with it, the seals took a ready front or the back
        // of the pool, so the counters the pool still holds (at most Z plus
        // a refill batch) may be missing between them.
        let slack = if speculation { 16 + REFILL_BATCH as u32 } else { 0 };
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
            let span = ctrs[ctrs.len() - 1] - ctrs[0] + 1;
            assert!(
                span <= ctrs.len() as u32 + slack,
                "speculation {speculation}: {} nonces over {span} counters",
                ctrs.len()
            );
        }
        let s = e.stats();
        assert_eq!(s.applies, 8 * per_thread as u64);
        if !speculation {
            assert_eq!((s.made_by_workers, s.ready_hits + s.waits), (0, 0), "{s}");
        }
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
            // Every front mask ready: nonces are taken in order, as
            // without speculation.
            e.quiesce();
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
        // The front's mask is ready, so the front is taken.
        e.quiesce();
        let (n, ej0) = pool.seal(&mut buf);
        assert!(seen.insert(n), "nonce used twice");
        assert_eq!(n, nonce_of(i), "ready masks are consumed in order");
        assert_eq!(xor(&buf, &pt), reference(&raw, &n, 2, 0, 4096));
        assert_eq!(ej0[..16].to_vec(), reference(&raw, &n, 1, 0, 16));
        // Refills come 32 at a time: never one define per seal.
        let extra = e.stats().defines - 100;
        assert_eq!(extra % 32, 0, "after {i} seals: {extra} refills");
        assert_eq!(extra, i / 32 * 32);
    }
}

#[test]
fn write_pool_takes_the_back_while_the_front_is_not_ready() {
    let e = Engine::new(EngineConfig {
        threads: 1,
        pool_size: 8,
        ..EngineConfig::default()
    })
    .unwrap();
    let raw = [0x5au8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    // Workers paused: no mask of the pool is made.
    e.pause();
    let pool = WritePool::with_nonces(e.clone(), k, Box::new(Counting(Mutex::new(0)))).unwrap();
    let seal = |i: u64| {
        let pt = vec![i as u8; 4096];
        let mut buf = pt.clone();
        let (n, ej0) = pool.seal(&mut buf);
        assert_eq!(xor(&buf, &pt), reference(&raw, &n, 2, 0, 4096));
        assert_eq!(ej0[..16].to_vec(), reference(&raw, &n, 1, 0, 16));
        n
    };
    // The caller makes the masks the workers would reach last, from the
    // back, and leaves the front to them.
    assert_eq!(seal(1), nonce_of(8));
    assert_eq!(seal(2), nonce_of(7));
    let s = e.stats();
    assert_eq!((s.ready_hits, s.inline, s.made_by_workers), (0, 2, 0), "{s}");
    // Workers make the rest: the front is ready again and taken in order.
    e.resume();
    e.quiesce();
    assert_eq!(seal(3), nonce_of(1));
    assert_eq!(seal(4), nonce_of(2));
    let s = e.stats();
    assert_eq!((s.ready_hits, s.inline), (2, 2), "{s}");
}
