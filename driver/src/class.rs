//! PMC classes: which rows each class owns, what it can do, how a PMC of it is configured, and
//! how that configuration reaches the hardware of the current CPU.
//!
//! Rows are numbered globally, as in FreeBSD: SOFT first, then TSC, then IAP (GP counters), then
//! IAF (fixed counters). The IAP and IAF rows exist only when every active CPU has an
//! architectural PMU, and there are as many as the CPU with the fewest counters has, so a process
//! PMC can run on any CPU.

use alloc::vec::Vec;

use crate::abi::{Caps, Class, SOFT_ROWS};
use crate::hw::{Msrs, msr};
use crate::percpu::{PerCpu, Slot};
use crate::pmu::IntelPmu;
use crate::regs::{
    Counter, CounterSet, FixedCtrCtrl, FixedCtrField, GlobalCtrl, PerfEvtSel, low_bits,
};

use core::sync::atomic::Ordering;

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

/// The classes of this machine and their rows.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) classes: Vec<ClassDesc>,
    /// The PMU every process PMC may assume (the smallest of all CPUs), if all have one.
    pub(crate) pmu: Option<IntelPmu>,
    /// The hardware counter behind each row (empty for SOFT and TSC rows).
    row_counters: Vec<CounterSet>,
    /// First row and row count of the IAP and IAF classes (0, 0 when absent).
    iap_rows: (u32, u32),
    iaf_rows: (u32, u32),
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
        push(Class::Soft, SOFT_ROWS, 64, Caps::SOFT_CLASS);
        push(Class::Tsc, 1, 64, Caps::READ);
        let common = common_pmu(pmus);
        if let Some(pmu) = common {
            push(Class::Iap, u32::from(pmu.gp_counters), u32::from(pmu.gp_width), Caps::IAP_CLASS);
            let fixed = pmu.fixed_counters();
            if fixed > 0 && pmu.has_global_ctrl() {
                push(Class::Iaf, u32::from(fixed), u32::from(pmu.fixed_width), Caps::IAF_CLASS);
            }
        }
        let mut row_counters = Vec::new();
        for class in &classes {
            for index in 0..class.rows as u8 {
                let counter = match class.class {
                    Class::Iap => CounterSet::EMPTY.with(Counter::Gp(index)),
                    Class::Iaf => CounterSet::EMPTY.with(Counter::Fixed(index)),
                    _ => CounterSet::EMPTY,
                };
                row_counters.push(counter);
            }
        }
        let rows_of = |class| {
            classes
                .iter()
                .find(|c: &&ClassDesc| c.class == class)
                .map_or((0, 0), |c| (c.first_row, c.rows))
        };
        let (iap_rows, iaf_rows) = (rows_of(Class::Iap), rows_of(Class::Iaf));
        Layout { classes, pmu: common, row_counters, iap_rows, iaf_rows }
    }

    /// The row of a hardware counter, if the layout has it.
    #[inline]
    pub(crate) fn row_of_counter(&self, counter: Counter) -> Option<u32> {
        let ((first, rows), index) = match counter {
            Counter::Gp(i) => (self.iap_rows, u32::from(i)),
            Counter::Fixed(i) => (self.iaf_rows, u32::from(i)),
        };
        (index < rows).then_some(first + index)
    }

    /// The width mask of each row's counter.
    pub(crate) fn row_masks(&self) -> Vec<u64> {
        self.classes.iter().flat_map(|c| (0..c.rows).map(move |_| c.mask())).collect()
    }

    /// The hardware counter behind `row`, as a set (empty for software rows).
    pub(crate) fn counter_of_row(&self, row: u32) -> CounterSet {
        self.row_counters.get(row as usize).copied().unwrap_or(CounterSet::EMPTY)
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum HwConfig {
    /// A software event.
    Soft { event: u32 },
    /// The time-stamp counter.
    #[default]
    Tsc,
    /// A GP counter with this event select (EN and INT clear; the driver sets them).
    Iap { evtsel: PerfEvtSel },
    /// Fixed counter `index` with this field (PMI clear; the driver sets it).
    Iaf { index: u8, field: FixedCtrField },
}

impl HwConfig {
    /// The configuration as loading writes it: enabled (EN), with an interrupt at overflow
    /// (INT, PMI). Counting PMCs interrupt too: the handler folds and reloads at every
    /// overflow. (PMI is valid in every fixed-counter field, so the field stays valid.)
    pub(crate) fn armed(self) -> HwConfig {
        match self {
            HwConfig::Iap { evtsel } => HwConfig::Iap {
                evtsel: evtsel.with(PerfEvtSel::INT, true).with(PerfEvtSel::EN, true),
            },
            HwConfig::Iaf { index, field } => HwConfig::Iaf {
                index,
                field: FixedCtrField::from_built_bits(field.bits() | FixedCtrField::PMI),
            },
            HwConfig::Soft { .. } | HwConfig::Tsc => self,
        }
    }
}

/// The counter behind a row on one CPU, fixed when the driver loads: what programming, reading
/// and clearing the row there needs besides the PMC's configuration, ready to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum RowCounter {
    /// A SOFT row: the slot's software counter.
    Soft,
    /// The TSC row.
    Tsc,
    /// GP counter `index`, written through `write_msr` (the full-width alias where this CPU
    /// has one).
    Gp { index: u8, write_msr: u32 },
    /// Fixed counter `index`.
    Fixed { index: u8 },
    /// A hardware row this CPU has no counter for (it has no PMU).
    #[default]
    Absent,
}

impl RowCounter {
    /// The counter behind `row` of `layout` on a CPU with `pmu`.
    pub(crate) fn of(layout: &Layout, row: u32, pmu: Option<&IntelPmu>) -> RowCounter {
        let Some(class) = layout.class_of_row(row) else { return RowCounter::Absent };
        let index = (row - class.first_row) as u8;
        match class.class {
            Class::Soft => RowCounter::Soft,
            Class::Tsc => RowCounter::Tsc,
            Class::Iap => pmu.filter(|p| index < p.gp_counters).map_or(RowCounter::Absent, |p| {
                RowCounter::Gp { index, write_msr: p.gp_write_msr(index) }
            }),
            Class::Iaf => pmu
                .filter(|p| p.has_fixed(index) && p.has_global_ctrl())
                .map_or(RowCounter::Absent, |_| RowCounter::Fixed { index }),
            _ => RowCounter::Absent,
        }
    }
}

/// Programs `armed` (a [`HwConfig::armed`] configuration) on `slot`'s row of the current CPU
/// with the counter at `start` and publishes the slot. A hardware counter does not count until
/// [`enable`] starts it; the counter to pass there is returned. `start` is already within the
/// width of every CPU's counters (it is below the class's width, the narrowest).
#[inline]
pub(crate) fn program(
    msrs: &(impl Msrs + ?Sized),
    cpu: &PerCpu,
    slot: &Slot,
    armed: HwConfig,
    start: u64,
) -> CounterSet {
    match (armed, slot.counter()) {
        (HwConfig::Soft { event }, _) => {
            slot.soft_counter().store(start, Ordering::Relaxed);
            slot.set_soft_event(event);
            slot.publish();
            CounterSet::EMPTY
        }
        (HwConfig::Tsc, _) => {
            slot.publish();
            CounterSet::EMPTY
        }
        (HwConfig::Iap { evtsel }, RowCounter::Gp { index, write_msr }) => {
            msrs.write_msr(write_msr, start);
            slot.publish();
            msrs.write_msr(msr::IA32_PERFEVTSEL0 + u32::from(index), evtsel.bits());
            CounterSet::EMPTY.with(Counter::Gp(index))
        }
        (HwConfig::Iaf { index, field }, RowCounter::Fixed { .. }) => {
            msrs.write_msr(msr::IA32_FIXED_CTR0 + u32::from(index), start);
            slot.publish();
            set_fixed_field(cpu, index, field);
            CounterSet::EMPTY.with(Counter::Fixed(index))
        }
        // A row without its counter on this CPU.
        (HwConfig::Iap { .. } | HwConfig::Iaf { .. }, _) => CounterSet::EMPTY,
    }
}

/// Starts `counters` (programmed by [`program`]) on the current CPU: IA32_FIXED_CTR_CTRL once if
/// fixed counters are among them, then IA32_PERF_GLOBAL_CTRL once, so they start together.
pub(crate) fn enable(msrs: &(impl Msrs + ?Sized), cpu: &PerCpu, counters: CounterSet) {
    let Some(pmu) = cpu.pmu.as_ref() else { return };
    if counters.is_empty() {
        return;
    }
    if counters.has_fixed() {
        msrs.write_msr(msr::IA32_FIXED_CTR_CTRL, cpu.fixed_ctrl.load(Ordering::Relaxed));
    }
    if pmu.has_global_ctrl() {
        // The cached image only ever holds counters that exist, as `counters` does.
        let enabled = CounterSet::from_built_bits(cpu.global_ctrl.load(Ordering::Relaxed));
        let enabled = enabled.union(counters);
        cpu.global_ctrl.store(enabled.bits(), Ordering::Relaxed);
        msrs.write_msr(msr::IA32_PERF_GLOBAL_CTRL, GlobalCtrl::from_counters(enabled).bits());
    }
}

/// Stops `counters` on the current CPU with one IA32_PERF_GLOBAL_CTRL write (perfmon v2+; on v1
/// [`unprogram`] stops a counter).
pub(crate) fn disable(msrs: &(impl Msrs + ?Sized), cpu: &PerCpu, counters: CounterSet) {
    let Some(pmu) = cpu.pmu.as_ref() else { return };
    if counters.is_empty() || !pmu.has_global_ctrl() {
        return;
    }
    let enabled = CounterSet::from_built_bits(cpu.global_ctrl.load(Ordering::Relaxed));
    let enabled = enabled.minus(counters);
    cpu.global_ctrl.store(enabled.bits(), Ordering::Relaxed);
    msrs.write_msr(msr::IA32_PERF_GLOBAL_CTRL, GlobalCtrl::from_counters(enabled).bits());
}

/// Clears `counter`'s configuration on the current CPU (its slot already hidden from the
/// interrupt path). A fixed counter's field changes only in the cached IA32_FIXED_CTR_CTRL
/// image: [`write_fixed_ctrl`] writes it.
#[inline]
pub(crate) fn unprogram(msrs: &(impl Msrs + ?Sized), cpu: &PerCpu, counter: RowCounter) {
    match counter {
        RowCounter::Gp { index, .. } => msrs.write_msr(msr::IA32_PERFEVTSEL0 + u32::from(index), 0),
        RowCounter::Fixed { index } => set_fixed_field(cpu, index, FixedCtrField::default()),
        RowCounter::Soft | RowCounter::Tsc | RowCounter::Absent => {}
    }
}

/// Writes the cached IA32_FIXED_CTR_CTRL image.
pub(crate) fn write_fixed_ctrl(msrs: &(impl Msrs + ?Sized), cpu: &PerCpu) {
    if cpu.pmu.is_some_and(|p| p.fixed_mask != 0 && p.has_global_ctrl()) {
        msrs.write_msr(msr::IA32_FIXED_CTR_CTRL, cpu.fixed_ctrl.load(Ordering::Relaxed));
    }
}

/// The counter value of `slot`'s row on the current CPU (bits above the counter's width
/// unspecified: the caller masks the value when it folds it).
#[inline]
pub(crate) fn read(msrs: &(impl Msrs + ?Sized), tsc: &dyn Fn() -> u64, slot: &Slot) -> u64 {
    match slot.counter() {
        RowCounter::Soft => slot.soft_counter().load(Ordering::Relaxed),
        RowCounter::Tsc => tsc(),
        RowCounter::Gp { index, .. } => msrs.read_pmc(Counter::Gp(index).rdpmc_index()),
        RowCounter::Fixed { index } => msrs.read_pmc(Counter::Fixed(index).rdpmc_index()),
        RowCounter::Absent => 0,
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

/// Updates counter `index`'s field in the cached IA32_FIXED_CTR_CTRL image (which only ever
/// holds values built by [`FixedCtrCtrl`] for this CPU's PMU; `index` is a fixed counter of
/// this CPU, see [`RowCounter::Fixed`]).
#[inline]
fn set_fixed_field(cpu: &PerCpu, index: u8, field: FixedCtrField) {
    let ctrl = FixedCtrCtrl::from_built_bits(cpu.fixed_ctrl.load(Ordering::Relaxed));
    cpu.fixed_ctrl.store(ctrl.with_known_field(index, field).bits(), Ordering::Relaxed);
}
