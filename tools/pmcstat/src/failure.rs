//! Why pmcstat stopped: a one-line message and the exit status (sysexits(3) values, as
//! FreeBSD's pmcstat uses).

use std::fmt;

/// `EX_USAGE`.
pub const EX_USAGE: i32 = 64;
/// `EX_DATAERR`.
pub const EX_DATAERR: i32 = 65;
/// `EX_NOINPUT`.
pub const EX_NOINPUT: i32 = 66;
/// `EX_UNAVAILABLE`.
pub const EX_UNAVAILABLE: i32 = 69;
/// `EX_OSERR`.
pub const EX_OSERR: i32 = 71;
/// `EX_IOERR`.
pub const EX_IOERR: i32 = 74;
/// `EX_NOPERM`.
pub const EX_NOPERM: i32 = 77;

/// A failure: what to print and the status to exit with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The message (one line, without the "pmcstat: " prefix).
    pub message: String,
    /// The exit status.
    pub status: i32,
}

impl Failure {
    /// A command-line mistake.
    pub fn usage(message: impl Into<String>) -> Self {
        Failure { message: message.into(), status: EX_USAGE }
    }
    /// Bad input data (a corrupt log).
    pub fn data(message: impl Into<String>) -> Self {
        Failure { message: message.into(), status: EX_DATAERR }
    }
    /// A libpmc error while `doing` something; the status follows the errno.
    pub fn pmc(doing: &str, e: &pmc::Error) -> Self {
        let status = match e.errno {
            libc::EPERM | libc::EACCES => EX_NOPERM,
            libc::ENOENT => EX_NOINPUT,
            libc::EINVAL => EX_UNAVAILABLE,
            _ => EX_OSERR,
        };
        Failure { message: format!("{doing}: {e}"), status }
    }
}

/// An I/O error while `doing` something.
pub fn io_failure(doing: &str, e: &std::io::Error) -> Failure {
    let status = if e.kind() == std::io::ErrorKind::NotFound { EX_NOINPUT } else { EX_IOERR };
    Failure { message: format!("{doing}: {e}"), status }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
