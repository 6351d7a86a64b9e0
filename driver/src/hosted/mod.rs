//! PMCs that the host kernel counts itself.
//!
//! A kernel that owns the PMU and virtualizes counters per task already — Linux's perf_event —
//! leaves the driver nothing to program and never calls its context-switch hooks. It embeds the
//! driver all the same, for everything else hwpmc(4) is: the operations and their rules and
//! errno, rows and dispositions, owners and targets, the log with its records and drop notices.
//! It says which classes it counts through [`Kernel::host_counters`](crate::Kernel::host_counters); the driver then hands the
//! counting of those PMCs to it at PMCSTART, takes their counts at PMCSTOP, PMCRW, detach and
//! release, and turns the samples the host delivers ([`Driver::hosted_sample`](crate::Driver::hosted_sample)) into CALLCHAIN
//! records of the owner's log, with losses ([`Driver::hosted_lost`](crate::Driver::hosted_lost)) reported by DROPNOTIFY.
//!
//! Such a host calls the driver on the calling thread, so it may read why a call failed with
//! the errno, from [`Driver::syscall_explained`](crate::Driver::syscall_explained), instead of
//! keeping the text per thread through [`Kernel::set_error_text`](crate::Kernel::set_error_text).

mod gate;
mod handover;

pub(crate) use self::gate::HostedGate;

use crate::abi::{Class, PmcFlags, PmcId};
use crate::errno::Errno;
use crate::types::{Cpu, Pid, Tid};

/// The event of a PMC the host counts, as the driver checked it at PMCALLOCATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostedEvent {
    /// A software event: a code the kernel got from
    /// [`Driver::register_soft_event`](crate::Driver::register_soft_event).
    Soft {
        /// The event code.
        event: u32,
    },
    /// An event of a hardware class, in the configuration word the class defines (reserved
    /// bits clear, enable and interrupt bits clear): for IAP the IA32_PERFEVTSEL bits (event
    /// select, umask, cmask, INV, EDGE, ANY, USR, OS), for IAF the fixed counter's index.
    Raw {
        /// The class.
        class: Class,
        /// The configuration word.
        config: u64,
    },
    /// The time-stamp counter.
    Tsc,
}

/// A PMC whose counting the host does, as the driver describes it to [`HostCounters::start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostedPmc {
    /// The driver's name for the PMC: samples and losses the host posts carry it back.
    pub token: u64,
    /// Its id (CPU of a system PMC, mode, class, row).
    pub id: PmcId,
    /// What it counts.
    pub event: HostedEvent,
    /// Whether to count in user mode.
    pub user: bool,
    /// Whether to count in kernel mode.
    pub kernel: bool,
    /// Its allocation flags: PMC_F_DESCENDANTS (follow children the targets fork from now on),
    /// PMC_F_CALLCHAIN (samples carry callchains), PMC_F_USERCALLCHAIN (kernel-mode samples get
    /// the user stack too).
    pub flags: PmcFlags,
    /// With PMC_F_THREAD in `flags`, the one thread of its target it counts (with
    /// PMC_F_THREAD_INHERIT, and the threads that thread creates from now on); 0 otherwise.
    pub thread: Tid,
    /// A sampling PMC's period in events (0 for a counting PMC).
    pub reload: u64,
}

/// What one sample of a host-counted PMC says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostedSample<'a> {
    /// The CPU it was taken on.
    pub cpu: Cpu,
    /// The process and thread it interrupted.
    pub pid: Pid,
    /// The thread.
    pub tid: Tid,
    /// Whether the CPU was in user mode.
    pub user: bool,
    /// The sampled program counter, then the callchain's return addresses (innermost first).
    pub pcs: &'a [u64],
    /// When it was taken, as a TSC value (the log's timestamps); `None` stamps it when posted.
    pub tsc: Option<u64>,
}

/// The counting a host kernel does for the driver (see the module documentation).
///
/// Every method is called in thread context, without the driver's locks held, from the system
/// call of the PMC's owner or from the exit hook of a target.
pub trait HostCounters {
    /// Whether the host counts the PMCs of `class`. The driver programs no hardware for them,
    /// and its context-switch and interrupt hooks never see them.
    fn counts(&self, class: Class) -> bool;
    /// Whether the host can count `pmc`, asked at PMCALLOCATE once the driver has checked the
    /// request (its `token` is 0: the PMC does not exist yet). The errno is PMCALLOCATE's:
    /// EINVAL for an event the host lacks, EOPNOTSUPP for a flag it cannot honour. The default
    /// takes everything.
    fn check(&self, pmc: &HostedPmc) -> Result<(), Errno> {
        let _ = pmc;
        Ok(())
    }
    /// Starts counting `pmc`: a process PMC on each of `targets` (all their threads, including
    /// those created later, and with PMC_F_DESCENDANTS the processes they fork from now on,
    /// whose counts belong to the target they descend from), a system PMC on its CPU (`targets`
    /// is empty). All or nothing: on failure nothing counts, and the errno is PMCSTART's
    /// (EPERM when the host forbids measuring a target, ESRCH when one is gone, …).
    fn start(&self, pmc: &HostedPmc, targets: &[Pid]) -> Result<(), Errno>;
    /// Stops counting `token`'s PMC and reports, per target (pid −1 for a system PMC), the
    /// events counted since [`HostCounters::start`]; the host forgets its counters. A sampling
    /// PMC's samples taken before the stop are posted ([`Driver::hosted_sample`](crate::Driver::hosted_sample)) before this
    /// returns: the driver may release the PMC next.
    fn stop(&self, token: u64, counted: &mut dyn FnMut(Pid, u64));
    /// The events `token`'s PMC counted since it started, over all its targets; it goes on.
    fn read(&self, token: u64) -> u64;
    /// Stops counting target `pid` of `token`'s running PMC (it exited or was detached) and
    /// returns what was counted there since start (0 if the host never counted it apart, as
    /// for a descendant counted with its ancestor).
    fn detach(&self, token: u64, pid: Pid) -> u64;
}
