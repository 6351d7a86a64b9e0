//! Loading, reading and unloading one PMC on the CPUs where it runs: what the system calls, the
//! tick and the hooks share.

use super::Driver;
use crate::backend::{CounterMask, PmuBackend};
use crate::book::Pmc;
use crate::class::HwConfig;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid};
use crate::machine::{self, PerCpu, Slot};
use crate::publish::LoadSpec;
use crate::types::{PmcHandle, SampleFlags};
use core::sync::atomic::Ordering;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Programs the PMC `spec` describes in `slot`, its row of the current CPU, for target
    /// `pid` (-1 for a system PMC), with its counter at `load`, and returns the hardware
    /// counter to start with [`PmuBackend::start`].
    #[inline]
    pub(crate) fn program_pmc(
        &self,
        state: &PerCpu,
        slot: &Slot,
        spec: &LoadSpec,
        load: u64,
        pid: Pid,
    ) -> CounterMask {
        slot.claim(spec.handle, pid, (spec.start, load), spec.sample_flags, spec.cell);
        machine::program(&self.backend, &self.hw, state, slot, &spec.armed, load)
    }

    /// The value `pmc`'s counter is loaded with. A hardware counter counts up from
    /// 2^width − period and overflows after `period` events (the reload of a sampling PMC, or the
    /// longest period for a counting one); the handler folds and reloads it, so the distance
    /// from the last fold stays below 2^width and the modular fold is exact (and on perfmon v1,
    /// bit width − 1 going clear shows the overflow). Software counters are 64 bits wide: a
    /// counting one starts from zero, a sampling one at 2^64 − reload.
    pub(crate) fn counter_start(&self, pmc: &Pmc) -> u64 {
        let period = match pmc.config {
            // A sampling software counter counts up to its 64-bit overflow, as hardware does.
            HwConfig::Soft { .. } if pmc.mode().is_sampling() => {
                return pmc.reload.max(1).wrapping_neg();
            }
            HwConfig::Soft { .. } | HwConfig::Tsc => return 0,
            HwConfig::Hardware(config) => self.backend.max_period(config, pmc.width_mask),
        };
        let period = if pmc.mode().is_sampling() { pmc.reload.clamp(1, period) } else { period };
        pmc.width_mask.wrapping_sub(period).wrapping_add(1) & pmc.width_mask
    }

    /// Programs and starts `pmc` on the current CPU `cpu` for target `pid` (-1 for a system
    /// PMC, whose `cell` is [`crate::publish::NO_CELL`]) with a whole period.
    pub(crate) fn load_pmc(&self, cpu: Cpu, handle: PmcHandle, pmc: &Pmc, pid: Pid, cell: u32) {
        let Some(state) = self.machine.cpu(cpu) else { return };
        let Some(slot) = state.slots.get(pmc.slot_row as usize) else { return };
        // A PMC of the thread running here joins what its switch-out unloads, so nothing may
        // stay parked; a system PMC needs its slot only.
        if pid >= 0 || slot.handle().is_some() {
            self.evict_parked(state);
        }
        let Some(spec) = pmc.load_spec_on(handle, cell, state.core_type) else { return };
        let counters = self.program_pmc(state, slot, &spec, pmc.start, pid);
        if pid >= 0 && pid == state.current_pid() {
            // Its counter's bit, programmed or not: the switch-out unpublishes it.
            state.add_current(pmc.slot_row, slot.counter().mask());
        }
        self.backend.start(&self.hw, &state.pmu, counters);
    }

    /// Stops and unloads `handle` from row `row` of the current CPU `cpu`; returns the target it
    /// ran for, the events it counted since loaded and the samples it lost, or `None` if it was
    /// not loaded there.
    pub(crate) fn unload_pmc(
        &self,
        cpu: Cpu,
        handle: PmcHandle,
        row: u32,
    ) -> Option<(Pid, u64, u64)> {
        let state = self.machine.cpu(cpu)?;
        let slot = state.slots.get(row as usize)?;
        if slot.handle() != Some(handle) {
            return None;
        }
        let counters = slot.counter().mask();
        state.remove_current_counters(counters);
        state.remove_current_row(row);
        state.published.unpublish(counters);
        slot.unpublish();
        self.backend.stop(&self.hw, &state.pmu, counters);
        self.backend.unprogram(&self.hw, &state.pmu, counters);
        let pid = slot.pid();
        let (delta, dropped, _) = self.finish_unload(slot, slot.sample_flags());
        slot.release();
        Some((pid, delta, dropped))
    }

    /// Unloads the PMC in `slot` (which samples as `flags` say) whose counter is already stopped
    /// and unprogrammed ([`PmuBackend::unprogram`]) and whose slot is hidden from the interrupt
    /// path: folds the
    /// final value and returns the events counted, the samples lost and, for a sampling PMC,
    /// the value to resume it with (see [`Slot::resume_value`]). The caller hands them back,
    /// then empties the slot ([`Slot::release`]).
    // Inlined into the switch-out loop, its hottest caller (out of line it costs ~20
    // instructions per PMC per switch in calls and spills).
    #[inline(always)]
    pub(crate) fn finish_unload(&self, slot: &Slot, flags: SampleFlags) -> (u64, u64, Option<u64>) {
        let now = machine::read(&self.backend, &self.hw, slot);
        let delta = slot.fold_all(now);
        // Only a sampling PMC loses samples (counting ones take none).
        if !flags.is_sampling() {
            return (delta, 0, None);
        }
        (delta, slot.take_drops(), Some(slot.resume_value(now)))
    }

    /// What `handle` counted on the current CPU `cpu` since it was loaded there, leaving it
    /// running (exact against an overflow interrupt meanwhile, see [`Slot::peek`]); `None` if it
    /// is not loaded there.
    pub(crate) fn peek_pmc(&self, cpu: Cpu, handle: PmcHandle, row: u32) -> Option<u64> {
        let state = self.machine.cpu(cpu)?;
        let slot = state.slots.get(row as usize)?;
        if slot.handle() != Some(handle) {
            return None;
        }
        Some(slot.peek(|| machine::read(&self.backend, &self.hw, slot)))
    }

    /// Unloads `handle` from every CPU where it is loaded and adds what it counted to its count
    /// (and to its targets' counts). Must be called without the bookkeeping lock held.
    pub(crate) fn unload_everywhere(&self, handle: PmcHandle) {
        self.on_cpus_holding(handle, |cpu, row| {
            if let Some(Some((pid, delta, dropped))) =
                self.on_cpu(cpu, || self.unload_pmc(cpu, handle, row))
            {
                self.credit(handle, pid, delta, dropped);
            }
        });
    }

    /// What `handle` counted so far on the CPUs where it is loaded, not yet in its count.
    pub(crate) fn peek_everywhere(&self, handle: PmcHandle) -> u64 {
        let mut total = 0u64;
        self.on_cpus_holding(handle, |cpu, row| {
            let counted = self.on_cpu(cpu, || self.peek_pmc(cpu, handle, row)).flatten();
            total = total.wrapping_add(counted.unwrap_or(0));
        });
        total
    }

    /// Calls `act(cpu, row)` for every CPU whose slot of `handle`'s row (its counter's row,
    /// [`Pmc::slot_row`]) holds it (a PMC's row never changes, so it is looked up once). Must be called without the bookkeeping lock held.
    pub(crate) fn on_cpus_holding(&self, handle: PmcHandle, mut act: impl FnMut(Cpu, u32)) {
        let Some(row) = self.book.lock(&self.kernel).pmc(handle).map(|p| p.slot_row) else {
            return;
        };
        for cpu in 0..self.kernel.cpu_count() {
            if self.machine.slot(cpu, row).is_some_and(|s| s.handle() == Some(handle)) {
                act(cpu, row);
            }
        }
    }

    /// Adds `delta` events to `handle`'s count and to target `pid`'s share of it, and
    /// `dropped` lost samples.
    pub(crate) fn credit(&self, handle: PmcHandle, pid: Pid, delta: u64, dropped: u64) {
        let mut book = self.book.lock(&self.kernel);
        book.credit(handle, pid, delta, dropped);
        if dropped > 0 {
            self.stats.unreported_drops.store(true, Ordering::Relaxed);
        }
    }
}
