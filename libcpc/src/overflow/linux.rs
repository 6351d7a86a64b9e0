//! Overflow signals (`CPC_OVF_NOTIFY_EMT`) on the Linux host, over libpmc.
//!
//! A request with the flag gets, next to its counting PMC, a sampling PMC of the same event
//! whose period is what its preset lacks to wrap (`2^64 - preset`): the driver writes a sample
//! to the process's pmc log (see [`crate::smpl`]) when the counter overflows. A watcher thread
//! reads the log; at an overflow it stops the set's counters (the context is frozen until
//! `cpc_set_restart`), then has the bound thread receive [`SIGEMT`](super::SIGEMT) with `si_code` =
//! [`EMT_CPCOVF`](crate::consts::EMT_CPCOVF) and `si_addr` = the sampled instruction pointer. Linux lets only a thread
//! send itself a signal with a positive `si_code`, so the watcher queues libcpc's own signal
//! ([`trigger_signal`](super::trigger_signal), `SIGRTMAX - 1`, carrying the address) to the thread, whose handler
//! sends it the `SIGEMT`. A program using libcpc's overflow signals must leave `SIGRTMAX - 1`
//! to libcpc.
//!
//! Linux has no SIGEMT on x86 and arm: it is `SIGSTKFLT` there (as `libcpc.h` defines it),
//! which the kernel never raises on those architectures. The signal follows the overflow by
//! the watcher's polling interval (about a millisecond), so a few events more may be counted
//! past the overflow; the counters then read `(preset + events) mod 2^64`, a small number.
//! An SMPL request with `CPC_OVF_NOTIFY_EMT` signals once, when its `smpl_nrecs` records are in
//! (the watcher reads its samples into the request's records; nothing stops).
//! Only sets bound with `cpc_bind_curlwp` signal: CPU-bound sets never do (as on illumos), and
//! `cpc_bind_pctx` of a set with such a request fails `ENOTSUP` (the signal would be the
//! controlled process's, which cannot be sent one carrying `EMT_CPCOVF` from another process).
//! A forked child has its own watcher, started by its first bind of such a request, and the
//! parent's sets act as unbound in it (their counters are the parent's). Each pass of the
//! watcher holds a gate that an at-fork handler takes before a fork, so no lock the watcher
//! takes is held in the child.
//! The simulator's overflow signals are [`super::sim`]'s; the signal itself is
//! [`super::signal`]'s.

#[cfg(target_os = "linux")]
use std::sync::{Arc, Mutex, Once, PoisonError, Weak};
#[cfg(target_os = "linux")]
use std::time::Duration;

#[cfg(target_os = "linux")]
use super::signal::{install_trigger, signal_thread};
#[cfg(target_os = "linux")]
use super::{OverflowTarget, lock};

#[cfg(target_os = "linux")]
/// How often the watcher reads the log while an overflow request is bound.
const POLL: Duration = Duration::from_micros(500);

#[cfg(target_os = "linux")]
/// An overflow PMC to watch.
#[derive(Debug, Clone)]
struct Watch {
    pmc: u32,
    target: Weak<Mutex<dyn OverflowTarget>>,
    tid: i32,
}

#[cfg(target_os = "linux")]
/// A process's overflow PMCs to watch, and its watcher thread (made again in a forked child:
/// see [`crate::fork`]).
struct Watcher {
    watches: Mutex<Vec<Watch>>,
    started: Once,
}

#[cfg(target_os = "linux")]
static WATCHER: crate::fork::PerProcess<Watcher> = crate::fork::PerProcess::new();

#[cfg(target_os = "linux")]
/// This process's watcher state.
fn watcher_state() -> &'static Watcher {
    WATCHER.get(|| Watcher { watches: Mutex::new(Vec::new()), started: Once::new() })
}

#[cfg(target_os = "linux")]
/// This process's watch list.
fn watches() -> std::sync::MutexGuard<'static, Vec<Watch>> {
    watcher_state().watches.lock().unwrap_or_else(PoisonError::into_inner)
}
static IN_USE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process has used overflow signals (the watcher runs).
pub(crate) fn in_use() -> bool {
    IN_USE.load(std::sync::atomic::Ordering::Acquire)
}

#[cfg(target_os = "linux")]
/// Watches overflow PMCs `pmcs` of the bound set `target`, signalling thread `tid` at an
/// overflow.
pub(crate) fn watch<T: OverflowTarget>(pmcs: &[u32], target: &Arc<Mutex<T>>, tid: i32) {
    let target = Arc::downgrade(target);
    let target: Weak<Mutex<dyn OverflowTarget>> = target;
    watches().extend(pmcs.iter().map(|&pmc| Watch { pmc, target: target.clone(), tid }));
}

#[cfg(target_os = "linux")]
/// Starts the watcher thread, before the first overflow PMC counts: a new thread's first
/// steps (its stack, its allocator arena) are page faults of this process, which a
/// process-scope PMC of page faults would count.
pub(crate) fn start_watcher() {
    watcher_state().started.call_once(|| {
        IN_USE.store(true, std::sync::atomic::Ordering::Release);
        install_trigger();
        let _ = std::thread::Builder::new().name("libcpc-overflow".into()).spawn(watcher);
    });
}

#[cfg(target_os = "linux")]
/// Stops watching `pmcs`.
pub(crate) fn unwatch(pmcs: &[u32]) {
    watches().retain(|w| !pmcs.contains(&w.pmc));
}

#[cfg(target_os = "linux")]
fn watcher() {
    loop {
        if watches().is_empty() {
            std::thread::sleep(POLL * 20);
            continue;
        }
        std::thread::sleep(POLL);
        // A pass holds the gate: a fork waits for its end, so no lock it takes is held then.
        let _gate = crate::fork::GATE.hold();
        let watches = watches().clone();
        for watch in watches {
            let Ok(samples) = crate::smpl::take_samples("overflow", watch.pmc) else { continue };
            let Some(target) = watch.target.upgrade() else { continue };
            let ip = lock(&target).on_samples(watch.pmc, &samples);
            if let Some(ip) = ip {
                signal_thread(watch.tid, ip);
            }
        }
    }
}

/// Overflow signals need the Linux host: elsewhere nothing is watched.
#[cfg(not(target_os = "linux"))]
pub(crate) fn watch<T: super::OverflowTarget>(
    _pmcs: &[u32],
    _target: &std::sync::Arc<std::sync::Mutex<T>>,
    _tid: i32,
) {
}

/// Overflow signals need the Linux host: elsewhere nothing is watched.
#[cfg(not(target_os = "linux"))]
pub(crate) fn start_watcher() {}

/// Overflow signals need the Linux host: elsewhere nothing is watched.
#[cfg(not(target_os = "linux"))]
pub(crate) fn unwatch(_pmcs: &[u32]) {}
