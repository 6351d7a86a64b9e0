//! This process's pid, cached and forgotten in a forked child: the owner of every PMC call
//! (FreeBSD semantics: after `fork()` the child owns none of its parent's PMCs). A leaf: the
//! per-process state ([`super::per_process`]), the launcher and the embedded hosts all ask it.

use std::sync::atomic::{AtomicI32, Ordering};

/// This process's pid, cached: a system call per PMC operation would cost as much as the
/// operation itself. A fork handler forgets it in the child, where the PMCs of the parent are
/// no longer the caller's (FreeBSD semantics: the child owns none of them).
static PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn forget_pid_in_child() {
    PID.store(0, Ordering::Relaxed);
}

/// This process's pid (the child's own after a fork).
pub(crate) fn current_pid() -> i32 {
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    static AT_FORK: std::sync::Once = std::sync::Once::new();
    AT_FORK.call_once(|| {
        // SAFETY: registers a handler that only stores to an atomic, which is async-signal-safe
        // and valid in the child after fork.
        unsafe { libc::pthread_atfork(None, None, Some(forget_pid_in_child)) };
    });
    let pid = std::process::id() as i32;
    PID.store(pid, Ordering::Relaxed);
    pid
}
