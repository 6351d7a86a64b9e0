//! libpctx's C ABI (`<libpctx.h>`) and `cpc_bind_pctx` / `cpc_terminate`.

use std::ffi::{CStr, CString, OsString, c_char, c_int, c_uint, c_void};
use std::os::unix::ffi::OsStrExt;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{cpc_set_t, cpc_t, guard, handle, set_of, status};
use crate::error::Error;
use crate::pctx::{CallbackFailed, Pctx, PctxEvents};

/// `pctx_t`: a controlled process and its callbacks.
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct pctx_t {
    /// `None` while [`pctx_run`] runs it.
    inner: Option<Pctx>,
    pid: i32,
    terminate: Arc<AtomicBool>,
    arg: *mut c_void,
    /// The handlers of `PCTX_*_EVENT` 1..=7, as set by `pctx_set_events`.
    handlers: [Option<unsafe extern "C" fn()>; 8],
    /// The application's `pctx_errfn_t`, if it gave one.
    errfn: Option<PctxErrFn>,
}

const EXEC_EVENT: usize = 1;
const FORK_EVENT: usize = 2;
const EXIT_EVENT: usize = 3;
const LWP_CREATE_EVENT: usize = 4;
const INIT_LWP_EVENT: usize = 5;
const FINI_LWP_EVENT: usize = 6;
const LWP_EXIT_EVENT: usize = 7;

type LwpFn = unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, *mut c_void) -> c_int;
/// The fork handler, called as illumos's libpctx calls it: parent pid, child pid, LWP.
type ForkFn = unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::pid_t, libc::id_t, *mut c_void);
type ExecFn =
    unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, *mut c_char, *mut c_void) -> c_int;
type ExitFn = unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, c_int, *mut c_void);
/// `pctx_errfn_t`: (function name without `pctx_`, format, `va_list`).
type PctxErrFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut c_void);

unsafe extern "C" {
    /// `variadic.c`: calls `handler(fn_name, fmt, <a va_list holding arg>)`.
    fn libcpc_call_pctx_errfn(
        handler: PctxErrFn,
        fn_name: *const c_char,
        fmt: *const c_char,
        arg: *const c_char,
    );
    /// `variadic.c`: `pctx_set_events` itself, reached through the trampoline below.
    fn libcpc_pctx_set_events_va(pctx: *mut c_void, ...) -> c_int;
}

/// Reports a failure of libpctx's function `pctx_<name>` as illumos's libpctx does: through
/// the application's error function with `fmt` (a printf format with at most one `%s`, which
/// `arg` fills), or on standard error as `libpctx: pctx_<name>: <message>`.
fn report(errfn: Option<PctxErrFn>, name: &str, fmt: &str, arg: &str) {
    match errfn {
        Some(f) => {
            let text = |s: &str| CString::new(s.replace('\0', "")).unwrap_or_default();
            let (name, fmt, arg) = (text(name), text(fmt), text(arg));
            // SAFETY: the application's pctx_errfn_t (pctx_create's promise); three
            // NUL-terminated strings, `fmt` with at most the one conversion `arg` fills.
            unsafe { libcpc_call_pctx_errfn(f, name.as_ptr(), fmt.as_ptr(), arg.as_ptr()) };
        }
        None => eprint!("libpctx: pctx_{name}: {}", fmt.replacen("%s", arg, 1).replace("%%", "%")),
    }
}

/// `pctx_create`'s diagnostic for launching `file` failed with `errno` (illumos's texts).
fn create_message(errno: i32) -> String {
    match errno {
        libc::ENOENT => "cannot find program '%s'\n".into(),
        libc::EACCES | libc::ENOEXEC | libc::EPERM => "cannot execute program '%s'\n".into(),
        libc::EAGAIN | libc::ENOMEM => "cannot fork, program '%s'\n".into(),
        errno => {
            let why = std::io::Error::from_raw_os_error(errno).to_string().replace('%', "%%");
            format!("{why}, program '%s'\n")
        }
    }
}

fn make(pctx: Pctx, arg: *mut c_void, errfn: Option<PctxErrFn>) -> *mut pctx_t {
    Box::into_raw(Box::new(pctx_t {
        pid: pctx.pid(),
        terminate: pctx.terminator(),
        inner: Some(pctx),
        arg,
        handlers: [None; 8],
        errfn,
    }))
}

/// Launches `filename` (a path, or a name looked up in `PATH` as `execvp` does; on the
/// simulator the built-in program it names) with the arguments `argv`, held before it runs.
/// NULL with `errno` on failure, after the error function (default: standard error) says why.
/// A NULL `filename` means `argv[0]`.
///
/// # Safety
///
/// `filename` must be NULL or a C string; `argv` NULL or a NULL-terminated array of C strings;
/// `errfn` NULL or a `pctx_errfn_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pctx_create(
    filename: *const c_char,
    argv: *const *const c_char,
    arg: *mut c_void,
    _verbose: c_int,
    errfn: Option<PctxErrFn>,
) -> *mut pctx_t {
    const OP: &str = "pctx_create";
    let os = |p: *const c_char| {
        // SAFETY: a C string by the caller's promise.
        OsString::from(std::ffi::OsStr::from_bytes(unsafe { CStr::from_ptr(p) }.to_bytes()))
    };
    let mut args = Vec::new();
    if !argv.is_null() {
        loop {
            // SAFETY: a NULL-terminated array by the caller's promise; every element before
            // this one was non-NULL.
            let a = unsafe { argv.add(args.len()).read() };
            if a.is_null() {
                break;
            }
            args.push(os(a));
        }
    }
    let file = if filename.is_null() { args.first().cloned() } else { Some(os(filename)) };
    let shown = file.as_ref().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    guard(None, ptr::null_mut(), || {
        let Some(file) = file.filter(|_| !args.is_empty()) else {
            report(errfn, "create", "no program to execute (argv is NULL or empty)\n", "");
            return Err(Error::invalid(OP, "argv is NULL or empty"));
        };
        match Pctx::create_file(&file, &args) {
            Ok(pctx) => Ok(make(pctx, arg, errfn)),
            Err(e) => {
                report(errfn, "create", &create_message(e.errno), &shown);
                Err(e)
            }
        }
    })
}

/// Follows running process `pid`; NULL with `ESRCH` if there is none, after the error
/// function (default: standard error) says why.
#[unsafe(no_mangle)]
pub extern "C" fn pctx_capture(
    pid: libc::pid_t,
    arg: *mut c_void,
    _verbose: c_int,
    errfn: Option<PctxErrFn>,
) -> *mut pctx_t {
    guard(None, ptr::null_mut(), || match Pctx::capture(pid) {
        Ok(pctx) => Ok(make(pctx, arg, errfn)),
        Err(e) => {
            let message = match e.errno {
                libc::ESRCH => format!("pid {pid} doesn't exist\n"),
                libc::EPERM | libc::EACCES => format!("pid {pid}: permission denied\n"),
                errno => {
                    let why = std::io::Error::from_raw_os_error(errno).to_string();
                    format!("{}: pid {pid}\n", why.replace('%', "%%"))
                }
            };
            report(errfn, "capture", &message, "");
            Err(e)
        }
    })
}

/// `pctx_set_events(pctx, event, handler, ..., PCTX_NULL_EVENT)`: a jump to the variadic C
/// function `libcpc_pctx_set_events_va`, which reads the list and calls
/// [`libcpc_pctx_set_event`] per event. A jump, not a call: the caller's argument registers,
/// stack and (on x86-64) `%al` reach the C function as the caller left them. It is a Rust
/// item so that the shared library exports it.
///
/// # Safety
///
/// Called from C as `int pctx_set_events(pctx_t *pctx, ...)`: `pctx` NULL or a live handle,
/// then (event, handler) pairs of matching types ended by `PCTX_NULL_EVENT`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn pctx_set_events() -> c_int {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("jmp {}", sym libcpc_pctx_set_events_va);
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("b {}", sym libcpc_pctx_set_events_va);
}

/// Sets the handler of one event (called for each by `pctx_set_events`): 0, or -1 with
/// `EINVAL` for an unknown event (reported through the error function) or a NULL handle.
///
/// # Safety
///
/// `pctx` must be NULL or a live handle; `handler` a function of the event's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn libcpc_pctx_set_event(
    pctx: *mut pctx_t,
    event: c_int,
    handler: Option<unsafe extern "C" fn()>,
) -> c_int {
    const OP: &str = "pctx_set_events";
    status(None, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let p = unsafe { pctx.as_mut() }.ok_or_else(|| Error::invalid(OP, "pctx is NULL"))?;
        let slot = usize::try_from(event).ok().filter(|e| (1..=7).contains(e));
        let Some(slot) = slot else {
            report(p.errfn, "set_events", &format!("unknown event type {event:x}\n"), "");
            return Err(Error::invalid(OP, format!("unknown event {event}")));
        };
        p.handlers[slot] = handler;
        Ok(())
    })
}

/// Calls the C handlers of a `pctx_t`.
struct CEvents {
    pctx: *mut pctx_t,
    arg: *mut c_void,
    handlers: [Option<unsafe extern "C" fn()>; 8],
    tick: Option<LwpFn>,
}

impl CEvents {
    fn lwp_call(&self, f: Option<LwpFn>, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        let Some(f) = f else { return Ok(()) };
        // SAFETY: the application's handler of this type, with its own argument.
        let r = unsafe { f(self.pctx, pid, lwp as libc::id_t, self.arg) };
        if r == 0 { Ok(()) } else { Err(CallbackFailed) }
    }

    fn handler(&self, event: usize) -> Option<LwpFn> {
        // SAFETY: pctx_set_events' promise: the handler of this event has this type.
        self.handlers[event]
            .map(|f| unsafe { std::mem::transmute::<unsafe extern "C" fn(), LwpFn>(f) })
    }
}

impl PctxEvents for CEvents {
    fn init_lwp(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        self.lwp_call(self.handler(INIT_LWP_EVENT), pid, lwp)
    }
    fn tick(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        self.lwp_call(self.tick, pid, lwp)
    }
    fn fini_lwp(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        self.lwp_call(self.handler(FINI_LWP_EVENT), pid, lwp)
    }
    fn lwp_create(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        self.lwp_call(self.handler(LWP_CREATE_EVENT), pid, lwp)
    }
    fn lwp_exit(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        self.lwp_call(self.handler(LWP_EXIT_EVENT), pid, lwp)
    }
    fn fork(&mut self, pid: i32, lwp: i32, child: i32) {
        if let Some(f) = self.handlers[FORK_EVENT] {
            // SAFETY: pctx_set_events' promise: the fork handler has this type.
            let f = unsafe { std::mem::transmute::<unsafe extern "C" fn(), ForkFn>(f) };
            // SAFETY: the application's handler, with its own argument.
            unsafe { f(self.pctx, pid, child, lwp as libc::id_t, self.arg) };
        }
    }
    fn exec(&mut self, pid: i32, lwp: i32, command: &str) -> Result<(), CallbackFailed> {
        let Some(f) = self.handlers[EXEC_EVENT] else { return Ok(()) };
        // SAFETY: pctx_set_events' promise: the exec handler has this type.
        let f = unsafe { std::mem::transmute::<unsafe extern "C" fn(), ExecFn>(f) };
        let text = std::ffi::CString::new(command.replace('\0', "")).unwrap_or_default();
        // SAFETY: the application's handler, with a NUL-terminated copy of the command (which
        // it must not write to, as illumos's).
        let r = unsafe { f(self.pctx, pid, lwp as libc::id_t, text.as_ptr().cast_mut(), self.arg) };
        if r == 0 { Ok(()) } else { Err(CallbackFailed) }
    }
    fn exit(&mut self, pid: i32, lwp: i32, status: i32) {
        if let Some(f) = self.handlers[EXIT_EVENT] {
            // SAFETY: pctx_set_events' promise: the exit handler has this type.
            let f = unsafe { std::mem::transmute::<unsafe extern "C" fn(), ExitFn>(f) };
            // SAFETY: the application's handler, with its own argument.
            unsafe { f(self.pctx, pid, lwp as libc::id_t, status, self.arg) };
        }
    }
}

/// Lets the process run, calling its handlers; `tick` every `msec` ms up to `nsamples` times.
/// Returns 0 when the process ended, the samples are done or `pctx_terminate` was called; -1
/// with `errno` when a handler failed (`EINVAL`) or the process could not be run.
///
/// # Safety
///
/// `pctx` must be NULL or a live handle; `tick` NULL or a valid function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pctx_run(
    pctx: *mut pctx_t,
    msec: c_uint,
    nsamples: c_uint,
    tick: Option<LwpFn>,
) -> c_int {
    const OP: &str = "pctx_run";
    status(None, || {
        // SAFETY: NULL or a live handle, by the caller's promise; the reference ends before
        // any handler runs.
        let (mut inner, arg, handlers) = match unsafe { pctx.as_mut() } {
            Some(p) => (p.inner.take(), p.arg, p.handlers),
            None => return Err(Error::invalid(OP, "pctx is NULL")),
        };
        let Some(process) = inner.as_mut() else {
            return Err(Error::invalid(OP, "pctx_run is already running this pctx"));
        };
        let mut events = CEvents { pctx, arg, handlers, tick };
        let result = process.run(msec, nsamples, &mut events);
        // SAFETY: still live (handlers must not release it while it runs).
        unsafe { (*pctx).inner = inner };
        result
    })
}

/// Frees the handle: a launched process still running is killed, a captured one resumes.
///
/// # Safety
///
/// `pctx` must be NULL or a live handle not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pctx_release(pctx: *mut pctx_t) {
    if !pctx.is_null() {
        // SAFETY: a handle from pctx_create/pctx_capture, given back once.
        let _ = std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(pctx) }));
    }
}

/// Makes a running `pctx_run` of this handle return.
///
/// # Safety
///
/// `pctx` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pctx_terminate(pctx: *mut pctx_t) {
    // SAFETY: NULL or a live handle, by the caller's promise.
    if let Some(p) = unsafe { pctx.as_ref() } {
        p.terminate.store(true, Ordering::Release);
    }
}

/// Binds `set` to LWP `id` of the process `pctx` controls (`flags` 0): -1 with `EINVAL` (bad
/// flags, foreign set, no requests, and the bind errors), `ESRCH` (no such LWP).
///
/// # Safety
///
/// `cpc` and `pctx` must be NULL or live handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_bind_pctx(
    cpc: *mut cpc_t,
    pctx: *mut pctx_t,
    id: libc::id_t,
    set: *mut cpc_set_t,
    flags: c_uint,
) -> c_int {
    const OP: &str = "cpc_bind_pctx";
    // SAFETY: NULL or a live handle, by the caller's promise.
    let h = unsafe { handle(OP, cpc) }.ok();
    status(h, || {
        let h = h.ok_or_else(|| Error::invalid(OP, "the cpc handle is NULL"))?;
        // SAFETY: NULL or a live handle; only its plain fields are read (pctx_run may hold its
        // process).
        let (pid, terminate) = match unsafe { pctx.as_ref() } {
            Some(p) => (p.pid, p.terminate.clone()),
            None => return Err(Error::invalid(OP, "pctx is NULL")),
        };
        // SAFETY: one thread uses a set at a time.
        let set = unsafe { set_of(OP, h, set)? };
        set.bind_process(h.cpc.platform(), pid, id as i32, flags)?;
        set.terminator = Some(terminate);
        Ok(())
    })
}

/// Makes a running `pctx_run` of any process a set of this handle was bound to return.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_terminate(cpc: *mut cpc_t) {
    // SAFETY: NULL, closed or a live handle, by the caller's promise.
    let Ok(h) = (unsafe { handle("cpc_terminate", cpc) }) else { return };
    for &set in &h.lists().sets {
        // SAFETY: the handle's sets are live; only the terminate flag is read.
        if let Some(t) = unsafe { &(*(set as *const cpc_set_t)).terminator } {
            t.store(true, Ordering::Release);
        }
    }
}
