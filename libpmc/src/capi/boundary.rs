//! The C boundary: `errno`, panics, the last error's text, C strings in and out.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::host::per_process::PerProcess;

thread_local! {
    /// The text of this thread's last failure, for `pmc_host_error`.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Sets the calling thread's `errno`.
pub(super) fn set_errno(errno: c_int) {
    #[cfg(any(target_os = "android", target_os = "netbsd", target_os = "openbsd"))]
    use libc::__errno as errno_location;
    #[cfg(any(target_os = "linux", target_os = "dragonfly", target_os = "hurd"))]
    use libc::__errno_location as errno_location;
    #[cfg(any(target_os = "freebsd", target_vendor = "apple"))]
    use libc::__error as errno_location;
    // SAFETY: the C library returns the calling thread's `errno`, which is always writable.
    unsafe { *errno_location() = errno };
}

/// Records `error` as this thread's last failure and sets `errno` to its value.
pub(super) fn report(error: &Error) {
    let text = CString::new(error.to_string().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = text);
    set_errno(error.errno);
}

/// Reads libpmc's settings from the environment (`PMC_HOST`, `PMC_CPUID`, …) at the first
/// entry of the process into the C ABI, unless the program installed its own: C programs
/// configure libpmc with these variables, and the library below reads only [`crate::config`].
pub(super) fn configure() {
    crate::config::install_once(crate::config::Config::from_env);
}

/// Runs the body of an entry point: its value, or `fail` with `errno` set when it returns an
/// error (`errno` of the error) or panics (`EIO`).
pub(super) fn guard<T>(fail: T, body: impl FnOnce() -> Result<T>) -> T {
    configure();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => {
            report(&error);
            fail
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            report(&Error::with_detail("libpmc", libc::EIO, format!("internal error: {what}")));
            fail
        }
    }
}

/// [`guard`] for the functions returning 0 or -1.
pub(super) fn status(body: impl FnOnce() -> Result<()>) -> c_int {
    guard(-1, || body().map(|()| 0))
}

/// An `EINVAL` error of operation `op` saying `detail`.
pub(super) fn invalid(op: &'static str, detail: impl Into<String>) -> Error {
    Error::with_detail(op, libc::EINVAL, detail)
}

/// `ptr` itself, or `EINVAL` naming argument `what` of `op` if it is NULL.
pub(super) fn non_null<T>(op: &'static str, what: &str, ptr: *mut T) -> Result<*mut T> {
    if ptr.is_null() { Err(invalid(op, format!("{what} is NULL"))) } else { Ok(ptr) }
}

/// The C string `s` as UTF-8; `EINVAL` if it is NULL or not UTF-8.
///
/// # Safety
///
/// `s` must be NULL or point to a NUL-terminated string that lives for `'a`.
pub(super) unsafe fn c_str<'a>(op: &'static str, what: &str, s: *const c_char) -> Result<&'a str> {
    if s.is_null() {
        return Err(invalid(op, format!("{what} is NULL")));
    }
    // SAFETY: non-null and NUL-terminated by the caller's promise.
    let s = unsafe { CStr::from_ptr(s) };
    s.to_str().map_err(|_| invalid(op, format!("{what} is not UTF-8")))
}

/// Stores `value` through the caller's pointer `out`, which [`non_null`] checked.
///
/// # Safety
///
/// `out` must point to writable memory for a `T` (it need not be aligned).
pub(super) unsafe fn store<T>(out: *mut T, value: T) {
    // SAFETY: writable for a T by the caller's promise; no alignment is assumed.
    unsafe { out.write_unaligned(value) };
}

/// Names handed to C: each distinct name becomes one NUL-terminated string that lives as long as
/// the process (FreeBSD's are static). The set is bounded by the names libpmc knows. A forked
/// child starts its own set (a thread of the parent may hold the lock at the fork).
static NAMES: PerProcess<Mutex<HashMap<String, &'static CStr>>> = PerProcess::new();

/// The process-lifetime C string of `name`.
pub(super) fn intern(name: &str) -> &'static CStr {
    let names = NAMES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut names = names.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&interned) = names.get(name) {
        return interned;
    }
    let owned = CString::new(name.replace('\0', " ")).unwrap_or_default();
    let interned: &'static CStr = Box::leak(owned.into_boxed_c_str());
    names.insert(name.to_string(), interned);
    interned
}

/// Why the last failed libpmc call of the calling thread failed, e.g. ``"event: EINVAL (Invalid
/// argument): unknown event `instrutions`; did you mean instructions? …"``; `""` if none has.
/// The string stays valid until the thread's next failing libpmc call.
///
/// An hwpmc-rs extension (`<pmc_host.h>`): FreeBSD's libpmc prints such reasons with `errx(3)`.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_host_error() -> *const c_char {
    let result = catch_unwind(|| LAST_ERROR.with(|last| last.borrow().as_ptr()));
    result.unwrap_or(c"".as_ptr())
}
