//! The Linux host: the `hwpmc` driver embedded in this process, counting with Linux's perf.
//!
//! The driver does what it does on FreeBSD — the operations with their rules and errno, rows,
//! owners and targets, the log and its records, drop notices — with this process as its kernel
//! (module `kernel`), and hands the counting to perf (module `counters`, the driver's
//! `HostCounters`): SOFT rows are perf software events, IAP/IAF rows (Intel) and K8 rows (AMD,
//! PERF_CTL images) perf raw and generic hardware events when the machine has a PMU (a VM often has none; the error says so), and the
//! TSC is `rdtsc`. Process PMCs count with perf's per-task virtualization, system PMCs with
//! per-CPU events. A worker thread (module `worker`) posts what perf's sampling rings hold
//! (module `rings`) into the driver: samples become CALLCHAIN records, and exec, mmap, fork and
//! exit records become the driver's hooks, so the log is the driver's. Samples carry a copy of
//! the user stack unless [`crate::host::CallGraph::FramePointers`] is chosen; module `unwind`
//! walks it with the images' CFI before the sample is posted, and joins it to the kernel frames
//! of a kernel-mode sample.

mod call_detail;
mod counters;
mod critical;
mod hybrid;
mod kernel;
mod mount_ns;
mod perf;
mod pmus;
mod procfs;
mod rings;
#[cfg(test)]
mod scripted_host;
#[cfg(test)]
mod scripted_perf;
pub mod unwind;
mod watched;
mod worker;

use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use hwpmc::abi::{
    Class, Op, PMC_OP_PMCREADTIMES, PmcFlags, PmcOpConfigureLog, PmcOpPmcAllocate,
    PmcOpPmcReadTimes, PmcOpPmcRw, PmcOpSimple,
};
use hwpmc::{Driver, Errno, ExecInfo, HostedSample, Pid, Tunables};
use zerocopy::{FromBytes, IntoBytes};

use super::per_process::PerProcess;
use super::{ChildPid, Host, HostKind, op_name};
use crate::error::{Error, Result};
use kernel::{LinuxCpu, LinuxKernel};
use rings::Event;

/// The processes whose end the driver was told of, newest last (perf, the worker's look at
/// `/proc` and `wait` may each see the same end).
const REMEMBERED_EXITS: usize = 1024;

/// The Linux host.
pub struct LinuxHost {
    driver: Driver<LinuxKernel, LinuxCpu>,
    /// Why IAP/IAF are missing, if they are.
    missing: Option<String>,
    intel_model: Option<String>,
    /// Processes that executed a program whose path was not known yet: the first file mapping
    /// after the exec is the executable.
    pending_exec: Mutex<Vec<Pid>>,
    exited: Mutex<VecDeque<Pid>>,
    /// Processes' mappings and images' CFI, for unwinding sampled user stacks.
    unwinding: Mutex<unwind::Unwinding>,
    /// Held for a whole [`LinuxHost::service`]: the worker, a thread that reaped a child and a
    /// thread flushing the log may each service at once, and one's drain must be posted before
    /// another tells the driver its processes ended (a sample posted after its process was
    /// detached is dropped).
    servicing: Mutex<()>,
}

/// Locks `m`; a thread that panicked holding it left nothing half-done that matters here.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LinuxHost {
    /// Loads the driver on this machine: CPUs, the CPUID PMU description and whether perf can
    /// use it, and perf's software events as the SOFT class's events.
    fn new() -> std::result::Result<LinuxHost, String> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32;
        let cpuid = raw_cpuid::CpuId::new();
        let intel = cpuid.get_performance_monitoring_info().filter(|p| p.version_id() > 0);
        // An AMD CPU's core counters, as the driver's AMD backend discovers them.
        let native = hwpmc::arch::x86::native::NativeCpuid;
        let amd = hwpmc::arch::x86::amd::discovery::AmdPmu::discover(&native);
        let is_amd = hwpmc::arch::x86::cpuid::CpuSignature::read(&native).is_amd();
        let described = if is_amd { amd.is_some() } else { intel.is_some() };
        let no_description = if is_amd {
            "CPUID advertises no AMD core counters (a guest without PerfCtrExtCore or PerfMonV2)"
        } else {
            "CPUID leaf 0xA reports architectural perfmon version 0"
        };
        // A hybrid machine's core PMUs (cpu_core, cpu_atom): which one each hardware PMC
        // opens on.
        let (pmus, unreadable_pmus) = match pmus::discover(std::path::Path::new("/sys")) {
            Ok(pmus) => (pmus, None),
            Err(why) => (pmus::CorePmus::default(), Some(why)),
        };
        let missing = match (described, perf::probe_hardware(), unreadable_pmus) {
            (_, _, Some(why)) => Some(format!("the core PMUs' sysfs files are unreadable: {why}")),
            (true, Ok(()), None) => None,
            (false, Err(reason), None) => Some(format!("{reason}; {no_description}")),
            (false, Ok(()), None) => Some(format!(
                "{no_description}, so the hardware classes (IAP/IAF, K8) cannot be described"
            )),
            (true, Err(reason), None) => Some(reason),
        };
        // FreeBSD's pmc_cpuid format (vendor-family-model-stepping), which picks the event table.
        let intel_model = cpuid.get_vendor_info().and_then(|vendor| {
            let f = cpuid.get_feature_info()?;
            Some(format!(
                "{}-{}-{:X}-{:X}",
                vendor.as_str(),
                f.family_id(),
                f.model_id(),
                f.stepping_id()
            ))
        });
        let host = Self::load(LinuxKernel::new(ncpu, pmus), missing, intel_model)?;
        // Once per program: a forked child inherits the handler, which serves its own host.
        static AT_EXIT: AtomicBool = AtomicBool::new(false);
        if !AT_EXIT.swap(true, Ordering::AcqRel) {
            // SAFETY: registers a handler with no preconditions of its own; it runs at exit(3).
            unsafe { libc::atexit(owner_exits) };
        }
        Ok(host)
    }

    /// Loads the driver on `kernel`, with hardware classes unless `missing` says why not.
    fn load(
        kernel: LinuxKernel,
        missing: Option<String>,
        intel_model: Option<String>,
    ) -> std::result::Result<LinuxHost, String> {
        let cpu = LinuxCpu { pmu_usable: missing.is_none() };
        let driver = Driver::load(kernel, cpu, Tunables::default())
            .map_err(|e| format!("the hwpmc driver did not load: {e}"))?;
        for (name, _) in perf::SOFTWARE_EVENTS {
            driver
                .register_soft_event(name)
                .map_err(|e| format!("registering SOFT event {name}: {e:?}"))?;
        }
        Ok(LinuxHost {
            driver,
            missing,
            intel_model,
            pending_exec: Mutex::new(Vec::new()),
            exited: Mutex::new(VecDeque::new()),
            unwinding: Mutex::new(unwind::Unwinding::default()),
            servicing: Mutex::new(()),
        })
    }

    fn kernel(&self) -> &LinuxKernel {
        self.driver.kernel()
    }

    /// Moves what the rings hold into the driver, tells it of targets that ended, and lets it
    /// report lost samples and write its full log buffers (the worker's round; also before the
    /// log is flushed or closed, and after a child is reaped).
    fn service(&self) {
        let _one_at_a_time = lock(&self.servicing);
        post_to(self, self.kernel().counters.drain());
        for pid in self.kernel().counters.live_targets() {
            if !procfs::process_running(pid) {
                self.ended(pid);
            }
        }
        self.driver.tick(0);
        self.driver.write_logs();
    }

    /// Process `pid` ended: the driver hears it once.
    fn ended(&self, pid: Pid) {
        {
            let mut exited = lock(&self.exited);
            if exited.contains(&pid) {
                return;
            }
            if exited.len() == REMEMBERED_EXITS {
                exited.pop_front();
            }
            exited.push_back(pid);
        }
        self.driver.process_exit(pid);
    }

    /// Tells the driver of `pid`'s exec of `path`.
    fn exec(&self, pid: Pid, path: &[u8]) {
        let info = ExecInfo { path, base_addr: 0, dyn_addr: 0, credentials_changed: false };
        self.driver.process_exec(pid, &info);
    }

    /// Posts one perf event, which happened at `time` (`CLOCK_MONOTONIC_RAW`), to the driver.
    fn post_event(&self, time: u64, event: Event) {
        match event {
            Event::Sample { token, cpu, pid, tid, user, mut pcs, stack } => {
                if let Some(stack) = stack {
                    // The user frames from the CFI where the sampled code has it, else perf's
                    // frame-pointer walk.
                    let max = unwind::MAX_FRAMES.saturating_sub(stack.user_at);
                    let frames = lock(&self.unwinding).unwind(pid, &stack, max);
                    if let Some(frames) = frames.filter(|f| !f.is_empty()) {
                        pcs.truncate(stack.user_at);
                        pcs.extend(frames);
                    }
                }
                let tsc = Some(self.kernel().tsc_at(time)).filter(|_| time != 0);
                let sample = HostedSample { cpu, pid, tid, user, pcs: &pcs, tsc };
                self.driver.hosted_sample(token, &sample);
            }
            Event::Map { pid, start, mapping, path: seen, file } => {
                // The file as this namespace finds it (the process may be in another one).
                let located = mount_ns::locate(pid, &seen, file, Some(mapping.range()));
                lock(&self.unwinding).map_file(pid, mapping, &seen, located.open.as_deref());
                let path = located.log;
                if !path.starts_with(b"/") {
                    // The vDSO: for unwinding only (no file for the log's readers).
                    return;
                }
                let waiting = {
                    let mut pending = lock(&self.pending_exec);
                    let at = pending.iter().position(|&p| p == pid);
                    at.map(|at| pending.swap_remove(at)).is_some()
                };
                if waiting {
                    self.exec(pid, &path);
                }
                self.driver.mmap(pid, start, start, &path);
            }
            Event::Exec { pid } => {
                lock(&self.unwinding).exec(pid);
                let path = mount_ns::exe_path(pid);
                if path.is_empty() {
                    lock(&self.pending_exec).push(pid);
                } else {
                    self.exec(pid, &path);
                }
            }
            Event::Fork { parent, child } => {
                // A pid used again is a new process.
                lock(&self.exited).retain(|&p| p != child);
                lock(&self.unwinding).fork(parent, child);
                self.driver.process_fork(parent, child);
            }
            Event::Thread { pid, tid } => self.driver.thread_create(pid, tid),
            Event::ProcessExit { pid } => {
                lock(&self.unwinding).exit(pid);
                self.ended(pid);
            }
            Event::ThreadExit { pid, tid } => self.driver.thread_exit(pid, tid),
            Event::Lost { token, count } => self.driver.hosted_lost(token, count),
        }
    }

    /// Starts the worker (if it is not running) and wakes it.
    fn ensure_worker(&'static self) {
        self.kernel().worker.ensure_running(
            || {
                if let Some(host) = instance() {
                    host.service();
                }
            },
            || instance().map(|h| h.kernel().counters.watched()).unwrap_or_default(),
        );
    }

    /// What perf adds to a successful operation `op`: a read of a PMC whose event lost its
    /// counter fails (EBUSY, naming the event); a released PMC's times are forgotten.
    fn after(&self, op: Op, arg: &[u8]) -> Result<()> {
        let counters = &self.kernel().counters;
        match op {
            Op::PmcRw => {
                let Ok((rw, _)) = PmcOpPmcRw::read_from_prefix(arg) else { return Ok(()) };
                let reads = PmcFlags::from_bits_retain(rw.pm_flags).contains(PmcFlags::OLDVALUE);
                match counters.failure(rw.pm_pmcid).filter(|_| reads) {
                    Some(why) => Err(Error::with_detail(op_name(op), libc::EBUSY, why)),
                    None => Ok(()),
                }
            }
            Op::PmcRelease => {
                if let Ok((simple, _)) = PmcOpSimple::read_from_prefix(arg) {
                    counters.forget(simple.pm_pmcid);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// PMC_OP_PMCREADTIMES's times are perf's (nanoseconds), not the driver's (which
    /// multiplexes no PMC perf counts); EBUSY for a PMC whose event lost its counter.
    fn perf_times(&self, arg: &mut [u8]) -> Result<()> {
        let Ok((mut request, _)) = PmcOpPmcReadTimes::read_from_prefix(arg) else { return Ok(()) };
        let counters = &self.kernel().counters;
        if let Some(why) = counters.failure(request.pm_pmcid) {
            return Err(Error::with_detail("PMCREADTIMES", libc::EBUSY, why));
        }
        if let Some((enabled, running)) = counters.times(request.pm_pmcid) {
            (request.pm_enabled, request.pm_running) = (enabled, running);
            arg[..size_of::<PmcOpPmcReadTimes>()].copy_from_slice(request.as_bytes());
        }
        Ok(())
    }

    /// The error of operation `op` failing with `errno`, with the reason when there is one.
    fn error(&self, op: Op, arg: &[u8], errno: Errno, why: Option<String>) -> Error {
        let errno_here = crate::error::host_errno(errno);
        if let Some(why) = why {
            return Error::with_detail(op_name(op), errno_here, why);
        }
        let hardware_class = op == Op::PmcAllocate
            && PmcOpPmcAllocate::read_from_prefix(arg).is_ok_and(|(r, _)| {
                [Class::Iap.as_u32(), Class::Iaf.as_u32()].contains(&r.pm_class)
            });
        match &self.missing {
            Some(reason) if hardware_class && errno == Errno::Inval => {
                Error::with_detail(op_name(op), errno_here, reason.clone())
            }
            _ if op == Op::PmcGetMsr && errno == Errno::NoSys => Error::with_detail(
                op_name(op),
                errno_here,
                "perf owns the counters here: read the PMC with pmc_read",
            ),
            _ => Error::new(op_name(op), errno_here),
        }
    }
}

/// At exit(3): this process, the owner of everything the driver holds here, exits — its PMCs
/// are released and its log written out and closed, as FreeBSD's driver does when an owner
/// exits (what perf's rings still hold goes in first). In a forked child, which owns nothing,
/// nothing happens.
extern "C" fn owner_exits() {
    // No panic may cross into the C library's exit path.
    let _ = std::panic::catch_unwind(|| {
        if let Some(host) = instance() {
            host.service();
            host.driver.process_exit(crate::host::current_pid::current_pid());
        }
    });
}

/// Posts perf's events to the driver in time order (one copy of a side-band record the rings of
/// several PMCs hold).
fn post_to(host: &LinuxHost, mut events: Vec<(u64, Event)>) {
    // Stable: records of one ring keep their order when their times are equal.
    events.sort_by_key(|(time, _)| *time);
    events.dedup_by(|a, b| a.0 == b.0 && a.1.is_side_band() && a.1 == b.1);
    for (time, event) in events {
        host.post_event(time, event);
    }
}

/// Posts perf's events to this process's driver (for the counters, which the driver owns).
pub(crate) fn post(events: Vec<(u64, Event)>) {
    if let Some(host) = instance() {
        post_to(host, events);
    }
}

/// This process's host: a forked child makes its own (it owns none of its parent's PMCs, and
/// the parent's locks may be held by threads the child does not have).
static HOST: PerProcess<std::result::Result<LinuxHost, String>> = PerProcess::new();

fn instance() -> Option<&'static LinuxHost> {
    HOST.get().and_then(|h| h.as_ref().ok())
}

/// This process's Linux host.
pub(crate) fn get() -> Result<&'static LinuxHost> {
    HOST.get_or_init(LinuxHost::new)
        .as_ref()
        .map_err(|why| Error::with_detail("load", libc::ENXIO, why.clone()))
}

impl Host for LinuxHost {
    fn kind(&self) -> HostKind {
        HostKind::Linux
    }

    fn syscall(&self, op: Op, arg: &mut [u8]) -> Result<()> {
        let closing_log = op == Op::ConfigureLog
            && PmcOpConfigureLog::read_from_prefix(arg).is_ok_and(|(r, _)| r.pm_logfd < 0);
        if matches!(op, Op::FlushLog | Op::CloseLog) || closing_log {
            // Everything sampled so far belongs in the log before it is written out.
            self.service();
        }
        let result = kernel::with_argument(arg, |ptr| {
            self.driver.syscall(op.as_u32(), ptr).map_err(|e| (e, call_detail::explanation(e)))
        });
        match result {
            Ok(()) => {
                let needs_worker = match op {
                    Op::ConfigureLog => true,
                    Op::PmcStart => self.kernel().counters.needs_worker(),
                    _ => false,
                };
                if let Some(host) = instance().filter(|_| needs_worker) {
                    host.ensure_worker();
                }
                self.after(op, arg)
            }
            Err((errno, why)) => Err(self.error(op, arg, errno, why)),
        }
    }

    fn extension_call(&self, op: u32, arg: &mut [u8]) -> Result<()> {
        kernel::with_argument(arg, |ptr| self.driver.syscall(op, ptr))
            .map_err(|e| Error::driver("extension op", e))?;
        if op == PMC_OP_PMCREADTIMES {
            self.perf_times(arg)?;
        }
        Ok(())
    }

    fn missing_hardware_reason(&self) -> Option<String> {
        self.missing.clone()
    }

    fn intel_model(&self) -> Option<String> {
        self.intel_model.clone()
    }

    fn spawn(&self, argv: &[OsString]) -> Result<ChildPid> {
        super::unix_process::spawn(argv)
    }

    fn spawn_file(&self, file: &std::ffi::OsStr, argv: &[OsString]) -> Result<ChildPid> {
        super::unix_process::spawn_file(file, argv)
    }

    fn resume(&self, pid: ChildPid) -> Result<()> {
        super::unix_process::resume(pid)
    }

    fn wait(&self, pid: ChildPid) -> Result<i32> {
        let status = super::unix_process::wait(pid)?;
        // Whatever the child left in the rings belongs in the log before it is detached.
        self.service();
        self.ended(pid);
        Ok(status)
    }
}
