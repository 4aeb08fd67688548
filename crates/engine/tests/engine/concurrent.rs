//! Random concurrent define/apply schedules against direct AES-CTR.

use super::*;

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
                                        assert_eq!(e[..16].to_vec(), reference(raw, d.nonce(), d.counter(), 0, 16));
                                        assert_eq!(&e[16..], &[0u8; 16], "a block cipher's tag mask is 16 bytes");
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
    #![proptest_config(ProptestConfig { cases: warpfs_testkit::cases(12), failure_persistence: None, ..ProptestConfig::default() })]

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
