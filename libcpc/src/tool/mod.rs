//! What cpustat(8) and cputrack(1) share (illumos keeps it in `cmd/cpc/common`): the `-c`
//! event-spec grammar, the column layout of their output, and the `-h` capabilities text.

pub mod columns;
pub mod spec;
pub mod usage;

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The C library's text of `errno` (`strerror(3)`), as the tools print it.
pub fn strerror(errno: i32) -> String {
    // SAFETY: strerror returns a NUL-terminated string that stays valid until the next call;
    // it is copied at once.
    let text = unsafe { std::ffi::CStr::from_ptr(libc::strerror(errno)) };
    text.to_string_lossy().into_owned()
}

/// The flag SIGHUP, SIGINT, SIGQUIT and SIGTERM set.
static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn on_stop_signal(_signal: libc::c_int) {
    if let Some(stop) = STOP.get() {
        stop.store(true, Ordering::Release);
    }
}

/// Makes SIGHUP, SIGINT, SIGQUIT (unless ignored) and SIGTERM set `stop` for an orderly end,
/// as the tools do; the first call's flag is the one set.
pub fn stop_on_signals(stop: Arc<AtomicBool>) {
    let _ = STOP.set(stop);
    for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM] {
        // SAFETY: installs a handler that only stores to an atomic flag (async-signal-safe);
        // a signal the caller ignores stays ignored.
        unsafe {
            let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            if libc::signal(signal, handler) == libc::SIG_IGN {
                libc::signal(signal, libc::SIG_IGN);
            }
        }
    }
}

/// How a tool reports a usage error: `<tool>: <message>` (the first line of `message`, without
/// an `error: ` prefix, as an argument parser words it) and the usage on standard error; the
/// exit status 2.
pub fn usage_error(tool: &str, usage: &str, message: &str) -> i32 {
    let message = message.lines().next().unwrap_or_default();
    eprintln!("{tool}: {}", message.trim_start_matches("error: "));
    eprint!("{usage}");
    2
}

/// Opens the library for a tool, or says `<tool>: <no_access> - <strerror>` on standard error
/// and gives the exit status 1.
pub fn open(tool: &str, no_access: &str) -> Result<crate::Cpc, i32> {
    crate::Cpc::open(crate::consts::CPC_VER_CURRENT).map_err(|e| {
        eprintln!("{tool}: {no_access} - {}", strerror(e.errno));
        1
    })
}

/// A tool's `-h`: `usage` and the capabilities text on standard output (exit status 0), or the
/// failure to open the library (1). A closed standard output is no error.
pub fn help(tool: &str, usage: &str, no_access: &str) -> i32 {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(usage.as_bytes());
    match open(tool, no_access) {
        Ok(cpc) => {
            let _ = write!(out, "\n{}", self::usage::capabilities(cpc.platform()));
            0
        }
        Err(status) => status,
    }
}
