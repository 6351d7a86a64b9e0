//! The pusher: a bounded queue the sampler offers windows to, and one background thread that
//! owns a small tokio runtime and sends them, one at a time, with retries.
//!
//! The sampler's side ([`Pusher::offer`], [`Pusher::status`]) takes only short locks and
//! atomics: it never waits on the network, whatever the backend does. The worker's side owns
//! every socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::otlp::ConvertOptions;
use crate::queue::{Offered, WindowQueue};
use crate::retry::Backoff;
use crate::sink::{Connection, Delivered, SendError, Sink, SinkError};
use crate::spool::{Spool, SpoolConfig, SpoolError};
use crate::status::{Counters, Status};
use crate::target::Target;
use crate::window::Window;

/// What a [`Pusher`] sends where, and within which bounds.
#[derive(Clone, Debug)]
pub struct PusherConfig {
    /// The backend.
    pub target: Target,
    /// Credentials, headers, TLS and time limits.
    pub connection: Connection,
    /// How windows become OTLP (for the OTLP backends).
    pub convert: ConvertOptions,
    /// Windows the queue holds at most (default 6: a minute of 10 s windows).
    pub queue_windows: usize,
    /// Bytes the queue holds at most (default 64 MiB): with the spool's bound and one window in
    /// flight, this bounds the pusher's memory.
    pub queue_bytes: usize,
    /// Retries.
    pub backoff: Backoff,
    /// Where windows go when the queue is full or every attempt failed, instead of being
    /// dropped; `None` drops them (and counts them).
    pub spool: Option<SpoolConfig>,
}

impl PusherConfig {
    /// The defaults, for `target`.
    pub fn new(target: Target) -> Self {
        PusherConfig {
            target,
            connection: Connection::default(),
            convert: ConvertOptions::default(),
            queue_windows: 6,
            queue_bytes: 64 << 20,
            backoff: Backoff::default(),
            spool: None,
        }
    }
}

/// Why a pusher could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The backend's client could not be set up (URL, TLS, headers).
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The spool directory could not be opened.
    #[error(transparent)]
    Spool(#[from] SpoolError),
    /// The runtime or the worker thread could not be started.
    #[error("starting the pusher's thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Pushes windows to one backend in the background. See the crate documentation.
#[derive(Debug)]
pub struct Pusher {
    shared: Arc<Shared>,
    shutdown: watch::Sender<Option<Instant>>,
    worker: Option<JoinHandle<()>>,
    /// Told when the worker ends. In a mutex only to make the pusher `Sync` (the sampler may
    /// offer from any thread); only `stop`, which has `&mut self`, uses it.
    finished: Mutex<mpsc::Receiver<()>>,
}

/// What the sampler's side and the worker share.
#[derive(Debug)]
struct Shared {
    queue: WindowQueue,
    counters: Counters,
    /// Wakes the worker when a window is queued (a permit is kept if it is not waiting).
    wake: Notify,
    spool: Option<Spool>,
    /// Set once shutdown is asked for: from then on nothing more is spooled (the spool is
    /// emptied when the worker ends).
    stopping: AtomicBool,
    /// Signalled each time a window lands (sent, dropped or set aside): what
    /// [`Pusher::flush`] waits on. The worker takes the lock to signal, so a flush that
    /// checked and is about to wait cannot miss it.
    landed: (Mutex<()>, Condvar),
}

impl Shared {
    /// Nothing queued, in flight or spooled.
    fn is_drained(&self) -> bool {
        self.queue.is_drained() && self.spooled_now() == 0
    }

    fn signal_landed(&self) {
        let _guard = self.landed.0.lock().unwrap_or_else(|e| e.into_inner());
        self.landed.1.notify_all();
    }

    /// A window that will not be sent now: into the spool if there is room, else dropped and
    /// counted under `cause`.
    fn set_aside(&self, window: Window, cause: &AtomicU64) {
        if let Some(spool) = self.spool.as_ref().filter(|_| !self.stopping.load(Ordering::Acquire))
        {
            match spool.put(&window) {
                Ok(()) => {
                    Counters::add(&self.counters.spooled, 1);
                    return;
                }
                Err(e) => self.counters.set_last_error(format!("spool: {e}")),
            }
        }
        Counters::add(cause, 1);
    }

    fn spooled_now(&self) -> usize {
        self.spool.as_ref().map_or(0, Spool::len)
    }
}

impl Pusher {
    /// Starts the worker thread. Fails only on configuration (URL, TLS, headers, spool
    /// directory); a backend that is down is not an error: windows wait and are retried.
    pub fn start(config: PusherConfig) -> Result<Pusher, StartError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StartError::Thread)?;
        let sink = {
            // The gRPC channels spawn their connection task on the runtime they are made in.
            let _guard = runtime.enter();
            Sink::new(&config.target, &config.connection, config.convert)?
        };
        let spool = config.spool.as_ref().map(Spool::open).transpose()?;
        let shared = Arc::new(Shared {
            queue: WindowQueue::new(config.queue_windows, config.queue_bytes),
            counters: Counters::default(),
            wake: Notify::new(),
            spool,
            stopping: AtomicBool::new(false),
            landed: (Mutex::new(()), Condvar::new()),
        });
        let (shutdown, shutdown_rx) = watch::channel(None);
        let (finished_tx, finished) = mpsc::channel();
        let worker_shared = Arc::clone(&shared);
        let backoff = config.backoff;
        let worker = std::thread::Builder::new()
            .name("pmcpush".into())
            .spawn(move || {
                runtime.block_on(
                    Worker { shared: worker_shared, sink, backoff, shutdown: shutdown_rx }.run(),
                );
                // The receiver may be gone (the pusher was dropped): nothing to tell then.
                let _ = finished_tx.send(());
            })
            .map_err(StartError::Thread)?;
        Ok(Pusher { shared, shutdown, worker: Some(worker), finished: Mutex::new(finished) })
    }

    /// Queues a window to be sent. Never blocks on the network: when the queue is full, the
    /// oldest queued window is spooled or dropped (and counted) to make room. Returns whether
    /// this window was queued (false only when it alone is larger than the queue's byte bound:
    /// then it is spooled or dropped).
    pub fn offer(&self, window: Window) -> bool {
        let shared = &self.shared;
        Counters::add(&shared.counters.offered, 1);
        let queued = match shared.queue.offer(window) {
            Offered::Queued => true,
            Offered::Evicted(old) => {
                for window in old {
                    shared.set_aside(window, &shared.counters.dropped_queue_full);
                }
                true
            }
            Offered::TooLarge(window) => {
                shared.set_aside(window, &shared.counters.dropped_queue_full);
                false
            }
        };
        shared.wake.notify_one();
        queued
    }

    /// Waits until every window offered so far has landed: sent or dropped, nothing queued,
    /// in flight or spooled. Gives up after `timeout`; returns whether it got there.
    ///
    /// A replay (`pmcstat -R`) makes windows faster than real time; calling `flush` after each
    /// offer turns the queue into a hand-off, so no window is dropped for want of room. A live
    /// sampler does not call it.
    pub fn flush(&self, timeout: Duration) -> bool {
        let shared = &self.shared;
        let deadline = std::time::Instant::now() + timeout;
        let mut guard = shared.landed.0.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if shared.is_drained() {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            guard = shared
                .landed
                .1
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// What the pusher did so far. Never waits on the worker.
    pub fn status(&self) -> Status {
        let queue = &self.shared.queue;
        self.shared.counters.snapshot(queue.len(), queue.in_flight(), self.shared.spooled_now())
    }

    /// Sends what is queued (the last window included) until `deadline` from now, then stops
    /// the worker: what is still queued or spooled then is dropped and counted as
    /// `at_shutdown`. Returns the final status. Waits at most `deadline` plus one second (the
    /// worker is left to end by itself if a request outlives that).
    pub fn shutdown(mut self, deadline: Duration) -> Status {
        self.stop(deadline);
        self.status()
    }

    fn stop(&mut self, deadline: Duration) {
        let Some(worker) = self.worker.take() else { return };
        // A deadline too far to be represented is no deadline worth waiting for.
        let at = Instant::now()
            .checked_add(deadline)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        self.shared.stopping.store(true, Ordering::Release);
        self.shutdown.send_replace(Some(at));
        self.shared.wake.notify_one();
        let finished = self.finished.get_mut().unwrap_or_else(|e| e.into_inner());
        if finished.recv_timeout(deadline + Duration::from_secs(1)).is_ok() {
            // The worker has finished; joining only collects it (a panic in it was already
            // counted as nothing sent, so its payload is not needed).
            let _ = worker.join();
        }
    }
}

impl Drop for Pusher {
    /// Dropping a pusher stops it without waiting for the backend: what is queued or spooled
    /// is dropped and counted.
    fn drop(&mut self) {
        self.stop(Duration::ZERO);
    }
}

/// The background side: takes windows from the queue (or the spool) and sends them.
struct Worker {
    shared: Arc<Shared>,
    sink: Sink,
    backoff: Backoff,
    shutdown: watch::Receiver<Option<Instant>>,
}

/// How one window ended. The run loop counts it, after the window left the queue or spool
/// and "in flight", so that a status taken meanwhile never sees it in two places.
enum Outcome {
    /// Sent, with what the backend said.
    Sent(Delivered),
    /// Not sent and handed back: spooled, or dropped for this cause.
    Failed(Window, Failure),
    /// Refused for good (or unreadable): dropped for this cause.
    Dropped(Refusal),
}

#[derive(Clone, Copy)]
enum Refusal {
    Rejected,
    Unreadable,
}

#[derive(Clone, Copy)]
enum Failure {
    RetriesExhausted,
    AtShutdown,
}

impl Worker {
    fn deadline(&self) -> Option<Instant> {
        *self.shutdown.borrow()
    }

    async fn run(mut self) {
        loop {
            let (window, spooled) = match self.shared.queue.take() {
                Some(w) => (w, None),
                None => match self.next_spooled() {
                    Some((id, w)) => (w, Some(id)),
                    None if self.deadline().is_some() => break,
                    None => {
                        self.wait_for_work().await;
                        continue;
                    }
                },
            };
            let outcome = self.deliver(window).await;
            let counters = &self.shared.counters;
            let landed = !matches!(outcome, Outcome::Failed(..));
            match (outcome, spooled) {
                (Outcome::Sent(delivered), _) => {
                    Counters::add(&counters.sent, 1);
                    Counters::add(&counters.bytes_sent, delivered.bytes);
                    if let Some(said) = delivered.partial_rejection {
                        Counters::add(&counters.partially_rejected, 1);
                        counters.set_last_error(format!("{}: {said}", self.sink.backend()));
                    }
                }
                (Outcome::Dropped(Refusal::Rejected), _) => {
                    Counters::add(&counters.dropped_rejected, 1);
                }
                (Outcome::Dropped(Refusal::Unreadable), _) => {
                    Counters::add(&counters.dropped_unreadable, 1);
                }
                (Outcome::Failed(..), Some(_)) => {
                    // Still in the spool, where it stays until the backend is back: wait
                    // before the next try, so a dead backend costs one attempt per interval.
                    if self.deadline().is_some() {
                        break;
                    }
                    self.pause(self.backoff.max).await;
                }
                (Outcome::Failed(window, failure), None) => {
                    let cause = match failure {
                        Failure::RetriesExhausted => &counters.dropped_retries_exhausted,
                        Failure::AtShutdown => &counters.dropped_at_shutdown,
                    };
                    self.shared.set_aside(window, cause);
                }
            }
            // Only now, with the window counted or spooled, does it leave the queue's "in
            // flight" or the spool: a flush that sees both drained sees the outcome too.
            match (spooled, &self.shared.spool) {
                (None, _) => self.shared.queue.landed(),
                (Some(id), Some(spool)) if landed => spool.remove(id),
                (Some(_), _) => {}
            }
            self.shared.signal_landed();
        }
        let at_shutdown = &self.shared.counters.dropped_at_shutdown;
        while self.shared.queue.pop().is_some() {
            Counters::add(at_shutdown, 1);
        }
        if let Some(spool) = &self.shared.spool {
            Counters::add(at_shutdown, spool.clear());
        }
        self.shared.signal_landed();
    }

    fn next_spooled(&self) -> Option<(u64, Window)> {
        let spool = self.shared.spool.as_ref()?;
        let (id, window) = spool.oldest()?;
        Counters::add(&self.shared.counters.unspooled, 1);
        Some((id, window))
    }

    /// Until a window is queued or shutdown is asked for.
    async fn wait_for_work(&mut self) {
        let shared = Arc::clone(&self.shared);
        tokio::select! {
            () = shared.wake.notified() => {}
            _ = self.shutdown.changed() => {}
        }
    }

    /// Sleeps `delay`, or less if a window is queued or shutdown is asked for meanwhile.
    async fn pause(&mut self, delay: Duration) {
        if self.deadline().is_some() {
            return;
        }
        let shared = Arc::clone(&self.shared);
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shared.wake.notified() => {}
            _ = self.shutdown.changed() => {}
        }
    }

    /// Sends one window, retrying what may be retried, until it is sent, refused, out of
    /// attempts, or the shutdown deadline passes.
    async fn deliver(&mut self, window: Window) -> Outcome {
        // The counters are shared, not the worker's: a handle of their own leaves `self` free.
        let shared = Arc::clone(&self.shared);
        let counters = &shared.counters;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let Some(result) = self.attempt(&window).await else {
                return Outcome::Failed(window, Failure::AtShutdown);
            };
            let error = match result {
                Ok(delivered) => return Outcome::Sent(delivered),
                Err(error) => error,
            };
            Counters::add(&counters.failed_attempts, 1);
            counters.set_last_error(format!("{}: {error}", self.sink.backend()));
            match error {
                SendError::Rejected(_) => return Outcome::Dropped(Refusal::Rejected),
                SendError::Unreadable(_) => return Outcome::Dropped(Refusal::Unreadable),
                SendError::Retryable(_) if !self.backoff.may_retry(attempts) => {
                    return Outcome::Failed(window, Failure::RetriesExhausted);
                }
                SendError::Retryable(_) => {}
            }
            let delay = self.backoff.delay(attempts - 1, &mut rand::rng());
            match self.deadline() {
                Some(deadline) if Instant::now() + delay >= deadline => {
                    return Outcome::Failed(window, Failure::AtShutdown);
                }
                Some(_) => tokio::time::sleep(delay).await,
                None => {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        // Shutdown asked for: retry now, then within the deadline.
                        _ = self.shutdown.changed() => {}
                    }
                }
            }
        }
    }

    /// One attempt; `None` when the shutdown deadline passed first. A shutdown asked for
    /// during the attempt bounds it by the deadline from then on.
    async fn attempt(&mut self, window: &Window) -> Option<Result<Delivered, SendError>> {
        let send = self.sink.send(window);
        tokio::pin!(send);
        if self.shutdown.borrow().is_none() {
            tokio::select! {
                result = &mut send => return Some(result),
                _ = self.shutdown.changed() => {}
            }
        }
        let deadline = *self.shutdown.borrow();
        match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, send).await.ok(),
            // The pusher is gone without a deadline (it cannot be: `stop` sets one first).
            None => Some(send.await),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pusher_can_be_shared_with_the_sampling_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Pusher>();
    }
}
