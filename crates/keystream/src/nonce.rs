//! Block nonces: a random 64-bit epoch ‖ a 32-bit counter that starts at a
//! random value. The epoch is drawn afresh by count and by time
//! ([`EpochPolicy`]), so a process state that is replayed (a VM snapshot
//! restored or cloned, a checkpointed process resumed) reuses nonces only
//! until its first redraw: at most [`EpochPolicy::max_nonces`] nonces, and
//! none once either clock has moved past [`EpochPolicy::max_age`] (FORMAT.md
//! 3.5, SECURITY.md "Snapshots"). See docs/decisions/0036-random-nonce-epochs.md
//! for why not a persisted global counter.

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
#[derive(Debug)]
pub struct NonceSource {
    state: Mutex<Epoch>,
    policy: EpochPolicy,
    clock: Box<dyn Clock>,
    /// Epochs drawn so far (the first included).
    epochs: std::sync::atomic::AtomicU64,
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
        Self {
            state: Mutex::new(first),
            policy,
            clock,
            epochs: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// The next unused nonce.
    pub fn next(&self) -> Nonce {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.expired(&s) {
            *s = fresh(&self.policy, &*self.clock);
            self.epochs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let n = compose(s.epoch, s.counter);
        s.counter += 1;
        s.used += 1;
        n
    }

    fn expired(&self, s: &Epoch) -> bool {
        let p = &self.policy;
        if s.used >= p.max_nonces || s.counter == u32::MAX {
            return true;
        }
        let mono = self.clock.monotonic();
        let wall = self.clock.wall();
        mono < s.mono || mono - s.mono >= p.max_age || wall < s.wall || wall - s.wall >= p.max_age
    }

    /// The current epoch (for stats and tests).
    pub fn epoch(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).epoch
    }

    /// Epochs drawn so far, the first included.
    pub fn epochs_drawn(&self) -> u64 {
        self.epochs.load(std::sync::atomic::Ordering::Relaxed)
    }
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

    /// A clock the test moves by hand.
    #[derive(Debug, Default, Clone)]
    struct Hand(Arc<Mutex<(Duration, Duration)>>);

    impl Hand {
        fn at(mono: u64, wall: u64) -> Self {
            Self(Arc::new(Mutex::new((
                Duration::from_secs(mono),
                Duration::from_secs(wall),
            ))))
        }
        fn set(&self, mono: u64, wall: u64) {
            *self.0.lock().unwrap() = (Duration::from_secs(mono), Duration::from_secs(wall));
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

    fn src(max_nonces: u32, secs: u64, clock: &Hand) -> NonceSource {
        NonceSource::with_clock(
            EpochPolicy {
                max_nonces,
                max_age: Duration::from_secs(secs),
            },
            Box::new(clock.clone()),
        )
    }

    fn epoch_of(n: &Nonce) -> u64 {
        u64::from_be_bytes(n[..8].try_into().unwrap())
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
}
