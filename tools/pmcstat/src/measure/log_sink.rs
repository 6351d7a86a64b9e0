//! Where the log goes (a file, a temporary file, a network receiver), and its end: closed,
//! why it could not be written, and what it lost.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use pmc::api;

use crate::cli::Options;
use crate::failure::{Failure, io_failure};
use crate::outputs::Output;
use crate::signals;

use super::files::NewFiles;

/// Where the log goes.
pub(super) enum LogSink {
    File(File),
    Socket(std::net::TcpStream),
    /// A temporary file pmcstat analyses itself (sampling without `-O`).
    Temporary(File, std::path::PathBuf),
}

impl LogSink {
    pub(super) fn fd(&self) -> i32 {
        match self {
            LogSink::File(f) | LogSink::Temporary(f, _) => f.as_raw_fd(),
            LogSink::Socket(s) => s.as_raw_fd(),
        }
    }

    /// The socket the log is sent on, if it is.
    pub(super) fn socket(&self) -> Option<i32> {
        match self {
            LogSink::Socket(stream) => Some(stream.as_raw_fd()),
            _ => None,
        }
    }

    /// The file the log can be read back from.
    pub(super) fn path<'a>(&'a self, o: &'a Options) -> Option<&'a Path> {
        match self {
            LogSink::Temporary(_, path) => Some(path),
            LogSink::File(_) => o.log_output.as_deref().map(Path::new),
            LogSink::Socket(_) => None,
        }
    }
}

pub(super) fn open_log(o: &Options, files: &mut NewFiles) -> Result<LogSink, Failure> {
    let network = o.log_output.as_deref().and_then(|t| t.to_str()).filter(|t| {
        // host:port, as FreeBSD tells them apart.
        !t.contains('/') && t.contains(':')
    });
    match (network, &o.log_output) {
        (Some(target), _) => {
            let stream = std::net::TcpStream::connect(target)
                .map_err(|e| io_failure(&format!("cannot connect to {target}"), &e))?;
            // SO_SNDTIMEO: a receiver that stops reading fails the log's writes after a while
            // instead of holding pmcstat (and the end of the run) for ever.
            stream.set_write_timeout(Some(NETWORK_STALL)).map_err(|e| {
                io_failure(&format!("cannot set up the connection to {target}"), &e)
            })?;
            Ok(LogSink::Socket(stream))
        }
        (None, Some(path)) => {
            let path = Path::new(path);
            let failed = |e: &std::io::Error| {
                io_failure(&format!("cannot create log {}", path.display()), e)
            };
            let output = Output::create(path).map_err(|e| failed(&e))?;
            let file = output.file().try_clone().map_err(|e| failed(&e))?;
            files.outputs.push(output);
            Ok(LogSink::File(file))
        }
        (None, None) => {
            // A new file of a name no one can guess or take first (O_EXCL).
            let (file, path) = tempfile::Builder::new()
                .prefix(&format!("pmcstat-{}-", std::process::id()))
                .suffix(".log")
                .tempfile()
                .map_err(|e| io_failure("cannot create the temporary log", &e))?
                .into_parts();
            let shown = path.to_path_buf();
            signals::temporary_log(Some(shown.clone()));
            files.temporary.push(path);
            Ok(LogSink::Temporary(file, shown))
        }
    }
}

/// How long a write of the log to a network receiver may make no progress before the log is
/// given up (the receiver stopped reading); the run itself goes on.
pub const NETWORK_STALL: Duration = Duration::from_secs(10);

/// How many DROPNOTIFY records (losses the driver wrote down) the log file at `path` holds:
/// read back through a bounded window, up to its first damaged record; 0 for what is not a
/// regular file (a device, a FIFO, which would block, is never opened).
pub(super) fn drop_notices(path: &Path) -> u64 {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return 0;
    }
    let Ok(file) = File::open(path) else { return 0 };
    let mut reader = pmclog::LogReader::new(file);
    let mut notices = 0;
    while let Ok(Some(entry)) = reader.next_entry() {
        if matches!(entry.record, pmclog::Record::DropNotify) {
            notices += 1;
        }
    }
    notices
}

/// How pmcstat's message about a log it could not write starts (a script looks for it on
/// standard error, or for `log_error` in `--json`: the exit status stays the command's).
pub const LOG_WRITE_FAILED: &str = "the log could not be written, it is incomplete";

/// `why` a log sent to `-O host:port` could not be written, with the reason in words when
/// the receiver stopped reading: data still waits to be sent on `stream` after the writes made
/// no progress for [`NETWORK_STALL`], or a signal stopped the wait.
pub(super) fn network_log_error(o: &Options, stream: &std::net::TcpStream, why: String) -> String {
    let target = o.log_output.as_deref().unwrap_or_default().to_string_lossy();
    let mut unsent: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ on a socket) writes one int, a valid local.
    let queried = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut unsent) } == 0;
    if signals::socket_shut_down() {
        format!("{why} (a signal stopped the wait for {target}, which was not reading)")
    } else if queried && unsent > 0 {
        format!(
            "{why} ({target} stopped reading: the log's writes made no progress for {} s)",
            NETWORK_STALL.as_secs()
        )
    } else {
        why
    }
}

/// Writes out and closes the log; why it could not be written, if it could not (the log is
/// closed in any case).
pub(super) fn close_log() -> Result<(), String> {
    let flushed = api::flush_log();
    let closed = api::close_log();
    match (flushed, closed) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drop_notices_of_a_log_file_are_counted_and_a_fifo_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drops.log");
        let mut bytes = Vec::new();
        let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
        for record in [pmclog::Record::DropNotify, pmclog::Record::CloseLog] {
            for _ in 0..2 {
                let len = pmclog::encode(&record, 0, &mut buf).unwrap();
                bytes.extend_from_slice(&buf[..len]);
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(drop_notices(&path), 2);
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path, which lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(drop_notices(&fifo), 0);
    }
}
