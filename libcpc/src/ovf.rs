//! Overflow signals (`CPC_OVF_NOTIFY_EMT`) on the Linux host, over libpmc.
//!
//! A request with the flag gets, next to its counting PMC, a sampling PMC of the same event
//! whose period is what its preset lacks to wrap (`2^64 - preset`): the driver writes a sample
//! to the process's pmc log (see [`crate::smpl`]) when the counter overflows. A watcher thread
//! reads the log; at an overflow it stops the set's counters (the context is frozen until
//! `cpc_set_restart`), then has the bound thread receive [`SIGEMT`] with `si_code` =
//! [`EMT_CPCOVF`] and `si_addr` = the sampled instruction pointer. Linux lets only a thread
//! send itself a signal with a positive `si_code`, so the watcher queues libcpc's own signal
//! ([`trigger_signal`], `SIGRTMAX - 1`, carrying the address) to the thread, whose handler
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
//! The simulator's overflow signals are [`crate::ovf_sim`]'s.

#[cfg(target_os = "linux")]
use std::sync::{Arc, Mutex, Once, PoisonError, Weak};
#[cfg(target_os = "linux")]
use std::time::Duration;

#[cfg(target_os = "linux")]
use crate::bind::{Binding, lock};
#[cfg(target_os = "linux")]
use crate::consts::EMT_CPCOVF;

/// The signal of an overflow: `SIGEMT` where the system has one, else `SIGSTKFLT`.
#[cfg(target_os = "linux")]
pub const SIGEMT: i32 = libc::SIGSTKFLT;
/// The signal of an overflow: the system's `SIGEMT`.
#[cfg(not(target_os = "linux"))]
pub const SIGEMT: i32 = libc::SIGEMT;

#[cfg(target_os = "linux")]
/// How often the watcher reads the log while an overflow request is bound.
const POLL: Duration = Duration::from_micros(500);

#[cfg(target_os = "linux")]
/// An overflow PMC to watch.
#[derive(Debug, Clone)]
struct Watch {
    pmc: u32,
    binding: Weak<Mutex<Binding>>,
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
/// The calling thread's kernel id.
pub(crate) fn current_tid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

#[cfg(target_os = "linux")]
/// Watches overflow PMCs `pmcs` of `binding`, signalling thread `tid` at an overflow.
pub(crate) fn watch(pmcs: &[u32], binding: &Arc<Mutex<Binding>>, tid: i32) {
    watches().extend(pmcs.iter().map(|&pmc| Watch { pmc, binding: Arc::downgrade(binding), tid }));
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
            let Some(binding) = watch.binding.upgrade() else { continue };
            let ip = lock(&binding).on_samples(watch.pmc, &samples);
            if let Some(ip) = ip {
                signal(watch.tid, ip);
            }
        }
    }
}

#[cfg(target_os = "linux")]
/// The signal the watcher queues to a bound thread at an overflow: `SIGRTMAX - 1`.
pub fn trigger_signal() -> i32 {
    libc::SIGRTMAX() - 1
}

#[cfg(target_os = "linux")]
/// Where the kernel's siginfo keeps the address of a fault (`si_addr`) and the value of a
/// queued signal (`si_value`) on 64-bit Linux.
const SI_ADDR_OFFSET: usize = 16;
#[cfg(target_os = "linux")]
const SI_VALUE_OFFSET: usize = 24;

#[cfg(target_os = "linux")]
/// Queues `signo` to thread `tid` of this process with `si_code` `code` and `word` at
/// `offset` of the siginfo.
fn queue(tid: i32, signo: i32, code: i32, offset: usize, word: u64) {
    // SAFETY: an all-zero siginfo_t is valid; the fields written are those of the kernel's
    // layout on 64-bit Linux (signo at 0, code at 8, the union from 16). rt_tgsigqueueinfo
    // reads the siginfo and fails harmlessly if the thread is gone.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        info.si_signo = signo;
        info.si_code = code;
        std::ptr::from_mut(&mut info).cast::<u8>().add(offset).cast::<u64>().write_unaligned(word);
        libc::syscall(libc::SYS_rt_tgsigqueueinfo, libc::getpid(), tid, signo, &info);
    }
}

#[cfg(target_os = "linux")]
/// Has thread `tid` receive [`SIGEMT`] with `si_addr` = `ip` (through [`trigger_signal`]).
fn signal(tid: i32, ip: u64) {
    queue(tid, trigger_signal(), libc::SI_QUEUE, SI_VALUE_OFFSET, ip);
}

#[cfg(target_os = "linux")]
/// The handler of [`trigger_signal`], on the bound thread: sends the thread itself
/// [`SIGEMT`] with `si_code` [`EMT_CPCOVF`] and the address the watcher queued. Only system
/// calls: async-signal-safe.
extern "C" fn on_trigger(
    _signo: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo; the queued value is at its 64-bit offset.
    let ip = unsafe { info.cast::<u8>().add(SI_VALUE_OFFSET).cast::<u64>().read_unaligned() };
    queue(current_tid(), SIGEMT, EMT_CPCOVF, SI_ADDR_OFFSET, ip);
}

#[cfg(target_os = "linux")]
/// Installs the handler of [`trigger_signal`].
fn install_trigger() {
    // SAFETY: a zeroed sigaction with a SA_SIGINFO handler that only makes system calls.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_trigger
            as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
            as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(trigger_signal(), &action, std::ptr::null_mut());
    }
}

/// Sends the calling thread [`SIGEMT`] with `si_code` [`EMT_CPCOVF`] and `si_addr` = `ip`
/// (the simulator's overflows, see [`crate::ovf_sim`]): Linux delivers it before the system
/// call returns.
#[cfg(target_os = "linux")]
pub(crate) fn signal_self(ip: u64) {
    queue(current_tid(), SIGEMT, EMT_CPCOVF, SI_ADDR_OFFSET, ip);
}

/// Sends the calling thread [`SIGEMT`] (elsewhere a thread cannot give its own signal a
/// `si_code`: it is `SI_USER`).
#[cfg(not(target_os = "linux"))]
pub(crate) fn signal_self(_ip: u64) {
    // SAFETY: raise sends a signal to the calling thread.
    unsafe { libc::raise(SIGEMT) };
}

/// [`SIGEMT`] blocked for the calling thread while it lives (so that a handler calling libcpc
/// cannot interrupt libcpc holding a set's lock), restored when dropped.
pub(crate) struct SignalHeld {
    previous: libc::sigset_t,
}

impl SignalHeld {
    /// Blocks [`SIGEMT`] if `hold`.
    pub(crate) fn new(hold: bool) -> Option<SignalHeld> {
        if !hold {
            return None;
        }
        // SAFETY: sigset operations on local sets; pthread_sigmask changes this thread's mask.
        unsafe {
            let mut block: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, SIGEMT);
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut previous);
            Some(SignalHeld { previous })
        }
    }
}

impl Drop for SignalHeld {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut()) };
    }
}

/// Overflow signals need the Linux host: elsewhere nothing is watched.
#[cfg(not(target_os = "linux"))]
pub(crate) fn current_tid() -> i32 {
    0
}

/// Overflow signals need the Linux host: elsewhere nothing is watched.
#[cfg(not(target_os = "linux"))]
pub(crate) fn watch(
    _pmcs: &[u32],
    _binding: &std::sync::Arc<std::sync::Mutex<crate::bind::Binding>>,
    _tid: i32,
) {
}

/// Overflow signals need the Linux host: elsewhere nothing is watched.
#[cfg(not(target_os = "linux"))]
pub(crate) fn start_watcher() {}

/// Overflow signals need the Linux host: elsewhere nothing is watched.
#[cfg(not(target_os = "linux"))]
pub(crate) fn unwatch(_pmcs: &[u32]) {}
