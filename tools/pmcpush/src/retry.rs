//! Exponential back-off with jitter, bounded in attempts.
//!
//! Delays double from `initial` up to `max`; each is then drawn uniformly from its upper half
//! ("equal jitter"), so a fleet of agents that lost the same backend at the same moment does
//! not come back in lockstep, while no delay falls below half the schedule.

use std::time::Duration;

use rand::Rng;

/// How failed sends are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure (before jitter).
    pub initial: Duration,
    /// The largest delay (before jitter).
    pub max: Duration,
    /// Attempts per window, the first included (at least 1). A window whose attempts all
    /// failed is spooled when there is a spool, and dropped (and counted) otherwise.
    pub max_attempts: u32,
}

impl Default for Backoff {
    /// 0.5 s, doubling to 30 s, 6 attempts: a window outlives about a minute of outage, which
    /// is what a restart of the backend takes, without holding a 10 s window much longer.
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            max_attempts: 6,
        }
    }
}

impl Backoff {
    /// The delay before retry number `retry` (0 for the retry after the first failure),
    /// without jitter: `initial × 2^retry`, at most `max`.
    pub fn base_delay(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.initial.checked_mul(factor).unwrap_or(self.max).min(self.max)
    }

    /// The delay before retry number `retry`, jittered: uniform in `[base/2, base]`.
    pub fn delay(&self, retry: u32, rng: &mut impl Rng) -> Duration {
        let base = self.base_delay(retry);
        let half = base / 2;
        let spread = u64::try_from((base - half).as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(rng.random_range(0..=spread))
    }

    /// Whether a window that has had `attempts` attempts may have another.
    pub fn may_retry(&self, attempts: u32) -> bool {
        attempts < self.max_attempts.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn the_schedule_doubles_up_to_the_maximum() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            max_attempts: 3,
        };
        let delays: Vec<_> = (0..6).map(|r| b.base_delay(r).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert!(b.may_retry(2));
        assert!(!b.may_retry(3));
    }

    proptest! {
        /// A jittered delay is within [base/2, base], and the schedule never shrinks.
        #[test]
        fn jitter_stays_in_the_upper_half(
            initial_ms in 1u64..10_000, max_ms in 1u64..1_000_000, retry in 0u32..200, seed: u64,
        ) {
            let b = Backoff {
                initial: Duration::from_millis(initial_ms),
                max: Duration::from_millis(max_ms),
                max_attempts: 5,
            };
            let mut rng = StdRng::seed_from_u64(seed);
            let base = b.base_delay(retry);
            let d = b.delay(retry, &mut rng);
            prop_assert!(d >= base / 2 && d <= base, "{d:?} outside [{:?}, {base:?}]", base / 2);
            prop_assert!(b.base_delay(retry + 1) >= base);
            prop_assert!(base <= b.max);
        }
    }
}
