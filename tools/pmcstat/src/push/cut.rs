//! Where a log's windows begin and end: its samples' timestamps (TSC ticks) cut into spans of
//! the window's length, and the ticks made wall-clock times with the log's INITIALIZE record.

use std::ops::Range;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A log's clock: INITIALIZE's wall-clock time and its own timestamp, and the TSC frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogClock {
    /// INITIALIZE's time, nanoseconds since the epoch.
    pub start_ns: i128,
    /// INITIALIZE's timestamp: the tick of `start_ns`.
    pub start_tsc: u64,
    /// Ticks per second; 0 where the log has no TSC.
    pub freq: u64,
}

impl LogClock {
    /// The wall-clock time of tick `tsc` (the log's start without a TSC frequency).
    pub fn wall(&self, tsc: u64) -> SystemTime {
        let ns = match self.freq {
            0 => self.start_ns,
            freq => {
                let ticks = i128::from(tsc) - i128::from(self.start_tsc);
                self.start_ns + ticks * 1_000_000_000 / i128::from(freq)
            }
        };
        match u64::try_from(ns) {
            Ok(ns) => UNIX_EPOCH + Duration::from_nanos(ns),
            Err(_) => UNIX_EPOCH,
        }
    }

    /// The windows of `window` length over the samples from tick `first` to tick `last`: the
    /// first starts at the first sample, each is `window` long, and the last ends after the
    /// last sample. Without a TSC frequency the log is one window.
    pub fn cut(&self, first: u64, last: u64, window: Duration) -> Vec<Range<u64>> {
        let span = last.saturating_add(1);
        let ticks = u128::from(self.freq) * window.as_nanos() / 1_000_000_000;
        let Ok(ticks @ 1..) = u64::try_from(ticks) else {
            return std::iter::once(first..span).collect();
        };
        let mut windows = Vec::new();
        let mut start = first;
        while start < span {
            let end = start.saturating_add(ticks).min(span);
            windows.push(start..end);
            start = end;
        }
        windows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_start_at_the_first_sample_and_the_last_ends_after_the_last() {
        let clock = LogClock { start_ns: 1_000_000_000_000, start_tsc: 500, freq: 1000 };
        let cut = clock.cut(1000, 3499, Duration::from_secs(1));
        assert_eq!(cut, vec![1000..2000, 2000..3000, 3000..3500]);
        assert_eq!(clock.wall(1500), UNIX_EPOCH + Duration::from_secs(1001));
        // Ticks before INITIALIZE's are before its time.
        assert_eq!(clock.wall(0), UNIX_EPOCH + Duration::from_millis(999_500));
    }

    #[test]
    fn a_log_without_a_tsc_frequency_is_one_window_at_its_start() {
        let clock = LogClock { start_ns: 7, start_tsc: 0, freq: 0 };
        let whole = clock.cut(10, 20, Duration::from_secs(10));
        assert_eq!((whole.len(), &whole[0]), (1, &(10..21)));
        assert_eq!(clock.wall(20), UNIX_EPOCH + Duration::from_nanos(7));
    }
}
