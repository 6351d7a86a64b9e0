//! The Linux host's worker thread: the kernel thread the driver would have. Every 20 ms while
//! PMCs run (and whenever the driver asks for its log writer) it moves what perf's rings hold
//! into the driver, notices targets that ended, lets the driver report lost samples, and writes
//! the log buffers that filled. Idle, it sleeps until woken.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use hwpmc::Pid;

use super::kernel::getpid;

/// How often the worker looks at the rings while PMCs run.
const PERIOD: Duration = Duration::from_millis(20);

#[derive(Default)]
struct State {
    /// The process whose worker thread runs (0: none; after fork the child has none).
    owner: Pid,
    /// Whether there is work to do now.
    woken: bool,
}

/// The worker's wake-up line.
#[derive(Default)]
pub(crate) struct Worker {
    state: Mutex<State>,
    wakeup: Condvar,
}

impl Worker {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the worker to run now (from any thread; never blocks for long).
    pub(crate) fn wake(&self) {
        self.lock().woken = true;
        self.wakeup.notify_one();
    }

    /// Starts this process's worker thread, running `service` each time it wakes, if it is
    /// not running yet; `busy` says whether PMCs run (then it wakes every 20 ms).
    pub(crate) fn ensure_running(&'static self, service: fn(), busy: fn() -> bool) {
        {
            let mut state = self.lock();
            if state.owner != getpid() {
                let spawned =
                    std::thread::Builder::new().name("hwpmc-worker".into()).spawn(move || {
                        loop {
                            self.sleep(busy());
                            service();
                        }
                    });
                if spawned.is_ok() {
                    state.owner = getpid();
                }
            }
        }
        self.wake();
    }

    /// Waits until woken, or for one period if `busy`.
    fn sleep(&self, busy: bool) {
        let mut state = self.lock();
        if !state.woken {
            state = if busy {
                self.wakeup.wait_timeout(state, PERIOD).map_or_else(|e| e.into_inner().0, |r| r.0)
            } else {
                self.wakeup.wait(state).unwrap_or_else(|e| e.into_inner())
            };
        }
        state.woken = false;
    }
}
