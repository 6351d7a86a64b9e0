//! Overflow signals (`CPC_OVF_NOTIFY_EMT`) on the simulator host.
//!
//! The simulator's programs run inside the thread that calls `pctx_run` (see
//! [`crate::pctx`]), so that thread stands for the simulated process: a set bound to it with
//! `cpc_bind_pctx` whose request has `CPC_OVF_NOTIFY_EMT` gets, as on the Linux host (see
//! [`super::linux`]), a sampling PMC of the request's event with the period its preset lacks to
//! wrap, attached to the simulated process. While such a set is bound, `pctx_run` runs the
//! machine one block execution per CPU per tick and reads the log after each tick: at the
//! sample of an overflow it stops the set's counters (the simulated process has run no
//! further, so the frozen values are exact: `(preset + events) mod 2^64`, 0 for a period that
//! ends on a block), and sends the calling thread [`super::signal::SIGEMT`] with `si_code`
//! `EMT_CPCOVF` and `si_addr` the sampled instruction pointer, which its handler receives
//! before the machine goes on. In that thread, `cpc_request_preset` and `cpc_set_restart`
//! (from the handler or after it) act on the set that signalled when the thread has no set of
//! its own (`cpc_bind_curlwp`); the set stays frozen until restarted. An SMPL request with the
//! flag signals once, when its records are in.
//!
//! `cpc_bind_curlwp` of such a request fails `ENOTSUP` on the simulator: the calling thread
//! runs no simulated code, so its counters would never overflow.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::signal::signal_self;
use super::{OverflowTarget, lock};

/// A bound set's PMCs that signal, and the set: as the target of their samples, and as itself
/// for [`signalled`] to give back.
#[derive(Clone)]
struct Watch {
    pmcs: Vec<u32>,
    target: Weak<Mutex<dyn OverflowTarget>>,
    set: Weak<dyn Any + Send + Sync>,
}

/// A set that signalled: the target of its samples, and the set itself.
#[derive(Clone)]
struct Signalled {
    target: Arc<Mutex<dyn OverflowTarget>>,
    set: Arc<dyn Any + Send + Sync>,
}

static WATCHES: Mutex<Vec<Watch>> = Mutex::new(Vec::new());

thread_local! {
    /// The set whose overflow signal this thread received last: what `cpc_set_restart` and
    /// `cpc_request_preset` act on when the thread has no set bound with `cpc_bind_curlwp`.
    static SIGNALLED: RefCell<Option<Signalled>> = const { RefCell::new(None) };
}

fn watches() -> std::sync::MutexGuard<'static, Vec<Watch>> {
    WATCHES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Watches the signalling PMCs `pmcs` of the bound set `set`.
pub(crate) fn watch<T: OverflowTarget>(pmcs: Vec<u32>, set: &Arc<Mutex<T>>) {
    let weak = Arc::downgrade(set);
    let target: Weak<Mutex<dyn OverflowTarget>> = weak.clone();
    let set: Weak<dyn Any + Send + Sync> = weak;
    watches().push(Watch { pmcs, target, set });
}

/// Stops watching `pmcs` (their set is released).
pub(crate) fn unwatch(pmcs: &[u32]) {
    let mut watches = watches();
    for watch in watches.iter_mut() {
        watch.pmcs.retain(|p| !pmcs.contains(p));
    }
    watches.retain(|w| !w.pmcs.is_empty());
}

/// Whether a bound set signals (so `pctx_run` checks the log after every tick).
pub(crate) fn watching() -> bool {
    !watches().is_empty()
}

/// An overflow to signal: the set that froze, and the sampled instruction pointer.
pub(crate) struct Overflow {
    signalled: Signalled,
    ip: u64,
}

/// Reads the samples of the watched PMCs: the first that calls for a signal (an overflow of
/// a running set, which is now frozen, or an SMPL request's last record).
pub(crate) fn check() -> Option<Overflow> {
    let watched = watches().clone();
    for watch in watched {
        let (Some(target), Some(set)) = (watch.target.upgrade(), watch.set.upgrade()) else {
            continue;
        };
        for pmc in watch.pmcs {
            let Ok(samples) = crate::smpl::take_samples("overflow", pmc) else { continue };
            if samples.is_empty() {
                continue;
            }
            // The log's time is the simulated machine's, not this CPU's: every sample read
            // here is new (the log is read after each tick, and a restart comes before the
            // next one), so each counts as taken now.
            let now: Vec<_> =
                samples.iter().map(|s| crate::smpl::Sample { tsc: u64::MAX, ..*s }).collect();
            let ip = lock(&target).on_samples(pmc, &now);
            if let Some(ip) = ip {
                return Some(Overflow { signalled: Signalled { target, set }, ip });
            }
        }
    }
    None
}

/// Sends the calling thread [`super::signal::SIGEMT`] for `overflow`; its handler runs before
/// this returns (a signal a thread sends itself is delivered at once).
pub(crate) fn deliver(overflow: Overflow) {
    SIGNALLED.with(|s| *s.borrow_mut() = Some(overflow.signalled));
    signal_self(overflow.ip);
}

/// The set whose signal this thread received last, if it is still bound (`S`: the set as
/// [`watch`] was given it).
pub(crate) fn signalled<S: Any + Send + Sync>() -> Option<Arc<S>> {
    let signalled = SIGNALLED.with(|s| s.borrow().clone())?;
    if !lock(&signalled.target).is_live() {
        return None;
    }
    signalled.set.downcast::<S>().ok()
}
