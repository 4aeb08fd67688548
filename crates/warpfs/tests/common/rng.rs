//! A small PRNG (xorshift64*), deterministic per seed.

pub struct Rng(u64);

impl Rng {
    /// A generator seeded from `WARPFS_TEST_SEED` when set, else from `tag`.
    /// The seed is printed so a failure can be replayed.
    pub fn for_test(tag: &str) -> Rng {
        let seed = match std::env::var("WARPFS_TEST_SEED") {
            Ok(s) => s.parse().expect("WARPFS_TEST_SEED must be a u64"),
            Err(_) => tag.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            }),
        };
        eprintln!("[{tag}] seed {seed} (set WARPFS_TEST_SEED to replay)");
        Rng::new(seed)
    }
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }
}
