//! Read windows: hits, growth, resets, overlap and out-of-order requests.

use super::*;

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
        assert_eq!(ej0[..16].to_vec(), reference(&raw, &nonce(b), 1, 0, 16));
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
    assert_eq!(ej0[..16].to_vec(), reference(&raw, &new, 1, 0, 16));
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
