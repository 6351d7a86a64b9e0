//! SIGINT, SIGTERM and SIGHUP during a measurement: the first one ends the measurement cleanly
//! (the measurement loop hears of it and stops, prints, closes the log); a second one ends
//! pmcstat at once, as the signal's default action would.
//!
//! The signals are caught by a thread that sleeps until one arrives (no periodic wake-up).

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
    /// to the command's process group.
    pub fn forward_to(&self, pid: i32) {
        if !self.from_terminal {
            // SAFETY: kill(2) of a child this process launched (and has not reaped); no memory
            // is involved.
            unsafe { libc::kill(pid, self.signal) };
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

/// Ends pmcstat at once as `signal`'s default action does. Exit handlers are not run: they
/// would wait for the measurement the signal interrupts.
fn end_now(signal: i32) -> ! {
    // A live view must not leave the terminal on its alternate screen.
    crate::live::restore_terminal();
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    // SAFETY: _exit(2) takes no pointers; nothing after it runs.
    unsafe { libc::_exit(128 + signal) }
}
