//! Block nonces: a random 64-bit epoch ‖ a 32-bit counter that starts at a
//! random value. The epoch is drawn afresh by count and by time
//! ([`EpochPolicy`]), so a process state that is replayed (a VM snapshot
//! restored or cloned, a checkpointed process resumed) reuses nonces only
//! until its first redraw: at most [`EpochPolicy::max_nonces`] nonces, and
//! none once either clock has moved past [`EpochPolicy::max_age`] (FORMAT.md
//! 3.5, SECURITY.md "Snapshots"). A mask made ahead for a nonce (the
//! engine's write pool) is used only while that nonce's epoch is still
//! [`NonceSource::live_epoch`] (docs/decisions/0073-epoch-bound-masks.md).
//! See docs/decisions/0036-random-nonce-epochs.md for why not a persisted
//! global counter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use warpfs_crypto::Nonce;

/// When an epoch ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochPolicy {
    /// Nonces handed out under one epoch at most.
    pub max_nonces: u32,
    /// Age of an epoch at most, on the monotonic clock and on the wall
    /// clock (a wall clock that goes back ends the epoch too).
    pub max_age: Duration,
}

impl EpochPolicy {
    /// 65,536 nonces (256 MiB of 4 KiB blocks) or 10 seconds.
    pub const DEFAULT: Self = Self {
        max_nonces: 1 << 16,
        max_age: Duration::from_secs(10),
    };
}

impl Default for EpochPolicy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The clocks an epoch's age is read from (injected in tests).
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Monotonic time; may stand still while a VM is suspended.
    fn monotonic(&self) -> Duration;
    /// Wall-clock time since the Unix epoch; jumps when it is corrected
    /// (e.g. by NTP after a snapshot is restored).
    fn wall(&self) -> Duration;
}

/// The system's clocks.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn monotonic(&self) -> Duration {
        // Instant has no absolute value: measure from a process-wide start.
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed()
    }

    fn wall(&self) -> Duration {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy)]
struct Epoch {
    epoch: u64,
    /// The next counter value.
    counter: u32,
    /// Nonces handed out under this epoch.
    used: u32,
    mono: Duration,
    wall: Duration,
}

/// Hands out each nonce exactly once for the life of the process.
///
/// The current epoch and the clock readings it began at are also kept in
/// atomics, so [`live_epoch`](Self::live_epoch) (what a pool of masks made
/// ahead asks before it uses one) reads the clocks and compares without
/// taking the lock.
#[derive(Debug)]
pub struct NonceSource {
    state: Mutex<Epoch>,
    policy: EpochPolicy,
    clock: Box<dyn Clock>,
    /// Epochs drawn so far (the first included).
    epochs: AtomicU64,
    /// The current epoch; written before `mono_start` and `wall_start`.
    live: AtomicU64,
    /// The monotonic and wall-clock readings (ns) the current epoch began at.
    mono_start: AtomicU64,
    wall_start: AtomicU64,
}

impl Default for NonceSource {
    fn default() -> Self {
        Self::new()
    }
}

impl NonceSource {
    /// A source with a fresh random epoch, the default policy and the
    /// system's clocks.
    pub fn new() -> Self {
        Self::with_clock(EpochPolicy::DEFAULT, Box::new(SystemClock))
    }

    /// A source with `policy` reading `clock`.
    pub fn with_clock(policy: EpochPolicy, clock: Box<dyn Clock>) -> Self {
        let policy = EpochPolicy {
            max_nonces: policy.max_nonces.clamp(1, 1 << 31),
            ..policy
        };
        let first = fresh(&policy, &*clock);
        Self::from_state(first, policy, clock, 1)
    }

    fn from_state(s: Epoch, policy: EpochPolicy, clock: Box<dyn Clock>, epochs: u64) -> Self {
        Self {
            state: Mutex::new(s),
            policy,
            clock,
            epochs: AtomicU64::new(epochs),
            live: AtomicU64::new(s.epoch),
            mono_start: AtomicU64::new(nanos(s.mono)),
            wall_start: AtomicU64::new(nanos(s.wall)),
        }
    }

    /// A second source in this one's exact state (epoch, counter, nonces
    /// used, the clock readings the epoch began at) that reads `clock`:
    /// what a process holds after a snapshot of its memory was restored,
    /// or cloned, beside the one that goes on. Only for measuring what two
    /// such timelines reuse (docs/decisions/0073); a program never copies
    /// a source.
    #[doc(hidden)]
    pub fn replica(&self, clock: Box<dyn Clock>) -> Self {
        let s = *self.lock();
        Self::from_state(s, self.policy, clock, self.epochs_drawn())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Epoch> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The policy in force (`max_nonces` clamped to 1..=2^31).
    pub fn policy(&self) -> EpochPolicy {
        self.policy
    }

    /// The next unused nonce.
    pub fn next(&self) -> Nonce {
        let mut n = [[0u8; 12]];
        self.next_many(&mut n);
        n[0]
    }

    /// Fill `out` with the next unused nonces, in order, reading the
    /// clocks once for all of them (an epoch that runs out of nonces on
    /// the way is followed by a fresh one, as with [`next`](Self::next)).
    pub fn next_many(&self, out: &mut [Nonce]) {
        if out.is_empty() {
            return;
        }
        let mut s = self.lock();
        if self.expired(&s) {
            self.begin(&mut s);
        }
        for n in out {
            if s.used >= self.policy.max_nonces || s.counter == u32::MAX {
                self.begin(&mut s);
            }
            *n = compose(s.epoch, s.counter);
            s.counter += 1;
            s.used += 1;
        }
    }

    /// The epoch whose nonces may still be used, after checking the
    /// clocks: an epoch that is due to end by time (its monotonic age, a
    /// wall-clock jump either way) ends here, before the answer, as it
    /// would on the next [`next`](Self::next). A nonce handed out earlier
    /// whose first 8 bytes are not the answer belongs to a retired epoch.
    /// Two clock reads and three atomic loads; the lock only when the
    /// epoch ends. An epoch that has handed out all its nonces stays live
    /// until the next nonce is drawn.
    pub fn live_epoch(&self) -> u64 {
        let (mono, wall) = (self.clock.monotonic(), self.clock.wall());
        let e = self.live.load(Ordering::Acquire);
        let m0 = Duration::from_nanos(self.mono_start.load(Ordering::Acquire));
        let w0 = Duration::from_nanos(self.wall_start.load(Ordering::Acquire));
        // A start read from an epoch begun after `e` comes with `e`
        // replaced (it is stored first): then ask again under the lock.
        if e == self.live.load(Ordering::Acquire) && !self.aged(mono, wall, m0, w0) {
            return e;
        }
        let mut s = self.lock();
        if self.aged(self.clock.monotonic(), self.clock.wall(), s.mono, s.wall) {
            self.begin(&mut s);
        }
        s.epoch
    }

    /// Whether clock readings `mono`, `wall` are past the end of an epoch
    /// that began at `m0`, `w0`.
    fn aged(&self, mono: Duration, wall: Duration, m0: Duration, w0: Duration) -> bool {
        let age = self.policy.max_age;
        mono < m0 || mono - m0 >= age || wall < w0 || wall - w0 >= age
    }

    fn expired(&self, s: &Epoch) -> bool {
        if s.used >= self.policy.max_nonces || s.counter == u32::MAX {
            return true;
        }
        self.aged(self.clock.monotonic(), self.clock.wall(), s.mono, s.wall)
    }

    /// End the current epoch and begin a fresh one (under the lock).
    fn begin(&self, s: &mut Epoch) {
        *s = fresh(&self.policy, &*self.clock);
        self.epochs.fetch_add(1, Ordering::Relaxed);
        self.live.store(s.epoch, Ordering::Release);
        self.mono_start.store(nanos(s.mono), Ordering::Release);
        self.wall_start.store(nanos(s.wall), Ordering::Release);
    }

    /// The current epoch (for stats and tests; no clock read).
    pub fn epoch(&self) -> u64 {
        self.live.load(Ordering::Acquire)
    }

    /// Epochs drawn so far, the first included.
    pub fn epochs_drawn(&self) -> u64 {
        self.epochs.load(Ordering::Relaxed)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The epoch of a nonce: its first 8 bytes, big-endian.
pub fn epoch_of(n: &Nonce) -> u64 {
    u64::from_be_bytes([n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]])
}

fn fresh(policy: &EpochPolicy, clock: &dyn Clock) -> Epoch {
    // The counter starts at a random value with room for a whole epoch, so
    // the nonces of two epochs spread over all 96 bits.
    let room = u32::MAX - policy.max_nonces;
    let counter = (warpfs_crypto::rand::u64() % (room as u64 + 1)) as u32;
    Epoch {
        epoch: fresh_epoch(),
        counter,
        used: 0,
        mono: clock.monotonic(),
        wall: clock.wall(),
    }
}

/// nonce = epoch (8 bytes, big-endian) ‖ counter (4 bytes, big-endian).
pub fn compose(epoch: u64, counter: u32) -> Nonce {
    let mut n = [0u8; 12];
    n[..8].copy_from_slice(&epoch.to_be_bytes());
    n[8..].copy_from_slice(&counter.to_be_bytes());
    n
}

/// A random epoch that is never zero, so no nonce is all zeros (an all-zero
/// nonce entry means "never written").
fn fresh_epoch() -> u64 {
    loop {
        let e = warpfs_crypto::rand::u64();
        if e != 0 {
            return e;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Arc;

    /// A clock the test moves by hand; counts how often it is read.
    #[derive(Debug, Default, Clone)]
    struct Hand(Arc<Mutex<(Duration, Duration)>>, Arc<AtomicU64>);

    impl Hand {
        fn at(mono: u64, wall: u64) -> Self {
            Self(
                Arc::new(Mutex::new((Duration::from_secs(mono), Duration::from_secs(wall)))),
                Arc::default(),
            )
        }
        fn set(&self, mono: u64, wall: u64) {
            *self.0.lock().unwrap() = (Duration::from_secs(mono), Duration::from_secs(wall));
        }
        /// A clock of its own, showing what this one shows now.
        fn copy(&self) -> Self {
            let (m, w) = *self.0.lock().unwrap();
            Self(Arc::new(Mutex::new((m, w))), Arc::default())
        }
        fn reads(&self) -> u64 {
            self.1.load(Ordering::Relaxed)
        }
    }

    impl Clock for Hand {
        fn monotonic(&self) -> Duration {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0.lock().unwrap().0
        }
        fn wall(&self) -> Duration {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0.lock().unwrap().1
        }
    }

    fn src(max_nonces: u32, secs: u64, clock: &Hand) -> NonceSource {
        NonceSource::with_clock(
            EpochPolicy {
                max_nonces,
                max_age: Duration::from_secs(secs),
            },
            Box::new(clock.clone()),
        )
    }

    #[test]
    fn nonces_are_unique_and_nonzero() {
        let s = NonceSource::with_clock(
            EpochPolicy {
                max_nonces: 100,
                ..EpochPolicy::DEFAULT
            },
            Box::new(SystemClock),
        );
        let mut seen = HashSet::new();
        for _ in 0..10_000 {
            let n = s.next();
            assert_ne!(n, [0u8; 12]);
            assert!(seen.insert(n));
        }
        assert!(s.epochs_drawn() >= 100);
    }

    #[test]
    fn an_epoch_ends_after_max_nonces_exactly() {
        let c = Hand::at(100, 1_000_000);
        let s = src(5, 10, &c);
        let first: Vec<Nonce> = (0..5).map(|_| s.next()).collect();
        let e0 = epoch_of(&first[0]);
        assert!(first.iter().all(|n| epoch_of(n) == e0));
        // consecutive counters within the epoch
        let c0 = u32::from_be_bytes(first[0][8..].try_into().unwrap());
        for (i, n) in first.iter().enumerate() {
            assert_eq!(u32::from_be_bytes(n[8..].try_into().unwrap()), c0 + i as u32);
        }
        let sixth = s.next();
        assert_ne!(epoch_of(&sixth), e0);
        assert_eq!(s.epochs_drawn(), 2);
    }

    #[test]
    fn an_epoch_ends_when_the_monotonic_clock_passes_max_age() {
        let c = Hand::at(100, 1_000_000);
        let s = src(1000, 10, &c);
        let e0 = epoch_of(&s.next());
        c.set(109, 1_000_000);
        assert_eq!(epoch_of(&s.next()), e0, "9 s is within the epoch");
        c.set(110, 1_000_000);
        let e1 = epoch_of(&s.next());
        assert_ne!(e1, e0, "10 s ends it");
        assert_eq!(epoch_of(&s.next()), e1);
    }

    #[test]
    fn a_wall_clock_jump_either_way_ends_the_epoch() {
        // A restored snapshot: the monotonic clock stands still, the wall
        // clock is corrected forward by hours.
        let c = Hand::at(100, 1_000_000);
        let s = src(1000, 10, &c);
        let e0 = epoch_of(&s.next());
        c.set(100, 1_000_000 + 3600);
        let e1 = epoch_of(&s.next());
        assert_ne!(e1, e0);
        // And a wall clock set back (another clone, or a bad RTC).
        c.set(100, 999_000);
        let e2 = epoch_of(&s.next());
        assert_ne!(e2, e1);
        assert_eq!(s.epochs_drawn(), 3);
    }

    #[test]
    fn a_monotonic_clock_that_goes_back_ends_the_epoch() {
        // A process checkpoint resumed on another boot.
        let c = Hand::at(5000, 1_000_000);
        let s = src(1000, 10, &c);
        let e0 = epoch_of(&s.next());
        c.set(3, 1_000_000);
        assert_ne!(epoch_of(&s.next()), e0);
    }

    #[test]
    fn counter_wrap_takes_a_new_epoch() {
        let c = Hand::at(0, 0);
        let s = src(1000, 10, &c);
        let e0 = s.epoch();
        s.state.lock().unwrap().counter = u32::MAX - 1;
        let a = s.next();
        assert_eq!(&a[..8], &e0.to_be_bytes());
        assert_eq!(&a[8..], &(u32::MAX - 1).to_be_bytes());
        let b = s.next();
        assert_ne!(&b[..8], &e0.to_be_bytes());
    }

    #[test]
    fn the_start_counter_leaves_room_for_a_whole_epoch() {
        let c = Hand::at(0, 0);
        for _ in 0..200 {
            let s = src(1 << 31, 10, &c);
            assert!(s.state.lock().unwrap().counter <= u32::MAX - (1 << 31));
        }
    }

    #[test]
    fn two_sources_have_different_epochs() {
        assert_ne!(NonceSource::new().epoch(), NonceSource::new().epoch());
    }

    #[test]
    fn live_epoch_ends_a_due_epoch_before_any_nonce_is_drawn() {
        // A restored snapshot: the monotonic clock stands still, the wall
        // clock is corrected forward. Nothing is drawn, yet the epoch of
        // the nonces drawn before is no longer live.
        let c = Hand::at(100, 1_000_000);
        let s = src(1000, 10, &c);
        let e0 = epoch_of(&s.next());
        assert_eq!(s.live_epoch(), e0);
        c.set(109, 1_000_009);
        assert_eq!(s.live_epoch(), e0, "within 10 s on both clocks");
        c.set(109, 1_000_000 + 3600);
        let e1 = s.live_epoch();
        assert_ne!(e1, e0);
        assert_eq!((s.epoch(), s.epochs_drawn()), (e1, 2));
        assert_eq!(epoch_of(&s.next()), e1, "the next nonce is of the live epoch");
        // The monotonic age ends it too, and so does a clock going back.
        c.set(119, 1_000_000 + 3601);
        let e2 = s.live_epoch();
        assert_ne!(e2, e1);
        c.set(119, 1_000_000 + 3600);
        assert_ne!(s.live_epoch(), e2);
        assert_eq!(s.epochs_drawn(), 4);
    }

    #[test]
    fn an_epoch_that_has_handed_out_all_its_nonces_stays_live_until_the_next() {
        let c = Hand::at(100, 1_000_000);
        let s = src(3, 10, &c);
        let e0 = epoch_of(&s.next());
        s.next();
        s.next();
        assert_eq!(s.live_epoch(), e0, "its last nonces may still be used");
        let e1 = epoch_of(&s.next());
        assert_ne!(e1, e0);
        assert_eq!(s.live_epoch(), e1);
    }

    #[test]
    fn a_batch_and_a_liveness_check_read_each_clock_once() {
        let c = Hand::at(100, 1_000_000);
        let s = src(1000, 10, &c);
        let before = c.reads();
        let mut batch = [[0u8; 12]; 32];
        s.next_many(&mut batch);
        assert_eq!(c.reads() - before, 2, "one monotonic and one wall reading");
        let before = c.reads();
        s.live_epoch();
        assert_eq!(c.reads() - before, 2);
        // The batch is 32 consecutive nonces of the epoch.
        let c0 = u32::from_be_bytes(batch[0][8..].try_into().unwrap());
        for (i, n) in batch.iter().enumerate() {
            assert_eq!(epoch_of(n), s.epoch());
            assert_eq!(u32::from_be_bytes(n[8..].try_into().unwrap()), c0 + i as u32);
        }
        // A batch that runs past the epoch's last nonce goes on in a new one.
        let s = src(20, 10, &c);
        s.next_many(&mut batch);
        let e0 = epoch_of(&batch[0]);
        assert!(batch[..20].iter().all(|n| epoch_of(n) == e0));
        assert!(batch[20..].iter().all(|n| epoch_of(n) == s.epoch() && s.epoch() != e0));
    }

    #[test]
    fn a_replica_repeats_the_original_until_its_clock_differs() {
        // What a restored snapshot does: the same state, the same nonces,
        // until its own clock ends the epoch.
        let c = Hand::at(100, 1_000_000);
        let s = src(1000, 10, &c);
        for _ in 0..5 {
            s.next();
        }
        let c2 = c.copy();
        let r = s.replica(Box::new(c2.clone()));
        assert_eq!((r.epoch(), r.epochs_drawn()), (s.epoch(), 1));
        let a: Vec<Nonce> = (0..10).map(|_| s.next()).collect();
        let b: Vec<Nonce> = (0..10).map(|_| r.next()).collect();
        assert_eq!(a, b);
        c2.set(100, 1_000_000 + 3600);
        assert_ne!(epoch_of(&r.next()), epoch_of(&s.next()));
        assert_eq!(
            epoch_of(&s.next()),
            epoch_of(&a[0]),
            "the original's clock did not move"
        );
    }
}
