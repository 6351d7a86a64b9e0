//! The driver's critical section in a user process: every signal blocked on the calling thread.
//!
//! The driver holds its spin locks inside [`hwpmc::Kernel::enter_critical_section`]; a kernel
//! disables interrupts and preemption there so that nothing runs on the CPU of a lock holder
//! that could want the same lock. In this process the driver's "CPU" is a thread, and what can
//! run on a thread in the middle of its code is a signal handler — which may call libpmc (a
//! SIGIO handler reading its PMC when the driver says a target is gone, a SIGALRM handler
//! reading counters): inside a driver lock that handler would spin for ever on the lock its own
//! thread holds. With every signal blocked it runs when the section ends instead, as an interrupt
//! that arrived with interrupts disabled does.
//!
//! Preemption cannot be disabled in a user process: another thread that wants a lock whose holder
//! Linux took off its CPU spins until the holder runs again, which it does (the scheduler runs
//! every runnable thread), so that costs time, never progress. The section is two
//! `rt_sigprocmask` calls; the driver takes its locks in system calls and in the worker's
//! service, never per counted event.
//!
//! The saved mask fits [`hwpmc::CriticalSection`]'s 64 bits: Linux has 64 signals (1 to
//! `SIGRTMAX` = 64), signal `n` at bit `n − 1`. Sections nest: an inner one saves "all
//! blocked" and restores it, the outer one restores the thread's own mask.

/// Blocks every signal on the calling thread; returns its previous mask (signal `n` at bit
/// `n − 1`).
pub(crate) fn block_signals() -> u64 {
    // SAFETY: `all` and `old` are valid sigset_t values for sigfillset and pthread_sigmask to
    // write; pthread_sigmask only changes the calling thread's mask.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        old
    };
    (1..=64).filter(|&signo| is_member(&old, signo)).fold(0, |bits, signo| bits | 1 << (signo - 1))
}

/// Sets the calling thread's mask to `saved` (from [`block_signals`]); a signal that came while
/// blocked and is unblocked now is delivered before this returns.
pub(crate) fn restore_signals(saved: u64) {
    // SAFETY: `mask` is a valid sigset_t for sigemptyset and sigaddset to write (signal numbers
    // 1..=64 are in range; the kernel ignores the few glibc keeps for itself);
    // pthread_sigmask reads it and only changes the calling thread's mask.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        for signo in (1..=64).filter(|signo| saved & 1 << (signo - 1) != 0) {
            libc::sigaddset(&mut mask, signo);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
    }
}

fn is_member(set: &libc::sigset_t, signo: i32) -> bool {
    // SAFETY: `set` is a valid, initialized sigset_t; sigismember only reads it.
    unsafe { libc::sigismember(set, signo) == 1 }
}

#[cfg(test)]
mod tests {
    use super::{block_signals, restore_signals};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// SIGURG deliveries to this test's handler (SIGURG: no other test of the process uses it,
    /// and its default action is to ignore it, so a stray one harms nothing).
    static DELIVERED: AtomicU32 = AtomicU32::new(0);

    extern "C" fn count(_: libc::c_int) {
        DELIVERED.fetch_add(1, Ordering::SeqCst);
    }

    /// The calling thread's mask, as [`block_signals`] encodes it.
    fn current_mask() -> u64 {
        let saved = block_signals();
        restore_signals(saved);
        saved
    }

    #[test]
    fn a_signal_raised_in_a_section_runs_when_the_outermost_section_ends_and_the_mask_is_restored()
    {
        // SAFETY: installs a handler that only touches an atomic (async-signal-safe); an
        // all-zero sigaction with sa_sigaction set is valid for sigaction to read.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = count as *const () as usize;
            assert_eq!(libc::sigaction(libc::SIGURG, &action, std::ptr::null_mut()), 0);
        }
        let before = current_mask();
        let outer = block_signals();
        assert_eq!(outer, before, "the section saves the thread's own mask");
        let inner = block_signals();
        assert_eq!(inner & (1 << (libc::SIGURG - 1)), 1 << (libc::SIGURG - 1), "inside: blocked");
        // SAFETY: sends SIGURG to this thread, whose handler is installed above.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGURG) };
        assert_eq!(DELIVERED.load(Ordering::SeqCst), 0, "no handler runs inside the section");
        restore_signals(inner);
        assert_eq!(DELIVERED.load(Ordering::SeqCst), 0, "nor after the inner section");
        restore_signals(outer);
        assert_eq!(DELIVERED.load(Ordering::SeqCst), 1, "it runs when the outer section ends");
        assert_eq!(current_mask(), before, "the thread's mask is what it was");
    }
}
