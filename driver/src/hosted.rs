//! PMCs that the host kernel counts itself.
//!
//! A kernel that owns the PMU and virtualizes counters per task already — Linux's perf_event —
//! leaves the driver nothing to program and never calls its context-switch hooks. It embeds the
//! driver all the same, for everything else hwpmc(4) is: the operations and their rules and
//! errno, rows and dispositions, owners and targets, the log with its records and drop notices.
//! It says which classes it counts through [`Kernel::host_counters`]; the driver then hands the
//! counting of those PMCs to it at PMCSTART, takes their counts at PMCSTOP, PMCRW, detach and
//! release, and turns the samples the host delivers ([`Driver::hosted_sample`]) into CALLCHAIN
//! records of the owner's log, with losses ([`Driver::hosted_lost`]) reported by DROPNOTIFY.

use core::sync::atomic::Ordering;

use pmclog::{Callchain, CallchainFlags, ProgramCounters, Record};

use crate::abi::{Class, PmcFlags, PmcId};
use crate::arch::Backend;
use crate::backend::{PmuBackend, rings};
use crate::class::HwConfig;
use crate::driver::{Driver, credit_locked};
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, Tid};
use crate::percpu::PmcHandle;
use crate::state::Pmc;

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
    /// PMC's samples taken before the stop are posted ([`Driver::hosted_sample`]) before this
    /// returns: the driver may release the PMC next.
    fn stop(&self, token: u64, counted: &mut dyn FnMut(Pid, u64));
    /// The events `token`'s PMC counted since it started, over all its targets; it goes on.
    fn read(&self, token: u64) -> u64;
    /// Stops counting target `pid` of `token`'s running PMC (it exited or was detached) and
    /// returns what was counted there since start (0 if the host never counted it apart, as
    /// for a descendant counted with its ancestor).
    fn detach(&self, token: u64, pid: Pid) -> u64;
}

impl HostedPmc {
    /// The description of `pmc` (`handle`) for the host.
    pub(crate) fn of(handle: PmcHandle, pmc: &Pmc) -> HostedPmc {
        HostedPmc::describe(handle.raw(), pmc)
    }

    /// The description of `pmc`, named `token`.
    fn describe(token: u64, pmc: &Pmc) -> HostedPmc {
        // A software event counts in the rings the caller asked for with PMC_CAP_USER and
        // PMC_CAP_SYSTEM, else both; hardware events carry theirs in their configuration.
        let (kernel, user) = rings(false, false, pmc.caps);
        let (event, user, kernel) = match pmc.config {
            HwConfig::Soft { event } => (HostedEvent::Soft { event }, user, kernel),
            HwConfig::Tsc => (HostedEvent::Tsc, true, true),
            HwConfig::Hardware(config) => {
                let raw = Backend::raw_event(config);
                (HostedEvent::Raw { class: pmc.id.class, config: raw.config }, raw.user, raw.kernel)
            }
        };
        HostedPmc {
            token,
            id: pmc.id,
            event,
            user,
            kernel,
            flags: pmc.flags,
            reload: if pmc.mode().is_sampling() { pmc.reload } else { 0 },
        }
    }
}

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Asks the host whether it can count the new PMC `pmc`.
    pub(crate) fn hosted_check(&self, pmc: &Pmc) -> Result<(), Errno> {
        let host = self.kernel.host_counters().ok_or(Errno::Doofus)?;
        host.check(&HostedPmc::describe(0, pmc))
    }

    /// Whether the host counts PMCs of `class`.
    pub(crate) fn host_counts(&self, class: Class) -> bool {
        self.kernel.host_counters().is_some_and(|h| h.counts(class))
    }

    /// Starts a host-counted PMC on `targets`.
    pub(crate) fn hosted_start(&self, handle: PmcHandle, targets: &[Pid]) -> Result<(), Errno> {
        let host = self.kernel.host_counters().ok_or(Errno::Doofus)?;
        let pmc = self.core.lock(&self.kernel).pmc(handle).map(|p| HostedPmc::of(handle, p));
        host.start(&pmc.ok_or(Errno::Inval)?, targets)
    }

    /// Stops a running host-counted PMC and adds what it counted to its count and its targets'
    /// shares.
    pub(crate) fn hosted_stop(&self, handle: PmcHandle) {
        let Some(host) = self.kernel.host_counters() else { return };
        let mut counted = alloc::vec::Vec::new();
        host.stop(handle.raw(), &mut |pid, delta| counted.push((pid, delta)));
        let mut core = self.core.lock(&self.kernel);
        for (pid, delta) in counted {
            credit_locked(&mut core, handle, pid, delta, 0);
        }
    }

    /// What a running host-counted PMC counted since it started.
    pub(crate) fn hosted_read(&self, handle: PmcHandle) -> u64 {
        self.kernel.host_counters().map_or(0, |h| h.read(handle.raw()))
    }

    /// Stops counting target `pid` of a running host-counted PMC and credits what it counted.
    pub(crate) fn hosted_detach(&self, handle: PmcHandle, pid: Pid) {
        let Some(host) = self.kernel.host_counters() else { return };
        let delta = host.detach(handle.raw(), pid);
        credit_locked(&mut self.core.lock(&self.kernel), handle, pid, delta, 0);
    }

    /// A sample of the host-counted PMC `token` (from [`HostedPmc::token`]): logged as a
    /// CALLCHAIN record in its owner's log (the current CPU's buffer, in the order the host
    /// posts samples and events, with the CPU the sample was taken on in the record). A sample
    /// taken while the PMC ran is logged even if it stopped since, until it is released; one
    /// of a released PMC (or of no PMC) is counted in `pm_intr_ignored`. Thread context.
    pub fn hosted_sample(&self, token: u64, sample: &HostedSample<'_>) {
        let depth = self.tunables.callchain_depth as usize;
        let pcs = &sample.pcs[..sample.pcs.len().min(depth)];
        let owner_and_id = {
            let core = self.core.lock(&self.kernel);
            let pmc = PmcHandle::from_raw(token).and_then(|h| core.pmc(h));
            pmc.filter(|p| p.hosted && p.mode().is_sampling()).map(|p| (p.owner, p.id.to_u32()))
        };
        let Some((owner, pmcid)) = owner_and_id else {
            self.local_stats().intr_ignored.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if pcs.is_empty() {
            self.local_stats().intr_ignored.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let flags = if sample.user { CallchainFlags::USERSPACE } else { 0 };
        let record = Record::Callchain(Callchain {
            pid: sample.pid,
            tid: sample.tid,
            pmcid,
            cpuflags: CallchainFlags::new(sample.cpu as u16, flags as u16),
            pcs: ProgramCounters::from_words(pcs),
        });
        self.local_stats().intr_processed.fetch_add(1, Ordering::Relaxed);
        let logged = match sample.tsc {
            Some(tsc) => self.log_record_at(owner, self.kernel.current_cpu(), &record, tsc),
            None => self.log_record(owner, &record),
        };
        if !logged {
            // The log is full: a lost sample like any other.
            self.local_stats().intr_bufferfull.fetch_add(1, Ordering::Relaxed);
            self.hosted_lost(token, 1);
        }
    }

    /// `count` samples of the host-counted PMC `token` were lost before they reached the
    /// driver (the host's buffer overflowed): the owner's log gets a DROPNOTIFY record at the
    /// next [`Driver::tick`], which a host that counts PMCs calls periodically. Thread context.
    pub fn hosted_lost(&self, token: u64, count: u64) {
        let mut core = self.core.lock(&self.kernel);
        let pmc = PmcHandle::from_raw(token).and_then(|h| core.pmc_mut(h));
        if let Some(pmc) = pmc.filter(|p| p.hosted && count > 0) {
            pmc.dropped += count;
            self.stats.unreported_drops.store(true, Ordering::Relaxed);
        }
    }
}
