//! The overflow signal itself: [`SIGEMT`] with `si_code` [`EMT_CPCOVF`] and `si_addr` the
//! sampled instruction pointer, sent to a bound thread (Linux: through libcpc's own
//! [`trigger_signal`], since only a thread may send itself a signal with a positive `si_code`)
//! or to the calling thread, and `SignalHeld`, which keeps it out while libcpc holds a lock.

#[cfg(target_os = "linux")]
use crate::consts::EMT_CPCOVF;

/// The signal of an overflow: `SIGEMT` where the system has one, else `SIGSTKFLT`.
#[cfg(target_os = "linux")]
pub const SIGEMT: i32 = libc::SIGSTKFLT;
/// The signal of an overflow: the system's `SIGEMT`.
#[cfg(not(target_os = "linux"))]
pub const SIGEMT: i32 = libc::SIGEMT;

#[cfg(target_os = "linux")]
/// The calling thread's kernel id.
pub(crate) fn current_tid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Overflow signals need the Linux host: elsewhere nothing is watched.
#[cfg(not(target_os = "linux"))]
pub(crate) fn current_tid() -> i32 {
    0
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
pub(crate) fn signal_thread(tid: i32, ip: u64) {
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
pub(crate) fn install_trigger() {
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
/// (the simulator's overflows, see [`super::sim`]): Linux delivers it before the system
/// call returns.
#[cfg(target_os = "linux")]
#[cfg_attr(not(feature = "sim"), allow(dead_code))] // The simulator's overflows.
pub(crate) fn signal_self(ip: u64) {
    queue(current_tid(), SIGEMT, EMT_CPCOVF, SI_ADDR_OFFSET, ip);
}

/// Sends the calling thread [`SIGEMT`] (elsewhere a thread cannot give its own signal a
/// `si_code`: it is `SI_USER`).
#[cfg(not(target_os = "linux"))]
#[cfg_attr(not(feature = "sim"), allow(dead_code))] // The simulator's overflows.
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
