//! Overflow signals (`CPC_OVF_NOTIFY_EMT`): watchers read the samples of a bound set's
//! overflow PMCs from the process's pmc log and hand them to the set, which says whether they
//! call for a signal (it freezes at an overflow; an SMPL request signals when its records are
//! in); the watcher then sends it.
//!
//! * [`linux`] — the Linux host's watcher thread, for sets bound to a thread;
//! * [`sim`] — the simulator's, run by `pctx_run` between ticks, for sets bound to a simulated
//!   process;
//! * [`signal`] — the signal itself ([`SIGEMT`] with `EMT_CPCOVF`) and how it is sent.
//!
//! The watchers know a bound set only as an `OverflowTarget`: they hold it weakly, and the
//! set tells them to stop watching its PMCs (`unwatch`) when it gives them back.

pub mod linux;
pub mod signal;
// Without the simulator host (the cargo feature `sim`) no set signals through it: binds still
// register and unregister their PMCs, but `pctx_run` never reads them.
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
pub mod sim;

use std::sync::{Mutex, MutexGuard, PoisonError};

pub use signal::SIGEMT;
#[cfg(target_os = "linux")]
pub use signal::trigger_signal;

/// A bound set as the overflow watchers see it.
pub(crate) trait OverflowTarget: Send + 'static {
    /// Takes the samples a watcher read of PMC `pmc`; the instruction pointer to signal with,
    /// if they call for a signal.
    fn on_samples(&mut self, pmc: u32, samples: &[crate::smpl::Sample]) -> Option<u64>;

    /// Whether the set is still bound (in this process).
    fn is_live(&self) -> bool;
}

/// Locks a watched set; a thread that panicked while holding it left it consistent (every
/// field is written whole), so a poisoned lock is used as is.
fn lock(target: &Mutex<dyn OverflowTarget>) -> MutexGuard<'_, dyn OverflowTarget> {
    target.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Stops watching `pmcs` (their set gives them back).
pub(crate) fn unwatch(pmcs: &[u32]) {
    linux::unwatch(pmcs);
    sim::unwatch(pmcs);
}
