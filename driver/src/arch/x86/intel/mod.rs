//! Intel architectural performance monitoring (SDM Vol. 3B chapter 21): the IAP class (GP
//! counters, `iap.rs`) and the IAF class (fixed counters, `iaf.rs`), discovered from CPUID leaf
//! 0xA on every CPU ([`discovery`]), programmed through typed registers ([`regs`], written only
//! by `io.rs`), with the perfmon v1 and v2+ PMI handlers. The offcore-response MSRs that IAP
//! events may read are claimed and loaded per CPU by [`offcore`].

pub mod discovery;
mod iaf;
mod iap;
mod io;
pub mod offcore;
pub mod regs;

use alloc::vec::Vec;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use self::discovery::{FreezeMode, IntelPmu};
use self::offcore::{Offcore, OffcoreClaims, OffcoreLoaded};
use self::regs::{
    Counter, CounterSet, EvtSelFlags, FixedCtrCtrl, FixedCtrField, FixedFlags, GlobalCtrl,
    GlobalStatusReset, PerfEvtSel, low_bits,
};
use super::cpuid::{CpuSignature, cpu_type_of};
use crate::abi::{Caps, Class};
use crate::backend::{
    AllocateRequest, CounterMask, CpuIdString, HardwareClass, PMI_ROUNDS, PmuBackend, RawEvent,
};
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::Tunables;

/// The machine's Intel PMU: the description every CPU shares, and its classes.
#[derive(Debug)]
pub struct IntelBackend {
    /// The PMU every process PMC may assume (the smallest of all CPUs), if all have one.
    common: Option<IntelPmu>,
    classes: Vec<HardwareClass>,
    signature: CpuSignature,
    /// Whether the PMU freezes its counters on a PMI where it can ([`Tunables::freeze_on_pmi`]).
    freeze_on_pmi: bool,
}

/// One CPU's PMU and the register images the driver keeps for it.
#[derive(Debug)]
pub struct IntelCpu {
    pmu: Option<IntelPmu>,
    /// Its global registers, when it has them (perfmon v2+).
    global: Option<io::GlobalRegs>,
    /// Every counter it has.
    counters: CounterSet,
    /// The IA32_PERF_GLOBAL_STATUS bits that are the driver's ([`IntelPmu::status_owned`]).
    owned_status: u64,
    /// The GP class's width mask (perfmon v1 finds overflows by the top bit of that width).
    gp_mask: u64,
    /// Whether the counters keep running after a PMI until the handler stops them (the driver
    /// does not have the PMU freeze itself: perfmon v1, hypervisor guests, or freezing is off).
    unfrozen: bool,
    /// The IA32_PERF_GLOBAL_CTRL image: the counters started on this CPU (kept on perfmon v1
    /// too, where it says which counters the PMI handler checks).
    global_ctrl: AtomicU64,
    /// The IA32_FIXED_CTR_CTRL image.
    fixed_ctrl: AtomicU64,
    /// Whether IA32_DEBUGCTL.FREEZE_PERFMON_ON_PMI was set when the driver loaded: unload puts
    /// that bit back and leaves the others as they are then (LBR, BTF... belong to others).
    found_freeze_bit: AtomicBool,
    /// Whether the driver owns the PMI entry (from load to unload): only then does the PMI
    /// handler unmask it, so an NMI during unload cannot unmask the entry unload masked.
    pmi_owned: AtomicBool,
    /// The offcore-response values the PMCs allocated for this CPU hold.
    offcore_claims: OffcoreClaims,
    /// What this CPU's offcore-response MSRs hold, and for which counters.
    offcore_loaded: OffcoreLoaded,
}

/// The counter behind a row on one CPU, with its addresses worked out once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntelCounter {
    counter: Counter,
    /// The MSR its value is written through (for a GP counter, the full-width alias where the
    /// CPU has one).
    write_msr: u32,
    /// Its RDPMC index.
    rdpmc: u32,
}

impl IntelCounter {
    /// `counter` of a CPU with `pmu` (which has it).
    fn new(pmu: &IntelPmu, counter: Counter) -> Self {
        let write_msr = match counter {
            Counter::Gp(index) => pmu.gp_write_msr(index),
            Counter::Fixed(index) => super::msr::IA32_FIXED_CTR0 + u32::from(index),
        };
        IntelCounter { counter, write_msr, rdpmc: counter.rdpmc_index() }
    }
}

/// How a PMC of an Intel class is programmed (what the class accepted at allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntelConfig {
    /// A GP counter with this event select (EN and INT clear until armed).
    Iap {
        /// The event select.
        evtsel: PerfEvtSel,
        /// The offcore-response MSR value the event reads, if it is an offcore-response event.
        offcore: Option<Offcore>,
    },
    /// Fixed counter `index` with this field (PMI clear until armed).
    Iaf {
        /// The fixed counter.
        index: u8,
        /// Its IA32_FIXED_CTR_CTRL field.
        field: FixedCtrField,
    },
}

impl PmuBackend for IntelBackend {
    type Description = IntelPmu;
    type Cpu = IntelCpu;
    type Counter = IntelCounter;
    type Config = IntelConfig;

    fn discover<H: Hardware>(hw: &H) -> Option<IntelPmu> {
        IntelPmu::discover(&hw.cpuid(), hw)
    }

    fn new<H: Hardware>(cpus: &[Option<IntelPmu>], hw: &H) -> Self {
        let common = common_pmu(cpus);
        let mut classes = Vec::new();
        if let Some(pmu) = common {
            let (gp, width) = (u32::from(pmu.gp_counters), u32::from(pmu.gp_width));
            classes.push(HardwareClass {
                class: Class::Iap,
                rows: gp,
                width,
                caps: Caps::IAP_CLASS,
            });
            let fixed = pmu.fixed_counters();
            if fixed > 0 && pmu.has_global_ctrl() {
                let (rows, width) = (u32::from(fixed), u32::from(pmu.fixed_width));
                classes.push(HardwareClass {
                    class: Class::Iaf,
                    rows,
                    width,
                    caps: Caps::IAF_CLASS,
                });
            }
        }
        IntelBackend {
            common,
            classes,
            signature: CpuSignature::read(&hw.cpuid()),
            freeze_on_pmi: Tunables::default().freeze_on_pmi,
        }
    }

    fn apply_tunables(&mut self, tunables: &Tunables) {
        self.freeze_on_pmi = tunables.freeze_on_pmi;
    }

    fn classes(&self) -> &[HardwareClass] {
        &self.classes
    }

    fn cpu(&self, description: Option<IntelPmu>) -> IntelCpu {
        let description = description.map(|mut pmu| {
            if !self.freeze_on_pmi {
                pmu.freeze = FreezeMode::None;
            }
            pmu
        });
        IntelCpu {
            pmu: description,
            global: description.as_ref().and_then(io::global_regs),
            counters: description.map_or(CounterSet::EMPTY, |p| p.counters()),
            owned_status: description.map_or(0, |p| p.status_owned()),
            gp_mask: low_bits(self.common.map_or(0, |p| u32::from(p.gp_width))),
            unfrozen: description.is_some_and(|p| p.freeze == FreezeMode::None),
            global_ctrl: AtomicU64::new(0),
            fixed_ctrl: AtomicU64::new(0),
            found_freeze_bit: AtomicBool::new(false),
            pmi_owned: AtomicBool::new(false),
            offcore_claims: OffcoreClaims::default(),
            offcore_loaded: OffcoreLoaded::default(),
        }
    }

    fn core_type(&self, cpu: &IntelCpu) -> u8 {
        match cpu.pmu.and_then(|p| p.core_type) {
            Some(discovery::CoreType::Atom) => 0x20,
            Some(discovery::CoreType::Core) => 0x40,
            Some(discovery::CoreType::Other(other)) => other,
            None => 0,
        }
    }

    fn row_counter(&self, cpu: &IntelCpu, class: Class, index: u32) -> Option<IntelCounter> {
        let pmu = cpu.pmu.as_ref()?;
        let index = u8::try_from(index).ok()?;
        match class {
            Class::Iap if index < pmu.gp_counters => {
                Some(IntelCounter::new(pmu, Counter::Gp(index)))
            }
            Class::Iaf if pmu.has_fixed(index) && pmu.has_global_ctrl() => {
                Some(IntelCounter::new(pmu, Counter::Fixed(index)))
            }
            _ => None,
        }
    }

    #[inline]
    fn counter_mask(counter: IntelCounter) -> CounterMask {
        CounterMask::from_bits(CounterSet::EMPTY.with(counter.counter).bits())
    }

    fn cpu_type(&self) -> u32 {
        cpu_type_of(&self.signature, self.common.is_some())
    }

    fn cpuid_string(&self) -> CpuIdString {
        self.signature.cpuid_string()
    }

    fn init_cpu<H: Hardware>(&self, hw: &H, cpu: &IntelCpu) {
        let Some(pmu) = cpu.pmu.as_ref() else { return };
        stop_all_counters(hw, cpu, pmu);
        if let Some(layout) = pmu.offcore.as_ref() {
            cpu.offcore_loaded.reset(hw, layout);
        }
        if let Some(global) = cpu.global {
            let status = io::read_global_status(hw, global);
            let reset = GlobalStatusReset::clearing(status, cpu.owned_status);
            if reset.bits() != 0 {
                io::write_status_reset(hw, global, reset);
            }
            if pmu.freeze != FreezeMode::None {
                let found = io::set_debugctl_freeze(hw, global, true);
                cpu.found_freeze_bit.store(found, Ordering::Relaxed);
            }
        }
        cpu.pmi_owned.store(true, Ordering::Relaxed);
        hw.unmask_pmi();
    }

    fn fini_cpu<H: Hardware>(&self, hw: &H, cpu: &IntelCpu) {
        let Some(pmu) = cpu.pmu.as_ref() else { return };
        // Before the mask: an NMI from here on leaves the entry as unload sets it.
        cpu.pmi_owned.store(false, Ordering::Relaxed);
        hw.mask_pmi();
        stop_all_counters(hw, cpu, pmu);
        if let Some(layout) = pmu.offcore.as_ref() {
            cpu.offcore_loaded.reset(hw, layout);
        }
        if let Some(global) = cpu.global.filter(|_| pmu.freeze != FreezeMode::None) {
            io::set_debugctl_freeze(hw, global, cpu.found_freeze_bit.load(Ordering::Relaxed));
        }
    }

    fn configure(
        &self,
        class: Class,
        rows: u32,
        request: &AllocateRequest<'_>,
    ) -> Result<(IntelConfig, Range<u32>), Errno> {
        let pmu = self.common.as_ref().ok_or(Errno::Inval)?;
        match class {
            Class::Iap => iap::configure(pmu, rows, request),
            Class::Iaf => iaf::configure(pmu, rows, request),
            _ => Err(Errno::Inval),
        }
    }

    fn claim<'a>(
        &self,
        cpus: impl Iterator<Item = &'a IntelCpu> + Clone,
        config: IntelConfig,
    ) -> Result<(), Errno> {
        let IntelConfig::Iap { offcore: Some(offcore), .. } = config else { return Ok(()) };
        if !cpus.clone().all(|cpu| cpu.offcore_claims.allows(offcore)) {
            return Err(Errno::Busy);
        }
        cpus.for_each(|cpu| cpu.offcore_claims.claim(offcore));
        Ok(())
    }

    fn unclaim<'a>(&self, cpus: impl Iterator<Item = &'a IntelCpu>, config: IntelConfig) {
        if let IntelConfig::Iap { offcore: Some(offcore), .. } = config {
            cpus.for_each(|cpu| cpu.offcore_claims.release(offcore));
        }
    }

    #[inline]
    fn armed(config: IntelConfig) -> IntelConfig {
        match config {
            IntelConfig::Iap { evtsel, offcore } => {
                IntelConfig::Iap { evtsel: iap::armed(evtsel), offcore }
            }
            IntelConfig::Iaf { index, field } => {
                IntelConfig::Iaf { index, field: iaf::armed(field) }
            }
        }
    }

    fn max_period(&self, config: IntelConfig, width_mask: u64) -> u64 {
        let half_width = (width_mask >> 1) + 1;
        let full_width_write = self.common.is_some_and(|p| p.full_width_write);
        match config {
            // Legacy writes sign-extend bit 31.
            IntelConfig::Iap { .. } if !full_width_write => half_width.min(1 << 31),
            IntelConfig::Iap { .. } | IntelConfig::Iaf { .. } => half_width,
        }
    }

    fn rdpmc_index(config: IntelConfig, index: u32) -> Option<u32> {
        let counter = match config {
            IntelConfig::Iap { .. } => Counter::Gp(u8::try_from(index).ok()?),
            IntelConfig::Iaf { index, .. } => Counter::Fixed(index),
        };
        Some(counter.rdpmc_index())
    }

    fn raw_event(config: IntelConfig) -> RawEvent {
        match config {
            IntelConfig::Iap { evtsel, .. } => RawEvent {
                config: evtsel.bits(),
                user: evtsel.has(EvtSelFlags::USR),
                kernel: evtsel.has(EvtSelFlags::OS),
            },
            IntelConfig::Iaf { index, field } => RawEvent {
                config: u64::from(index),
                user: field.flags().contains(FixedFlags::USR),
                kernel: field.flags().contains(FixedFlags::OS),
            },
        }
    }

    fn host_countable(config: IntelConfig) -> bool {
        !matches!(config, IntelConfig::Iap { offcore: Some(_), .. })
    }

    #[inline]
    fn write_counter<H: Hardware>(&self, hw: &H, counter: IntelCounter, value: u64) {
        io::write_counter(hw, counter, value);
    }

    #[inline]
    fn program<H: Hardware>(
        &self,
        hw: &H,
        cpu: &IntelCpu,
        counter: IntelCounter,
        armed: IntelConfig,
    ) -> CounterMask {
        match (armed, counter.counter) {
            (IntelConfig::Iap { evtsel, offcore }, Counter::Gp(index)) => {
                // A counter whose response value cannot be loaded (allocation keeps that from
                // happening) stays unprogrammed rather than count another value's events.
                if offcore.is_some_and(|o| !cpu.offcore_loaded.load(hw, index, o)) {
                    return CounterMask::EMPTY;
                }
                io::write_evtsel(hw, index, evtsel)
            }
            (IntelConfig::Iaf { field, .. }, Counter::Fixed(index)) => {
                set_fixed_field(cpu, index, field);
            }
            // A configuration of another class than the row's: nothing to program.
            _ => return CounterMask::EMPTY,
        }
        Self::counter_mask(counter)
    }

    #[inline]
    fn start<H: Hardware>(&self, hw: &H, cpu: &IntelCpu, counters: CounterMask) {
        if counters.is_empty() {
            return;
        }
        // Only this backend builds the masks, from counters that exist here.
        let counters = CounterSet::from_built_bits(counters.bits());
        // Perfmon v1 counts from the moment an event select has EN set.
        if let Some(global) = cpu.global.filter(|_| counters.has_fixed()) {
            let ctrl = FixedCtrCtrl::from_built_bits(cpu.fixed_ctrl.load(Ordering::Relaxed));
            io::write_fixed_ctrl(hw, global, ctrl);
        }
        set_started(hw, cpu, started(cpu).union(counters));
    }

    #[inline]
    fn stop<H: Hardware>(&self, hw: &H, cpu: &IntelCpu, counters: CounterMask) {
        if counters.is_empty() {
            return;
        }
        let counters = CounterSet::from_built_bits(counters.bits());
        set_started(hw, cpu, started(cpu).minus(counters));
    }

    #[inline]
    fn unprogram<H: Hardware>(&self, hw: &H, cpu: &IntelCpu, counter: IntelCounter) {
        match counter.counter {
            Counter::Gp(index) => io::write_evtsel(hw, index, PerfEvtSel::default()),
            Counter::Fixed(index) => set_fixed_field(cpu, index, FixedCtrField::default()),
        }
    }

    #[inline]
    fn flush<H: Hardware>(&self, hw: &H, cpu: &IntelCpu, counters: CounterMask) {
        // Fixed counters exist only with the global registers.
        let Some(global) = cpu.global.filter(|_| !counters.is_empty()) else { return };
        let counters = CounterSet::from_built_bits(counters.bits());
        // Offcore-response MSRs exist only on CPUs with the global registers (Nehalem on).
        cpu.offcore_loaded.unloaded(hw, counters.bits() as u32);
        if counters.has_fixed() {
            let ctrl = FixedCtrCtrl::from_built_bits(cpu.fixed_ctrl.load(Ordering::Relaxed));
            io::write_fixed_ctrl(hw, global, ctrl);
        }
        // Clear the overflow indications of the counters just unloaded (SDM Vol. 3B §21.2.2):
        // a PMI served late would otherwise be handled as an overflow of whichever PMC is
        // loaded on the counter next. (Perfmon v1 has no indication to clear: a counter loaded
        // again has its top bit set.)
        io::write_status_reset(hw, global, GlobalStatusReset::counters(counters));
    }

    #[inline]
    fn read<H: Hardware>(&self, hw: &H, counter: IntelCounter) -> u64 {
        io::read_counter(hw, counter)
    }

    #[inline]
    fn pmi<H: Hardware>(
        &self,
        hw: &H,
        cpu: &IntelCpu,
        mut overflowed: impl FnMut(u32) -> bool,
    ) -> bool {
        let claimed = match cpu.global {
            Some(global) => pmi_global(hw, cpu, global, overflowed),
            None => {
                let mut claimed = false;
                v1_overflowed(hw, cpu).for_each_bit(|bit| claimed |= overflowed(bit));
                claimed
            }
        };
        // Relaxed: the flag is written and read on this CPU only (the NMI interrupts the code
        // that wrote it), and a compiler barrier is all that orders them.
        if cpu.pmi_owned.load(Ordering::Relaxed) {
            hw.unmask_pmi();
        }
        claimed
    }
}

/// The PMI handler of perfmon v2+ (see [`PmuBackend::pmi`]), without the unmasking.
#[inline]
fn pmi_global<H: Hardware>(
    hw: &H,
    cpu: &IntelCpu,
    global: io::GlobalRegs,
    mut overflowed: impl FnMut(u32) -> bool,
) -> bool {
    if cpu.unfrozen {
        // Stop the counters before reading the status: one that overflowed after the read
        // would have its bit set too late to be seen, and its own PMI, raised while the entry
        // is masked, may be dropped (KVM drops it).
        io::write_global_ctrl(hw, global, GlobalCtrl::NONE);
    }
    let mut status = io::read_global_status(hw, global);
    let mut counters = status.overflowed(cpu.counters);
    let frozen = status.counters_frozen();
    if counters.is_empty() && !frozen {
        if cpu.unfrozen {
            io::write_global_ctrl(hw, global, GlobalCtrl::from_counters(started(cpu)));
        }
        return false;
    }
    if !frozen && !cpu.unfrozen {
        io::write_global_ctrl(hw, global, GlobalCtrl::NONE);
    }
    let mut rounds = PMI_ROUNDS;
    loop {
        CounterMask::from_bits(counters.bits()).for_each_overflow(
            #[inline(always)]
            |bit| _ = overflowed(bit),
        );
        // Only the driver's bits: another user's PMI (Intel PT's ToPA, the DS buffer) stays
        // pending for its own handler.
        io::write_status_reset(hw, global, GlobalStatusReset::clearing(status, cpu.owned_status));
        // A PMU that froze itself stopped when the PMI was raised, before the status was read.
        // Stopping the counters by GLOBAL_CTRL may take effect a few events late: read the
        // status until none of the driver's counters overflowed since (as Linux does).
        rounds -= 1;
        if !cpu.unfrozen || rounds == 0 {
            break;
        }
        status = io::read_global_status(hw, global);
        counters = status.overflowed(cpu.counters);
        if counters.is_empty() {
            break;
        }
    }
    // A frozen PMU restarts when its CTR_FRZ bit is cleared (with the status above).
    if !frozen {
        io::write_global_ctrl(hw, global, GlobalCtrl::from_counters(started(cpu)));
    }
    // A frozen PMU was stopped by a PMI even when no counter bit remains (a counter of ours
    // overflowed and was handled by an earlier NMI): it is ours, so the entry is unmasked.
    true
}

/// Perfmon v1 has no status register: a started counter overflowed when its top bit went clear
/// (counters are loaded at 2^width − period, with period at most 2^(width − 1)). Returns those
/// counters; the interrupt is the driver's only if a PMC was loaded on one of them.
// Out of line: the common handler (with a status register) stays short.
#[inline(never)]
fn v1_overflowed<H: Hardware>(hw: &H, cpu: &IntelCpu) -> CounterMask {
    if cpu.pmu.is_none() {
        return CounterMask::EMPTY;
    }
    let top = (cpu.gp_mask >> 1) + 1;
    let mut overflowed = CounterSet::EMPTY;
    for counter in started(cpu).iter() {
        if io::read_started_counter(hw, counter) & top == 0 {
            overflowed = overflowed.with(counter);
        }
    }
    CounterMask::from_bits(overflowed.bits())
}

/// The counters started on `cpu` (its GLOBAL_CTRL image).
#[inline]
fn started(cpu: &IntelCpu) -> CounterSet {
    // The image only ever holds counters of this CPU.
    CounterSet::from_built_bits(cpu.global_ctrl.load(Ordering::Relaxed))
}

/// Records `enabled` as the counters started on `cpu` and writes IA32_PERF_GLOBAL_CTRL (perfmon
/// v1 has none: a counter stops when it is unprogrammed).
#[inline]
fn set_started<H: Hardware>(hw: &H, cpu: &IntelCpu, enabled: CounterSet) {
    cpu.global_ctrl.store(enabled.bits(), Ordering::Relaxed);
    if let Some(global) = cpu.global {
        io::write_global_ctrl(hw, global, GlobalCtrl::from_counters(enabled));
    }
}

/// Clears every event select, the fixed-counter control and GLOBAL_CTRL of the current CPU.
fn stop_all_counters<H: Hardware>(hw: &H, cpu: &IntelCpu, pmu: &IntelPmu) {
    for index in 0..pmu.gp_counters {
        io::write_evtsel(hw, index, PerfEvtSel::default());
    }
    if let Some(global) = cpu.global {
        io::write_global_ctrl(hw, global, GlobalCtrl::NONE);
        if pmu.fixed_counters() > 0 {
            io::write_fixed_ctrl(hw, global, FixedCtrCtrl::default());
        }
    }
}

/// Updates counter `index`'s field in the cached IA32_FIXED_CTR_CTRL image (which only ever
/// holds values built by [`FixedCtrCtrl`] for this CPU's PMU; `index` is a fixed counter of this
/// CPU, see [`IntelCounter::Fixed`]).
#[inline]
fn set_fixed_field(cpu: &IntelCpu, index: u8, field: FixedCtrField) {
    let ctrl = FixedCtrCtrl::from_built_bits(cpu.fixed_ctrl.load(Ordering::Relaxed));
    cpu.fixed_ctrl.store(ctrl.with_known_field(index, field).bits(), Ordering::Relaxed);
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
        common.umask2 &= pmu.umask2;
        // One response value is checked for every CPU, so only a layout all share is usable.
        if common.offcore != pmu.offcore {
            common.offcore = None;
        }
        if common.core_type != pmu.core_type {
            common.core_type = None;
        }
    }
    // A fixed counter is a row of its own index: the IAF class has a row up to the highest
    // counter all CPUs have, and a row whose counter some CPU lacks (a gap of the perfmon v5
    // bitmap) takes no PMC (`iaf::configure`).
    Some(common)
}
