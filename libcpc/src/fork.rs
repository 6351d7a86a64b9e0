//! libcpc in a forked child.
//!
//! A child of `fork` gets a copy of the parent's memory but only the forking thread, so:
//! * a lock another thread held at the fork stays held in the child for ever. The overflow
//!   watcher (see [`crate::overflow::linux`]) is such a thread: it holds its watch list, the sample log
//!   and a set's lock while it reads an overflow. It therefore does each pass holding
//!   [`Gate`], which an at-fork handler takes before the fork: no pass is under way at the
//!   fork, so the watcher holds none of them then. (A lock the application's own threads hold
//!   at the fork is the application's business, as with any library.)
//! * the child has no watcher thread, and libpmc's driver state is the child's own (it owns
//!   none of the parent's PMCs, as on FreeBSD). libcpc's per-process state ([`PerProcess`]:
//!   the watch list and whether the watcher runs, the sample log) is made again in the child
//!   on first use; the parent's copy is left alone.
//! * sets the parent bound are not the child's: their bindings are of an earlier
//!   [`generation`], and act as unbound (their counters are the parent's, never released by
//!   the child, whose own PMCs may have the same ids).

use std::cell::UnsafeCell;
use std::sync::Once;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// How many forks this process's line of ancestors made since libcpc first bound a set: each
/// child's is one more than its parent's at the fork.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The at-fork handlers, registered once (a child inherits them).
static REGISTERED: Once = Once::new();

/// The process's generation (see [`GENERATION`]); registers the at-fork handlers first, so a
/// value read here changes in a child.
pub(crate) fn generation() -> u64 {
    REGISTERED.call_once(|| {
        // SAFETY: the handlers only lock and unlock the gate and store to an atomic, which is
        // allowed in a child of a multi-threaded process (POSIX's at-fork idiom).
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(in_child)) };
    });
    GENERATION.load(Ordering::Acquire)
}

/// A mutex the watcher holds during a pass, and the at-fork handler across a fork.
pub(crate) struct Gate(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: the pthread mutex inside is made for use by several threads; it is only used through
// pthread_mutex_lock and pthread_mutex_unlock.
unsafe impl Sync for Gate {}

/// The watcher's gate.
pub(crate) static GATE: Gate = Gate(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));

/// The gate held: released when dropped.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // The watcher runs on Linux.
pub(crate) struct GateHeld(());

#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // The watcher runs on Linux.
impl Gate {
    /// Takes the gate (waiting for a fork under way).
    pub(crate) fn hold(&'static self) -> GateHeld {
        // SAFETY: a statically initialised mutex, never moved; not held by this thread (the
        // watcher takes it once per pass, and a fork happens on another thread).
        unsafe { libc::pthread_mutex_lock(self.0.get()) };
        GateHeld(())
    }
}

impl Drop for GateHeld {
    fn drop(&mut self) {
        // SAFETY: this thread locked the gate in `hold`.
        unsafe { libc::pthread_mutex_unlock(GATE.0.get()) };
    }
}

extern "C" fn before_fork() {
    // SAFETY: as in `Gate::hold`; released by `after_fork` or `in_child`.
    unsafe { libc::pthread_mutex_lock(GATE.0.get()) };
}

extern "C" fn after_fork() {
    // SAFETY: `before_fork` locked it on this thread.
    unsafe { libc::pthread_mutex_unlock(GATE.0.get()) };
}

extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    // SAFETY: the forking thread locked it in `before_fork`; it is this thread in the child.
    unsafe { libc::pthread_mutex_unlock(GATE.0.get()) };
}

/// One value per process, made on first use in each (see the module documentation).
pub(crate) struct PerProcess<T: 'static> {
    /// The value and the generation that made it last, leaked: never freed (a child leaves its
    /// parent's copy alone).
    made: AtomicPtr<(u64, T)>,
}

impl<T: 'static> PerProcess<T> {
    /// No value yet.
    pub(crate) const fn new() -> Self {
        PerProcess { made: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// This process's value, made with `make` if it has none yet. Threads that make one at the
    /// same time keep the first stored; the others' are dropped unused.
    pub(crate) fn get(&self, make: impl Fn() -> T) -> &'static T {
        let generation = generation();
        loop {
            let current = self.made.load(Ordering::Acquire);
            // SAFETY: a non-null pointer was leaked from a Box below and is never freed.
            if let Some((made, value)) = unsafe { current.as_ref() }
                && *made == generation
            {
                return value;
            }
            let fresh = Box::into_raw(Box::new((generation, make())));
            match self.made.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire) {
                // SAFETY: just stored; leaked for the life of the process.
                Ok(_) => return unsafe { &(*fresh).1 },
                Err(_) => {
                    // SAFETY: `fresh` was never shared: the exchange failed.
                    drop(unsafe { Box::from_raw(fresh) });
                }
            }
        }
    }
}
