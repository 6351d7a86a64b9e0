//! Why pmcstat stopped: a one-line message and the exit status (sysexits(3) values, as
//! FreeBSD's pmcstat uses).

use std::fmt;

use pmcprof::one_line;

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

/// The status of a process killed by SIGPIPE, as a shell reports it.
pub const STATUS_BROKEN_PIPE: i32 = 128 + libc::SIGPIPE;

/// An I/O error while `doing` something. A closed pipe (`pmcstat -R log | head`) is a quiet
/// end, with the status of a process that SIGPIPE ended, as other tools in a pipeline have:
/// there is nothing wrong to say.
pub fn io_failure(doing: &str, e: &std::io::Error) -> Failure {
    let status = match e.kind() {
        std::io::ErrorKind::NotFound => EX_NOINPUT,
        std::io::ErrorKind::BrokenPipe => {
            return Failure { message: String::new(), status: STATUS_BROKEN_PIPE };
        }
        _ => EX_IOERR,
    };
    Failure { message: format!("{doing}: {e}"), status }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Prints `pmcstat: ` and `message` as one line on standard error. A closed or full standard
/// error loses the line but never ends pmcstat (`eprintln!` would panic): what pmcstat was
/// doing — finishing a log, returning the command's status — matters more than the message.
pub fn tell(message: fmt::Arguments<'_>) {
    use std::io::Write;
    let line = format!("pmcstat: {}\n", one_line(&message.to_string()));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
