//! The Linux host: the hwpmc system call answered in this process over `perf_event_open(2)`.
//!
//! PMCs keep FreeBSD's ids, rows, states, ownership and errno; what counts is a perf event:
//! SOFT rows are perf software events, the TSC is `rdtsc`, and IAP/IAF rows are perf raw and
//! generic hardware events when the machine has a PMU (a VM often has none; the error says so).
//! Process PMCs count with perf's per-task virtualization (one event per thread of the target,
//! inherited by the threads — and with PMC_F_DESCENDANTS the children — it creates afterwards);
//! system PMCs are per-CPU events. Sampling PMCs get one perf ring per CPU, and a drain thread
//! turns their samples and side-band records into the owner's pmclog (module `log`).
//!
//! Where this is headed (DESIGN §5.1): the operations here mirror the `hwpmc` driver's rules
//! (the C error client runs against both hosts and they agree), but they are not the driver.
//! Embedding the driver needs a driver concept it lacks — classes whose virtualization the host
//! does (perf counts per task, and the driver's context-switch hooks never run in user space):
//! attach, start, read and release delegating to a host backend, and entry points for the host
//! to post samples and side-band events into the driver's rings and hooks, so that the log,
//! drops and records come from the driver. The op-level `Host` interface stays the same then.

mod log;
mod ops;
mod perf;

use std::ffi::OsString;
use std::sync::{Arc, Mutex, OnceLock};

use hwpmc::abi::{Caps, Class, Op, PMC_CPUID_LEN, SOFT_ROWS};

use super::{ChildPid, Host, HostKind};
use crate::error::{Error, Result};

pub(crate) use ops::LinuxState;

/// The rows of one class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClassRows {
    pub(crate) class: Class,
    pub(crate) first_row: u32,
    pub(crate) rows: u32,
    pub(crate) width: u32,
    pub(crate) caps: Caps,
}

/// The Linux host.
pub struct LinuxHost {
    ncpu: u32,
    /// Why IAP/IAF are missing, if they are.
    missing: Option<String>,
    intel_model: Option<String>,
    cpuid: [u8; PMC_CPUID_LEN],
    state: Mutex<LinuxState>,
    log: Arc<log::Log>,
}

/// The IAP capabilities here: perf has no precise (PEBS) sampling to offer through this host.
const IAP_CAPS: Caps = Caps::IAP_CLASS.difference(Caps::PRECISE);

impl LinuxHost {
    /// Discovers this machine: CPUs, the CPUID PMU description, and whether perf can use it.
    pub fn new() -> LinuxHost {
        // SAFETY: sysconf has no memory-safety preconditions.
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32;
        let cpuid = raw_cpuid::CpuId::new();
        let mut classes = Vec::new();
        let mut next = 0;
        let mut push = |class, rows, width, caps| {
            classes.push(ClassRows { class, first_row: next, rows, width, caps });
            next += rows;
        };
        push(Class::Soft, SOFT_ROWS, 64, Caps::SOFT_CLASS);
        push(Class::Tsc, 1, 64, Caps::READ);
        let pmu = cpuid.get_performance_monitoring_info().filter(|p| p.version_id() > 0);
        let missing = match (&pmu, perf::probe_hardware()) {
            (Some(p), Ok(())) => {
                push(
                    Class::Iap,
                    u32::from(p.number_of_counters()),
                    u32::from(p.counter_bit_width()),
                    IAP_CAPS,
                );
                if p.version_id() > 1 && p.fixed_function_counters() > 0 {
                    let fixed = u32::from(p.fixed_function_counters()).min(3);
                    push(
                        Class::Iaf,
                        fixed,
                        u32::from(p.fixed_function_counters_bit_width()),
                        Caps::IAF_CLASS,
                    );
                }
                None
            }
            (None, Err(reason)) => {
                Some(format!("{reason}; CPUID leaf 0xA reports architectural perfmon version 0"))
            }
            (None, Ok(())) => Some(
                "CPUID leaf 0xA reports no architectural perfmon, so IAP/IAF cannot be described"
                    .into(),
            ),
            (Some(_), Err(reason)) => Some(reason),
        };
        let intel_model =
            cpuid.get_vendor_info().filter(|v| v.as_str() == "GenuineIntel").and_then(|_| {
                let f = cpuid.get_feature_info()?;
                Some(format!("GenuineIntel-{}-{:X}", f.family_id(), f.model_id()))
            });
        let mut id = [0u8; PMC_CPUID_LEN];
        let text = match cpuid.get_feature_info() {
            Some(f) => format!(
                "{}-{}-{:X}-{:X}",
                cpuid.get_vendor_info().map(|v| v.as_str().to_string()).unwrap_or_default(),
                f.family_id(),
                f.model_id(),
                f.stepping_id()
            ),
            None => String::new(),
        };
        let n = text.len().min(PMC_CPUID_LEN - 1);
        id[..n].copy_from_slice(&text.as_bytes()[..n]);
        LinuxHost {
            ncpu,
            state: Mutex::new(LinuxState::new(&classes)),
            missing,
            intel_model,
            cpuid: id,
            log: Arc::default(),
        }
    }
}

impl Default for LinuxHost {
    fn default() -> Self {
        Self::new()
    }
}

/// This process's Linux host.
pub(crate) fn get() -> Result<&'static LinuxHost> {
    static HOST: OnceLock<LinuxHost> = OnceLock::new();
    Ok(HOST.get_or_init(LinuxHost::new))
}

impl Host for LinuxHost {
    fn kind(&self) -> HostKind {
        HostKind::Linux
    }

    fn syscall(&self, op: Op, arg: &mut [u8]) -> Result<()> {
        self.dispatch(op, arg)
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

    fn resume(&self, pid: ChildPid) -> Result<()> {
        super::unix_process::resume(pid)
    }

    fn wait(&self, pid: ChildPid) -> Result<i32> {
        let status = super::unix_process::wait(pid)?;
        // Whatever the child left in the rings belongs in the log before anyone reads it.
        self.log.drain();
        self.target_exited(pid);
        Ok(status)
    }
}

/// A perf failure as pmc(3) reports it: perf's EACCES (not permitted by perf_event_paranoid) is
/// FreeBSD's EPERM; ENOENT/EOPNOTSUPP for an event this machine lacks is EINVAL with the reason.
pub(crate) fn perf_error(op: &'static str, what: &str, err: &std::io::Error) -> Error {
    let raw = err.raw_os_error().unwrap_or(libc::EIO);
    match raw {
        libc::EACCES | libc::EPERM => Error::with_detail(
            op,
            libc::EPERM,
            format!(
                "perf does not allow {what} (kernel.perf_event_paranoid is {}; measuring other \
                 users' processes or whole CPUs needs root or CAP_PERFMON)",
                std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "unknown".into())
            ),
        ),
        libc::ESRCH => Error::with_detail(op, libc::ESRCH, format!("{what}: no such process")),
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV => Error::with_detail(
            op,
            libc::EINVAL,
            format!(
                "{what}: this machine's perf has no such event ({})",
                crate::error::errno_name(raw)
            ),
        ),
        _ => Error::with_detail(op, raw, format!("{what}: perf_event_open failed: {err}")),
    }
}
