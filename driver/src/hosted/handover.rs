//! The driver's side of PMCs a host kernel counts itself ([`crate::hosted`]): describing them
//! to the host, handing their counting over at PMCSTART and taking their counts back, and
//! logging the samples and losses the host posts.

use core::sync::atomic::Ordering;

use pmclog::{Callchain, CallchainFlags, ProgramCounters, Record};

use crate::abi::Class;
use crate::arch::Backend;
use crate::backend::{PmuBackend, rings};
use crate::book::Pmc;
use crate::class::HwConfig;
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hosted::{HostedEvent, HostedPmc, HostedSample};
use crate::hw::Hardware;
use crate::kernel::{Kernel, Pid};
use crate::types::PmcHandle;

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
            thread: pmc.threads.first().copied().unwrap_or(0),
            reload: if pmc.mode().is_sampling() { pmc.reload } else { 0 },
        }
    }
}

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Asks the host whether it can count the new PMC `pmc`.
    pub(crate) fn hosted_check(&self, pmc: &Pmc) -> Result<(), Errno> {
        let host = self.kernel.host_counters().ok_or(Errno::Doofus)?;
        if let HwConfig::Hardware(config) = pmc.config {
            // The host is given the event select only.
            if !Backend::host_countable(config) {
                return Err(Errno::OpNotSupp);
            }
        }
        host.check(&HostedPmc::describe(0, pmc))
    }

    /// Whether the host counts PMCs of `class`.
    pub(crate) fn host_counts(&self, class: Class) -> bool {
        self.kernel.host_counters().is_some_and(|h| h.counts(class))
    }

    /// Starts a host-counted PMC on `targets`.
    pub(crate) fn hosted_start(&self, handle: PmcHandle, targets: &[Pid]) -> Result<(), Errno> {
        let host = self.kernel.host_counters().ok_or(Errno::Doofus)?;
        let pmc = self.book.lock(&self.kernel).pmc(handle).map(|p| HostedPmc::of(handle, p));
        host.start(&pmc.ok_or(Errno::Inval)?, targets)
    }

    /// Stops a running host-counted PMC and adds what it counted to its count and its targets'
    /// shares.
    pub(crate) fn hosted_stop(&self, handle: PmcHandle) {
        let Some(host) = self.kernel.host_counters() else { return };
        let mut counted = alloc::vec::Vec::new();
        // A read meanwhile would find the count neither on the host nor credited.
        self.hosted_gate.enter();
        host.stop(handle.raw(), &mut |pid, delta| counted.push((pid, delta)));
        {
            let mut book = self.book.lock(&self.kernel);
            for (pid, delta) in counted {
                book.credit(handle, pid, delta, 0);
            }
        }
        self.hosted_gate.leave();
    }

    /// What a running host-counted PMC counted since it started.
    pub(crate) fn hosted_read(&self, handle: PmcHandle) -> u64 {
        self.kernel.host_counters().map_or(0, |h| h.read(handle.raw()))
    }

    /// The count of a host-counted PMC: what the driver was credited plus what the host counted
    /// since, taken together while no stop or detach moves a part from one to the other (so
    /// that successive reads never go back); `None` if the PMC is gone.
    pub(crate) fn hosted_value(&self, handle: PmcHandle) -> Option<u64> {
        self.hosted_gate.read(|| {
            let credited = self.book.lock(&self.kernel).pmc(handle).map(|p| p.value)?;
            Some(credited.wrapping_add(self.hosted_read(handle)))
        })
    }

    /// Stops counting target `pid` of a running host-counted PMC and credits what it counted.
    pub(crate) fn hosted_detach(&self, handle: PmcHandle, pid: Pid) {
        let Some(host) = self.kernel.host_counters() else { return };
        self.hosted_gate.enter();
        let delta = host.detach(handle.raw(), pid);
        self.book.lock(&self.kernel).credit(handle, pid, delta, 0);
        self.hosted_gate.leave();
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
            let book = self.book.lock(&self.kernel);
            let pmc = PmcHandle::from_raw(token).and_then(|h| book.pmc(h));
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
        let mut book = self.book.lock(&self.kernel);
        let pmc = PmcHandle::from_raw(token).and_then(|h| book.pmc_mut(h));
        if let Some(pmc) = pmc.filter(|p| p.hosted && count > 0) {
            pmc.dropped += count;
            self.stats.unreported_drops.store(true, Ordering::Relaxed);
        }
    }
}
