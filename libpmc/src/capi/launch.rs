//! The hwpmc-rs extensions of `<pmc_host.h>`: which host serves the process, and launching a
//! program to measure (a command on Linux and FreeBSD, a built-in program on the simulator).

use std::ffi::{CStr, OsString, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::ptr;

use super::boundary::{guard, invalid, non_null, status, store};
use crate::api;
use crate::host::HostKind;

/// The host serving this process: `"freebsd"`, `"linux"` or `"sim"` (chosen by `PMC_HOST`, else
/// FreeBSD's kernel module if present, else Linux), or NULL with `errno` `EINVAL` if `PMC_HOST`
/// names no host. The string is static.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_host_name() -> *const c_char {
    guard(ptr::null(), || {
        let name = match api::host_kind()? {
            HostKind::FreeBsd => c"freebsd",
            HostKind::Linux => c"linux",
            HostKind::Sim => c"sim",
        };
        Ok(name.as_ptr())
    })
}

/// Launches `argv` (a NULL-terminated array; `argv[0]` is looked up in `PATH` on Linux and
/// FreeBSD, and names a built-in program such as `"hot-cold"` on the simulator) held before it
/// runs its program, so PMCs can be attached to it first; then [`pmc_resume`] lets it run.
/// Returns its pid, or -1 with `errno`: `EINVAL` for a NULL or empty `argv`, `ENOENT` for a
/// program that does not exist, or the error of `fork(2)`.
///
/// # Safety
///
/// `argv` must be NULL or a NULL-terminated array of NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_spawn(argv: *const *const c_char) -> libc::pid_t {
    const OP: &str = "pmc_spawn";
    guard(-1, || {
        let argv = non_null(OP, "argv", argv.cast_mut())?;
        let mut args = Vec::new();
        loop {
            // SAFETY: `argv` is a NULL-terminated array (the caller's promise) and every element
            // before the NULL has been read without meeting it, so this one is in bounds.
            let arg = unsafe { argv.add(args.len()).read() };
            if arg.is_null() {
                break;
            }
            // SAFETY: a NUL-terminated string by the caller's promise.
            let bytes = unsafe { CStr::from_ptr(arg) }.to_bytes();
            args.push(OsString::from(std::ffi::OsStr::from_bytes(bytes)));
        }
        if args.is_empty() {
            return Err(invalid(OP, "argv is empty: argv[0] names the program"));
        }
        api::spawn(&args)
    })
}

/// Lets a child from [`pmc_spawn`] run its program. Returns 0, or -1 with `errno` (`ESRCH`
/// for a process that is not a held child of this one).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_resume(pid: libc::pid_t) -> c_int {
    status(|| api::resume(pid))
}

/// Waits for a child from [`pmc_spawn`] to end and stores its exit status in `*status` (unless
/// `status` is NULL) as a shell reports it: the exit code, or 128 + the signal number for a
/// child killed by a signal. On the simulator this runs the machine until the child's end.
/// Returns 0, or -1 with `errno` (`ECHILD` for a process that is not a child of this one).
///
/// # Safety
///
/// `status` must be NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_wait(pid: libc::pid_t, status_out: *mut c_int) -> c_int {
    status(|| {
        let code = api::wait(pid)?;
        if !status_out.is_null() {
            // SAFETY: non-null; writable by the caller's promise.
            unsafe { store(status_out, code) };
        }
        Ok(())
    })
}
