//! Retiring keys: a retired id is refused everywhere, its expanded key is
//! dropped before `retire_key` returns, queued and ready masks for it are
//! dropped, an owning write pool retires its key once it and its read
//! windows are gone, other keys are unaffected, and lookups racing a retire
//! on many threads either succeed with the right bytes or fail cleanly.

use super::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Weak;

fn spec_engine(threads: usize, pool_size: usize) -> Arc<Engine> {
    Engine::new(EngineConfig {
        threads,
        speculation: true,
        pool_size,
        ..EngineConfig::default()
    })
    .unwrap()
}

/// A weak handle on the engine's expanded key for `k` (no strong one kept).
fn weak_cipher(e: &Engine, k: KeyId) -> Weak<MaskCipher> {
    Arc::downgrade(&e.cipher(k).unwrap())
}

#[test]
fn a_retired_key_is_refused_and_released_and_others_keep_working() {
    for speculation in [true, false] {
        let e = engine(2, speculation);
        let (raw1, raw2) = ([0x11u8; 32], [0x22u8; 16]);
        let k1 = e.add_raw_key(&raw1).unwrap();
        let k2 = e.add_raw_key(&raw2).unwrap();
        let weak = weak_cipher(&e, k1);
        assert_eq!(e.stats().keys_live, 2);
        e.retire_key(k1).unwrap();
        // Dropped (and so zeroized) before retire_key returned.
        assert!(weak.upgrade().is_none(), "the retired key is still in memory");
        let s = e.stats();
        assert_eq!((s.keys_live, s.keys_retired, s.keys_released), (1, 1, 1), "{s}");
        // Every use of k1 is refused with the same clear error.
        let n = nonce_of(1);
        let ctx = e.context();
        let mut buf = vec![0u8; 100];
        let retired = Err(EngineError::RetiredKey(k1.index()));
        assert_eq!(e.define(&ctx, k1, &n, 0).map(|_| ()), retired);
        assert_eq!(e.define_on_demand(&ctx, k1, &n).map(|_| ()), retired);
        assert_eq!(e.define_batch(&[(&ctx, k1, n, 0)]).map(|_| ()), retired);
        assert_eq!(e.xor_direct(k1, &n, 2, 0, &mut buf), retired);
        assert_eq!(e.open_direct(k1, &n, &mut buf).map(|_| ()), retired);
        assert_eq!(e.cipher(k1).map(|_| ()), retired);
        assert_eq!(WritePool::new(e.clone(), k1).map(|_| ()), retired);
        assert_eq!(ReadWindow::new(e.clone(), k1).map(|_| ()), retired);
        assert!(buf.iter().all(|&b| b == 0), "a refused call touched the buffer");
        assert_eq!(e.retire_key(k1), retired, "retired twice");
        let unknown = unknown_key(&e);
        assert_eq!(e.retire_key(unknown), Err(EngineError::UnknownKey(unknown.index())));
        assert_eq!(e.stats().keys_retired, 1);
        // k2 is untouched, on every path.
        let t = e.define(&ctx, k2, &n, 0).unwrap();
        e.quiesce();
        let mut a = vec![0u8; 300];
        e.apply(&ctx, &t, &mut a, 7).unwrap();
        assert_eq!(a, reference(&raw2, &n, 1, 7, 300));
        let mut d = vec![0u8; 300];
        e.xor_direct(k2, &n, 2, 5, &mut d).unwrap();
        assert_eq!(d, reference(&raw2, &n, 2, 5, 300));
        // A new key gets a new id: ids are never reused.
        let k3 = e.add_raw_key(&raw1).unwrap();
        assert!(k3.index() > k2.index());
        assert_eq!(e.stats().keys_live, 2);
    }
}

#[test]
fn masks_made_for_a_retired_key_are_dropped_and_never_applied() {
    let raw = [0x33u8; 32];
    let e = spec_engine(1, 4);
    let k = e.add_raw_key(&raw).unwrap();
    let other = e.add_raw_key(&[0x44u8; 32]).unwrap();
    // Ready masks: made by the workers, held by their contexts.
    let ready: Vec<(Ctx, Defined)> = (0..6)
        .map(|i| {
            let c = e.context();
            let t = e.define(&c, k, &nonce_of(i), 0).unwrap();
            (c, t)
        })
        .collect();
    let keep = e.context();
    let kt = e.define(&keep, other, &nonce_of(99), 0).unwrap();
    e.quiesce();
    assert_eq!(e.stats().masks_held, 7);
    // Queued masks: the workers are paused, so they stay queued.
    e.pause();
    let queued: Vec<(Ctx, Defined)> = (10..20)
        .map(|i| {
            let c = e.context();
            let t = e.define(&c, k, &nonce_of(i), 0).unwrap();
            (c, t)
        })
        .collect();
    let (keep2, kt2) = {
        let c = e.context();
        let t = e.define(&c, other, &nonce_of(98), 0).unwrap();
        (c, t)
    };
    assert_eq!(e.queued(), 11);
    e.retire_key(k).unwrap();
    // Off the queue: only the other key's entry is left for the workers.
    assert_eq!(e.queued(), 1);
    e.resume();
    e.quiesce();
    assert_eq!(e.ctx_info(&keep2).state, CtxState::Ready);
    let mut buf = vec![0u8; 64];
    e.apply(&keep2, &kt2, &mut buf, 0).unwrap();
    assert_eq!(buf, reference(&[0x44u8; 32], &nonce_of(98), 1, 0, 64));
    for (c, t) in ready.iter().chain(&queued) {
        let mut buf = vec![0u8; 64];
        assert_eq!(e.apply(c, t, &mut buf, 0), Err(EngineError::RetiredKey(k.index())));
        assert!(buf.iter().all(|&b| b == 0));
        assert_eq!(e.ctx_info(c).state, CtxState::Pending);
    }
    // Each ready mask was dropped at its refused apply; the other key's stay.
    let s = e.stats();
    assert_eq!(s.masks_held, 2, "{s}");
    let mut buf = vec![0u8; 64];
    e.apply(&keep, &kt, &mut buf, 0).unwrap();
    assert_eq!(buf, reference(&[0x44u8; 32], &nonce_of(99), 1, 0, 64));
    drop((ready, queued, keep, keep2));
    assert_eq!(e.stats().masks_held, 0);
}

#[test]
fn an_owning_pool_retires_its_key_once_it_and_its_windows_are_gone() {
    let e = spec_engine(2, 32);
    let raw_b = [0x55u8; 32];
    let kb = e.add_raw_key(&raw_b).unwrap();
    let pool_b = WritePool::owning(e.clone(), kb).unwrap();
    e.quiesce();
    let held_b = e.stats().masks_held;
    assert_eq!(held_b, 32, "pool B's masks");
    let ka = e.add_raw_key(&[0x66u8; 32]).unwrap();
    let weak = weak_cipher(&e, ka);
    let pool_a = Arc::new(WritePool::owning(e.clone(), ka).unwrap());
    // A read window of pool A with look-ahead masks.
    let window = pool_a.clone().reader();
    let blocks: Vec<(u64, Nonce)> = window.plan(0, 8).map(|b| (b, nonce_of(1000 + b))).collect();
    window.prefetch(&blocks);
    e.quiesce();
    assert!(e.stats().masks_held > held_b + 32, "{}", e.stats());
    // The pool goes, its window stays: the key stays.
    drop(pool_a);
    assert_eq!(e.stats().keys_retired, 0);
    let mut b = vec![0u8; 4096];
    window.open(3, &nonce_of(1003), &mut b);
    assert_eq!(b, reference(&[0x66u8; 32], &nonce_of(1003), 2, 0, 4096));
    window.finish(0, 8);
    drop(window);
    // Both gone: the key is retired and dropped, and every mask made for
    // it (pool and window) with it; pool B keeps its key and its masks.
    let s = e.stats();
    assert_eq!((s.keys_live, s.keys_retired, s.keys_released), (1, 1, 1), "{s}");
    assert!(weak.upgrade().is_none());
    assert_eq!(e.cipher(ka).map(|_| ()), Err(EngineError::RetiredKey(ka.index())));
    assert_eq!(s.masks_held, held_b, "{s}");
    let direct = Direct::new(ContentKey::new(&raw_b).unwrap());
    for _ in 0..40 {
        let mut ct = vec![7u8; 4096];
        let (n, ej0) = pool_b.seal(&mut ct);
        assert_eq!(direct.open(&n, &mut ct), ej0);
        assert_eq!(ct, vec![7u8; 4096]);
    }
    drop(pool_b);
    let s = e.stats();
    assert_eq!((s.keys_live, s.keys_retired, s.masks_held), (0, 2, 0), "{s}");
}

/// Many threads look a key up (define and apply, direct keystream, worker
/// masks) while it is retired: each call either succeeds with the right
/// bytes or fails with `RetiredKey` leaving the buffer alone, every call
/// begun after `retire_key` returned fails, nothing crashes, and the key
/// is released each round. Calls are long (up to 64 KiB of keystream, on
/// the software AES too, which reads its round keys from memory per step)
/// so that the retire lands while some are using the key: a key dropped
/// without waiting for them shows as zeroed keystream or a crash.
#[test]
fn lookups_racing_a_retire_on_many_threads_are_clean() {
    const THREADS: u64 = 8;
    const ROUNDS: u64 = 12;
    for (speculation, software_aes) in [(true, false), (false, false), (true, true), (false, true)] {
        let e = Engine::new(EngineConfig {
            threads: 2,
            speculation,
            software_aes,
            ..EngineConfig::default()
        })
        .unwrap();
        let max_len = if software_aes { 16 << 10 } else { 64 << 10 };
        for round in 0..ROUNDS {
            let raw = [round as u8 + 1; 32];
            let k = e.add_raw_key(&raw).unwrap();
            let weak = weak_cipher(&e, k);
            let ops = Arc::new(AtomicU64::new(0));
            let retired = Arc::new(AtomicBool::new(false));
            let hs: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (e, ops, retired) = (e.clone(), ops.clone(), retired.clone());
                    std::thread::spawn(move || {
                        let oracle = ContentKey::new(&raw).unwrap();
                        let mut rng = Rng::new(round * 100 + t + 1);
                        let ctx = e.context();
                        let (mut ok, mut after) = (0u64, 0u64);
                        // Run until 100 calls began after the retire.
                        while after < 100 {
                            let was_retired = retired.load(Ordering::Acquire);
                            let n = nonce_of(rng.below(1 << 20));
                            let len = 1 + rng.below(max_len) as usize;
                            let mut buf = vec![0u8; len];
                            let (r, counter) = match rng.below(3) {
                                0 => (e.xor_direct(k, &n, 2, 0, &mut buf), 2),
                                1 => (
                                    e.define(&ctx, k, &n, rng.below(8) as i32)
                                        .and_then(|t| e.apply(&ctx, &t, &mut buf, 0)),
                                    1,
                                ),
                                _ => (
                                    e.define_on_demand(&ctx, k, &n)
                                        .and_then(|t| e.apply(&ctx, &t, &mut buf, 0)),
                                    1,
                                ),
                            };
                            match r {
                                Ok(()) => {
                                    assert!(!was_retired, "a call begun after retire_key returned succeeded");
                                    let mut want = vec![0u8; len];
                                    oracle.keystream(&n, counter, &mut want);
                                    assert!(buf == want, "wrong keystream");
                                    ok += 1;
                                }
                                Err(EngineError::RetiredKey(i)) if i == k.index() => {
                                    assert!(buf.iter().all(|&b| b == 0), "a refused call touched the buffer");
                                }
                                Err(x) => panic!("unexpected error {x:?}"),
                            }
                            ops.fetch_add(1, Ordering::Relaxed);
                            if was_retired {
                                after += 1;
                            }
                        }
                        ok
                    })
                })
                .collect();
            // Retire mid-way: once the threads have made some calls.
            while ops.load(Ordering::Relaxed) < THREADS * 20 {
                std::thread::yield_now();
            }
            e.retire_key(k).unwrap();
            retired.store(true, Ordering::Release);
            let ok: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
            assert!(
                ok >= THREADS * 10,
                "round {round}: only {ok} calls succeeded before the retire"
            );
            assert!(
                weak.upgrade().is_none(),
                "round {round}: the retired key is still in memory"
            );
        }
        e.quiesce();
        let s = e.stats();
        assert_eq!(
            (s.keys_live, s.keys_retired, s.keys_released),
            (0, ROUNDS, ROUNDS),
            "{s}"
        );
    }
}
