//! The bounded queue between the sampler and the worker that pushes.
//!
//! The sampler must never wait on the network, so [`WindowQueue::offer`] never blocks: it
//! takes a lock held only for a push or a pop (never across I/O), and when the queue is full
//! (too many windows, or too many bytes) it evicts the oldest window and hands it back, so the
//! caller can spool it or count it as dropped. The newest window is kept because a fleet
//! looks at what happens now; an old window that could not be sent in time is the one to lose.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::window::Window;

/// A FIFO of windows bounded by count and by bytes.
#[derive(Debug)]
pub struct WindowQueue {
    inner: Mutex<Inner>,
    max_windows: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Inner {
    windows: VecDeque<Window>,
    bytes: usize,
    /// A window was taken to be sent and its outcome is not known yet. Kept under the same
    /// lock as the windows, so that "nothing queued and nothing in flight" is one fact.
    in_flight: bool,
}

/// What [`WindowQueue::offer`] did.
#[derive(Debug)]
#[must_use]
pub enum Offered {
    /// The window is queued, and nothing was evicted.
    Queued,
    /// The window is queued, and these older windows were evicted to make room (oldest
    /// first); the caller spools or drops them.
    Evicted(Vec<Window>),
    /// The window alone is larger than the queue's byte bound; it was not queued.
    TooLarge(Window),
}

impl WindowQueue {
    /// A queue of at most `max_windows` windows (at least 1) and `max_bytes` bytes.
    pub fn new(max_windows: usize, max_bytes: usize) -> Self {
        WindowQueue { inner: Mutex::default(), max_windows: max_windows.max(1), max_bytes }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The lock guards only a VecDeque and a byte count kept consistent before any call
        // that could panic, so a poisoned lock still holds a good queue.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `window` at the back, evicting from the front what it must. Never blocks on
    /// anything but the short lock.
    pub fn offer(&self, window: Window) -> Offered {
        let size = window.size_bytes();
        if size > self.max_bytes {
            return Offered::TooLarge(window);
        }
        let mut inner = self.lock();
        let mut evicted = Vec::new();
        while inner.windows.len() >= self.max_windows || inner.bytes + size > self.max_bytes {
            let Some(old) = inner.windows.pop_front() else { break };
            inner.bytes -= old.size_bytes();
            evicted.push(old);
        }
        inner.bytes += size;
        inner.windows.push_back(window);
        if evicted.is_empty() { Offered::Queued } else { Offered::Evicted(evicted) }
    }

    /// The oldest window, if any.
    pub fn pop(&self) -> Option<Window> {
        let mut inner = self.lock();
        let window = inner.windows.pop_front()?;
        inner.bytes -= window.size_bytes();
        Some(window)
    }

    /// The oldest window, marked in flight until [`landed`](WindowQueue::landed) is called.
    pub fn take(&self) -> Option<Window> {
        let mut inner = self.lock();
        let window = inner.windows.pop_front()?;
        inner.bytes -= window.size_bytes();
        inner.in_flight = true;
        Some(window)
    }

    /// The window [`take`](WindowQueue::take) gave is sent, dropped or set aside.
    pub fn landed(&self) {
        self.lock().in_flight = false;
    }

    /// Whether a window taken is not landed yet.
    pub fn in_flight(&self) -> bool {
        self.lock().in_flight
    }

    /// Whether nothing is queued and nothing in flight.
    pub fn is_drained(&self) -> bool {
        let inner = self.lock();
        inner.windows.is_empty() && !inner.in_flight
    }

    /// Windows queued now.
    pub fn len(&self) -> usize {
        self.lock().windows.len()
    }

    /// Whether no window is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes queued now (as [`Window::size_bytes`] counts them).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowMeta;
    use proptest::prelude::*;
    use std::time::UNIX_EPOCH;

    fn window(n: u8, len: usize) -> Window {
        Window::new(vec![n; len], WindowMeta::new(UNIX_EPOCH, UNIX_EPOCH, "e", "s"))
    }

    #[test]
    fn a_full_queue_evicts_the_oldest() {
        let q = WindowQueue::new(2, usize::MAX);
        assert!(matches!(q.offer(window(1, 1)), Offered::Queued));
        assert!(matches!(q.offer(window(2, 1)), Offered::Queued));
        match q.offer(window(3, 1)) {
            Offered::Evicted(old) => assert_eq!(old[0].profile[0], 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(q.pop().map(|w| w.profile[0]), Some(2));
        assert_eq!(q.pop().map(|w| w.profile[0]), Some(3));
        assert!(q.pop().is_none());
    }

    #[test]
    fn a_window_larger_than_the_queue_is_refused() {
        let q = WindowQueue::new(4, 100);
        assert!(matches!(q.offer(window(1, 1000)), Offered::TooLarge(_)));
        assert!(q.is_empty());
    }

    proptest! {
        /// Whatever is offered and popped, the bounds hold, order is FIFO, and every window
        /// offered is accounted for: popped, evicted, refused or still queued.
        #[test]
        fn bounds_order_and_accounting(ops in proptest::collection::vec((any::<bool>(), 0usize..3000), 1..200)) {
            let max_windows = 5;
            let meta_size = window(0, 0).size_bytes();
            let max_bytes = 4 * (2000 + meta_size);
            let q = WindowQueue::new(max_windows, max_bytes);
            let (mut offered, mut out, mut popped) = (0u64, Vec::<u64>::new(), Vec::<u64>::new());
            let mut id = 0u64;
            for (is_offer, len) in ops {
                if is_offer {
                    id += 1;
                    offered += 1;
                    let mut w = window(0, len);
                    w.meta.event = id.to_string();
                    match q.offer(w) {
                        Offered::Queued => {}
                        Offered::Evicted(old) => out.extend(old.iter().map(|w| w.meta.event.parse::<u64>().unwrap())),
                        Offered::TooLarge(w) => out.push(w.meta.event.parse().unwrap()),
                    }
                } else if let Some(w) = q.pop() {
                    let id: u64 = w.meta.event.parse().unwrap();
                    prop_assert!(popped.last().is_none_or(|&last| last < id), "not FIFO");
                    popped.push(id);
                }
                prop_assert!(q.len() <= max_windows);
                prop_assert!(q.bytes() <= max_bytes);
            }
            while let Some(w) = q.pop() {
                popped.push(w.meta.event.parse().unwrap());
            }
            out.extend(&popped);
            prop_assert_eq!(out.len() as u64, offered);
            let mut sorted = out.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len() as u64, offered);
        }
    }
}
