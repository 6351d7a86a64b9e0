//! Why the current system call failed, in words: the driver answers with an errno, and the
//! Linux host's parts that refused (perf, `/proc`) say why next to it, for the caller's error.
//! Per thread: each thread makes its own system calls.

use std::cell::RefCell;

use hwpmc::Errno;

thread_local! {
    /// Why the current system call failed, in words, with the errno it explains.
    static DETAIL: RefCell<Option<(Errno, String)>> = const { RefCell::new(None) };
}

/// Forgets the reason of the previous call (a new call begins).
pub(crate) fn forget() {
    DETAIL.with(|d| d.borrow_mut().take());
}

/// Says why the current call fails with `errno` (shown with it if the call fails with it).
pub(crate) fn explain(errno: Errno, why: impl Into<String>) -> Errno {
    // At exit the thread's locals may be gone already: the reason goes with them.
    let _ = DETAIL.try_with(|d| *d.borrow_mut() = Some((errno, why.into())));
    errno
}

/// The reason given for `errno` during the current call, if any.
pub(crate) fn explanation(errno: Errno) -> Option<String> {
    DETAIL.with(|d| d.borrow_mut().take().filter(|(e, _)| *e == errno).map(|(_, why)| why))
}
