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
pub mod perfmon_ext;
pub mod regs;

use alloc::vec::Vec;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use self::discovery::{CoreType, FreezeMode, IntelPmu};
use self::offcore::{Offcore, OffcoreClaims, OffcoreLoaded};
use self::regs::{
    Counter, CounterSet, EvtSelFlags, FixedCtrCtrl, FixedCtrField, FixedFlags, GlobalCtrl,
    GlobalStatus, GlobalStatusReset, PerfEvtSel, low_bits,
};
use super::cpuid::{CpuSignature, cpu_type_of};
use crate::abi::{Caps, Class};
use crate::backend::{
    AllocateRequest, CounterMask, CpuIdString, HardwareClass, OtherCoreType, PMI_ROUNDS,
    PmuBackend, RawEvent, cold_path,
};
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::Tunables;
use crate::refusal::Refusal;

/// The machine's Intel PMU: the description every CPU shares, and its classes.
#[derive(Debug)]
pub struct IntelBackend {
    /// The PMU every process PMC may assume (the smallest of all CPUs), if all have one.
    common: Option<IntelPmu>,
    /// On a hybrid machine, the PMU a PMC of one core type may assume (the smallest of that
    /// type's CPUs), by core type (leaf 0x1A numbering).
    core_types: Vec<(u8, IntelPmu)>,
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
    /// A counter wider than its class (a hybrid machine's P-core counter, the class being as
    /// wide as the narrowest core type's): the sign bit of the class width, and the bits above
    /// it up to the counter's own width. A value written with the sign bit set (a counter
    /// loaded `period` events before the class's overflow) gets them too, so that the counter
    /// overflows after `period` events as a counter of the class width would; reads are masked
    /// to the class width. Both 0 when the counter is as wide as its class.
    sign_bit: u64,
    extension: u64,
}

impl IntelCounter {
    /// `counter` of a CPU with `pmu` (which has it), in a class `class_width` bits wide.
    fn new(pmu: &IntelPmu, counter: Counter, class_width: u8) -> Self {
        let (write_msr, width) = match counter {
            Counter::Gp(index) => (pmu.gp_write_msr(index), pmu.gp_width),
            Counter::Fixed(index) => {
                (super::msr::IA32_FIXED_CTR0 + u32::from(index), pmu.fixed_width)
            }
        };
        // A legacy GP write (no FW_WRITE) sign-extends bit 31 to the counter's width itself.
        let full_width = pmu.full_width_write || matches!(counter, Counter::Fixed(_));
        let (sign_bit, extension) = if full_width && width > class_width && class_width > 0 {
            let class_mask = low_bits(u32::from(class_width));
            (1 << (class_width - 1), low_bits(u32::from(width)) & !class_mask)
        } else {
            (0, 0)
        };
        IntelCounter { counter, write_msr, rdpmc: counter.rdpmc_index(), sign_bit, extension }
    }

    /// `value` as written to this counter: sign-extended from the class width.
    #[inline]
    fn written(&self, value: u64) -> u64 {
        if value & self.sign_bit != 0 { value | self.extension } else { value }
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

/// The GP counters an image can hold (discovery keeps at most 32, the GLOBAL_CTRL layout's).
const IMAGE_GP: usize = 32;

/// The control registers of some counters as loading programs them (the backend's `Image`).
/// Small, as loading a single PMC makes one too.
#[derive(Debug, Clone, Default)]
pub struct IntelImage {
    /// The GP counters programmed (bit `i`: IA32_PMC`i`) and their event selects, by counter.
    gp: u32,
    evtsel: [PerfEvtSel; IMAGE_GP],
    /// The GP counters whose event reads an offcore-response MSR, those of them that read
    /// the second one, and the value each MSR must hold (the PMCs allocated for a CPU hold one
    /// value per MSR, see [`OffcoreClaims`]).
    offcore: u32,
    offcore_second: u32,
    offcore_values: [Option<Offcore>; 2],
    /// The IA32_FIXED_CTR_CTRL fields of the fixed counters programmed, and their nibbles.
    fixed: u64,
    fixed_mask: u64,
    /// Every counter of the image.
    counters: CounterSet,
}

/// The nibbles of IA32_FIXED_CTR_CTRL of the fixed counters in `fixed` (bit `i`: counter `i`,
/// below 16, the register's fields).
#[inline]
fn fixed_nibbles(fixed: u32) -> u64 {
    // Without a loop (a switch-out clears the fields of all its fixed counters at once): bit
    // `i` is spread to bit `4i`, then each such bit becomes its nibble (no carry crosses one).
    let mut x = u64::from(fixed & 0xFFFF);
    x = (x | x << 24) & 0x0000_00FF_0000_00FF;
    x = (x | x << 12) & 0x000F_000F_000F_000F;
    x = (x | x << 6) & 0x0303_0303_0303_0303;
    x = (x | x << 3) & 0x1111_1111_1111_1111;
    x * 0xF
}

impl PmuBackend for IntelBackend {
    type Description = IntelPmu;
    type Cpu = IntelCpu;
    type Counter = IntelCounter;
    type Config = IntelConfig;
    type Image = IntelImage;

    fn discover<H: Hardware>(hw: &H) -> Option<IntelPmu> {
        IntelPmu::discover(&hw.cpuid(), hw)
    }

    fn new<H: Hardware>(cpus: &[Option<IntelPmu>], hw: &H) -> Self {
        let common = common_pmu(cpus);
        let core_types = core_type_pmus(cpus);
        let mut classes = Vec::new();
        if let Some(pmu) = common {
            // Rows up to the most counters any CPU has: a row some core type lacks takes only
            // PMCs of the core types that have it (`configure`).
            let most =
                |count: fn(&IntelPmu) -> u8| cpus.iter().flatten().map(count).max().unwrap_or(0);
            let gp = most(|p| p.gp_counters);
            let (gp, width) = (u32::from(gp), u32::from(pmu.gp_width));
            classes.push(HardwareClass {
                class: Class::Iap,
                rows: gp,
                width,
                caps: Caps::IAP_CLASS,
            });
            let fixed = most(|p| if p.has_global_ctrl() { p.fixed_counters() } else { 0 });
            if pmu.fixed_counters() > 0 && pmu.has_global_ctrl() {
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
            core_types,
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
        cpu.pmu.and_then(|p| p.core_type).map_or(0, CoreType::code)
    }

    fn stop_keeps_program(&self, cpu: &IntelCpu) -> bool {
        // Perfmon v2 on stops counters through GLOBAL_CTRL; v1 has only their enable bits.
        cpu.global.is_some()
    }

    fn row_counter(&self, cpu: &IntelCpu, class: Class, index: u32) -> Option<IntelCounter> {
        let pmu = cpu.pmu.as_ref()?;
        let common = self.common.as_ref()?;
        let index = u8::try_from(index).ok()?;
        match class {
            Class::Iap if index < pmu.gp_counters => {
                Some(IntelCounter::new(pmu, Counter::Gp(index), common.gp_width))
            }
            Class::Iaf if pmu.has_fixed(index) && pmu.has_global_ctrl() => {
                Some(IntelCounter::new(pmu, Counter::Fixed(index), common.fixed_width))
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
        rows_of_class: u32,
        request: &AllocateRequest<'_>,
    ) -> Result<(IntelConfig, Range<u32>), Refusal> {
        let common = self.common.as_ref().ok_or(Errno::Inval)?;
        match class {
            Class::Iap => {
                // A PMC with a second encoding for the E-cores loads this one on the P-cores,
                // on a row both have.
                let two_encodings = request.raw.pm_md.iap_config_atom() != 0;
                let (pmu, rows) = match request.core_type {
                    0 if two_encodings => (self.core_type_pmu(CoreType::Core.code())?, common),
                    0 => (common, common),
                    core_type => {
                        let pmu = self.core_type_pmu(core_type)?;
                        (pmu, pmu)
                    }
                };
                Ok(iap::configure(pmu, rows_within(rows.gp_counters, rows_of_class), request)?)
            }
            Class::Iaf => {
                let pmu = match request.core_type {
                    0 => common,
                    core_type => self.core_type_pmu(core_type)?,
                };
                Ok(iaf::configure(pmu, rows_of_class, request)?)
            }
            _ => Err(Errno::Inval.into()),
        }
    }

    fn configure_other_core_type(
        &self,
        class: Class,
        request: &AllocateRequest<'_>,
        config: IntelConfig,
    ) -> Result<Option<OtherCoreType<IntelConfig>>, Errno> {
        let raw = request.raw.pm_md.iap_config_atom();
        if raw == 0 {
            return Ok(None);
        }
        // A fixed counter counts the same event on every core type; a PMC of one core type
        // has that type's encoding only.
        let IntelConfig::Iap { evtsel: primary, .. } = config else { return Err(Errno::Inval) };
        if class != Class::Iap || request.core_type != 0 {
            return Err(Errno::Inval);
        }
        let atom = self.core_type_pmu(CoreType::Atom.code())?;
        let config = iap::configure_like(atom, raw, primary, request)?;
        let (primary, other) = (CoreType::Core.code(), CoreType::Atom.code());
        Ok(Some(OtherCoreType { primary, other, config }))
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
        io::write_counter(hw, counter, counter.written(value));
    }

    #[inline]
    fn add_to_image(image: &mut IntelImage, counter: IntelCounter, armed: IntelConfig) {
        match (armed, counter.counter) {
            (IntelConfig::Iap { evtsel, offcore }, Counter::Gp(index)) => {
                let i = usize::from(index) % IMAGE_GP;
                image.gp |= 1 << i;
                image.evtsel[i] = evtsel;
                image.offcore &= !(1 << i);
                image.offcore_second &= !(1 << i);
                if let Some(offcore) = offcore {
                    image.offcore |= 1 << i;
                    let msr = offcore.msr_index() % 2;
                    image.offcore_second |= u32::from(msr == 1) << i;
                    image.offcore_values[msr] = Some(offcore);
                }
            }
            (IntelConfig::Iaf { field, .. }, Counter::Fixed(index)) => {
                let ctrl = FixedCtrCtrl::from_built_bits(image.fixed);
                image.fixed = ctrl.with_known_field(index, field).bits();
                image.fixed_mask |= fixed_nibbles(1 << (index % 16));
            }
            // A configuration of another class than the row's: nothing to program.
            _ => return,
        }
        image.counters = image.counters.with(counter.counter);
    }

    #[inline]
    fn program<H: Hardware>(&self, hw: &H, cpu: &IntelCpu, image: &IntelImage) -> CounterMask {
        // An image of counters this CPU lacks is not this CPU's: nothing reaches a register.
        if !image.counters.minus(cpu.counters).is_empty() {
            return CounterMask::EMPTY;
        }
        let programmed = if image.offcore == 0 {
            let mut gp = image.gp;
            while gp != 0 {
                let index = gp.trailing_zeros() as u8;
                gp &= gp - 1;
                io::write_evtsel(hw, index, image.evtsel[usize::from(index) % IMAGE_GP]);
            }
            image.counters
        } else {
            program_reading_offcore(hw, cpu, image)
        };
        if image.fixed_mask != 0 {
            // Only this CPU writes its image (no read-modify-write instruction needed).
            let ctrl = cpu.fixed_ctrl.load(Ordering::Relaxed);
            cpu.fixed_ctrl.store(ctrl & !image.fixed_mask | image.fixed, Ordering::Relaxed);
        }
        CounterMask::from_bits(programmed.bits())
    }

    #[inline]
    fn program_counter<H: Hardware>(
        &self,
        hw: &H,
        cpu: &IntelCpu,
        counter: IntelCounter,
        armed: IntelConfig,
    ) -> CounterMask {
        // A counter this CPU lacks is not this CPU's: nothing reaches a register.
        if !cpu.counters.contains(counter.counter) {
            return CounterMask::EMPTY;
        }
        match (armed, counter.counter) {
            (IntelConfig::Iap { evtsel, offcore }, Counter::Gp(index)) => {
                // An event whose response value cannot be loaded stays unprogrammed, as in
                // `program_reading_offcore`.
                if offcore.is_some_and(|o| !cpu.offcore_loaded.load(hw, index, o)) {
                    return CounterMask::EMPTY;
                }
                io::write_evtsel(hw, index, evtsel);
            }
            (IntelConfig::Iaf { field, .. }, Counter::Fixed(index)) => {
                // Only this CPU writes its image (no read-modify-write instruction needed).
                let ctrl = FixedCtrCtrl::from_built_bits(cpu.fixed_ctrl.load(Ordering::Relaxed));
                cpu.fixed_ctrl.store(ctrl.with_known_field(index, field).bits(), Ordering::Relaxed);
            }
            // A configuration of another class than the row's: nothing to program.
            _ => return CounterMask::EMPTY,
        }
        Self::counter_mask(counter)
    }

    #[inline]
    fn program_and_start<H: Hardware>(
        &self,
        hw: &H,
        cpu: &IntelCpu,
        image: &IntelImage,
    ) -> CounterMask {
        let programmed = self.program(hw, cpu, image);
        self.start(hw, cpu, programmed);
        programmed
    }

    #[inline]
    fn stop_and_unprogram<H: Hardware>(&self, hw: &H, cpu: &IntelCpu, counters: CounterMask) {
        self.stop(hw, cpu, counters);
        self.unprogram(hw, cpu, counters);
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
    fn unprogram<H: Hardware>(&self, hw: &H, cpu: &IntelCpu, counters: CounterMask) {
        let counters = CounterSet::from_bits_within(counters.bits(), cpu.counters);
        let mut gp = counters.bits() as u32;
        while gp != 0 {
            io::write_evtsel(hw, gp.trailing_zeros() as u8, PerfEvtSel::default());
            gp &= gp - 1;
        }
        // Fixed counters and offcore-response MSRs exist only with the global registers
        // (perfmon v2, Nehalem on), and perfmon v1 has no overflow indication to clear (a
        // counter loaded again has its top bit set).
        let Some(global) = cpu.global.filter(|_| !counters.is_empty()) else { return };
        cpu.offcore_loaded.unloaded(hw, counters.bits() as u32);
        if counters.has_fixed() {
            let fields = fixed_nibbles((counters.bits() >> 32) as u32);
            let ctrl = cpu.fixed_ctrl.load(Ordering::Relaxed) & !fields;
            cpu.fixed_ctrl.store(ctrl, Ordering::Relaxed);
            io::write_fixed_ctrl(hw, global, FixedCtrCtrl::from_built_bits(ctrl));
        }
        // Clear the overflow indications of the counters just unloaded (SDM Vol. 3B §21.2.2):
        // a PMI served late would otherwise be handled as an overflow of whichever PMC is
        // loaded on the counter next.
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

impl IntelBackend {
    /// The PMU every CPU of core type `core_type` has (EINVAL where no CPU has that type).
    fn core_type_pmu(&self, core_type: u8) -> Result<&IntelPmu, Errno> {
        self.core_types.iter().find(|(t, _)| *t == core_type).map(|(_, p)| p).ok_or(Errno::Inval)
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
    let status = io::read_global_status(hw, global);
    let counters = status.overflowed(cpu.counters);
    // Frozen at the driver's own request only (CTR_FRZ is among its status bits when it asked
    // for the streamlined freeze): otherwise CTR_FRZ is another agent's (its DEBUGCTL freeze,
    // its bit to clear), and the counters stopped above must start again.
    let frozen = status.counters_frozen_for(cpu.owned_status);
    if counters.is_empty() && !frozen {
        cold_path();
        if cpu.unfrozen {
            io::write_global_ctrl(hw, global, GlobalCtrl::from_counters(started(cpu)));
        }
        return false;
    }
    if !frozen && !cpu.unfrozen {
        io::write_global_ctrl(hw, global, GlobalCtrl::NONE);
    }
    handle_round(hw, cpu, global, status, &mut overflowed);
    // A PMU that froze itself stopped when the PMI was raised, before the status was read.
    // Stopping the counters by GLOBAL_CTRL may take effect a few events late: read the status
    // until none of the driver's counters overflowed since (as Linux does).
    if cpu.unfrozen {
        let mut status = io::read_global_status(hw, global);
        if !status.overflowed(cpu.counters).is_empty() {
            // Rare (a counter overflowed after the stop): apart from the common PMI's straight
            // line, whose registers a loop around it would take.
            cold_path();
            let mut rounds = PMI_ROUNDS - 1;
            loop {
                handle_round(hw, cpu, global, status, &mut overflowed);
                rounds -= 1;
                if rounds == 0 {
                    break;
                }
                status = io::read_global_status(hw, global);
                if status.overflowed(cpu.counters).is_empty() {
                    break;
                }
            }
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

/// One round of [`pmi_global`]: hands each of the driver's counters that overflowed in
/// `status` to `overflowed`, then clears their status bits (only the driver's: another user's
/// PMI, such as Intel PT's ToPA or the DS buffer's, stays pending for its own handler).
#[inline(always)]
fn handle_round<H: Hardware>(
    hw: &H,
    cpu: &IntelCpu,
    global: io::GlobalRegs,
    status: GlobalStatus,
    overflowed: &mut impl FnMut(u32) -> bool,
) {
    CounterMask::from_bits(status.overflowed(cpu.counters).bits()).for_each_overflow(
        #[inline(always)]
        |bit| _ = overflowed(bit),
    );
    io::write_status_reset(hw, global, GlobalStatusReset::clearing(status, cpu.owned_status));
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

/// Writes the event selects of `image`, some of whose events read an offcore-response MSR
/// (loaded first); returns the counters programmed. A counter whose response value cannot be
/// loaded (allocation keeps that from happening) stays unprogrammed rather than count another
/// value's events.
// Out of line: few PMCs read the offcore-response MSRs.
#[inline(never)]
fn program_reading_offcore<H: Hardware>(hw: &H, cpu: &IntelCpu, image: &IntelImage) -> CounterSet {
    let mut programmed = image.counters;
    let mut gp = image.gp;
    while gp != 0 {
        let index = gp.trailing_zeros() as u8;
        gp &= gp - 1;
        let i = usize::from(index) % IMAGE_GP;
        if image.offcore >> i & 1 != 0 {
            let msr = (image.offcore_second >> i & 1) as usize;
            let loaded =
                image.offcore_values[msr].is_some_and(|o| cpu.offcore_loaded.load(hw, index, o));
            if !loaded {
                programmed = programmed.without(Counter::Gp(index));
                continue;
            }
        }
        io::write_evtsel(hw, index, image.evtsel[i]);
    }
    programmed
}

/// The GP rows of a class of `class_rows` rows that a PMU of `gp_counters` counters may use.
fn rows_within(gp_counters: u8, class_rows: u32) -> u32 {
    u32::from(gp_counters).min(class_rows)
}

/// On a hybrid machine, the PMU description the CPUs of each core type share, by core type
/// (leaf 0x1A numbering); empty when the machine is not hybrid or a CPU has no PMU.
fn core_type_pmus(pmus: &[Option<IntelPmu>]) -> Vec<(u8, IntelPmu)> {
    let mut by_type: Vec<(u8, IntelPmu)> = Vec::new();
    if pmus.iter().any(|p| p.is_none_or(|p| p.core_type.is_none())) {
        return by_type;
    }
    for pmu in pmus.iter().flatten() {
        let code = pmu.core_type.map_or(0, CoreType::code);
        if by_type.iter().all(|(t, _)| *t != code) {
            let same: Vec<_> = pmus
                .iter()
                .filter(|p| p.and_then(|p| p.core_type) == pmu.core_type)
                .copied()
                .collect();
            if let Some(shared) = common_pmu(&same) {
                by_type.push((code, shared));
            }
        }
    }
    by_type
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::fixed_nibbles;

    #[test]
    fn each_fixed_counter_has_its_nibble_of_the_fixed_counter_control() {
        assert_eq!(fixed_nibbles(0), 0);
        assert_eq!(fixed_nibbles(0b1), 0xF);
        assert_eq!(fixed_nibbles(0b1011), 0xF0FF);
        assert_eq!(fixed_nibbles(1 << 15), 0xF << 60);
        assert_eq!(fixed_nibbles(0xFFFF), u64::MAX);
        for i in 0..16 {
            assert_eq!(fixed_nibbles(1 << i), 0xF << (4 * i), "counter {i}");
        }
    }
}
