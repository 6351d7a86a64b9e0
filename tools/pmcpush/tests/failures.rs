//! What a fleet needs when the backend misbehaves: the backend down, slow, restarting,
//! refusing (4xx) or failing (5xx); shutdown flushing the last windows or giving up at its
//! deadline; the spool keeping windows through an outage. Nothing blocks the sampler, every
//! drop is counted, the pusher recovers.
//!
//! No assertion is on time: receivers stall on a gate the test opens, and waits are hang
//! guards far beyond what loopback takes.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use pmcpush::{Backend, Pusher, PusherConfig, SpoolConfig, Status, Target, Window};

/// Offers `windows` from another thread, as the sampler would, and fails (instead of hanging)
/// if an offer blocks.
fn offer_from_sampler(pusher: &Arc<Pusher>, windows: Vec<Window>) -> Vec<bool> {
    let (tx, rx) = mpsc::channel();
    let pusher = Arc::clone(pusher);
    std::thread::spawn(move || {
        let queued: Vec<bool> = windows.into_iter().map(|w| pusher.offer(w)).collect();
        // The handle goes before the answer, so the test owns the only one once answered.
        drop(pusher);
        let _ = tx.send(queued);
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("an offer blocked")
}

fn start(config: PusherConfig) -> Arc<Pusher> {
    Arc::new(Pusher::start(config).unwrap())
}

fn shutdown(pusher: Arc<Pusher>, deadline: Duration) -> Status {
    Arc::try_unwrap(pusher).expect("the only handle").shutdown(deadline)
}

/// Every window offered is sent, dropped, queued or spooled: none is lost silently.
fn assert_accounted(status: &Status) {
    assert_eq!(
        status.windows_offered,
        status.windows_sent
            + status.dropped.total()
            + status.queued
            + status.in_spool
            + status.in_flight,
        "{status}"
    );
}

#[test]
fn a_slow_backend_never_blocks_offers_and_the_queue_drops_the_oldest_counted() {
    let receiver = http_receiver(0, "/ingest");
    receiver.script.push(&[Answer::Stall]);
    let mut config = quick_config(Target::new(Backend::Pyroscope, &receiver.url()));
    config.queue_windows = 2;
    config.connection.request_timeout = Duration::from_secs(120);
    let pusher = start(config);
    assert_eq!(offer_from_sampler(&pusher, vec![window(0)]), [true]);
    // The worker is now inside a request the receiver holds.
    wait_until("the first request", || receiver.script.requests_seen.load(Ordering::SeqCst) == 1);
    let queued = offer_from_sampler(&pusher, (1..=5).map(window).collect());
    assert_eq!(queued, [true; 5]);
    let status = pusher.status();
    assert_eq!(
        (status.in_flight, status.queued, status.dropped.queue_full, status.windows_sent),
        (1, 2, 3, 0),
        "{status}"
    );
    assert_accounted(&status);

    receiver.script.release();
    wait_until("the held window and the queue sent", || pusher.status().windows_sent == 3);
    let status = shutdown(pusher, Duration::from_secs(30));
    assert_accounted(&status);
    // The newest windows were kept: the held one (0) and the last two (4, 5).
    let froms: Vec<String> = receiver
        .received
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.param("from").unwrap().to_owned())
        .collect();
    let from =
        |n| window_start(n).duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().to_string();
    assert_eq!(froms, [from(0), from(4), from(5)]);
}

#[test]
fn a_request_that_outlives_its_timeout_is_retried() {
    let receiver = otlp_grpc_receiver(0);
    receiver.script.push(&[Answer::Stall]);
    let mut config = quick_config(Target::new(Backend::OtlpGrpc, &receiver.url()));
    config.connection.request_timeout = Duration::from_millis(300);
    let pusher = start(config);
    offer_from_sampler(&pusher, vec![window(0)]);
    wait_until("the retry to be taken", || pusher.status().windows_sent == 1);
    let status = shutdown(pusher, Duration::from_secs(30));
    assert_eq!((status.failed_attempts, status.dropped.total()), (1, 0), "{status}");
    assert!(status.last_error.as_deref().unwrap_or("").contains("otlp-grpc"), "{status}");
    assert_eq!(receiver.script.requests_seen.load(Ordering::SeqCst), 2);
    // The stalled request never completed; its gate is still shut.
    receiver.script.release();
}

#[test]
fn a_backend_down_drops_counted_windows_then_one_that_comes_up_gets_them() {
    let port = free_port();
    let mut config =
        quick_config(Target::new(Backend::OtlpGrpc, &format!("http://127.0.0.1:{port}")));
    config.queue_windows = 2;
    let pusher = start(config);
    assert_eq!(offer_from_sampler(&pusher, (0..6).map(window).collect()), [true; 6]);
    wait_until("every window to be given up", || pusher.status().dropped.total() == 6);
    let status = pusher.status();
    assert_eq!(status.dropped.queue_full + status.dropped.retries_exhausted, 6, "{status}");
    assert!(status.dropped.retries_exhausted >= 1, "{status}");
    // Three attempts for each window that was tried.
    assert_eq!(status.failed_attempts, 3 * status.dropped.retries_exhausted, "{status}");
    assert!(status.last_error.is_some());

    let receiver = otlp_grpc_receiver(port);
    offer_from_sampler(&pusher, vec![window(6)]);
    wait_until("the window after the backend came up", || pusher.status().windows_sent == 1);
    let status = shutdown(pusher, Duration::from_secs(30));
    assert_accounted(&status);
    assert_eq!(summarize(&receiver.received.lock().unwrap()[0].message), expected_summary(6));
}

/// A backend that restarts between two windows: the window sent while it is down is retried
/// until it is back (gRPC reconnects, HTTP opens a new connection).
#[test]
fn grpc_and_http_pushers_survive_a_backend_restart() {
    for backend in [Backend::OtlpGrpc, Backend::Pyroscope] {
        let port = free_port();
        let stop_first: Box<dyn FnOnce()> = match backend {
            Backend::OtlpGrpc => {
                let r = otlp_grpc_receiver(port);
                Box::new(move || r.stop())
            }
            _ => {
                let r = http_receiver(port, "/ingest");
                Box::new(move || r.stop())
            }
        };
        let url = format!("http://127.0.0.1:{port}");
        let mut config = quick_config(Target::new(backend, &url));
        // Enough attempts to outlast the restart whatever the machine's load.
        config.backoff.max_attempts = 1000;
        let pusher = start(config);
        offer_from_sampler(&pusher, vec![window(0)]);
        wait_until("the first window", || pusher.status().windows_sent == 1);
        stop_first();
        offer_from_sampler(&pusher, vec![window(1)]);
        wait_until("a failed attempt while down", || pusher.status().failed_attempts >= 1);
        let received_after = match backend {
            Backend::OtlpGrpc => {
                let r = otlp_grpc_receiver(port);
                wait_until("the window after the restart", || pusher.status().windows_sent == 2);
                summarize(&r.received.lock().unwrap()[0].message).times[0].0
            }
            _ => {
                let r = http_receiver(port, "/ingest");
                wait_until("the window after the restart", || pusher.status().windows_sent == 2);
                r.received.lock().unwrap()[0].param("from").unwrap().parse::<u64>().unwrap()
                    * 1_000_000_000
            }
        };
        let status = shutdown(pusher, Duration::from_secs(30));
        assert_eq!(status.dropped.total(), 0, "{backend}: {status}");
        let start =
            window_start(1).duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        assert_eq!(received_after, start, "{backend}");
    }
}

/// The receiver refuses the first window: it is dropped, counted as rejected, not tried again,
/// and the next window is sent.
fn refused_once(backend: Backend, url: &str, script: &Script) {
    script.push(&[Answer::Status(400)]);
    let pusher = start(quick_config(Target::new(backend, url)));
    offer_from_sampler(&pusher, vec![window(0), window(1)]);
    wait_until("both windows done", || {
        let s = pusher.status();
        s.windows_sent + s.dropped.total() == 2
    });
    let status = shutdown(pusher, Duration::from_secs(30));
    assert_eq!(
        (status.windows_sent, status.dropped.rejected, status.failed_attempts),
        (1, 1, 1),
        "{backend}: {status}"
    );
    assert_eq!(script.requests_seen.load(Ordering::SeqCst), 2, "{backend}: no retry");
    let error = status.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("400") || error.contains("InvalidArgument"), "{backend}: {error}");
}

#[test]
fn an_http_4xx_is_dropped_counted_and_not_retried() {
    let receiver = http_receiver(0, "/ingest");
    refused_once(Backend::Pyroscope, &receiver.url(), &receiver.script);
}

#[test]
fn a_grpc_invalid_argument_is_dropped_counted_and_not_retried() {
    let receiver = parca_receiver(0);
    refused_once(Backend::Parca, &receiver.url(), &receiver.script);
}

#[test]
fn server_errors_are_retried_until_the_attempts_run_out() {
    let receiver = http_receiver(0, "/v1development/profiles");
    // Window 0: 503, 500, then taken on the third attempt. Window 1: three 503s, given up.
    receiver.script.push(&[
        Answer::Status(503),
        Answer::Status(500),
        Answer::Accept,
        Answer::Status(503),
        Answer::Status(503),
        Answer::Status(503),
    ]);
    let pusher = start(quick_config(Target::new(Backend::OtlpHttp, &receiver.url())));
    offer_from_sampler(&pusher, vec![window(0)]);
    wait_until("window 0", || pusher.status().windows_sent == 1);
    offer_from_sampler(&pusher, vec![window(1)]);
    wait_until("window 1 given up", || pusher.status().dropped.retries_exhausted == 1);
    // The pusher goes on: window 2 is taken.
    offer_from_sampler(&pusher, vec![window(2)]);
    wait_until("window 2", || pusher.status().windows_sent == 2);
    let status = shutdown(pusher, Duration::from_secs(30));
    assert_eq!((status.failed_attempts, status.dropped.total()), (5, 1), "{status}");
    assert!(status.last_error.as_deref().unwrap_or_default().contains("503"), "{status}");
    assert_eq!(receiver.script.requests_seen.load(Ordering::SeqCst), 7);
    assert_accounted(&status);
}

#[test]
fn shutdown_flushes_the_queued_windows_the_last_one_included() {
    let receiver = parca_receiver(0);
    receiver.script.push(&[Answer::Stall]);
    let pusher = start(quick_config(Target::new(Backend::Parca, &receiver.url())));
    offer_from_sampler(&pusher, (0..3).map(window).collect());
    wait_until("the first request", || receiver.script.requests_seen.load(Ordering::SeqCst) == 1);
    // Shutdown starts while window 0 is held and 1, 2 are queued; the receiver then lets go.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(shutdown(pusher, Duration::from_secs(60))).unwrap());
    receiver.script.release();
    let status = rx.recv_timeout(Duration::from_secs(90)).expect("shutdown returns");
    assert_eq!((status.windows_sent, status.dropped.total(), status.queued), (3, 0, 0), "{status}");
    assert_eq!(receiver.count(), 3);
}

#[test]
fn shutdown_gives_up_at_its_deadline_and_counts_what_it_drops() {
    let receiver = otlp_grpc_receiver(0);
    receiver.script.push(&[Answer::Stall]);
    let mut config = quick_config(Target::new(Backend::OtlpGrpc, &receiver.url()));
    config.connection.request_timeout = Duration::from_secs(120);
    let pusher = start(config);
    offer_from_sampler(&pusher, (0..3).map(window).collect());
    wait_until("the first request", || receiver.script.requests_seen.load(Ordering::SeqCst) == 1);
    // The receiver never answers: the deadline ends the held request and drops the queue.
    let status = shutdown(pusher, Duration::from_millis(200));
    assert_eq!((status.windows_sent, status.dropped.at_shutdown), (0, 3), "{status}");
    assert_accounted(&status);
    receiver.script.release();
}

#[test]
fn the_spool_keeps_windows_through_an_outage_and_touches_nothing_else() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let spool_dir = dir.path().join("spool");
    std::fs::create_dir(&spool_dir).unwrap();
    let theirs = spool_dir.join("pmcpush-1-1-0000000000000000.window");
    std::fs::write(&theirs, b"someone else's").unwrap();
    let mut config = quick_config(Target::new(Backend::Parca, &format!("http://127.0.0.1:{port}")));
    config.queue_windows = 1;
    config.backoff.max_attempts = 2;
    config.spool =
        Some(SpoolConfig { dir: spool_dir.clone(), max_windows: 10, max_bytes: 1 << 20 });
    let pusher = start(config);
    offer_from_sampler(&pusher, (0..4).map(window).collect());
    wait_until("every window in the spool, none in flight", || {
        let status = pusher.status();
        status.in_spool == 4 && status.in_flight == 0
    });
    let status = pusher.status();
    assert_eq!((status.dropped.total(), status.windows_sent), (0, 0), "{status}");
    assert_accounted(&status);

    let receiver = parca_receiver(port);
    wait_until("the spooled windows sent", || pusher.status().windows_sent == 4);
    let status = shutdown(pusher, Duration::from_secs(30));
    assert_eq!((status.dropped.total(), status.in_spool), (0, 0), "{status}");
    assert!(status.windows_unspooled >= 4, "{status}");
    let received = receiver.received.lock().unwrap();
    assert_eq!(received.len(), 4, "each spooled window sent once");
    for request in received.iter() {
        assert_eq!(request.message.series[0].samples[0].raw_profile, sample_pprof());
    }
    // Only the other file is left: the spool removed its own, and only those.
    let left: Vec<_> = std::fs::read_dir(&spool_dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(left, std::slice::from_ref(&theirs));
    assert_eq!(std::fs::read(&theirs).unwrap(), b"someone else's");
}

#[test]
fn a_replay_that_flushes_after_each_offer_loses_no_window() {
    let receiver = parca_receiver(0);
    let mut config = quick_config(Target::new(Backend::Parca, &receiver.url()));
    // One window of room: without flush, a replay faster than the backend would drop.
    config.queue_windows = 1;
    let pusher = start(config);
    for n in 0..20 {
        assert_eq!(offer_from_sampler(&pusher, vec![window(n)]), [true]);
        assert!(pusher.flush(Duration::from_secs(30)), "window {n} landed");
        assert_eq!(pusher.status().windows_sent, n + 1);
    }
    let status = shutdown(pusher, Duration::from_secs(30));
    assert_eq!((status.windows_sent, status.dropped.total()), (20, 0), "{status}");
    assert_eq!(receiver.count(), 20);
}

#[test]
fn flush_says_so_when_windows_are_still_waiting() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut config = quick_config(Target::new(Backend::Parca, &format!("http://127.0.0.1:{port}")));
    config.backoff.max_attempts = 1;
    config.spool =
        Some(SpoolConfig { dir: dir.path().join("spool"), max_windows: 4, max_bytes: 1 << 20 });
    let pusher = start(config);
    offer_from_sampler(&pusher, vec![window(0)]);
    // The backend is down: the window ends in the spool, never sent.
    assert!(!pusher.flush(Duration::from_millis(300)));
    wait_until("the window in the spool", || pusher.status().in_spool == 1);
    let status = shutdown(pusher, Duration::from_millis(100));
    assert_eq!(
        (status.windows_sent, status.dropped.at_shutdown, status.in_spool),
        (0, 1, 0),
        "{status}"
    );
}
