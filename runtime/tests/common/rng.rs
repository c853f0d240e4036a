//! Deterministic test data: a splitmix64 generator, seeded per PE and per case, so every PE
//! can recompute what any other PE wrote.

/// splitmix64 state.
pub struct Rng(u64);

impl Rng {
    /// The generator the tests share, for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng::salted(seed, 0x5eed)
    }

    /// A generator whose start is `seed` mixed with `salt`: a test file with its own salt draws
    /// different data from the same seeds.
    pub fn salted(seed: u64, salt: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_ne_bytes());
        }
        v.truncate(n);
        v
    }
}
