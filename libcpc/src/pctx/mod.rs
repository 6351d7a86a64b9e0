//! The part of libpctx that libcpc's users need: a process to measure — launched held before it
//! runs ([`Pctx::create`]) or already running ([`Pctx::capture`]) — and [`Pctx::run`], which
//! lets it run and calls back at its start, every `msec` milliseconds and at its end.
//!
//! Over libpmc's hosts (design choices):
//! * On Linux the process is traced with ptrace while [`Pctx::run`] runs (see
//!   [`ptrace`]): every event is reported, LWP ids are thread ids (the main LWP's is
//!   the pid), and with [`Pctx::follow_forks`] the forked processes are followed too. A
//!   process another tracer holds cannot be run (`EPERM`).
//! * On FreeBSD the process is one "LWP" to the callbacks (counting is per process, see
//!   [`crate::bind`]): its id is the process's main thread id. No tracing is used there, so
//!   `fork`, `exec`, `lwp_create` and `lwp_exit` are not reported.
//! * The simulator runs a launched program when [`Pctx::run`] does, stopping at each change of
//!   the process its kernel reports: LWPs are numbered 1 (the first thread) up in creation
//!   order; a new LWP gets `init_lwp` then `lwp_create`, an ending one `fini_lwp` then
//!   `lwp_exit`; a fork gets `fork` (before the child runs) and, with
//!   [`Pctx::follow_forks`], the child is followed too (`init_lwp` of its LWP 1, its events,
//!   its exit); an exec gets `fini_lwp` of each LWP, `exec` (with the new program's path) and
//!   `init_lwp` of LWP 1; the process's end gets `fini_lwp` of each live LWP and `exit`. No
//!   `tick` (the simulated time is not the caller's). A bound set's overflow signals are
//!   delivered to the calling thread while it runs (see [`crate::overflow::sim`]).
//! * An `exec` callback that fails ends that process's tracking, as illumos's libpctx does: the
//!   process runs on, let go (never killed), the other followed processes are still followed,
//!   and `run` fails (`EINVAL`) if the process was the launched or captured one.
//! * A launched process still running when the handle is dropped is killed (unless an exec let
//!   it go); a captured one keeps running.
//!
//! [`events`] holds the callbacks' trait, [`ptrace`] the Linux tracer, `sim` the run on the
//! simulator (the cargo feature `sim`, on by default).

pub mod events;
#[cfg(target_os = "linux")]
pub mod ptrace;
#[cfg(feature = "sim")]
mod sim;

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pmc::host::HostKind;

use crate::bind::process_binds::retire_process_binds;
use crate::error::{Error, Result};

pub use events::{CallbackFailed, PctxEvents};

/// A controlled process.
#[derive(Debug)]
pub struct Pctx {
    pid: i32,
    created: bool,
    ended: bool,
    /// Let go, running, at an exec its `exec` callback refused: never killed.
    released: bool,
    follow_forks: bool,
    terminate: Arc<AtomicBool>,
}

fn host() -> Result<HostKind> {
    pmc::api::host_kind().map_err(|e| Error::pmc("pctx", &e))
}

impl Pctx {
    /// Launches `argv` held before it runs (`argv[0]` found in `PATH`).
    pub fn create(argv: &[OsString]) -> Result<Pctx> {
        let program = argv.first().cloned().unwrap_or_default();
        Pctx::create_file(&program, argv)
    }

    /// Launches `file` (a path, or a name found in `PATH`) held before it runs, with the
    /// arguments `argv` (`pctx_create(file, argv)`: `argv[0]` is only the name the program
    /// gets for itself).
    pub fn create_file(file: &std::ffi::OsStr, argv: &[OsString]) -> Result<Pctx> {
        let pid = pmc::api::spawn_file(file, argv).map_err(|e| Error::pmc("pctx_create", &e))?;
        Ok(Pctx {
            pid,
            created: true,
            ended: false,
            released: false,
            follow_forks: false,
            terminate: Arc::default(),
        })
    }

    /// Follows running process `pid` (`pctx_capture`): `ESRCH` if there is none, `ENOTSUP` on
    /// the simulator (its programs are launched, never found).
    pub fn capture(pid: i32) -> Result<Pctx> {
        const OP: &str = "pctx_capture";
        if host()? == HostKind::Sim {
            return Err(Error::new(OP, libc::ENOTSUP)
                .because("the simulator measures the programs it launches (pctx_create)"));
        }
        if pid <= 0 || !process_exists(pid) {
            return Err(Error::new(OP, libc::ESRCH).because(format!("no process {pid}")));
        }
        Ok(Pctx {
            pid,
            created: false,
            ended: false,
            released: false,
            follow_forks: false,
            terminate: Arc::default(),
        })
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The id its callbacks and `cpc_bind_pctx` use for its (only) LWP.
    pub fn lwp(&self) -> i32 {
        lwp_id(self.pid)
    }

    /// Whether [`Pctx::run`] follows the processes this one forks (the simulator and Linux;
    /// FreeBSD does not see forks).
    pub fn follow_forks(&mut self, follow: bool) {
        self.follow_forks = follow;
    }

    /// Waits for a launched process that an exec let go (see [`PctxEvents::exec`]) to end, and
    /// reaps it: its status as a shell reports it; `None` if the process was not let go so, or
    /// not launched here. It runs on untraced, but it was launched to die with the thread that
    /// launched it (libpmc's launch: a measurer killed outright leaves no orphan), so that
    /// thread must outlive it: a tool waits here before it exits. The flag of
    /// [`Pctx::terminator`] ends the wait (`None`; the process is left to die with that thread).
    pub fn wait_released(&mut self) -> Option<i32> {
        if !(self.created && self.released && !self.ended) {
            return None;
        }
        while !self.ended_yet() {
            if self.terminate.load(Ordering::Acquire) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let status = pmc::api::wait(self.pid).ok()?;
        self.ended = true;
        Some(status)
    }

    /// A flag that makes a running [`Pctx::run`] return (`pctx_terminate`).
    pub fn terminator(&self) -> Arc<AtomicBool> {
        self.terminate.clone()
    }

    /// Lets the process run, calling `events` (`pctx_run`): `init_lwp` first, `tick` every
    /// `msec` ms (0: never) up to `nsamples` times (0: unlimited), then at its end `fini_lwp`
    /// and `exit`. Returns when the process ended, the samples are done or it is terminated;
    /// `EINVAL` if a callback failed.
    pub fn run(&mut self, msec: u32, nsamples: u32, events: &mut dyn PctxEvents) -> Result<()> {
        const OP: &str = "pctx_run";
        let failed = || Error::invalid(OP, "a callback failed");
        let (pid, lwp) = (self.pid, self.lwp());
        events.init_lwp(pid, lwp).map_err(|CallbackFailed| failed())?;
        #[cfg(target_os = "linux")]
        if host()? == HostKind::Linux {
            return self.run_traced(msec, nsamples, events);
        }
        if self.created {
            pmc::api::resume(pid).map_err(|e| Error::pmc(OP, &e))?;
        }
        #[cfg(feature = "sim")]
        if host()? == HostKind::Sim && self.created {
            return self.run_sim(events);
        }
        let period = Duration::from_millis(u64::from(msec));
        let mut next = Instant::now() + period;
        let mut samples = 0;
        let sim = host()? == HostKind::Sim;
        while !sim && !self.ended_yet() {
            if self.terminate.load(Ordering::Acquire) {
                return Ok(());
            }
            let now = Instant::now();
            if msec > 0 && now >= next {
                events.tick(pid, lwp).map_err(|CallbackFailed| failed())?;
                samples += 1;
                if nsamples > 0 && samples >= nsamples {
                    return Ok(());
                }
                next += period;
            }
            let wake = if msec > 0 {
                next.min(now + Duration::from_millis(20))
            } else {
                now + Duration::from_millis(20)
            };
            std::thread::sleep(wake.saturating_duration_since(Instant::now()));
        }
        let status = if self.created {
            // The simulator runs the program here; a Linux child is reaped after fini_lwp.
            if sim { Some(pmc::api::wait(pid).map_err(|e| Error::pmc(OP, &e))?) } else { None }
        } else {
            Some(0)
        };
        events.fini_lwp(pid, lwp).map_err(|CallbackFailed| failed())?;
        let status = match status {
            Some(s) => s,
            None => pmc::api::wait(pid).map_err(|e| Error::pmc(OP, &e))?,
        };
        self.ended = true;
        events.exit(pid, lwp, status);
        retire_process_binds(pid, None);
        Ok(())
    }

    /// [`Pctx::run`] on the Linux host, the process traced (see [`ptrace`]); its main
    /// LWP's `init_lwp` is done, the process not resumed yet.
    #[cfg(target_os = "linux")]
    fn run_traced(&mut self, msec: u32, nsamples: u32, events: &mut dyn PctxEvents) -> Result<()> {
        const OP: &str = "pctx_run";
        let pid = self.pid;
        let mut tracer = ptrace::Tracer::seize(pid, self.created, self.follow_forks)?;
        for lwp in tracer.other_threads() {
            events
                .init_lwp(pid, lwp)
                .map_err(|CallbackFailed| Error::invalid(OP, "a callback failed"))?;
        }
        if self.created {
            pmc::api::resume(pid).map_err(|e| Error::pmc(OP, &e))?;
        }
        let result = tracer.run(msec, nsamples, &self.terminate, events);
        self.ended |= tracer.root_ended();
        if tracer.root_released() {
            self.released = true;
            return result.and(Err(exec_refused()));
        }
        result
    }

    /// Whether the process has ended (a launched child is left unreaped, so still readable).
    fn ended_yet(&self) -> bool {
        if !self.created {
            return !process_exists(self.pid);
        }
        // SAFETY: an all-zero siginfo_t is a valid output buffer.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with WNOWAIT only looks at the child's state; `info` is writable.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: waitid filled `info` (or left it zero: no state change).
        r != 0 || unsafe { info.si_pid() } == self.pid
    }
}

/// [`Pctx::run`]'s failure when the `exec` callback refused the launched or captured process's
/// exec (illumos's `pctx_run` returns -1 then).
fn exec_refused() -> Error {
    Error::invalid("pctx_run", "the exec callback ended the tracking; the process runs on")
}

/// Whether [`Pctx::run`] sees forks and execs on this host (the simulator, and Linux with
/// ptrace), so [`Pctx::follow_forks`] works.
pub fn can_follow_forks() -> bool {
    let host = host().ok();
    host == Some(HostKind::Sim) || (cfg!(target_os = "linux") && host == Some(HostKind::Linux))
}

/// The id of process `pid`'s main LWP: its thread id (the pid), 1 on the simulator.
pub fn lwp_id(pid: i32) -> i32 {
    if host().ok() == Some(HostKind::Sim) { 1 } else { pid }
}

/// Whether `lwp` is a thread of process `pid`.
pub fn has_lwp(pid: i32, lwp: i32) -> bool {
    if host().ok() == Some(HostKind::Sim) {
        lwp == 1
    } else if cfg!(target_os = "linux") {
        lwp > 0 && std::path::Path::new(&format!("/proc/{pid}/task/{lwp}")).exists()
    } else {
        // Without Linux's /proc the process's one LWP is its main thread, named by its pid.
        lwp == pid && process_exists(pid)
    }
}

/// Whether process `pid` exists (and, on Linux, is not a zombie).
fn process_exists(pid: i32) -> bool {
    if cfg!(target_os = "linux") {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z'))
            }
            Err(_) => false,
        }
    } else {
        // SAFETY: signal 0 only checks that the process exists and may be signalled.
        unsafe { libc::kill(pid, 0) == 0 }
    }
}

impl Drop for Pctx {
    fn drop(&mut self) {
        if self.created && !self.ended && !self.released {
            if host().ok() == Some(HostKind::Sim) {
                let _ = pmc::api::wait(self.pid);
            } else {
                // SAFETY: signals our own child, which has not been reaped.
                unsafe { libc::kill(self.pid, libc::SIGKILL) };
                let _ = pmc::api::wait(self.pid);
            }
        }
    }
}
