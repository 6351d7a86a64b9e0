//! The Linux host's worker thread: the kernel thread the driver would have. It sleeps in
//! `poll(2)` until there is something to do — perf says a sampling ring has filled to its
//! wakeup watermark, a process a PMC counts has ended (its pidfd), or the driver asks for its
//! log writer — then moves what perf's rings hold into the driver, notices targets that ended,
//! lets the driver report lost samples, and writes the log buffers that filled. It never wakes
//! on a timer: the measured program's context switches are its own.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, MutexGuard};

use hwpmc::Pid;

use super::watched::{PROCESS_KEY, Watched};
use crate::host::current_pid::current_pid as getpid;

/// The worker's wake-up line: an eventfd, and the process whose worker thread runs.
pub(crate) struct Worker {
    /// The process whose worker thread runs (0: none; after fork the child has none).
    owner: Mutex<Pid>,
    /// Written to wake the worker; `None` if the kernel refused an eventfd (then the worker
    /// is never started and the rings are read at flush, stop and exit only).
    wakeup: Option<OwnedFd>,
}

impl Default for Worker {
    fn default() -> Self {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        // SAFETY: `fd` was just returned by eventfd and is owned by nothing else.
        let wakeup = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        Worker { owner: Mutex::new(0), wakeup }
    }
}

impl Worker {
    fn owner(&self) -> MutexGuard<'_, Pid> {
        self.owner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the worker to run now (from any thread; never blocks).
    pub(crate) fn wake(&self) {
        if let Some(fd) = &self.wakeup {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a valid local to our eventfd (a full counter only
            // means a wake-up is pending already).
            unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
        }
    }

    /// Starts this process's worker thread, if it is not running yet, and wakes it. Each time
    /// it wakes it runs `service`; it waits on what `watch` returns.
    pub(crate) fn ensure_running(&'static self, service: fn(), watch: fn() -> Vec<Watched>) {
        if self.wakeup.is_none() {
            return;
        }
        {
            let mut owner = self.owner();
            if *owner != getpid() {
                let spawned =
                    std::thread::Builder::new().name("hwpmc-worker".into()).spawn(move || {
                        let mut hung = BTreeSet::new();
                        loop {
                            self.sleep(&watch(), &mut hung);
                            service();
                        }
                    });
                if spawned.is_ok() {
                    *owner = getpid();
                }
            }
        }
        self.wake();
    }

    /// Waits until woken or until a watched descriptor is readable. A descriptor that reports
    /// only a hang-up (a ring whose task ended, until the driver detaches it) is left out of
    /// the next waits, so that it cannot make the worker spin; `hung` remembers them by key.
    fn sleep(&self, watched: &[Watched], hung: &mut BTreeSet<u64>) {
        let Some(wakeup) = &self.wakeup else { return };
        hung.retain(|key| watched.iter().any(|(k, _)| k == key));
        let waited: Vec<&Watched> = watched.iter().filter(|(k, _)| !hung.contains(k)).collect();
        let mut fds: Vec<libc::pollfd> = std::iter::once(wakeup.as_raw_fd())
            .chain(waited.iter().map(|(_, fd)| fd.as_raw_fd()))
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs for poll to update.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready <= 0 {
            return; // EINTR: go round once more.
        }
        if fds[0].revents & libc::POLLIN != 0 {
            let mut count: u64 = 0;
            // SAFETY: reads 8 bytes into a valid local from our non-blocking eventfd.
            unsafe { libc::read(wakeup.as_raw_fd(), (&raw mut count).cast(), 8) };
        }
        let only_hung_up = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
        for (pollfd, (key, _)) in fds[1..].iter().zip(&waited) {
            // A process ends once: its pidfd has nothing more to say after that.
            let process_ended = key & PROCESS_KEY != 0 && pollfd.revents != 0;
            if process_ended
                || (pollfd.revents & only_hung_up != 0 && pollfd.revents & libc::POLLIN == 0)
            {
                hung.insert(*key);
            }
        }
    }
}
