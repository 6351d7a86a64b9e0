//! AMD core performance counters (AMD64 APM vol. 2 §13.2; the PPRs of families 17h, 19h and
//! 1Ah): FreeBSD's K8 class, discovered from CPUID on every CPU ([`discovery`]), programmed
//! through typed registers ([`regs`], written only by `io.rs`), with the PerfMonV2 PMI handler
//! (global status, control and status-clear) and the legacy one (a counter's top bit gone
//! clear).

pub mod discovery;
mod io;
pub mod k8;
pub mod msr;
pub mod regs;

use alloc::vec::Vec;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use self::discovery::AmdPmu;
use self::regs::{CoreCounters, PerfCtl, PerfCtlFlags};
use super::cpuid::{CpuSignature, cpu_type_of};
use crate::abi::{Caps, Class};
use crate::backend::{
    AllocateRequest, CounterMask, CpuIdString, HardwareClass, OtherCoreType, PMI_ROUNDS,
    PmuBackend, RawEvent, cold_path,
};
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::refusal::Refusal;

/// The machine's AMD PMU: the description every CPU shares, and its class.
#[derive(Debug)]
pub struct AmdBackend {
    /// The counters every process PMC may assume (the fewest of all CPUs), if all have some.
    common: Option<AmdPmu>,
    classes: Vec<HardwareClass>,
    signature: CpuSignature,
}

/// One CPU's core counters and the register images the driver keeps for them.
#[derive(Debug)]
pub struct AmdCpu {
    pmu: Option<AmdPmu>,
    /// PerfMonV2's registers, when the CPU has them.
    global: Option<io::GlobalRegs>,
    /// Every core counter the CPU has.
    counters: CoreCounters,
    /// The counters started on this CPU (PerfCntrGlobalCtl's image with PerfMonV2; without it,
    /// the counters the PMI handler checks).
    started: AtomicU64,
    /// Without PerfMonV2: the counters whose PERF_CTL has EN set in the hardware (a counter is
    /// started and stopped through its own EN bit).
    enabled: AtomicU64,
    /// Each counter's PERF_CTL as programmed (armed), for starting and stopping it by EN.
    ctl: [AtomicU64; msr::MAX_CORE_COUNTERS as usize],
    /// PerfCntrGlobalCtl as found at load, restored at unload (its reset value enables every
    /// counter, for software that knows only PERF_CTL.EN).
    saved_global_ctl: AtomicU64,
    /// Whether the driver owns the PMI entry (from load to unload).
    pmi_owned: AtomicBool,
}

/// The counter behind a row on one CPU, with its addresses worked out once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmdCounter {
    /// Its number: its bit in the global registers and its RDPMC index.
    index: u8,
    ctl_msr: u32,
    ctr_msr: u32,
}

impl AmdCounter {
    fn new(pmu: &AmdPmu, index: u8) -> Self {
        AmdCounter { index, ctl_msr: pmu.ctl_msr(index), ctr_msr: pmu.ctr_msr(index) }
    }
    fn set(self) -> CoreCounters {
        CoreCounters::from_built_bits(1 << self.index)
    }
}

/// How a K8 PMC is programmed: its PERF_CTL (EN and INT clear until armed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmdConfig {
    /// The control value.
    pub ctl: PerfCtl,
}

/// The control registers of some core counters as loading programs them
/// (the backend's `Image`): each counter's PERF_CTL.
#[derive(Debug, Clone, Default)]
pub struct AmdImage {
    /// The counters programmed.
    counters: CoreCounters,
    /// Each one's counter and PERF_CTL, by number.
    ctl: [Option<(AmdCounter, PerfCtl)>; msr::MAX_CORE_COUNTERS as usize],
}

impl PmuBackend for AmdBackend {
    type Description = AmdPmu;
    type Cpu = AmdCpu;
    type Counter = AmdCounter;
    type Config = AmdConfig;
    type Image = AmdImage;

    fn discover<H: Hardware>(hw: &H) -> Option<AmdPmu> {
        AmdPmu::discover(&hw.cpuid())
    }

    /// AMD's parts are not hybrid.
    fn core_type(&self, _cpu: &AmdCpu) -> u8 {
        0
    }

    fn stop_keeps_program(&self, _cpu: &AmdCpu) -> bool {
        // PerfMonV2 stops counters through its global control, the legacy counters by their
        // enable bits, which `start` sets again from the control images.
        true
    }

    /// No PMU tunable concerns AMD's core counters (they have no freeze on PMI).
    fn apply_tunables(&mut self, _tunables: &crate::kernel::Tunables) {}

    /// The core counters share no register.
    fn claim<'a>(
        &self,
        _cpus: impl Iterator<Item = &'a AmdCpu> + Clone,
        _config: AmdConfig,
    ) -> Result<(), Errno> {
        Ok(())
    }

    fn unclaim<'a>(&self, _cpus: impl Iterator<Item = &'a AmdCpu>, _config: AmdConfig) {}

    /// A PERF_CTL image says all of the event.
    fn host_countable(_config: AmdConfig) -> bool {
        true
    }

    fn new<H: Hardware>(cpus: &[Option<AmdPmu>], hw: &H) -> Self {
        let common = common_pmu(cpus);
        let mut classes = Vec::new();
        if let Some(pmu) = common {
            classes.push(HardwareClass {
                class: Class::K8,
                rows: u32::from(pmu.counters),
                width: u32::from(pmu.width),
                caps: Caps::K8_CLASS,
            });
        }
        AmdBackend { common, classes, signature: CpuSignature::read(&hw.cpuid()) }
    }

    fn classes(&self) -> &[HardwareClass] {
        &self.classes
    }

    fn cpu(&self, description: Option<AmdPmu>) -> AmdCpu {
        AmdCpu {
            pmu: description,
            global: description.as_ref().and_then(io::global_regs),
            counters: description.map_or(CoreCounters::EMPTY, |p| CoreCounters::first(p.counters)),
            started: AtomicU64::new(0),
            enabled: AtomicU64::new(0),
            ctl: Default::default(),
            saved_global_ctl: AtomicU64::new(0),
            pmi_owned: AtomicBool::new(false),
        }
    }

    fn row_counter(&self, cpu: &AmdCpu, class: Class, index: u32) -> Option<AmdCounter> {
        let pmu = cpu.pmu.as_ref()?;
        let index = u8::try_from(index).ok()?;
        (class == Class::K8 && index < pmu.counters).then(|| AmdCounter::new(pmu, index))
    }

    #[inline]
    fn counter_mask(counter: AmdCounter) -> CounterMask {
        CounterMask::from_bits(counter.set().bits())
    }

    fn cpu_type(&self) -> u32 {
        cpu_type_of(&self.signature, self.common.is_some())
    }

    fn cpuid_string(&self) -> CpuIdString {
        self.signature.cpuid_string()
    }

    fn init_cpu<H: Hardware>(&self, hw: &H, cpu: &AmdCpu) {
        let Some(pmu) = cpu.pmu.as_ref() else { return };
        if let Some(global) = cpu.global {
            cpu.saved_global_ctl.store(io::read_global_ctl(hw, global), Ordering::Relaxed);
            io::write_global_ctl(hw, global, CoreCounters::EMPTY);
        }
        disable_all(hw, cpu, pmu);
        cpu.pmi_owned.store(true, Ordering::Relaxed);
        hw.unmask_pmi();
    }

    fn fini_cpu<H: Hardware>(&self, hw: &H, cpu: &AmdCpu) {
        let Some(pmu) = cpu.pmu.as_ref() else { return };
        // Before the mask: an NMI from here on leaves the entry as unload sets it.
        cpu.pmi_owned.store(false, Ordering::Relaxed);
        hw.mask_pmi();
        if let Some(global) = cpu.global {
            io::write_global_ctl(hw, global, CoreCounters::EMPTY);
        }
        disable_all(hw, cpu, pmu);
        if let Some(global) = cpu.global {
            let saved = cpu.saved_global_ctl.load(Ordering::Relaxed);
            io::restore_global_ctl(hw, global, saved);
        }
    }

    fn configure(
        &self,
        class: Class,
        rows: u32,
        request: &AllocateRequest<'_>,
    ) -> Result<(AmdConfig, Range<u32>), Refusal> {
        if self.common.is_none() || class != Class::K8 {
            return Err(Errno::Inval.into());
        }
        let (ctl, rows) = k8::configure(rows, request)?;
        Ok((AmdConfig { ctl }, rows))
    }

    /// AMD's parts are not hybrid: no second encoding (the bytes Intel's extension uses belong to
    /// `pm_ibs` here, so they are not looked at).
    fn configure_other_core_type(
        &self,
        _class: Class,
        _request: &AllocateRequest<'_>,
        _config: AmdConfig,
    ) -> Result<Option<OtherCoreType<AmdConfig>>, Errno> {
        Ok(None)
    }

    #[inline]
    fn armed(config: AmdConfig) -> AmdConfig {
        AmdConfig { ctl: k8::armed(config.ctl) }
    }

    fn max_period(&self, _config: AmdConfig, width_mask: u64) -> u64 {
        // Half the width: without PerfMonV2 an overflow is seen as the top bit gone clear, so
        // a loaded counter must start with it set.
        (width_mask >> 1) + 1
    }

    fn rdpmc_index(_config: AmdConfig, index: u32) -> Option<u32> {
        // RDPMC ECX = the core counter's number (0–5; FreeBSD derives it from the legacy MSR
        // address, which is wrong for counters 4 and 5).
        (index < u32::from(msr::MAX_CORE_COUNTERS)).then_some(index)
    }

    fn raw_event(config: AmdConfig) -> RawEvent {
        RawEvent {
            config: config.ctl.bits(),
            user: config.ctl.has(PerfCtlFlags::USR),
            kernel: config.ctl.has(PerfCtlFlags::OS),
        }
    }

    #[inline]
    fn write_counter<H: Hardware>(&self, hw: &H, counter: AmdCounter, value: u64) {
        io::write_counter(hw, counter, value);
    }

    #[inline]
    fn add_to_image(image: &mut AmdImage, counter: AmdCounter, armed: AmdConfig) {
        let Some(entry) = image.ctl.get_mut(usize::from(counter.index)) else { return };
        *entry = Some((counter, armed.ctl));
        image.counters = image.counters.union(counter.set());
    }

    #[inline]
    fn program<H: Hardware>(&self, hw: &H, cpu: &AmdCpu, image: &AmdImage) -> CounterMask {
        // An image of counters this CPU lacks is not this CPU's: nothing reaches a register.
        if !image.counters.minus(cpu.counters).is_empty() {
            return CounterMask::EMPTY;
        }
        for (image, &entry) in cpu.ctl.iter().zip(&image.ctl) {
            let Some((counter, ctl)) = entry else { continue };
            image.store(ctl.bits(), Ordering::Relaxed);
            // With PerfMonV2 the counter waits for its global bit; without, EN starts it now
            // (as Intel's perfmon v1 does), and `start` only records it.
            io::write_ctl(hw, counter, ctl);
        }
        if cpu.global.is_none() {
            // Only this CPU writes its images (no read-modify-write instruction needed).
            let enabled = cpu.enabled.load(Ordering::Relaxed);
            cpu.enabled.store(enabled | image.counters.bits(), Ordering::Relaxed);
        }
        CounterMask::from_bits(image.counters.bits())
    }

    #[inline]
    fn program_counter<H: Hardware>(
        &self,
        hw: &H,
        cpu: &AmdCpu,
        counter: AmdCounter,
        armed: AmdConfig,
    ) -> CounterMask {
        let set = counter.set();
        // A counter this CPU lacks is not this CPU's: nothing reaches a register.
        if !set.minus(cpu.counters).is_empty() {
            return CounterMask::EMPTY;
        }
        let Some(image) = cpu.ctl.get(usize::from(counter.index)) else {
            return CounterMask::EMPTY;
        };
        image.store(armed.ctl.bits(), Ordering::Relaxed);
        // As in `program`: with PerfMonV2 the counter waits for its global bit; without, EN
        // starts it now, and `start` only records it.
        io::write_ctl(hw, counter, armed.ctl);
        if cpu.global.is_none() {
            // Only this CPU writes its images (no read-modify-write instruction needed).
            let enabled = cpu.enabled.load(Ordering::Relaxed);
            cpu.enabled.store(enabled | set.bits(), Ordering::Relaxed);
        }
        CounterMask::from_bits(set.bits())
    }

    #[inline]
    fn program_and_start<H: Hardware>(
        &self,
        hw: &H,
        cpu: &AmdCpu,
        image: &AmdImage,
    ) -> CounterMask {
        let programmed = self.program(hw, cpu, image);
        self.start(hw, cpu, programmed);
        programmed
    }

    #[inline]
    fn stop_and_unprogram<H: Hardware>(&self, hw: &H, cpu: &AmdCpu, counters: CounterMask) {
        self.stop(hw, cpu, counters);
        self.unprogram(hw, cpu, counters);
    }

    #[inline]
    fn start<H: Hardware>(&self, hw: &H, cpu: &AmdCpu, counters: CounterMask) {
        if counters.is_empty() {
            return;
        }
        let counters = CoreCounters::within(counters.bits(), cpu.counters);
        let started = started(cpu).union(counters);
        cpu.started.store(started.bits(), Ordering::Relaxed);
        match cpu.global {
            Some(global) => io::write_global_ctl(hw, global, started),
            None => set_enabled(hw, cpu, counters, true),
        }
    }

    #[inline]
    fn stop<H: Hardware>(&self, hw: &H, cpu: &AmdCpu, counters: CounterMask) {
        if counters.is_empty() {
            return;
        }
        let counters = CoreCounters::within(counters.bits(), cpu.counters);
        let started = started(cpu).minus(counters);
        cpu.started.store(started.bits(), Ordering::Relaxed);
        match cpu.global {
            Some(global) => io::write_global_ctl(hw, global, started),
            None => set_enabled(hw, cpu, counters, false),
        }
    }

    #[inline]
    fn unprogram<H: Hardware>(&self, hw: &H, cpu: &AmdCpu, counters: CounterMask) {
        let Some(pmu) = cpu.pmu.as_ref() else { return };
        let counters = CoreCounters::within(counters.bits(), cpu.counters);
        let was_enabled = cpu.enabled.load(Ordering::Relaxed);
        cpu.enabled.store(was_enabled & !counters.bits(), Ordering::Relaxed);
        for index in counters.iter() {
            if let Some(image) = cpu.ctl.get(usize::from(index)) {
                image.store(0, Ordering::Relaxed);
            }
            // Without PerfMonV2, `stop` already cleared EN: a control with EN clear counts
            // nothing, and the next `program` overwrites it.
            if cpu.global.is_some() || was_enabled >> index & 1 != 0 {
                io::write_ctl(hw, AmdCounter::new(pmu, index), PerfCtl::default());
            }
        }
        // Clear the overflow indications of the counters just unloaded: a PMI served late
        // would otherwise be taken for an overflow of whatever is loaded there next. (Without
        // PerfMonV2 there is none: a counter loaded again has its top bit set.)
        if let Some(global) = cpu.global.filter(|_| !counters.is_empty()) {
            io::clear_status(hw, global, counters);
        }
    }

    #[inline]
    fn read<H: Hardware>(&self, hw: &H, counter: AmdCounter) -> u64 {
        io::read_counter(hw, counter)
    }

    #[inline]
    fn pmi<H: Hardware>(
        &self,
        hw: &H,
        cpu: &AmdCpu,
        mut overflowed: impl FnMut(u32) -> bool,
    ) -> bool {
        let claimed = match cpu.global {
            Some(global) => pmi_v2(hw, cpu, global, overflowed),
            None => {
                let mut claimed = false;
                legacy_overflowed(hw, cpu).for_each_bit(|bit| claimed |= overflowed(bit));
                claimed
            }
        };
        // Relaxed: written and read on this CPU only (the NMI interrupts the code that wrote it).
        if cpu.pmi_owned.load(Ordering::Relaxed) {
            hw.unmask_pmi();
        }
        claimed
    }
}

/// The PerfMonV2 PMI handler (see [`PmuBackend::pmi`]), without the unmasking.
#[inline]
fn pmi_v2<H: Hardware>(
    hw: &H,
    cpu: &AmdCpu,
    global: io::GlobalRegs,
    mut overflowed: impl FnMut(u32) -> bool,
) -> bool {
    // Stop every counter before reading the status: one overflowing after the read would have
    // its bit set too late to be seen, and its PMI (raised while the entry is masked) may be
    // dropped.
    io::write_global_ctl(hw, global, CoreCounters::EMPTY);
    let counters = CoreCounters::within(io::read_global_status(hw, global), cpu.counters);
    if counters.is_empty() {
        cold_path();
        io::write_global_ctl(hw, global, started(cpu));
        return false;
    }
    // Stopping by the global control may take effect a few events late: after each round, read
    // the status until none of the driver's counters overflowed since.
    handle_round(hw, global, counters, &mut overflowed);
    let mut counters = CoreCounters::within(io::read_global_status(hw, global), cpu.counters);
    if !counters.is_empty() {
        // Rare (a counter overflowed after the stop): apart from the common PMI's straight
        // line, whose registers a loop around it would take.
        cold_path();
        for _ in 1..PMI_ROUNDS {
            handle_round(hw, global, counters, &mut overflowed);
            counters = CoreCounters::within(io::read_global_status(hw, global), cpu.counters);
            if counters.is_empty() {
                break;
            }
        }
    }
    io::write_global_ctl(hw, global, started(cpu));
    true
}

/// One round of [`pmi_v2`]: hands each of `counters` (the driver's, overflowed) to
/// `overflowed`, then clears their status bits (only theirs: the others belong to other users
/// of the PMU).
#[inline(always)]
fn handle_round<H: Hardware>(
    hw: &H,
    global: io::GlobalRegs,
    counters: CoreCounters,
    overflowed: &mut impl FnMut(u32) -> bool,
) {
    CounterMask::from_bits(counters.bits()).for_each_overflow(
        #[inline(always)]
        |bit| _ = overflowed(bit),
    );
    io::clear_status(hw, global, counters);
}

/// Without PerfMonV2 there is no status register: a started counter overflowed when its top
/// bit went clear (counters are loaded at 2^48 − period, with period at most 2^47). Returns
/// those counters; the interrupt is claimed only if one of them holds a running PMC (an NMI for
/// an overflow an earlier NMI already handled is not claimed, as there is no way to tell it
/// from someone else's).
// Out of line: the PerfMonV2 handler stays short.
#[inline(never)]
fn legacy_overflowed<H: Hardware>(hw: &H, cpu: &AmdCpu) -> CounterMask {
    let Some(pmu) = cpu.pmu.as_ref() else { return CounterMask::EMPTY };
    let top = 1u64 << (pmu.width - 1);
    let mut overflowed = 0u64;
    for index in started(cpu).iter() {
        if io::read_counter(hw, AmdCounter::new(pmu, index)) & top == 0 {
            overflowed |= 1 << index;
        }
    }
    CounterMask::from_bits(overflowed)
}

/// The counters started on `cpu`.
#[inline]
fn started(cpu: &AmdCpu) -> CoreCounters {
    CoreCounters::from_built_bits(cpu.started.load(Ordering::Relaxed))
}

/// Without PerfMonV2: sets or clears PERF_CTL.EN of `counters` (programmed ones; the others are
/// left cleared), writing only those whose EN changes.
#[inline]
fn set_enabled<H: Hardware>(hw: &H, cpu: &AmdCpu, counters: CoreCounters, on: bool) {
    let Some(pmu) = cpu.pmu.as_ref() else { return };
    let enabled = CoreCounters::from_built_bits(cpu.enabled.load(Ordering::Relaxed));
    let change =
        if on { counters.minus(enabled) } else { CoreCounters::within(counters.bits(), enabled) };
    for index in change.iter() {
        let image = cpu.ctl[usize::from(index)].load(Ordering::Relaxed);
        if image == 0 {
            continue;
        }
        let ctl = PerfCtl::from_built_bits(image).with(PerfCtlFlags::EN, on);
        io::write_ctl(hw, AmdCounter::new(pmu, index), ctl);
    }
    let enabled = if on { enabled.union(change) } else { enabled.minus(change) };
    cpu.enabled.store(enabled.bits(), Ordering::Relaxed);
}

/// Clears every core counter's PERF_CTL and, with PerfMonV2, the counters' overflow bits.
fn disable_all<H: Hardware>(hw: &H, cpu: &AmdCpu, pmu: &AmdPmu) {
    for index in 0..pmu.counters {
        io::write_ctl(hw, AmdCounter::new(pmu, index), PerfCtl::default());
        cpu.ctl[usize::from(index)].store(0, Ordering::Relaxed);
    }
    cpu.enabled.store(0, Ordering::Relaxed);
    cpu.started.store(0, Ordering::Relaxed);
    if let Some(global) = cpu.global {
        io::clear_status(hw, global, cpu.counters);
    }
}

/// The description all CPUs share: the fewest counters, and the extended layout and PerfMonV2
/// only where every CPU has them. `None` if any CPU has no counters. (Each CPU still drives its
/// own registers through its own description.)
fn common_pmu(pmus: &[Option<AmdPmu>]) -> Option<AmdPmu> {
    let mut iter = pmus.iter();
    let mut common = (*iter.next()?)?;
    for pmu in iter {
        let pmu = (*pmu)?;
        common.counters = common.counters.min(pmu.counters);
        common.extended &= pmu.extended;
        common.perfmon_v2 &= pmu.perfmon_v2;
        common.width = common.width.min(pmu.width);
    }
    Some(common)
}
