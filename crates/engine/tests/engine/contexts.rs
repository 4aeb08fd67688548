//! Contexts: priorities, inline and ready masks, tickets, batches, on-demand
//! definitions and applies that do not wait for a slow worker.

use super::*;

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
        assert_eq!(ej0[..16].to_vec(), reference(&raw, t.nonce(), 1, 0, 16));
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
    assert_eq!(ej0[..16].to_vec(), reference(&raw, &nonce_of(9), 1, 0, 16));
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
