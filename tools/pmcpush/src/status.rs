//! What the pusher did so far: atomic counters the worker bumps, and the [`Status`] snapshot
//! anyone can ask for at any time without waiting on the worker.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The counters behind [`Status`]. Each is only ever increased, except `queued`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) offered: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) partially_rejected: AtomicU64,
    pub(crate) failed_attempts: AtomicU64,
    pub(crate) dropped_queue_full: AtomicU64,
    pub(crate) dropped_rejected: AtomicU64,
    pub(crate) dropped_retries_exhausted: AtomicU64,
    pub(crate) dropped_at_shutdown: AtomicU64,
    pub(crate) dropped_unreadable: AtomicU64,
    pub(crate) spooled: AtomicU64,
    pub(crate) unspooled: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn set_last_error(&self, error: String) {
        // A poisoned lock only means a panic elsewhere while holding it; the text is still
        // a whole string, so keep using it.
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
    }

    pub(crate) fn snapshot(&self, queued: usize, in_flight: bool, spooled_now: usize) -> Status {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Status {
            windows_offered: get(&self.offered),
            windows_sent: get(&self.sent),
            bytes_sent: get(&self.bytes_sent),
            windows_partially_rejected: get(&self.partially_rejected),
            failed_attempts: get(&self.failed_attempts),
            dropped: Drops {
                queue_full: get(&self.dropped_queue_full),
                rejected: get(&self.dropped_rejected),
                retries_exhausted: get(&self.dropped_retries_exhausted),
                at_shutdown: get(&self.dropped_at_shutdown),
                unreadable: get(&self.dropped_unreadable),
            },
            windows_spooled: get(&self.spooled),
            windows_unspooled: get(&self.unspooled),
            queued: queued as u64,
            in_flight: u64::from(in_flight),
            in_spool: spooled_now as u64,
            last_error: self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

/// A snapshot of what a pusher did since it started.
///
/// Every window offered is in exactly one of: sent, dropped (by cause), queued, in the spool,
/// or in flight (being sent). The counters are read one by one, so a snapshot taken while the
/// worker moves a window may see it in two places (a window just counted as sent or spooled
/// is still in flight for a moment); one taken while the worker waits (or after shutdown) adds
/// up:
/// `windows_offered == windows_sent + dropped.total() + queued + in_spool + in_flight`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Windows given to [`Pusher::offer`](crate::Pusher::offer).
    pub windows_offered: u64,
    /// Windows the backend accepted.
    pub windows_sent: u64,
    /// Request body bytes of the accepted windows: the pprof bytes for Pyroscope and Parca,
    /// the OTLP body over HTTP (gzipped when it is), the OTLP message over gRPC (before
    /// gRPC's own compression).
    pub bytes_sent: u64,
    /// Windows sent that the backend took only in part (OTLP partial success: some profiles
    /// refused); counted in `windows_sent` too, the backend's words in `last_error`.
    pub windows_partially_rejected: u64,
    /// Attempts that failed (each retry that failed counts once).
    pub failed_attempts: u64,
    /// Windows given up, by cause.
    pub dropped: Drops,
    /// Windows written to the spool directory (each time one was).
    pub windows_spooled: u64,
    /// Windows read back from the spool to be sent again.
    pub windows_unspooled: u64,
    /// Windows waiting in the queue now.
    pub queued: u64,
    /// Windows in the spool directory now.
    pub in_spool: u64,
    /// Windows from the queue being sent now (0 or 1).
    pub in_flight: u64,
    /// The last error the backend or the network gave, for a person to read.
    pub last_error: Option<String>,
}

/// Windows given up, by cause. None is silent: each one is counted here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// The queue was full (the backend is slower than the sampler, or down) and the spool was
    /// full or absent: the oldest window was dropped to make room. Also a window larger, alone,
    /// than the queue's byte bound.
    pub queue_full: u64,
    /// The backend refused the window for good (a 4xx other than 408/429, a gRPC status that
    /// says the request is wrong); it is not retried.
    pub rejected: u64,
    /// Every attempt failed and the spool was full or absent.
    pub retries_exhausted: u64,
    /// Still queued when the shutdown deadline passed.
    pub at_shutdown: u64,
    /// Not a pprof profile (or too large once decompressed), so it could not be converted.
    pub unreadable: u64,
}

impl Drops {
    /// All dropped windows.
    pub fn total(&self) -> u64 {
        self.queue_full
            + self.rejected
            + self.retries_exhausted
            + self.at_shutdown
            + self.unreadable
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "windows: {} offered, {} sent ({} bytes, {} in part), {} dropped (queue full {}, rejected {}, \
             retries exhausted {}, at shutdown {}, unreadable {}), {} queued, {} in spool; \
             {} failed attempts",
            self.windows_offered,
            self.windows_sent,
            self.bytes_sent,
            self.windows_partially_rejected,
            self.dropped.total(),
            self.dropped.queue_full,
            self.dropped.rejected,
            self.dropped.retries_exhausted,
            self.dropped.at_shutdown,
            self.dropped.unreadable,
            self.queued,
            self.in_spool,
            self.failed_attempts,
        )?;
        if let Some(e) = &self.last_error {
            write!(f, "; last error: {e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_every_counter() {
        let c = Counters::default();
        Counters::add(&c.offered, 5);
        Counters::add(&c.sent, 2);
        Counters::add(&c.dropped_queue_full, 1);
        Counters::add(&c.dropped_rejected, 1);
        c.set_last_error("HTTP 503".into());
        let s = c.snapshot(1, false, 0);
        assert_eq!((s.windows_offered, s.windows_sent, s.dropped.total(), s.queued), (5, 2, 2, 1));
        assert!(s.to_string().contains("last error: HTTP 503"), "{s}");
    }
}
