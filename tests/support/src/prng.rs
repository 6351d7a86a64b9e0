//! Seeded random numbers for tests: the simulator's own [`SplitMix64`] (the sequence the
//! machine's scheduler uses), and [`XorShift64`], the smallest generator, for tests that want
//! one per thread.

pub use hwpmc_sim::prng::SplitMix64;

/// xorshift64 (shifts 13, 7, 17): a few instructions per number, `Send`, one per
/// thread of a stress test. Its seed must not be 0 (the sequence would stay 0).
#[derive(Debug, Clone)]
pub struct XorShift64(pub u64);

impl XorShift64 {
    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_stays_below_its_bound_and_repeats_from_its_seed() {
        let (mut a, mut b) = (XorShift64(7), XorShift64(7));
        for n in 1..100 {
            let x = a.below(n);
            assert!(x < n);
            assert_eq!(x, b.below(n));
        }
    }
}
