//! State that belongs to one process and is made again in a forked child.
//!
//! A process that forks while other threads use libpmc hands its child a copy of every lock in
//! whatever state it was: a lock another thread held at that moment stays held in the child for
//! ever, with no thread left to release it. libpmc's embedded driver, its worker and its tables
//! are therefore per process: the child never touches its parent's copy (it owns none of the
//! parent's PMCs anyway, as on FreeBSD) and makes its own on first use, so no lock is ever held
//! across `fork`. The parent's copy is left untouched in the child's memory.

use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use super::current_pid::current_pid;

/// One value per process, made on first use in each process (see the module documentation).
pub(crate) struct PerProcess<T: 'static> {
    /// The value of the process that made it last, leaked (it lives as long as that process).
    made: AtomicPtr<Made<T>>,
    /// The pid of the process one of whose threads is making the value now (0: none). A
    /// parent's thread that was making it when the process forked does not exist in the child,
    /// whose pid differs, so the child does not wait for it.
    making: AtomicI32,
}

struct Made<T> {
    pid: i32,
    value: T,
}

/// Clears `making` if the value's constructor panics, so another thread can try again.
struct MakingGuard<'a>(&'a AtomicI32);

impl Drop for MakingGuard<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

impl<T: 'static> PerProcess<T> {
    /// No value yet.
    pub(crate) const fn new() -> Self {
        PerProcess { made: AtomicPtr::new(std::ptr::null_mut()), making: AtomicI32::new(0) }
    }

    /// This process's value, if it made one.
    pub(crate) fn get(&self) -> Option<&'static T> {
        let made = self.made.load(Ordering::Acquire);
        // SAFETY: a non-null pointer was leaked from a Box by `get_or_init` and is never freed.
        let made: &'static Made<T> = unsafe { made.as_ref() }?;
        (made.pid == current_pid()).then_some(&made.value)
    }

    /// This process's value, made with `make` if this process has none yet. Threads of one
    /// process that ask at the same time get the same value.
    pub(crate) fn get_or_init(&self, make: impl FnOnce() -> T) -> &'static T {
        let pid = current_pid();
        loop {
            if let Some(value) = self.get() {
                return value;
            }
            let making = self.making.load(Ordering::Acquire);
            if making == pid {
                // Another thread of this process is making it.
                std::thread::yield_now();
                continue;
            }
            if self
                .making
                .compare_exchange(making, pid, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let guard = MakingGuard(&self.making);
            if let Some(value) = self.get() {
                // Made between our look and our claim.
                return value;
            }
            let made: &'static Made<T> = Box::leak(Box::new(Made { pid, value: make() }));
            self.made.store(std::ptr::from_ref(made).cast_mut(), Ordering::Release);
            drop(guard);
            return &made.value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait status of child `pid`; a child still running after a minute is hung: it is
    /// killed and the test fails.
    fn wait_at_most_a_minute(pid: i32) -> i32 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut status = 0;
        // SAFETY: `status` is a valid int for waitpid to fill.
        while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0 {
            if std::time::Instant::now() > deadline {
                // SAFETY: kill(2) of our own child; no pointers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("the forked child hangs");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        status
    }

    #[test]
    fn one_value_per_process_shared_by_its_threads() {
        static VALUE: PerProcess<std::sync::Mutex<u32>> = PerProcess::new();
        let made = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    *VALUE
                        .get_or_init(|| {
                            made.fetch_add(1, Ordering::Relaxed);
                            std::sync::Mutex::new(0)
                        })
                        .lock()
                        .unwrap() += 1;
                });
            }
        });
        assert_eq!(made.load(Ordering::Relaxed), 1, "made more than once in one process");
        assert_eq!(*VALUE.get().unwrap().lock().unwrap(), 8);
    }

    #[test]
    fn a_forked_child_makes_its_own_value_though_the_parents_lock_is_held() {
        static VALUE: PerProcess<std::sync::Mutex<u32>> = PerProcess::new();
        let held = VALUE.get_or_init(|| std::sync::Mutex::new(1)).lock().unwrap();
        // SAFETY: fork; the child only locks a fresh mutex and calls _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let fresh = VALUE.get_or_init(|| std::sync::Mutex::new(2));
            let ok = *fresh.lock().unwrap() == 2;
            // SAFETY: _exit takes no pointers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert!(pid > 0);
        let status = wait_at_most_a_minute(pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status:#x}");
        assert_eq!(*held, 1, "the parent keeps its own value");
    }
}
