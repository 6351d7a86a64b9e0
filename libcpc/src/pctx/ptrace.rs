//! libpctx's process events on the Linux host, with ptrace(2): the process is seized
//! (`PTRACE_SEIZE` with `PTRACE_O_TRACEFORK`, `TRACEVFORK`, `TRACECLONE`, `TRACEEXEC`,
//! `TRACEEXIT`, and `EXITKILL` for a launched one) and `Tracer::run` turns its ptrace stops
//! into [`PctxEvents`] calls while it stops there, so counters are attached to a new process or
//! read at an exec or an exit before it goes on:
//!
//! * a new thread (`clone` with `CLONE_THREAD`): `init_lwp` then `lwp_create`, before it runs;
//! * a new process (`fork`, `vfork`, `clone` without `CLONE_THREAD`): `fork`, then, when forks
//!   are followed, `init_lwp` of its main thread before it runs (its own events follow); a
//!   child not followed is let go (detached), and so is one whose `init_lwp` or `tick` fails
//!   (as illumos's tracker per child gives up alone: the run goes on);
//! * an exec: `fini_lwp` of the process's threads, `exec` with the new command line (as
//!   illumos's `pr_psargs`: arguments joined by spaces, at most 79 bytes), `init_lwp` of the
//!   main thread (the one that executed takes its id); an `exec` callback that fails ends that
//!   process's tracking (it is let go and runs on; the others followed are still followed);
//!   the launch of the command itself (its first exec) is not reported;
//! * a thread's exit: `fini_lwp` then `lwp_exit`; the main thread's exit (the process's end):
//!   `fini_lwp` of every thread, then `exit` with the status;
//! * signals reach the process as without the tracer (a stop signal stops it).
//!
//! LWP ids are thread ids; the main thread's is the process id. Only the thread that seized the
//! process may act on it: everything happens inside `Tracer::run`. Wait statuses are taken
//! per traced thread (never `waitpid(-1)`), so other children of the calling process are not
//! disturbed, and the launched command's own exit status is left for libpmc's `wait`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::events::{CallbackFailed, PctxEvents};
use crate::bind::process_binds::retire_process_binds;
use crate::error::{Error, Result};

const OP: &str = "pctx_run";

/// How long the event loop sleeps when no traced thread has had anything to report for a
/// while; after an event it sleeps [`POLL_AFTER_EVENT`], doubling while nothing comes (a
/// resumed process often stops again soon: a fork's child executes, a command exits).
const POLL: Duration = Duration::from_millis(1);
/// The event loop's first sleep after an event.
const POLL_AFTER_EVENT: Duration = Duration::from_micros(20);

/// The followed processes and their threads, as the tracer sees them.
pub(crate) struct Tracer {
    /// The process pctx launched or captured.
    root: i32,
    /// Whether pctx launched it (its first exec is the launch; its status is `wait`'s).
    created: bool,
    /// Whether the launch's exec is still to come.
    launch_exec_pending: bool,
    follow_forks: bool,
    /// Followed process → its live threads (the main thread first).
    procs: BTreeMap<i32, Vec<i32>>,
    /// Threads that have passed their exit stop, whose last wait status is still to be taken.
    departing: Vec<i32>,
    /// Whether the root's end was reported (a launched one is reaped then).
    root_ended: bool,
    /// Whether the root was let go at an exec its `exec` callback refused.
    root_released: bool,
}

/// A ptrace request on `tid`; the errno on failure.
fn ptrace(
    request: libc::c_uint,
    tid: i32,
    addr: usize,
    data: usize,
) -> std::result::Result<i64, i32> {
    // SAFETY: the requests used here (SEIZE, CONT, DETACH, LISTEN, INTERRUPT, GETEVENTMSG with
    // `data` pointing to a writable c_ulong) take no other pointers; a bad tid fails ESRCH.
    let r =
        unsafe { libc::ptrace(request, tid, addr as *mut libc::c_void, data as *mut libc::c_void) };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    } else {
        Ok(r)
    }
}

/// The message of `tid`'s current event stop (`PTRACE_GETEVENTMSG`).
fn event_message(tid: i32) -> u64 {
    let mut message: libc::c_ulong = 0;
    let _ = ptrace(libc::PTRACE_GETEVENTMSG, tid, 0, std::ptr::from_mut(&mut message) as usize);
    message
}

/// Resumes `tid` from a ptrace stop, delivering `signal` (0: none).
fn resume(tid: i32, signal: i32) {
    let _ = ptrace(libc::PTRACE_CONT, tid, 0, signal as usize);
}

/// Process `pid`'s command line as illumos's `pr_psargs` holds it (what libpctx passes to the
/// `exec` callback): the arguments joined by spaces, cut to 79 bytes (PRARGSZ less its NUL).
fn command_line(pid: i32) -> String {
    const PRARGSZ: usize = 80;
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut joined: Vec<u8> = raw.strip_suffix(&[0]).unwrap_or(&raw).to_vec();
    for byte in &mut joined {
        if *byte == 0 {
            *byte = b' ';
        }
    }
    joined.truncate(PRARGSZ - 1);
    String::from_utf8_lossy(&joined).into_owned()
}

/// The process (thread group) thread `tid` belongs to, from `/proc/TID/status`.
fn thread_group(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// A wait status as a shell reports it: the exit code, or 128 + the killing signal.
fn shell_status(status: i32) -> i32 {
    if libc::WIFSIGNALED(status) { 128 + libc::WTERMSIG(status) } else { libc::WEXITSTATUS(status) }
}

/// Waits for thread `tid`'s next state change (blocking unless `nohang`); `None` if it has
/// none to report (or is not traced).
fn wait_thread(tid: i32, nohang: bool) -> Option<i32> {
    let flags = libc::__WALL | if nohang { libc::WNOHANG } else { 0 };
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int for waitpid to fill.
        let r = unsafe { libc::waitpid(tid, &mut status, flags) };
        if r == tid {
            return Some(status);
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return None;
    }
}

/// Whether `tid` has exited (zombie), without taking its status (so `wait` still can).
fn has_exited(tid: i32) -> bool {
    // SAFETY: an all-zero siginfo_t is a valid output buffer.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with WNOWAIT only looks; `info` is writable.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            tid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
        )
    };
    // A tracer is told of the tracee's ptrace stops too: only an exit counts.
    let exited = matches!(info.si_code, libc::CLD_EXITED | libc::CLD_KILLED | libc::CLD_DUMPED);
    // SAFETY: filled by waitid, or left zero (nothing to report).
    r == 0 && exited && unsafe { info.si_pid() } == tid
}

impl Tracer {
    /// Seizes process `pid`: every thread of a captured one, the (only) thread of a launched
    /// one, which has not executed its command yet. `EPERM` (or the errno) if it cannot be
    /// traced.
    pub(crate) fn seize(pid: i32, created: bool, follow_forks: bool) -> Result<Tracer> {
        let mut options = libc::PTRACE_O_TRACEFORK
            | libc::PTRACE_O_TRACEVFORK
            | libc::PTRACE_O_TRACECLONE
            | libc::PTRACE_O_TRACEEXEC
            | libc::PTRACE_O_TRACEEXIT;
        if created {
            // A launched command dies with its controller (illumos's PR_KLC).
            options |= libc::PTRACE_O_EXITKILL;
        }
        let threads = if created { vec![pid] } else { threads_of(pid) };
        let mut seized = Vec::new();
        for &tid in &threads {
            match ptrace(libc::PTRACE_SEIZE, tid, 0, options as usize) {
                Ok(_) => seized.push(tid),
                // A thread that ended meanwhile.
                Err(libc::ESRCH) if tid != pid => {}
                Err(errno) => {
                    for &tid in &seized {
                        let _ = detach_running(tid);
                    }
                    return Err(Error::new(OP, errno)
                        .because(format!("cannot trace process {pid} (ptrace)")));
                }
            }
        }
        let mut procs = BTreeMap::new();
        procs.insert(pid, seized);
        Ok(Tracer {
            root: pid,
            created,
            launch_exec_pending: created,
            follow_forks,
            procs,
            departing: Vec::new(),
            root_ended: false,
            root_released: false,
        })
    }

    /// Whether the root process's end was reported (a launched one has been reaped).
    pub(crate) fn root_ended(&self) -> bool {
        self.root_ended
    }

    /// Whether the root was let go, running, at an exec its `exec` callback refused (illumos's
    /// `pctx_run` fails then; the process runs on untraced).
    pub(crate) fn root_released(&self) -> bool {
        self.root_released
    }

    /// The threads of the root other than its main one (a captured process's), for their
    /// `init_lwp`.
    pub(crate) fn other_threads(&self) -> Vec<i32> {
        let root = self.root;
        self.procs
            .get(&root)
            .map(|t| t.iter().copied().filter(|&t| t != root).collect())
            .unwrap_or_default()
    }

    /// Runs the followed processes to their ends, reporting their events to `events` and
    /// calling `tick` for each every `msec` ms (0: never) up to `nsamples` times (0: no limit);
    /// returns early (letting them go) when `terminate` is set or the samples are done.
    pub(crate) fn run(
        &mut self,
        msec: u32,
        nsamples: u32,
        terminate: &Arc<AtomicBool>,
        events: &mut dyn PctxEvents,
    ) -> Result<()> {
        let period = Duration::from_millis(u64::from(msec));
        let mut next = Instant::now() + period;
        let mut samples = 0;
        let mut pause = POLL_AFTER_EVENT;
        let outcome = loop {
            if terminate.load(Ordering::Acquire) {
                break Ok(());
            }
            match self.take_events(events) {
                Ok(true) => pause = POLL_AFTER_EVENT,
                Ok(false) => pause = (pause * 2).min(POLL),
                Err(CallbackFailed) => break Err(Error::invalid(OP, "a callback failed")),
            }
            if self.procs.is_empty() {
                break Ok(());
            }
            let now = Instant::now();
            if msec > 0 && now >= next {
                let pids: Vec<i32> = self.procs.keys().copied().collect();
                let mut failed = false;
                for pid in pids {
                    if events.tick(pid, pid).is_ok() {
                        continue;
                    }
                    if pid == self.root {
                        failed = true;
                        break;
                    }
                    // A forked process's failed tick ends its tracking alone; it runs on.
                    for tid in self.procs.remove(&pid).unwrap_or_default() {
                        let _ = detach_running(tid);
                    }
                }
                if failed {
                    break Err(Error::invalid(OP, "a callback failed"));
                }
                samples += 1;
                if nsamples > 0 && samples >= nsamples {
                    break Ok(());
                }
                next += period;
            }
            std::thread::sleep(pause);
        };
        self.let_go();
        outcome
    }

    /// Handles every state change the traced threads have to report; whether there was one.
    fn take_events(
        &mut self,
        events: &mut dyn PctxEvents,
    ) -> std::result::Result<bool, CallbackFailed> {
        let mut any = false;
        self.departing.retain(|&tid| {
            wait_thread(tid, true).is_none()
                && std::path::Path::new(&format!("/proc/{tid}")).exists()
        });
        let threads: Vec<(i32, i32)> = self
            .procs
            .iter()
            .flat_map(|(&pid, tids)| tids.iter().map(move |&t| (pid, t)))
            .collect();
        for (pid, tid) in threads {
            if !self.procs.get(&pid).is_some_and(|t| t.contains(&tid)) {
                continue; // Gone with an earlier event of this round (an exec, an exit).
            }
            if pid == self.root && tid == pid && self.created && has_exited(tid) {
                // Killed past its exit stop: its status is libpmc's wait's.
                self.process_end(pid, None, events)?;
                any = true;
                continue;
            }
            if let Some(status) = wait_thread(tid, true) {
                self.on_status(pid, tid, status, events)?;
                any = true;
            }
        }
        Ok(any)
    }

    /// Thread `tid` of process `pid` reported `status`.
    fn on_status(
        &mut self,
        pid: i32,
        tid: i32,
        status: i32,
        events: &mut dyn PctxEvents,
    ) -> std::result::Result<(), CallbackFailed> {
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            // Gone without an exit stop (SIGKILL).
            if tid == pid {
                return self.process_end(pid, Some(shell_status(status)), events);
            }
            self.forget_thread(pid, tid);
            let result = events.fini_lwp(pid, tid).and_then(|()| events.lwp_exit(pid, tid));
            retire_process_binds(pid, Some(tid));
            return result;
        }
        if !libc::WIFSTOPPED(status) {
            return Ok(());
        }
        let signal = libc::WSTOPSIG(status);
        match status >> 16 {
            libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE => {
                let new = event_message(tid) as i32;
                // The new task's first stop: it has not run yet.
                let _ = wait_thread(new, false);
                let result = if thread_group(new) == Some(pid) {
                    if let Some(tids) = self.procs.get_mut(&pid) {
                        tids.push(new);
                    }
                    events.init_lwp(pid, new).and_then(|()| events.lwp_create(pid, new))
                } else {
                    events.fork(pid, tid, new);
                    if self.follow_forks {
                        self.procs.insert(new, vec![new]);
                        if events.init_lwp(new, new).is_err() {
                            // As illumos's per-process trackers: only this child's tracking
                            // ends; it runs on, let go.
                            self.procs.remove(&new);
                            let _ = ptrace(libc::PTRACE_DETACH, new, 0, 0);
                        }
                        Ok(())
                    } else {
                        let _ = ptrace(libc::PTRACE_DETACH, new, 0, 0);
                        Ok(())
                    }
                };
                if self.procs.values().any(|t| t.contains(&new)) {
                    resume(new, 0);
                }
                resume(tid, 0);
                result
            }
            libc::PTRACE_EVENT_EXEC => {
                if pid == self.root && self.launch_exec_pending {
                    self.launch_exec_pending = false;
                    resume(tid, 0);
                    return Ok(());
                }
                // The thread that executed now has the process's id; the others are gone.
                let old = self.procs.insert(pid, vec![pid]).unwrap_or_default();
                let mut result = Ok(());
                for lwp in old {
                    result = result.and_then(|()| events.fini_lwp(pid, lwp));
                }
                if result.is_err() {
                    resume(pid, 0);
                    return result;
                }
                if events.exec(pid, pid, &command_line(pid)).is_err() {
                    // As illumos's pctx: a refused exec ends this process's tracking, and the
                    // process runs on, released (the others followed are still followed).
                    self.procs.remove(&pid);
                    self.root_released |= pid == self.root;
                    let _ = ptrace(libc::PTRACE_DETACH, pid, 0, 0);
                    return Ok(());
                }
                let result = events.init_lwp(pid, pid);
                resume(pid, 0);
                result
            }
            libc::PTRACE_EVENT_EXIT => {
                let code = event_message(tid) as i32;
                if tid == pid {
                    // Still readable: the process ends after this stop.
                    let result = self.process_end(pid, Some(shell_status(code)), events);
                    resume(tid, 0);
                    return result;
                }
                self.forget_thread(pid, tid);
                self.departing.push(tid);
                let result = events.fini_lwp(pid, tid).and_then(|()| events.lwp_exit(pid, tid));
                retire_process_binds(pid, Some(tid));
                resume(tid, 0);
                result
            }
            libc::PTRACE_EVENT_STOP => {
                // A group stop keeps the thread stopped (as without the tracer) until SIGCONT;
                // any other (a new thread's first stop, an interrupt) goes on.
                if matches!(signal, libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU) {
                    let _ = ptrace(libc::PTRACE_LISTEN, tid, 0, 0);
                } else {
                    resume(tid, 0);
                }
                Ok(())
            }
            // A signal on its way to the thread: delivered as it would be untraced.
            _ => {
                resume(tid, signal);
                Ok(())
            }
        }
    }

    /// Process `pid` has ended (at its exit stop, or gone): `fini_lwp` of its threads and
    /// `exit` with `status` (the launched command's is libpmc's `wait`'s when not given, or
    /// once it is gone).
    fn process_end(
        &mut self,
        pid: i32,
        status: Option<i32>,
        events: &mut dyn PctxEvents,
    ) -> std::result::Result<(), CallbackFailed> {
        let threads = self.procs.remove(&pid).unwrap_or_default();
        self.root_ended |= pid == self.root;
        let mut result = Ok(());
        for lwp in threads {
            result = result.and_then(|()| events.fini_lwp(pid, lwp));
        }
        let status = if pid == self.root && self.created {
            // Past its exit stop nothing stops it: libpmc's wait reaps it.
            resume(pid, 0);
            pmc::api::wait(pid).unwrap_or_else(|_| status.unwrap_or(0))
        } else {
            // Its last wait status is the tracer's to take (its parent gets its own).
            self.departing.push(pid);
            status.unwrap_or(0)
        };
        events.exit(pid, pid, status);
        retire_process_binds(pid, None);
        result
    }

    fn forget_thread(&mut self, pid: i32, tid: i32) {
        if let Some(tids) = self.procs.get_mut(&pid) {
            tids.retain(|&t| t != tid);
        }
    }

    /// Lets every traced thread go on untraced.
    fn let_go(&mut self) {
        for tid in std::mem::take(&mut self.procs).into_values().flatten() {
            let _ = detach_running(tid);
        }
    }
}

/// Detaches running thread `tid`: interrupts it, waits for the stop and detaches, passing on
/// a signal it was stopped for.
fn detach_running(tid: i32) -> std::result::Result<(), i32> {
    ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0)?;
    loop {
        let Some(status) = wait_thread(tid, false) else { return Err(libc::ESRCH) };
        if !libc::WIFSTOPPED(status) {
            return Err(libc::ESRCH);
        }
        let event = status >> 16;
        let signal = if event == 0 { libc::WSTOPSIG(status) } else { 0 };
        if event == libc::PTRACE_EVENT_STOP || event == 0 {
            ptrace(libc::PTRACE_DETACH, tid, 0, signal as usize)?;
            return Ok(());
        }
        // Another event stop came first: the interrupt's stop follows.
        resume(tid, 0);
    }
}

/// The threads of process `pid` (`/proc/PID/task`), the main one first.
fn threads_of(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    tids.sort_by_key(|&t| (t != pid, t));
    if tids.is_empty() {
        tids.push(pid);
    }
    tids
}
