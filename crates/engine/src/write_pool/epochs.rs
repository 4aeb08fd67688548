//! Pooled masks and nonce epochs, on hand-moved clocks: masks of a retired
//! epoch are redefined at once and never sealed with, and a simulated
//! snapshot restore (the pool's nonce source and the nonces its contexts
//! hold, copied as a snapshot of the daemon's memory copies them; both
//! copies go on writing) is measured by the nonces both timelines sealed
//! with: the (key, nonce) pairs a restore reuses (SECURITY.md "Snapshots
//! and clones", docs/decisions/0073-epoch-bound-masks.md).

use super::*;
use crate::{EngineConfig, DEFAULT_POOL_SIZE};
use std::collections::HashSet;
use std::time::Duration;
use warpfs_keystream::{Clock, EpochPolicy};

/// Both clocks, set by the test.
#[derive(Debug, Clone)]
struct Hand(Arc<Mutex<(Duration, Duration)>>);

impl Hand {
    fn new() -> Self {
        Self(Arc::new(Mutex::new((
            Duration::from_secs(1_000),
            Duration::from_secs(1_700_000_000),
        ))))
    }
    /// Both clocks move on by `d`.
    fn advance(&self, d: Duration) {
        let mut c = self.0.lock().unwrap();
        c.0 += d;
        c.1 += d;
    }
    /// The wall clock alone moves by `d` (corrected after a restore).
    fn jump_wall(&self, d: Duration) {
        self.0.lock().unwrap().1 += d;
    }
    /// A clock of its own showing what this one shows now.
    fn copy(&self) -> Self {
        Self(Arc::new(Mutex::new(*self.0.lock().unwrap())))
    }
}

impl Clock for Hand {
    fn monotonic(&self) -> Duration {
        self.0.lock().unwrap().0
    }
    fn wall(&self) -> Duration {
        self.0.lock().unwrap().1
    }
}

/// One timeline: a pool, its nonce source and its clock.
struct Timeline {
    pool: WritePool,
    source: Arc<NonceSource>,
    clock: Hand,
    /// Every epoch seen live so far.
    seen: Mutex<HashSet<u64>>,
}

impl Timeline {
    fn new(engine: &Arc<Engine>, key: KeyId, policy: EpochPolicy) -> Self {
        let clock = Hand::new();
        let source = Arc::new(NonceSource::with_clock(policy, Box::new(clock.clone())));
        let pool = WritePool::with_nonces(engine.clone(), key, Box::new(source.clone())).unwrap();
        let seen = Mutex::new(HashSet::from([source.epoch()]));
        Self {
            pool,
            source,
            clock,
            seen,
        }
    }

    /// What a snapshot of this process's memory holds, restored beside it:
    /// the source's state, the nonces the pool's contexts hold, the clock
    /// as it showed then.
    fn restore(&self) -> Self {
        let clock = self.clock.copy();
        let source = Arc::new(self.source.replica(Box::new(clock.clone())));
        let pool = self.pool.replica(Box::new(source.clone()));
        let seen = Mutex::new(self.seen.lock().unwrap().clone());
        Self {
            pool,
            source,
            clock,
            seen,
        }
    }

    /// Seal one block, `tick` after the last one: the nonce it took, which
    /// must not be of an epoch retired before the seal began.
    fn seal(&self, tick: Duration) -> Nonce {
        self.clock.advance(tick);
        // What the seal's own check finds first (its clock reading ends an
        // epoch that is due).
        let live = self.source.live_epoch();
        let mut seen = self.seen.lock().unwrap();
        seen.insert(live);
        let mut b = [0x5au8; 16];
        let (n, _) = self.pool.seal(&mut b);
        let e = epoch_of(&n);
        assert!(e == live || !seen.contains(&e), "sealed under a retired epoch");
        seen.insert(e);
        seen.insert(self.source.epoch());
        n
    }

    /// Seal `blocks` blocks, each once every mask asked for is made (the
    /// workers keeping up: masks are taken from the pool's front, in
    /// order).
    fn write(&self, blocks: usize, tick: Duration) -> Vec<Nonce> {
        (0..blocks)
            .map(|_| {
                self.pool.engine.quiesce();
                self.seal(tick)
            })
            .collect()
    }
}

/// An engine with speculation on and a pool of `z`; masks of 32 bytes
/// (E(J0) and one 16-byte block), so that many seals stay cheap.
fn engine(z: usize) -> (Arc<Engine>, KeyId) {
    let e = Engine::new(EngineConfig {
        threads: 2,
        speculation: true,
        pool_size: z,
        mask_len: 32,
        ..EngineConfig::default()
    })
    .unwrap();
    let k = e.add_raw_key(&[0x73; 32]).unwrap();
    (e, k)
}

/// The nonces both timelines sealed with.
fn reused(a: &[Nonce], b: &[Nonce]) -> Vec<Nonce> {
    let a: HashSet<&Nonce> = a.iter().collect();
    b.iter().filter(|n| a.contains(n)).copied().collect()
}

const TICK: Duration = Duration::from_micros(100);

#[test]
fn a_restore_whose_clock_has_jumped_seals_with_no_mask_made_before_the_snapshot() {
    // The default pool (Z = 1,024) and epochs (65,536 nonces, 10 s). The
    // restored daemon's wall clock is corrected (by an hour) before it
    // writes again (k = 0), or after k of its writes.
    let z = DEFAULT_POOL_SIZE;
    for k in [0, 100] {
        let (e, key) = engine(z);
        let a = Timeline::new(&e, key, EpochPolicy::DEFAULT);
        a.write(3_000, TICK);
        let held = a.pool.ring().queue.len();
        assert!(held >= z - REFILL_BATCH, "the pool holds {held} masks ahead");
        let b = a.restore();
        let before = b.write(k, TICK);
        b.clock.jump_wall(Duration::from_secs(3_600));
        let after = b.write(3 * z, TICK);
        let a_after = a.write(3 * z + k, TICK);
        let both = reused(&a_after, &[before, after.clone()].concat());
        // Measured: 0 pairs with k = 0, k with k = 100; with the epoch
        // check removed, every mask the pool held (1,024).
        assert!(
            both.len() <= k,
            "k = {k}: {} (key, nonce) pairs sealed in both timelines, of {held} held ahead",
            both.len()
        );
        assert!(reused(&a_after, &after).is_empty(), "a pair reused after the jump");
    }
}

#[test]
fn a_restore_whose_clock_runs_on_reuses_only_the_snapshots_epoch() {
    // Epochs of 4,096 nonces; the snapshot is taken just after one ended
    // by count, while the pool still holds masks of the retired one at its
    // front. Neither clock jumps: both timelines go on with the live epoch
    // until its own end (its count, or 10 s), and only its nonces repeat.
    let policy = EpochPolicy {
        max_nonces: 4_096,
        max_age: Duration::from_secs(10),
    };
    let z = 1_024;
    let (e, key) = engine(z);
    let a = Timeline::new(&e, key, policy);
    let mut sealed = Vec::new();
    while a.source.epochs_drawn() < 2 {
        sealed.push(a.seal(TICK));
    }
    let live = a.source.epoch();
    let retired_held = {
        let r = a.pool.ring();
        r.queue.iter().filter(|(_, t)| epoch_of(t.nonce()) != live).count()
    };
    assert!(retired_held > z / 2, "only {retired_held} retired masks held");
    let b = a.restore();
    let tick = Duration::from_millis(1);
    let (ta, tb) = (a.write(3 * 4_096, tick), b.write(3 * 4_096, tick));
    let both = reused(&ta, &tb);
    // Measured: the live epoch's nonces, at most 4,096; with the epoch
    // check removed, the retired epoch's held masks too.
    assert!(both.len() <= policy.max_nonces as usize, "{} pairs reused", both.len());
    assert!(
        both.iter().all(|n| epoch_of(n) == live),
        "{} of {} reused pairs are of a retired epoch",
        both.iter().filter(|n| epoch_of(n) != live).count(),
        both.len()
    );
    assert!(sealed.iter().all(|n| !both.contains(n)));
}

#[test]
fn masks_of_a_retired_epoch_are_redefined_at_once_and_seals_keep_hitting() {
    // Every mask made before each seal (quiesce): across ends by count
    // every seal finds its mask ready; an end by time retires every mask
    // the pool holds, which are redefined together at once (that seal
    // finds its mask ready only if a worker was quick).
    let policy = EpochPolicy {
        max_nonces: 1_024,
        max_age: Duration::from_secs(10),
    };
    let z = 64;
    let (e, key) = engine(z);
    let a = Timeline::new(&e, key, policy);
    let seal = |tick| {
        e.quiesce();
        a.seal(tick)
    };
    for _ in 0..3_000 {
        seal(TICK);
    }
    assert!(a.source.epochs_drawn() >= 3, "{} epochs", a.source.epochs_drawn());
    let s = e.stats();
    assert_eq!((s.ready_hits, s.inline, s.waits), (3_000, 0, 0), "{s}");
    let held = a.pool.ring().queue.len() as u64;
    let old = a.source.epoch();
    let n = seal(Duration::from_secs(10));
    assert_ne!(epoch_of(&n), old);
    let t = e.stats();
    assert!(
        t.wasted - s.wasted >= held,
        "{} of {held} masks dropped",
        t.wasted - s.wasted
    );
    let ring = a.pool.ring();
    assert!(ring.queue.iter().all(|(_, t)| epoch_of(t.nonce()) == a.source.epoch()));
    assert!(ring.queue.len() >= z - REFILL_BATCH);
    drop(ring);
    seal(TICK);
    assert_eq!(e.stats().ready_hits, t.ready_hits + 1);
}

#[test]
fn a_pool_keeps_at_most_half_an_epoch_ahead() {
    let policy = EpochPolicy {
        max_nonces: 256,
        max_age: Duration::from_secs(10),
    };
    let (e, key) = engine(1_024);
    let a = Timeline::new(&e, key, policy);
    assert_eq!(a.pool.z, 128);
    assert_eq!(a.pool.ring().queue.len(), 128);
    let mut seen = HashSet::new();
    for n in a.write(2_000, TICK) {
        assert!(seen.insert(n), "a nonce sealed twice");
    }
}
