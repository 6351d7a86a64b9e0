//! The only code that reads and writes the AMD PMU's MSRs. Each function names one register and
//! takes a proof that it exists on the current CPU: a counter the CPU's description produced
//! ([`super::AmdCounter`]), or [`GlobalRegs`] for PerfMonV2's registers. Values are typed
//! ([`PerfCtl`], [`CoreCounters`]) so they hold no reserved bit.

use super::AmdCounter;
use super::discovery::AmdPmu;
use super::msr;
use super::regs::{CoreCounters, PerfCtl};
use crate::hw::Hardware;

/// Writes `counter`'s PERF_CTL.
#[inline]
pub(super) fn write_ctl<H: Hardware>(hw: &H, counter: AmdCounter, ctl: PerfCtl) {
    // SAFETY: the counter exists on this CPU (its addresses come from the CPU's description),
    // and a `PerfCtl` holds only bits PERF_CTL defines.
    unsafe { hw.write_msr(counter.ctl_msr, ctl.bits()) }
}

/// Writes `value` (below 2^48) to `counter`'s PERF_CTR.
#[inline]
pub(super) fn write_counter<H: Hardware>(hw: &H, counter: AmdCounter, value: u64) {
    // SAFETY: the counter exists on this CPU; the driver writes values below 2^width (the
    // counters are 48 bits wide and their upper bits are reserved).
    unsafe { hw.write_msr(counter.ctr_msr, value) }
}

/// RDPMC of `counter` (ECX = its number: legacy counters 0–3, extended 0–5).
#[inline]
pub(super) fn read_counter<H: Hardware>(hw: &H, counter: AmdCounter) -> u64 {
    // SAFETY: the counter exists on this CPU.
    unsafe { hw.read_pmc(u32::from(counter.index)) }
}

/// Proof that the current CPU has PerfMonV2's global registers. Only [`global_regs`] makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GlobalRegs(());

/// The global registers of a CPU with `pmu`, if it has them.
pub(super) fn global_regs(pmu: &AmdPmu) -> Option<GlobalRegs> {
    pmu.perfmon_v2.then_some(GlobalRegs(()))
}

/// Writes PerfCntrGlobalCtl: `counters` run (with their PERF_CTL.EN), the others do not.
#[inline]
pub(super) fn write_global_ctl<H: Hardware>(hw: &H, _: GlobalRegs, counters: CoreCounters) {
    // SAFETY: the register exists (`GlobalRegs`); a `CoreCounters` holds only counters of this
    // CPU, whose bits the register defines.
    unsafe { hw.write_msr(msr::PERF_CNTR_GLOBAL_CTL, counters.bits()) }
}

/// Reads PerfCntrGlobalCtl.
pub(super) fn read_global_ctl<H: Hardware>(hw: &H, _: GlobalRegs) -> u64 {
    // SAFETY: the register exists (`GlobalRegs`).
    unsafe { hw.read_msr(msr::PERF_CNTR_GLOBAL_CTL) }
}

/// Writes PerfCntrGlobalCtl back to `value`, what it held when the driver loaded.
pub(super) fn restore_global_ctl<H: Hardware>(hw: &H, _: GlobalRegs, value: u64) {
    // SAFETY: the register exists (`GlobalRegs`) and `value` was read from it.
    unsafe { hw.write_msr(msr::PERF_CNTR_GLOBAL_CTL, value) }
}

/// Reads PerfCntrGlobalStatus.
#[inline]
pub(super) fn read_global_status<H: Hardware>(hw: &H, _: GlobalRegs) -> u64 {
    // SAFETY: the register exists (`GlobalRegs`); it is read-only and only read here.
    unsafe { hw.read_msr(msr::PERF_CNTR_GLOBAL_STATUS) }
}

/// Clears the overflow bits of `counters` through PerfCntrGlobalStatusClr (the other bits of
/// the status, e.g. the LBR freeze indication, belong to other users and are left alone).
#[inline]
pub(super) fn clear_status<H: Hardware>(hw: &H, _: GlobalRegs, counters: CoreCounters) {
    // SAFETY: the register exists (`GlobalRegs`); the bits of this CPU's counters are defined.
    unsafe { hw.write_msr(msr::PERF_CNTR_GLOBAL_STATUS_CLR, counters.bits()) }
}
