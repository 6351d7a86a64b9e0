//! Waiting for the end of the measured work: on the simulator, which runs it in this thread;
//! on a real host, a loop woken by the command's end, signals, the interval and the deadline.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use pmc::api;

use crate::cli::Options;
use crate::failure::Failure;
use crate::signals::{self, Interrupt};

use super::ending::{Ending, Wake};
use super::log_sink::LogSink;
use super::pmcs::Allocated;
use super::progress::Progress;
use super::targets::Targets;

/// FreeBSD's default printing interval.
const DEFAULT_INTERVAL: f64 = 5.0;

/// How often a log file gets what the driver holds, at the latest.
const LOG_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// On the simulator: the simulated machine runs in this thread, to the command's end. A signal
/// reaches it through the simulator, which then ends the command as the signal would.
pub(super) fn wait_simulated(
    rx: mpsc::Receiver<Wake>,
    child: Option<i32>,
) -> Result<Ending, Failure> {
    std::thread::spawn(move || {
        while let Ok(wake) = rx.recv() {
            if let Wake::Interrupted(interrupt) = wake {
                pmc::host::sim::interrupt(interrupt.signal);
            }
        }
    });
    Ok(match child {
        Some(pid) => Ending::Command(
            api::wait(pid).map_err(|e| Failure::pmc("waiting for the command", &e))?,
        ),
        None => Ending::Done,
    })
}

/// The command's end after it was asked to end (by a signal, or at the -l deadline).
fn command_end(rx: &mpsc::Receiver<Wake>) -> Result<Ending, Failure> {
    loop {
        match rx.recv() {
            Ok(Wake::CommandEnded(status)) => {
                let status = status.map_err(|e| Failure::pmc("waiting for the command", &e))?;
                return Ok(Ending::Command(status));
            }
            Ok(Wake::Interrupted(_)) => {}
            Err(_) => return Ok(Ending::Done),
        }
    }
}

/// On a real host: waits for the command's end, a signal, the `-l` deadline or the attached
/// processes' end, printing every interval and flushing the log file meanwhile.
pub(super) fn wait_for_end(
    o: &Options,
    (tx, rx): (mpsc::Sender<Wake>, mpsc::Receiver<Wake>),
    targets: &Targets,
    log: Option<&LogSink>,
    counting: &[&Allocated],
    progress: &mut Progress,
) -> Result<Ending, Failure> {
    let child = targets.child;
    if let Some(pid) = child {
        std::thread::spawn(move || {
            let status = api::wait(pid);
            signals::reaped();
            let _ = tx.send(Wake::CommandEnded(status));
        });
    }
    let interval = Duration::from_secs_f64(o.interval.unwrap_or(DEFAULT_INTERVAL));
    let deadline = o.duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    // Woken every interval only for something to do then: counts or a profile to print, a
    // deadline, or attached processes to look for (a launched command's end and signals
    // wake the loop themselves).
    let periodic = progress.print_counts
        || progress.live.is_some()
        || (child.is_none() && !targets.pids.is_empty());
    let mut next_print = Instant::now() + interval;
    // A log file gets what the driver holds at least every LOG_FLUSH_INTERVAL, not only
    // when a buffer fills (minutes at a low rate): a run that ends abruptly keeps its
    // samples. (Not a socket: a stalled receiver would hold this loop.)
    let flushing = matches!(log, Some(LogSink::File(_) | LogSink::Temporary(..)));
    let mut next_flush = flushing.then(|| Instant::now() + LOG_FLUSH_INTERVAL);
    let ending = loop {
        let wake_at =
            [(deadline.is_some() || periodic).then_some(next_print), deadline, next_flush]
                .into_iter()
                .flatten()
                .min();
        let timeout = match wake_at {
            Some(at) => at.saturating_duration_since(Instant::now()),
            None => Duration::MAX,
        };
        let woken = if timeout == Duration::MAX {
            rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(timeout)
        };
        match woken {
            Ok(Wake::CommandEnded(status)) => {
                break Ending::Command(
                    status.map_err(|e| Failure::pmc("waiting for the command", &e))?,
                );
            }
            Ok(Wake::Interrupted(interrupt)) => match child {
                Some(pid) => {
                    interrupt.forward_to(pid);
                    // The command's end may wait for the log's writes: a receiver that
                    // stopped reading must not hold it (module signals).
                    signals::shut_down_on_signal(log.and_then(LogSink::socket));
                    break command_end(&rx)?;
                }
                None => break Ending::Interrupted(interrupt),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) if child.is_some() => break Ending::Done,
            Err(_) => {}
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            if let Some(pid) = child {
                // As a SIGINT pmcstat was sent (a stopped command acts on it too).
                Interrupt { signal: libc::SIGINT, from_terminal: false }.forward_to(pid);
                break command_end(&rx)?;
            }
            break Ending::Done;
        }
        if next_flush.is_some_and(|at| Instant::now() >= at) {
            // An error stops the log; closing it at the end says why.
            let _ = api::flush_log();
            next_flush = Some(Instant::now() + LOG_FLUSH_INTERVAL);
        }
        if Instant::now() < next_print {
            continue;
        }
        next_print = Instant::now() + interval;
        if child.is_none()
            && !targets.pids.is_empty()
            && targets.pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        {
            break Ending::Done;
        }
        progress.write_interval(o, counting)?;
    };
    // A signal from now on ends pmcstat at once.
    drop(rx);
    Ok(ending)
}
