//! The operations on a PMC's value: PMCRW, PMCSETCOUNT, PMCGETMSR (direct RDPMC access) and
//! the extension PMCREADTIMES (a multiplexed PMC's times).

use crate::abi::{
    Class, PmcFlags, PmcId, PmcOpGetMsr, PmcOpPmcReadTimes, PmcOpPmcRw, PmcOpPmcSetCount,
};
use crate::arch::Backend;
use crate::backend::PmuBackend;
use crate::book::Pmc;
use crate::class::HwConfig;
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, UserPtr};
use crate::refusal::{Cause, Refusal};
use crate::types::PmcHandle;
use zerocopy::IntoBytes;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// PMCRW: read and/or write a PMC's value.
    pub(super) fn op_rw(&self, arg: UserPtr) -> Result<(), Refusal> {
        let mut request: PmcOpPmcRw = self.copy_in(arg)?;
        let flags = PmcFlags::from_bits(request.pm_flags)
            .filter(|f| (PmcFlags::OLDVALUE | PmcFlags::NEWVALUE).contains(*f))
            .ok_or(Cause::InvalidRwFlags)?;
        if flags.is_empty() {
            return Err(Cause::RwNeedsFlags.into());
        }
        let caller = self.kernel.current_pid();
        // The fields a read needs, copied under the lock (PMCRW is the hot operation: no clone
        // of the whole PMC).
        let (handle, pmc) = {
            let book = self.book.lock(&self.kernel);
            let handle = book.find(caller, request.pm_pmcid)?;
            (handle, book.pmc(handle).map(ValueView::of).ok_or(Cause::UnknownPmc)?)
        };
        let write = flags.contains(PmcFlags::NEWVALUE);
        if write && pmc.running {
            return Err(Cause::WriteRunning.into());
        }
        // Read and write together: the old value goes back to the caller, the new one is kept.
        let new_value = request.pm_value;
        if flags.contains(PmcFlags::OLDVALUE) {
            request.pm_value = self.current_value(handle, &pmc)?;
            let value_at = arg.offset(8).ok_or(Errno::Fault)?;
            self.kernel.copy_out(request.pm_value.as_bytes(), value_at)?;
        }
        if write {
            let mut book = self.book.lock(&self.kernel);
            // What the hooks handed back belongs to the value being replaced.
            book.settle(handle);
            let pmc = book.pmc_mut(handle).ok_or(Cause::UnknownPmc)?;
            if pmc.mode().is_sampling() {
                pmc.reload = new_value;
                pmc.start = self.counter_start(pmc);
            } else {
                pmc.value = new_value;
            }
        }
        Ok(())
    }

    /// The value PMCRW reads: the count (including what runs right now on every CPU), the TSC
    /// for the TSC class, or the reload count of a sampling PMC.
    fn current_value(&self, handle: PmcHandle, pmc: &ValueView) -> Result<u64, Cause> {
        if pmc.id.mode.is_sampling() {
            return Ok(pmc.reload);
        }
        if let Some(cpu) = pmc.id.cpu.map(Cpu::from) {
            if !self.kernel.cpu_active(cpu) {
                return Err(Cause::CpuOffline);
            }
            if pmc.id.class == Class::Tsc {
                return self.on_cpu(cpu, || self.hw.read_tsc()).ok_or(Cause::CpuOffline);
            }
        }
        if pmc.running && pmc.hosted {
            // The count credited so far and what the host counted since, taken together.
            return self.hosted_value(handle).ok_or(Cause::UnknownPmc);
        }
        // The count first, then what the CPUs hold: a PMC unloaded in between makes the read
        // late, never counts twice.
        let value = {
            let mut book = self.book.lock(&self.kernel);
            book.settle(handle);
            book.pmc(handle).map(|p| p.value).ok_or(Cause::UnknownPmc)?
        };
        if !pmc.running {
            return Ok(value);
        }
        Ok(value.wrapping_add(self.peek_everywhere(handle)))
    }

    /// The smallest reload a sampling PMC of `class` takes: `kern.hwpmc.mincount` for hardware
    /// events, 1 for software ones.
    pub(super) fn min_reload(&self, class: Class) -> u64 {
        if class == Class::Soft { 1 } else { self.tunables.min_count.max(1) }
    }

    /// PMCSETCOUNT: the reload of a sampling PMC, or the initial count of a counting one.
    pub(super) fn op_set_count(&self, arg: UserPtr) -> Result<(), Refusal> {
        let request: PmcOpPmcSetCount = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let mut book = self.book.lock(&self.kernel);
        let handle = book.find(caller, request.pm_pmcid)?;
        if book.pmc(handle).ok_or(Cause::UnknownPmc)?.is_running() {
            return Err(Cause::SetCountRunning.into());
        }
        book.settle(handle);
        let pmc = book.pmc_mut(handle).ok_or(Cause::UnknownPmc)?;
        if pmc.mode().is_sampling() {
            pmc.reload = request.pm_count.max(self.min_reload(pmc.id.class));
            pmc.start = self.counter_start(pmc);
        } else {
            pmc.value = request.pm_count;
        }
        Ok(())
    }

    /// PMCGETMSR: the RDPMC index of a process PMC attached only to its owner.
    pub(super) fn op_get_msr(&self, arg: UserPtr) -> Result<(), Refusal> {
        let mut request: PmcOpGetMsr = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, pmc) = self.find_cloned(caller, request.pm_pmcid)?;
        let self_only = pmc.targets.len() == 1 && pmc.targets[0] == pmc.owner;
        // A multiplexed PMC's counter is another PMC's in the other turns.
        if !pmc.mode().is_virtual()
            || pmc.flags.contains(PmcFlags::DESCENDANTS)
            || !self_only
            || pmc.mux.is_multiplexed()
        {
            return Err(Cause::GetMsrScope.into());
        }
        if pmc.hosted {
            // The host's counter is not the driver's to give out.
            return Err(Cause::GetMsrNoCounter.into());
        }
        let HwConfig::Hardware(config) = pmc.config else {
            return Err(Cause::GetMsrNoCounter.into());
        };
        request.pm_msr =
            Backend::rdpmc_index(config, pmc.class_row).ok_or(Cause::GetMsrNoCounter)?;
        self.copy_out(&request, arg)?;
        let targets = {
            let mut book = self.book.lock(&self.kernel);
            if let Some(pmc) = book.pmc_mut(handle) {
                pmc.msr_granted = true;
            }
            book.refresh_targets_of(handle)
        };
        self.publish_loads(&targets);
        // The caller runs now: if the PMC is on this CPU, RDPMC works from its next instruction.
        let cpu = self.kernel.current_cpu();
        let loaded_here =
            self.machine.slot(cpu, pmc.slot_row).is_some_and(|s| s.handle() == Some(handle));
        if let Some(state) = self.machine.cpu(cpu).filter(|_| loaded_here) {
            state.allow_rdpmc();
            self.kernel.set_user_rdpmc(true);
        }
        Ok(())
    }

    /// PMC_OP_PMCREADTIMES (extension): the count as PMCRW reads it, with a multiplexed PMC's
    /// times enabled and running (both 0 for other PMCs).
    pub(super) fn op_read_times(&self, arg: UserPtr) -> Result<(), Refusal> {
        let mut request: PmcOpPmcReadTimes = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, view, multiplexed) = {
            let book = self.book.lock(&self.kernel);
            let handle = book.find(caller, request.pm_pmcid)?;
            let pmc = book.pmc(handle).ok_or(Cause::UnknownPmc)?;
            (handle, ValueView::of(pmc), pmc.mux.is_multiplexed())
        };
        if multiplexed && view.running {
            self.mux_checkpoint();
        }
        request.pm_value = self.current_value(handle, &view)?;
        let times =
            self.book.lock(&self.kernel).pmc(handle).map(|p| p.mux).ok_or(Cause::UnknownPmc)?;
        (request.pm_enabled, request.pm_running) = (times.enabled, times.running);
        self.copy_out(&request, arg)
    }
}

/// What PMCRW needs to know of a PMC.
struct ValueView {
    id: PmcId,
    running: bool,
    hosted: bool,
    reload: u64,
}

impl ValueView {
    fn of(pmc: &Pmc) -> ValueView {
        ValueView { id: pmc.id, running: pmc.is_running(), hosted: pmc.hosted, reload: pmc.reload }
    }
}
