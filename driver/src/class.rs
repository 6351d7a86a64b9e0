//! PMC classes: which rows each class owns, what it can do, how a PMC of it is configured, and
//! how that configuration reaches the hardware of the current CPU.
//!
//! Rows are numbered globally, as in FreeBSD: SOFT first, then TSC, then IAP (GP counters), then
//! IAF (fixed counters). The IAP and IAF rows exist only when every active CPU has an
//! architectural PMU, and there are as many as the CPU with the fewest counters has, so a process
//! PMC can run on any CPU.

use alloc::vec::Vec;

use crate::abi::{Caps, Class};
use crate::hw::{Msrs, msr};
use crate::percpu::{PerCpu, Slot};
use crate::pmu::IntelPmu;
use crate::regs::{
    Counter, CounterSet, FixedCtrCtrl, FixedCtrField, GlobalCtrl, PerfEvtSel, low_bits,
};

use core::sync::atomic::Ordering;

/// SOFT rows, as FreeBSD (`SOFT_NPMCS`).
pub(crate) const SOFT_ROWS: u32 = 16;

/// One class and its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClassDesc {
    pub(crate) class: Class,
    pub(crate) first_row: u32,
    pub(crate) rows: u32,
    /// Counter width in bits.
    pub(crate) width: u32,
    pub(crate) caps: Caps,
}

impl ClassDesc {
    pub(crate) fn contains(&self, row: u32) -> bool {
        (self.first_row..self.first_row + self.rows).contains(&row)
    }
    pub(crate) fn mask(&self) -> u64 {
        low_bits(self.width)
    }
    /// Rows of this class may hold several PMCs at once (the TSC).
    pub(crate) fn shareable(&self) -> bool {
        self.class == Class::Tsc
    }
}

const SOFT_CAPS: Caps =
    Caps::READ.union(Caps::WRITE).union(Caps::INTERRUPT).union(Caps::USER).union(Caps::SYSTEM);
const IAP_CAPS: Caps = Caps::INTERRUPT
    .union(Caps::USER)
    .union(Caps::SYSTEM)
    .union(Caps::EDGE)
    .union(Caps::THRESHOLD)
    .union(Caps::READ)
    .union(Caps::WRITE)
    .union(Caps::INVERT)
    .union(Caps::QUALIFIER)
    .union(Caps::PRECISE);
const IAF_CAPS: Caps =
    Caps::INTERRUPT.union(Caps::USER).union(Caps::SYSTEM).union(Caps::READ).union(Caps::WRITE);

/// The classes of this machine and their rows.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) classes: Vec<ClassDesc>,
    /// The PMU every process PMC may assume (the smallest of all CPUs), if all have one.
    pub(crate) pmu: Option<IntelPmu>,
}

impl Layout {
    /// The layout for CPUs with these PMUs (`None` for CPUs without one).
    pub(crate) fn new(pmus: &[Option<IntelPmu>]) -> Layout {
        let mut classes = Vec::new();
        let mut next = 0;
        let mut push = |class, rows, width, caps| {
            classes.push(ClassDesc { class, first_row: next, rows, width, caps });
            next += rows;
        };
        push(Class::Soft, SOFT_ROWS, 64, SOFT_CAPS);
        push(Class::Tsc, 1, 64, Caps::READ);
        let common = common_pmu(pmus);
        if let Some(pmu) = common {
            push(Class::Iap, u32::from(pmu.gp_counters), u32::from(pmu.gp_width), IAP_CAPS);
            let fixed = pmu.fixed_counters();
            if fixed > 0 && pmu.has_global_ctrl() {
                push(Class::Iaf, u32::from(fixed), u32::from(pmu.fixed_width), IAF_CAPS);
            }
        }
        Layout { classes, pmu: common }
    }

    /// Total rows (`pm_npmc`).
    pub(crate) fn rows(&self) -> u32 {
        self.classes.iter().map(|c| c.rows).sum()
    }

    pub(crate) fn class(&self, class: Class) -> Option<&ClassDesc> {
        self.classes.iter().find(|c| c.class == class)
    }

    pub(crate) fn class_of_row(&self, row: u32) -> Option<&ClassDesc> {
        self.classes.iter().find(|c| c.contains(row))
    }
}

/// The PMU description all CPUs share: the fewest counters, the narrowest widths, the lowest
/// version and the features all have. `None` if any CPU has no PMU.
fn common_pmu(pmus: &[Option<IntelPmu>]) -> Option<IntelPmu> {
    let mut iter = pmus.iter();
    let mut common = (*iter.next()?)?;
    for pmu in iter {
        let pmu = (*pmu)?;
        common.version = common.version.min(pmu.version);
        common.gp_counters = common.gp_counters.min(pmu.gp_counters);
        common.gp_width = common.gp_width.min(pmu.gp_width);
        common.fixed_mask &= pmu.fixed_mask;
        common.fixed_width = common.fixed_width.min(pmu.fixed_width);
        common.arch_events &= pmu.arch_events;
        common.full_width_write &= pmu.full_width_write;
        common.any_thread &= pmu.any_thread;
    }
    // Fixed counters are used by index, so only the contiguous run from 0 is usable everywhere.
    common.fixed_mask = low_bits(common.fixed_mask.trailing_ones()) as u32;
    Some(common)
}

/// How a PMC is programmed on its row (what the class accepted at allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HwConfig {
    /// A software event.
    Soft { event: u32 },
    /// The time-stamp counter.
    Tsc,
    /// A GP counter with this event select (EN and INT clear; the driver sets them).
    Iap { evtsel: PerfEvtSel },
    /// Fixed counter `index` with this field (PMI clear; the driver sets it).
    Iaf { index: u8, field: FixedCtrField },
}

/// Programs `config` on row `row_in_class` of the current CPU with the counter at `start`, then
/// publishes the slot and enables the counter. `interrupt` asks for a PMI on overflow.
pub(crate) fn load(
    msrs: &dyn Msrs,
    cpu: &PerCpu,
    slot: &Slot,
    row_in_class: u32,
    config: HwConfig,
    start: u64,
    interrupt: bool,
) {
    match config {
        HwConfig::Soft { event } => {
            slot.soft_counter().store(start, Ordering::Relaxed);
            slot.set_soft_event(event);
            slot.publish();
        }
        HwConfig::Tsc => slot.publish(),
        HwConfig::Iap { evtsel } => {
            let Some(pmu) = cpu.pmu else { return };
            let index = row_in_class as u8;
            msrs.write_msr(msr::IA32_PERFEVTSEL0 + row_in_class, 0);
            msrs.write_msr(pmu.gp_write_msr(index), start & low_bits(u32::from(pmu.gp_width)));
            slot.publish();
            let sel = evtsel.with(PerfEvtSel::INT, interrupt).with(PerfEvtSel::EN, true);
            msrs.write_msr(msr::IA32_PERFEVTSEL0 + row_in_class, sel.bits());
            enable_globally(msrs, cpu, &pmu, Counter::Gp(index));
        }
        HwConfig::Iaf { index, field } => {
            let Some(pmu) = cpu.pmu else { return };
            set_fixed_field(msrs, cpu, &pmu, index, FixedCtrField::default());
            msrs.write_msr(
                msr::IA32_FIXED_CTR0 + u32::from(index),
                start & low_bits(u32::from(pmu.fixed_width)),
            );
            slot.publish();
            let pmi = if interrupt { FixedCtrField::PMI } else { 0 };
            let field =
                FixedCtrField::new(field.bits() | pmi, pmu.fixed_field_valid()).unwrap_or(field);
            set_fixed_field(msrs, cpu, &pmu, index, field);
            enable_globally(msrs, cpu, &pmu, Counter::Fixed(index));
        }
    }
}

/// Stops the counter of row `row_in_class` on the current CPU (after unpublishing its slot).
pub(crate) fn stop(
    msrs: &dyn Msrs,
    cpu: &PerCpu,
    slot: &Slot,
    row_in_class: u32,
    config: HwConfig,
) {
    slot.unpublish();
    match config {
        HwConfig::Soft { .. } | HwConfig::Tsc => {}
        HwConfig::Iap { .. } => {
            let Some(pmu) = cpu.pmu else { return };
            msrs.write_msr(msr::IA32_PERFEVTSEL0 + row_in_class, 0);
            disable_globally(msrs, cpu, &pmu, Counter::Gp(row_in_class as u8));
        }
        HwConfig::Iaf { index, .. } => {
            let Some(pmu) = cpu.pmu else { return };
            set_fixed_field(msrs, cpu, &pmu, index, FixedCtrField::default());
            disable_globally(msrs, cpu, &pmu, Counter::Fixed(index));
        }
    }
}

/// The raw counter value of row `row_in_class` on the current CPU.
pub(crate) fn read(
    msrs: &dyn Msrs,
    tsc: &dyn Fn() -> u64,
    cpu: &PerCpu,
    slot: &Slot,
    row_in_class: u32,
    config: HwConfig,
) -> u64 {
    match config {
        HwConfig::Soft { .. } => slot.soft_counter().load(Ordering::Relaxed),
        HwConfig::Tsc => tsc(),
        HwConfig::Iap { .. } => match cpu.pmu {
            Some(pmu) => {
                msrs.read_pmc(Counter::Gp(row_in_class as u8).rdpmc_index())
                    & low_bits(u32::from(pmu.gp_width))
            }
            None => 0,
        },
        HwConfig::Iaf { index, .. } => match cpu.pmu {
            Some(pmu) => {
                msrs.read_pmc(Counter::Fixed(index).rdpmc_index())
                    & low_bits(u32::from(pmu.fixed_width))
            }
            None => 0,
        },
    }
}

/// The counter of `config` in the GLOBAL_CTRL layout, for the interrupt handler.
pub(crate) fn counter_of(config: HwConfig, row_in_class: u32) -> Option<Counter> {
    match config {
        HwConfig::Iap { .. } => Some(Counter::Gp(row_in_class as u8)),
        HwConfig::Iaf { index, .. } => Some(Counter::Fixed(index)),
        HwConfig::Soft { .. } | HwConfig::Tsc => None,
    }
}

fn enable_globally(msrs: &dyn Msrs, cpu: &PerCpu, pmu: &IntelPmu, counter: Counter) {
    if !pmu.has_global_ctrl() {
        return;
    }
    let enabled =
        CounterSet::from_bits_within(cpu.global_ctrl.load(Ordering::Relaxed), pmu.counters());
    let enabled = enabled.with(counter).intersection(pmu.counters());
    cpu.global_ctrl.store(enabled.bits(), Ordering::Relaxed);
    msrs.write_msr(msr::IA32_PERF_GLOBAL_CTRL, GlobalCtrl::from_counters(enabled).bits());
}

fn disable_globally(msrs: &dyn Msrs, cpu: &PerCpu, pmu: &IntelPmu, counter: Counter) {
    if !pmu.has_global_ctrl() {
        return;
    }
    let enabled =
        CounterSet::from_bits_within(cpu.global_ctrl.load(Ordering::Relaxed), pmu.counters());
    let enabled = enabled.without(counter).intersection(pmu.counters());
    cpu.global_ctrl.store(enabled.bits(), Ordering::Relaxed);
    msrs.write_msr(msr::IA32_PERF_GLOBAL_CTRL, GlobalCtrl::from_counters(enabled).bits());
}

fn set_fixed_field(msrs: &dyn Msrs, cpu: &PerCpu, pmu: &IntelPmu, index: u8, field: FixedCtrField) {
    let bits = cpu.fixed_ctrl.load(Ordering::Relaxed);
    let ctrl = FixedCtrCtrl::from_bits_within(bits, pmu.fixed_mask, pmu.fixed_field_valid());
    let Some(ctrl) = ctrl.with_field(index, pmu.fixed_mask, field) else { return };
    cpu.fixed_ctrl.store(ctrl.bits(), Ordering::Relaxed);
    msrs.write_msr(msr::IA32_FIXED_CTR_CTRL, ctrl.bits());
}
