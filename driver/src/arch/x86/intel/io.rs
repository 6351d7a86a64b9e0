//! The only code that reads and writes the Intel PMU's MSRs. Each function names one register,
//! takes its typed value (which holds no reserved bit, see [`super::regs`]) and a proof that the
//! register exists on the current CPU: [`GlobalRegs`] for the perfmon v2 ones, or a counter the
//! CPU's description produced ([`super::IntelCounter`], an index in `0..gp_counters`).
//! Callers are the backend's methods, which run on the CPU whose description they hold.

use super::IntelCounter;
use super::discovery::IntelPmu;
use super::regs::{Counter, FixedCtrCtrl, GlobalCtrl, GlobalStatus, GlobalStatusReset, PerfEvtSel};
use crate::arch::x86::msr;
use crate::hw::Hardware;

/// IA32_DEBUGCTL bit 12: FREEZE_PERFMON_ON_PMI.
const DEBUGCTL_FREEZE_PERFMON_ON_PMI: u64 = 1 << 12;

/// Writes IA32_PERFEVTSEL`index` (`index` below the CPU's GP counter count).
#[inline]
pub(super) fn write_evtsel<H: Hardware>(hw: &H, index: u8, evtsel: PerfEvtSel) {
    // SAFETY: GP counter `index` exists (the caller got it from the CPU's description), and a
    // `PerfEvtSel` holds only bits its PMU defines.
    unsafe { hw.write_msr(msr::IA32_PERFEVTSEL0 + u32::from(index), evtsel.bits()) }
}

/// Writes `value` (below 2^width) to `counter`.
#[inline]
pub(super) fn write_counter<H: Hardware>(hw: &H, counter: IntelCounter, value: u64) {
    // SAFETY: the counter exists on this CPU and its write address was chosen from the CPU's
    // description (`IntelCounter::new`); values are below the counter's width.
    unsafe { hw.write_msr(counter.write_msr, value) }
}

/// RDPMC of `counter`, one of the counters the CPU's [`GlobalCtrl`] image holds (built only
/// from counters that exist).
#[inline]
pub(super) fn read_started_counter<H: Hardware>(hw: &H, counter: Counter) -> u64 {
    // SAFETY: the image holds only counters of this CPU's description.
    unsafe { hw.read_pmc(counter.rdpmc_index()) }
}

/// RDPMC of `counter`.
#[inline]
pub(super) fn read_counter<H: Hardware>(hw: &H, counter: IntelCounter) -> u64 {
    // SAFETY: the counter exists on this CPU (`IntelCounter::new`).
    unsafe { hw.read_pmc(counter.rdpmc) }
}

/// Proof that the current CPU has perfmon v2's global registers: IA32_PERF_GLOBAL_CTRL,
/// IA32_PERF_GLOBAL_STATUS, IA32_PERF_GLOBAL_OVF_CTRL, IA32_FIXED_CTR_CTRL and IA32_DEBUGCTL's
/// freeze bit. Only [`global_regs`] makes one, from the CPU's description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GlobalRegs(());

/// The global registers of a CPU with `pmu`, if it has them (perfmon v2+).
pub(super) fn global_regs(pmu: &IntelPmu) -> Option<GlobalRegs> {
    pmu.has_global_ctrl().then_some(GlobalRegs(()))
}

/// Writes IA32_FIXED_CTR_CTRL.
#[inline]
pub(super) fn write_fixed_ctrl<H: Hardware>(hw: &H, _: GlobalRegs, ctrl: FixedCtrCtrl) {
    // SAFETY: the register exists (`GlobalRegs`); `FixedCtrCtrl` holds only fields of existing
    // counters with defined bits.
    unsafe { hw.write_msr(msr::IA32_FIXED_CTR_CTRL, ctrl.bits()) }
}

/// Writes IA32_PERF_GLOBAL_CTRL.
#[inline]
pub(super) fn write_global_ctrl<H: Hardware>(hw: &H, _: GlobalRegs, ctrl: GlobalCtrl) {
    // SAFETY: the register exists (`GlobalRegs`); a `GlobalCtrl` enables only counters that
    // exist.
    unsafe { hw.write_msr(msr::IA32_PERF_GLOBAL_CTRL, ctrl.bits()) }
}

/// Reads IA32_PERF_GLOBAL_STATUS.
#[inline]
pub(super) fn read_global_status<H: Hardware>(hw: &H, _: GlobalRegs) -> GlobalStatus {
    // SAFETY: the register exists (`GlobalRegs`).
    GlobalStatus::from_bits(unsafe { hw.read_msr(msr::IA32_PERF_GLOBAL_STATUS) })
}

/// Writes IA32_PERF_GLOBAL_OVF_CTRL (STATUS_RESET from v4): `reset` clears only bits the CPU's
/// version defines (it was built from the status the driver owns, see
/// [`IntelPmu::status_owned`]).
#[inline]
pub(super) fn write_status_reset<H: Hardware>(hw: &H, _: GlobalRegs, reset: GlobalStatusReset) {
    // SAFETY: the register exists (`GlobalRegs`); the driver's status bits (its counters, and
    // CTR_FRZ on v4) are all defined bits of it.
    unsafe { hw.write_msr(msr::IA32_PERF_GLOBAL_OVF_CTRL, reset.bits()) }
}

/// Sets or clears IA32_DEBUGCTL.FREEZE_PERFMON_ON_PMI and leaves every other bit as it is now
/// (LBR, BTF, branch trace... are other users' and may have changed since the driver loaded);
/// returns whether the bit was set. Only a CPU that freezes (bare metal, perfmon v2+) calls it.
pub(super) fn set_debugctl_freeze<H: Hardware>(hw: &H, _: GlobalRegs, freeze: bool) -> bool {
    // SAFETY: IA32_DEBUGCTL exists on every CPU with perfmon v2 (`GlobalRegs`).
    let now = unsafe { hw.read_msr(msr::IA32_DEBUGCTL) };
    let value = if freeze {
        now | DEBUGCTL_FREEZE_PERFMON_ON_PMI
    } else {
        now & !DEBUGCTL_FREEZE_PERFMON_ON_PMI
    };
    if value != now {
        // SAFETY: the value is what the CPU holds (its reserved bits clear) with bit 12 changed,
        // which bare-metal perfmon v2+ defines (the caller freezes only there).
        unsafe { hw.write_msr(msr::IA32_DEBUGCTL, value) }
    }
    now & DEBUGCTL_FREEZE_PERFMON_ON_PMI != 0
}
