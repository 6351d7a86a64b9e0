//! Reads of a host-counted PMC that never go backwards while a stop or a detach moves its count
//! from the host to the driver.
//!
//! A running host-counted PMC's value is two parts: what the driver was credited (its `value`,
//! under the bookkeeping lock) and what the host counted since (read from the host without that
//! lock). A stop or a detach moves a part from the second to the first in two steps — the host
//! hands it over, then the driver credits it — and a read between the two steps sees it in
//! neither: the count goes back, and an interval printed then wraps to nearly 2^64. The host
//! step cannot run under the bookkeeping lock (the host posts samples into the driver as it
//! stops), so the moves are fenced instead: each runs between [`HostedGate::enter`] and
//! [`HostedGate::leave`], and [`HostedGate::read`] retries a read that overlapped one.

use crate::sync::{AtomicU32, AtomicU64, Ordering, retry_hint};

/// The fence between reads of host-counted PMCs and the moves of their counts.
#[derive(Debug, Default)]
pub(crate) struct HostedGate {
    /// Moves in progress.
    moving: AtomicU32,
    /// Moves finished.
    moved: AtomicU64,
}

impl HostedGate {
    /// A move of counts from the host to the driver starts.
    pub(crate) fn enter(&self) {
        self.moving.fetch_add(1, Ordering::SeqCst);
    }

    /// The move that [`HostedGate::enter`] started is complete: the host gave its part and the
    /// driver credited it.
    pub(crate) fn leave(&self) {
        self.moved.fetch_add(1, Ordering::SeqCst);
        self.moving.fetch_sub(1, Ordering::SeqCst);
    }

    /// `read()`'s result from a run that no move overlapped (retried until one is). Moves are
    /// rare (a stop, a target's exit) and short, and a read waits only while one runs.
    pub(crate) fn read<T>(&self, mut read: impl FnMut() -> T) -> T {
        loop {
            let before = self.moved.load(Ordering::SeqCst);
            if self.moving.load(Ordering::SeqCst) == 0 {
                let value = read();
                if self.moving.load(Ordering::SeqCst) == 0
                    && self.moved.load(Ordering::SeqCst) == before
                {
                    return value;
                }
            }
            retry_hint();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::HostedGate;
    use crate::sync::{AtomicU64, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    #[test]
    fn a_read_sees_a_moved_count_in_one_part_or_the_other_never_in_neither() {
        loom::model(|| {
            let gate = Arc::new(HostedGate::default());
            // 30 counted by the host, none credited yet.
            let host = Arc::new(AtomicU64::new(30));
            let credited = Arc::new(AtomicU64::new(0));
            let stop = {
                let (gate, host, credited) =
                    (Arc::clone(&gate), Arc::clone(&host), Arc::clone(&credited));
                thread::spawn(move || {
                    gate.enter();
                    // Each part is behind a lock in the driver (acquire and release).
                    let handed = host.swap(0, Ordering::AcqRel);
                    credited.fetch_add(handed, Ordering::AcqRel);
                    gate.leave();
                })
            };
            let value =
                gate.read(|| credited.load(Ordering::Acquire) + host.load(Ordering::Acquire));
            assert_eq!(value, 30, "the count is whole whenever it is read");
            stop.join().unwrap();
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::HostedGate;

    #[test]
    fn a_read_without_a_move_runs_once_and_one_during_a_move_waits_for_its_end() {
        let gate = HostedGate::default();
        let mut runs = 0;
        assert_eq!(
            gate.read(|| {
                runs += 1;
                7
            }),
            7
        );
        assert_eq!(runs, 1);
        // A move that starts and ends during the read: the read runs again.
        let mut runs = 0;
        let value = gate.read(|| {
            runs += 1;
            if runs == 1 {
                gate.enter();
                gate.leave();
            }
            runs
        });
        assert_eq!(value, 2);
    }
}
