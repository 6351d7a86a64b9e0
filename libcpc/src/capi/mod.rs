//! The C ABI of `libcpc.so` / `libcpc.a`, as illumos' `<libcpc.h>` declares it (header in
//! `libcpc/include`). Every function keeps illumos' name, signature and return convention: 0
//! (or an index) on success, -1 with `errno` on failure, NULL with `errno` for pointers.
//! Beyond illumos: handle, set and buffer arguments are checked (a NULL or foreign one is
//! `EINVAL`), and no panic crosses into C (`EIO`).
//!
//! Failures with a subcode also call the handle's error handler (`cpc_seterrhndlr`), or print
//! `libcpc: <function>: <message>` to standard error when none is set; `errno` is kept across
//! the call.

mod bufs;
mod handle;
mod pctx;
mod sets;
mod smpl;

use std::collections::BTreeSet;
use std::ffi::{CString, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use bufs::*;
pub use handle::*;
pub use pctx::*;
pub use sets::*;
pub use smpl::*;

use crate::error::Error;
use crate::{Buf, Cpc, Set};

/// `cpc_attr_t`: an attribute name and value.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct cpc_attr_t {
    /// The name.
    pub ca_name: *mut c_char,
    /// The value.
    pub ca_val: u64,
}

/// `cpc_set_t`.
#[allow(non_camel_case_types)]
pub type cpc_set_t = Set;
/// `cpc_buf_t`.
#[allow(non_camel_case_types)]
pub type cpc_buf_t = Buf;

/// `cpc_t`: the handle, its sets and buffers, and its error handler.
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct cpc_t {
    cpc: Cpc,
    lists: Mutex<Lists>,
    cciname: CString,
    cpuref: CString,
}

/// What a handle owns.
#[derive(Debug, Default)]
struct Lists {
    sets: Vec<usize>,
    bufs: Vec<usize>,
    /// The application's `cpc_errhndlr_t`, if it set one.
    handler: Option<usize>,
}

impl cpc_t {
    /// The handle's lists, locked; with overflow signals in use, SIGEMT is held meanwhile (as
    /// illumos does), so that a handler calling libcpc cannot find them locked by the code it
    /// interrupted.
    fn lists(&self) -> ListsGuard<'_> {
        let held = crate::overflow::signal::SignalHeld::new(crate::overflow::linux::in_use());
        ListsGuard { guard: self.lists.lock().unwrap_or_else(PoisonError::into_inner), _held: held }
    }
}

/// A handle's locked lists. The lock is released before SIGEMT is let through again (fields
/// drop in order).
struct ListsGuard<'a> {
    guard: MutexGuard<'a, Lists>,
    _held: Option<crate::overflow::signal::SignalHeld>,
}

impl std::ops::Deref for ListsGuard<'_> {
    type Target = Lists;
    fn deref(&self) -> &Lists {
        &self.guard
    }
}

impl std::ops::DerefMut for ListsGuard<'_> {
    fn deref_mut(&mut self) -> &mut Lists {
        &mut self.guard
    }
}

unsafe extern "C" {
    /// `variadic.c`: calls `handler(fn_name, subcode, fmt, <an empty va_list>)`.
    fn libcpc_call_errhndlr(
        handler: *const c_void,
        fn_name: *const c_char,
        subcode: c_int,
        fmt: *const c_char,
    );
}

/// Sets the calling thread's `errno`.
fn set_errno(errno: c_int) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    use libc::__errno_location as errno_location;
    #[cfg(any(target_os = "freebsd", target_vendor = "apple"))]
    use libc::__error as errno_location;
    // SAFETY: the C library returns the calling thread's `errno`, which is always writable.
    unsafe { *errno_location() = errno };
}

/// Reports `error` of `handle`'s function: the error handler for a subcode, then `errno`.
fn report(handle: Option<&cpc_t>, error: &Error) {
    if let (Some(handle), Some(subcode)) = (handle, error.subcode) {
        let handler = handle.lists().handler;
        let message = subcode.message();
        match handler {
            Some(handler) => {
                let name = CString::new(error.op).unwrap_or_default();
                let fmt = CString::new(format!("{message}\n")).unwrap_or_default();
                // SAFETY: `handler` is the application's cpc_errhndlr_t (cpc_seterrhndlr's
                // promise); both strings are NUL-terminated and contain no conversions.
                unsafe {
                    libcpc_call_errhndlr(
                        handler as *const c_void,
                        name.as_ptr(),
                        subcode.code(),
                        fmt.as_ptr(),
                    )
                };
            }
            None => eprintln!("libcpc: {}: {message}", error.op),
        }
    }
    set_errno(error.errno);
}

/// Runs an entry point's body: its value, or `fail` with `errno` set (and the handler called)
/// when it returns an error or panics (`EIO`). The first entry of the process reads libpmc's
/// settings from the environment (`PMC_HOST`, `PMC_SIM_MODEL`, …): C programs configure the
/// library with these variables.
fn guard<T>(handle: Option<&cpc_t>, fail: T, body: impl FnOnce() -> crate::Result<T>) -> T {
    pmc::config::install_once(pmc::config::Config::from_env);
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => {
            report(handle, &error);
            fail
        }
        Err(_) => {
            set_errno(libc::EIO);
            fail
        }
    }
}

/// [`guard`] for the functions returning 0 or -1.
fn status(handle: Option<&cpc_t>, body: impl FnOnce() -> crate::Result<()>) -> c_int {
    guard(handle, -1, || body().map(|()| 0))
}

/// The handles `cpc_open` gave and `cpc_close` has not taken back, by address: a closed (or
/// never opened) handle is refused without reading its memory, as sets and buffers are by
/// their handle's lists. Only live handles are kept.
static LIVE_HANDLES: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

/// The live handles, locked; SIGEMT is held meanwhile, as for [`cpc_t::lists`].
fn live_handles() -> LiveHandlesHeld {
    let held = crate::overflow::signal::SignalHeld::new(crate::overflow::linux::in_use());
    (LIVE_HANDLES.lock().unwrap_or_else(PoisonError::into_inner), held)
}

/// The live handles' lock as [`live_handles`] holds it (with SIGEMT blocked).
type LiveHandlesHeld =
    (MutexGuard<'static, BTreeSet<usize>>, Option<crate::overflow::signal::SignalHeld>);

thread_local! {
    /// The live handles' lock, held by the forking thread across a `fork`.
    static HELD_ACROSS_FORK: std::cell::RefCell<Option<LiveHandlesHeld>> =
        const { std::cell::RefCell::new(None) };
}

/// Every thread of a program may be in a libcpc call, holding the live handles' lock for a
/// moment, when another thread forks: the child would find it held for ever (only the forking
/// thread goes on in a child), and its first libcpc call would hang. The at-fork handlers take
/// the lock before the fork and give it back after, in the parent and in the child.
fn lock_handles_across_forks() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        extern "C" fn before_fork() {
            // As any holder: with SIGEMT blocked, so that a handler's libcpc call cannot come
            // in on this thread meanwhile.
            let locked = live_handles();
            HELD_ACROSS_FORK.with(|held| *held.borrow_mut() = Some(locked));
        }
        extern "C" fn after_fork() {
            HELD_ACROSS_FORK.with(|held| drop(held.borrow_mut().take()));
        }
        // SAFETY: the handlers only lock and unlock a mutex through this thread's own slot,
        // POSIX's at-fork idiom; registering has no other precondition.
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork)) };
    });
}

/// Gives out `handle` (`cpc_open`).
fn register(handle: Box<cpc_t>) -> *mut cpc_t {
    lock_handles_across_forks();
    let raw = Box::into_raw(handle);
    live_handles().0.insert(raw as usize);
    raw
}

/// Takes `cpc` back (`cpc_close`): the handle, or `EINVAL` if it is not live (closed twice,
/// or never opened).
///
/// # Safety
///
/// A live `cpc` must not be in use by another thread.
unsafe fn unregister(op: &'static str, cpc: *mut cpc_t) -> crate::Result<Box<cpc_t>> {
    if cpc.is_null() || !live_handles().0.remove(&(cpc as usize)) {
        return Err(Error::invalid(op, "the cpc handle is NULL, closed or not from cpc_open"));
    }
    // SAFETY: a handle from cpc_open (registered), taken off the live list once.
    Ok(unsafe { Box::from_raw(cpc) })
}

/// The handle behind `cpc`, or `EINVAL` if it is NULL, closed or not one of `cpc_open`'s.
///
/// # Safety
///
/// A live `cpc` must not be closed while the result is used.
unsafe fn handle<'a>(op: &'static str, cpc: *mut cpc_t) -> crate::Result<&'a cpc_t> {
    if cpc.is_null() || !live_handles().0.contains(&(cpc as usize)) {
        return Err(Error::invalid(op, "the cpc handle is NULL, closed or not from cpc_open"));
    }
    // SAFETY: a live handle of cpc_open's, not closed meanwhile by the caller's promise.
    Ok(unsafe { &*cpc })
}

/// The set `set` of handle `h`, or `EINVAL` if it is not one of its sets.
///
/// # Safety
///
/// No other reference to the set may be live while the result is used (illumos' rule: one
/// thread uses a set at a time).
unsafe fn set_of<'a>(
    op: &'static str,
    h: &cpc_t,
    set: *mut cpc_set_t,
) -> crate::Result<&'a mut Set> {
    if set.is_null() || !h.lists().sets.contains(&(set as usize)) {
        return Err(Error::invalid(op, "the set was not created with this handle"));
    }
    // SAFETY: on the handle's list, so a live Box<Set> of ours; exclusive by the promise.
    Ok(unsafe { &mut *set })
}

/// The buffer `buf` of handle `h`, or `EINVAL`.
///
/// # Safety
///
/// As [`set_of`].
unsafe fn buf_of<'a>(
    op: &'static str,
    h: &cpc_t,
    buf: *mut cpc_buf_t,
) -> crate::Result<&'a mut Buf> {
    if buf.is_null() || !h.lists().bufs.contains(&(buf as usize)) {
        return Err(Error::invalid(op, "the buffer was not created with this handle"));
    }
    // SAFETY: on the handle's list, so a live Box<Buf> of ours; exclusive by the promise.
    Ok(unsafe { &mut *buf })
}

#[cfg(test)]
mod tests {
    use super::cpc_attr_t;

    #[test]
    fn cpc_attr_t_has_the_lp64_layout_of_illumos() {
        assert_eq!(size_of::<cpc_attr_t>(), 16);
        assert_eq!(std::mem::offset_of!(cpc_attr_t, ca_name), 0);
        assert_eq!(std::mem::offset_of!(cpc_attr_t, ca_val), 8);
    }
}
