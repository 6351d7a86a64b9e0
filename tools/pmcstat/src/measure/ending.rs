//! How a run ends: what woke the measurement loop, and the end the later stages act on.

use crate::failure::Failure;
use crate::signals::Interrupt;

/// How the measured work ends.
pub(super) enum Ending {
    /// The command's exit status.
    Command(i32),
    /// Attached processes went away, or the duration elapsed.
    Done,
    /// A signal ended a measurement without a command.
    Interrupted(Interrupt),
}

impl Ending {
    /// pmcstat's exit status: the command's, 0, or 128 + the signal that ended it.
    fn status(&self) -> i32 {
        match self {
            Ending::Command(status) => *status,
            Ending::Done => 0,
            Ending::Interrupted(interrupt) => interrupt.exit_status(),
        }
    }
}

/// What wakes the measurement loop.
pub(super) enum Wake {
    /// The launched command ended (its status, or why waiting failed).
    CommandEnded(pmc::Result<i32>),
    /// SIGINT, SIGTERM or SIGHUP.
    Interrupted(Interrupt),
}

/// How the run ended, and what the stages after it need to know of it.
pub(super) struct RunEnd {
    pub(super) ending: Ending,
    /// Why the log could not be written, if it could not.
    pub(super) log_error: Option<String>,
    /// Whether pmcstat launched the command.
    pub(super) launched: bool,
    /// Whether any sampling PMC followed the command's descendants (`-d`).
    pub(super) sampled_descendants: bool,
}

impl RunEnd {
    /// pmcstat's exit status, given why the counts could not be written, if they could not.
    pub(super) fn status(&self, output_failure: Option<&Failure>) -> i32 {
        match (&self.ending, &self.log_error, output_failure) {
            // Without a command's status to return, a log that could not be written is the
            // status, else counts that could not be written.
            (Ending::Done | Ending::Interrupted(_), Some(_), _) => crate::failure::EX_IOERR,
            (Ending::Done, None, Some(failure)) => failure.status,
            _ => self.ending.status(),
        }
    }
}
