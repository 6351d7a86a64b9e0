//! SIGINT, SIGTERM and SIGHUP during a measurement: the first one ends the measurement cleanly
//! (the measurement loop hears of it and stops, prints, closes the log); a second one ends
//! pmcstat at once, as the signal's default action would — after it wrote out and closed the
//! log ([`finish_log_at_once`]) and killed the launched command ([`launched`]), which would
//! otherwise run on unmeasured (one that ignores the signal, or is stopped).
//!
//! The signals are caught by a thread that sleeps until one arrives (no periodic wake-up).
//!
//! Once the run ends (the command ended, or a first signal asked it to end), a log sent over
//! the network (`-O host:port`) may be stuck on a receiver that stopped reading: a signal then
//! stops that wait ([`shut_down_on_signal`]) instead of ending pmcstat, so that pmcstat still
//! finishes at once with its counts and the command's status (later signals are ignored then).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::Sender;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::low_level::siginfo::Cause;

use crate::failure::{Failure, io_failure};

/// The signals that end a measurement.
pub const ENDING_SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// A signal that asks the measurement to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupt {
    /// The signal number.
    pub signal: i32,
    /// Whether the kernel sent it (the terminal's ^C, ^\ or hang-up): then it went to the whole
    /// foreground process group, the launched command included, and is not sent again.
    pub from_terminal: bool,
}

impl Interrupt {
    /// pmcstat's exit status when the signal ended a measurement without a command: 128 + the
    /// signal, as a shell reports a process the signal killed.
    pub fn exit_status(&self) -> i32 {
        128 + self.signal
    }

    /// Passes the signal on to the launched command `pid`, unless the terminal already sent it
    /// to the command's process group; then continues the command, so that a stopped command
    /// (SIGSTOP, ^Z) acts on the signal now rather than at a SIGCONT that may never come.
    pub fn forward_to(&self, pid: i32) {
        // SAFETY: kill(2) of a child this process launched (and has not reaped); no memory is
        // involved.
        unsafe {
            if !self.from_terminal {
                libc::kill(pid, self.signal);
            }
            libc::kill(pid, libc::SIGCONT);
        }
    }
}

/// Catches [`ENDING_SIGNALS`] from now on: the first one is sent to `to` as `wrap(interrupt)`;
/// a second one, or any once the receiver of `to` is gone (the measurement is over), ends
/// pmcstat at once with the signal's default action.
pub fn catch<T: Send + 'static>(to: Sender<T>, wrap: fn(Interrupt) -> T) -> Result<(), Failure> {
    let mut signals = SignalsInfo::<WithOrigin>::new(ENDING_SIGNALS)
        .map_err(|e| io_failure("cannot catch SIGINT, SIGTERM and SIGHUP", &e))?;
    std::thread::Builder::new()
        .name("pmcstat-signals".into())
        .spawn(move || {
            let mut delivered = false;
            for origin in signals.forever() {
                let socket = SOCKET_TO_SHUT.swap(-1, Ordering::SeqCst);
                if socket >= 0 {
                    // SAFETY: shutdown(2) of a socket the run keeps open until it has taken
                    // it back from SOCKET_TO_SHUT; no memory is involved.
                    unsafe { libc::shutdown(socket, libc::SHUT_RDWR) };
                    SOCKET_SHUT.store(true, Ordering::SeqCst);
                    continue;
                }
                if SOCKET_SHUT.load(Ordering::SeqCst) {
                    // Nothing is left to wait for: the run ends at once by itself, with the
                    // command's status, which ending pmcstat here would lose.
                    continue;
                }
                let from_terminal = origin.cause == Cause::Kernel;
                let interrupt = Interrupt { signal: origin.signal, from_terminal };
                if delivered || to.send(wrap(interrupt)).is_err() {
                    end_now(origin.signal);
                }
                delivered = true;
            }
        })
        .map_err(|e| io_failure("cannot start the signal thread", &e))?;
    Ok(())
}

/// Set when a signal ends pmcstat at once: the run must not end first by itself (the
/// command killed here would let it), with another status ([`hold_if_ending_at_once`]).
static ENDING_AT_ONCE: AtomicBool = AtomicBool::new(false);

/// Waits for ever if a signal is ending pmcstat at once: the signal thread ends the process as
/// the signal would, and a status returned here must not win the race.
pub fn hold_if_ending_at_once() {
    while ENDING_AT_ONCE.load(Ordering::SeqCst) {
        std::thread::park();
    }
}

/// The launched command (0: none), killed when a signal ends pmcstat at once.
static COMMAND: AtomicI32 = AtomicI32::new(0);
/// Whether a signal that ends pmcstat at once writes out and closes the log first.
static FINISH_LOG: AtomicBool = AtomicBool::new(false);

/// The measurement launched the command `pid`: a signal that ends pmcstat at once kills it.
pub fn launched(pid: i32) {
    COMMAND.store(pid, Ordering::SeqCst);
}

/// The command was reaped: its pid is no longer pmcstat's to signal.
pub fn reaped() {
    COMMAND.store(0, Ordering::SeqCst);
}

/// From now on a signal that ends pmcstat at once first writes out what the log holds and
/// closes it (with CLOSELOG), from the signal thread: only where libpmc's calls may come from
/// two threads at once (not the simulator, which runs inside one).
pub fn finish_log_at_once() {
    FINISH_LOG.store(true, Ordering::SeqCst);
}

/// The temporary log, removed when a signal ends pmcstat at once (exit handlers do not run).
static TEMPORARY_LOG: std::sync::Mutex<Option<std::path::PathBuf>> = std::sync::Mutex::new(None);

/// The run writes its log to the temporary file `path` (`None`: no more): a signal that ends
/// pmcstat at once removes it, as the end of the run would.
pub fn temporary_log(path: Option<std::path::PathBuf>) {
    *TEMPORARY_LOG.lock().unwrap_or_else(|e| e.into_inner()) = path;
}

/// The socket the next signal shuts down (-1: none).
static SOCKET_TO_SHUT: AtomicI32 = AtomicI32::new(-1);
/// Whether a signal shut it down.
static SOCKET_SHUT: AtomicBool = AtomicBool::new(false);

/// From now on (`Some`) until `None`, the next signal shuts the socket `fd` down — a write
/// blocked on it fails at once — instead of ending the measurement or pmcstat. The caller keeps
/// `fd` open until it calls this with `None`.
pub fn shut_down_on_signal(fd: Option<i32>) {
    SOCKET_TO_SHUT.store(fd.unwrap_or(-1), Ordering::SeqCst);
}

/// Whether a signal shut down the socket of [`shut_down_on_signal`].
pub fn socket_shut_down() -> bool {
    SOCKET_SHUT.load(Ordering::SeqCst)
}

/// Ends pmcstat at once as `signal`'s default action does. Exit handlers are not run: they
/// would wait for the measurement the signal interrupts.
fn end_now(signal: i32) -> ! {
    ENDING_AT_ONCE.store(true, Ordering::SeqCst);
    // A live view must not leave the terminal on its alternate screen.
    crate::live::restore_terminal();
    let command = COMMAND.swap(0, Ordering::SeqCst);
    if command > 0 {
        // SAFETY: kill(2) of the child pmcstat launched and has not reaped; no memory is
        // involved.
        unsafe { libc::kill(command, libc::SIGKILL) };
    }
    if FINISH_LOG.load(Ordering::SeqCst) {
        let socket = SOCKET_TO_SHUT.swap(-1, Ordering::SeqCst);
        if socket >= 0 {
            // SAFETY: as in `catch`: a socket the run keeps open while it is registered.
            unsafe { libc::shutdown(socket, libc::SHUT_RDWR) };
        }
        // The log ends with what the driver holds and CLOSELOG (errors: nothing more to do;
        // a log the run closed already refuses this).
        let _ = pmc::api::flush_log();
        let _ = pmc::api::close_log();
    }
    if let Some(path) = TEMPORARY_LOG.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = std::fs::remove_file(path);
    }
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    // SAFETY: _exit(2) takes no pointers; nothing after it runs.
    unsafe { libc::_exit(128 + signal) }
}
