//! libpmc in a process that forks while other threads use PMCs: the child can use libpmc at once
//! (no lock of the parent's is held in it), and the parent's PMCs keep working.
#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pmc::PmcSpec;

/// One full use of a process PMC on this process: allocate, attach, start, read, stop, read,
/// release. Returns the count read after stopping.
fn use_a_pmc(event: &str) -> Result<u64, pmc::Error> {
    let pmc = PmcSpec::new(event).allocate()?;
    pmc.attach(0)?;
    pmc.start()?;
    let running = pmc.read()?;
    pmc.stop()?;
    let stopped = pmc.read()?;
    assert!(stopped >= running, "{event}: {stopped} after stop < {running} while running");
    Ok(stopped)
}

/// The wait status of child `pid`; `None` if it is still running after `limit` (it is hung:
/// it is killed).
fn wait_within(pid: i32, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    let mut status = 0;
    // SAFETY: `status` is a valid int for waitpid to fill.
    while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0 {
        if Instant::now() > deadline {
            // SAFETY: kill(2) of our own child; no pointers.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: as above.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Some(status)
}

#[test]
fn children_forked_while_other_threads_use_pmcs_can_use_libpmc_at_once() {
    const FORKS: usize = 60;
    let stop = AtomicBool::new(false);
    let parent_rounds = AtomicU64::new(0);
    let (mut hung, mut failed) = (0, Vec::new());
    std::thread::scope(|s| {
        // Threads that allocate, start, read, stop and release PMCs without a pause (and with
        // that take every lock of the embedded driver, its host and its worker).
        for event in ["task-clock", "page-faults", "context-switches"] {
            let (stop, rounds) = (&stop, &parent_rounds);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    use_a_pmc(event).unwrap_or_else(|e| panic!("parent, {event}: {e}"));
                    rounds.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // Wait until the threads are busy, then fork in a loop.
        while parent_rounds.load(Ordering::Relaxed) < 10 {
            std::thread::yield_now();
        }
        for _ in 0..FORKS {
            // SAFETY: fork; the child uses libpmc (the behaviour under test) and _exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let ok = use_a_pmc("task-clock").is_ok() && use_a_pmc("page-faults").is_ok();
                // SAFETY: _exit takes no pointers; the child runs no exit handlers.
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
            match wait_within(pid, Duration::from_secs(30)) {
                None => hung += 1,
                Some(status) if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) => {
                    failed.push(status)
                }
                Some(_) => {}
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(hung, 0, "{hung} of {FORKS} children hung in libpmc");
    assert!(failed.is_empty(), "children failed to use libpmc: wait statuses {failed:x?}");
    // The parent's threads went on working across the forks.
    assert!(parent_rounds.load(Ordering::Relaxed) >= 10 + FORKS as u64 / 10);
}
