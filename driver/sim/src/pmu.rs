//! The simulated Intel architectural performance-monitoring unit of one CPU, register by register,
//! and the [`SimHardware`] handle through which the `hwpmc` driver reaches the PMU of "the current
//! CPU" of a simulated machine.
//!
//! References are to the Intel SDM Vol. 3B, chapter 21 ("Performance Monitoring"): §21.2.1
//! (architectural perfmon version 1), §21.2.2 (version 2), §21.2.3 (version 3), §21.2.4 (version 4),
//! §21.2.5 (version 5) and §21.2.6 (full-width writes); to Vol. 4 ("Model-Specific Registers") for
//! the MSR addresses; and to Vol. 3A, chapter 11 ("Advanced Programmable Interrupt Controller") for
//! the local APIC's LVT performance-monitoring-counter entry.
//!
//! # What is modelled
//!
//! * **Registers.** IA32_PMCx, IA32_A_PMCx (only with FW_WRITE), IA32_PERFEVTSELx,
//!   IA32_FIXED_CTRx, IA32_FIXED_CTR_CTRL, IA32_PERF_GLOBAL_STATUS (read-only),
//!   IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_OVF_CTRL (v4: STATUS_RESET; reads as 0),
//!   IA32_PERF_GLOBAL_STATUS_SET and IA32_PERF_GLOBAL_INUSE (v4+), IA32_PERF_CAPABILITIES
//!   (read-only, only with PDCM), IA32_DEBUGCTL (the bits the model's
//!   [`Quirks`](crate::quirks::Quirks) implement, FREEZE_PERFMON_ON_PMI where the model has it;
//!   the others raise #GP), IA32_TIME_STAMP_COUNTER and the x2APIC
//!   LVT performance-monitoring entry (MSR 0x834). The global MSRs and fixed counters exist from v2.
//!   MSR_OFFCORE_RSP_0/1 exist where the model defines them ([`crate::offcore`]).
//! * **#GP.** Every access the SDM says faults returns a [`Fault`]: unknown MSRs (including MSRs of
//!   counters or versions the model lacks), reserved bits (PERFEVTSEL bits 63:32 but UMASK2
//!   47:40 where the model has it and the TSX bits 32 and 33 on a TSX part, AnyThread where
//!   unsupported, FIXED_CTR_CTRL nibbles of missing counters, GLOBAL_CTRL bits of missing
//!   counters, offcore-response bits the model leaves undefined, OVF_CTRL bits the version does
//!   not define, counter values wider than the counter through a
//!   full-width MSR), writes to read-only MSRs, and RDPMC of a counter that does not exist.
//! * **Counting.** [`SimPmu::retire_repeated`] retires a basic block `repeat` times in O(1): the GP
//!   counters count their (event, umask) through the exact CMASK / INV / EDGE model of
//!   [`CycleFilter`]; the fixed counters count instructions, core cycles, reference cycles and
//!   TOPDOWN.SLOTS.
//! * **Overflow and PMIs.** A counter passing 2^width − 1 wraps, keeps the remainder, sets its
//!   GLOBAL_STATUS bit (v2+) and, with its INT / PMI bit, raises a PMI at the end of the block
//!   (the skid is the rest of the block). The LVT entry delivers it when unmasked and masks itself;
//!   a PMI raised while the entry is masked is held until it is unmasked (or dropped, or
//!   re-raised at unmask while a status bit asks for it, see [`MaskedPmi`]). FREEZE_PERFMON_ON_PMI clears GLOBAL_CTRL (v2/v3) or sets CTR_FRZ (v4+).

mod amd;

pub use amd::STATUS_LBRS_FROZEN as AMD_STATUS_LBRS_FROZEN;

use crate::arch_event::{ArchEvent, arch_event_of};
use crate::cpuid::{CpuidModel, PmuModel};
use crate::offcore;
use crate::quirks::EVTSEL_IN_TX;
pub use crate::work::{RawCount, Work};
use hwpmc::hw::{Hardware, Lapic, Msrs};
use std::cell::{Cell, RefCell, RefMut};
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

/// MSR addresses: the driver's (from the `x86` crate), so the workspace writes them down once.
pub use hwpmc::arch::x86::msr;

/// Register bits (SDM Vol. 3B Figures 21-1, 21-2, 21-3, 21-6, 21-13 to 21-17; Vol. 3A Figure 11-8).
pub mod bits {
    /// IA32_PERFEVTSELx: USR, count at CPL > 0.
    pub const EVTSEL_USR: u64 = 1 << 16;
    /// IA32_PERFEVTSELx: OS, count at CPL 0.
    pub const EVTSEL_OS: u64 = 1 << 17;
    /// IA32_PERFEVTSELx: E, edge detect.
    pub const EVTSEL_EDGE: u64 = 1 << 18;
    /// IA32_PERFEVTSELx: PC, pin control (accepted, no effect here).
    pub const EVTSEL_PC: u64 = 1 << 19;
    /// IA32_PERFEVTSELx: INT, APIC interrupt on overflow.
    pub const EVTSEL_INT: u64 = 1 << 20;
    /// IA32_PERFEVTSELx: AnyThread (v3+, unless deprecated).
    pub const EVTSEL_ANY: u64 = 1 << 21;
    /// IA32_PERFEVTSELx: EN, enable.
    pub const EVTSEL_EN: u64 = 1 << 22;
    /// IA32_PERFEVTSELx: INV, invert the CMASK comparison.
    pub const EVTSEL_INV: u64 = 1 << 23;
    /// IA32_PERFEVTSELx: UMASK2, the second unit mask (bits 47:40; CPUID leaf 23H).
    pub const EVTSEL_UMASK2: u64 = 0xFF << 40;
    /// IA32_FIXED_CTR_CTRL nibble: count at CPL 0.
    pub const FIXED_OS: u64 = 0x1;
    /// IA32_FIXED_CTR_CTRL nibble: count at CPL > 0.
    pub const FIXED_USR: u64 = 0x2;
    /// IA32_FIXED_CTR_CTRL nibble: AnyThread (v3+, unless deprecated).
    pub const FIXED_ANY: u64 = 0x4;
    /// IA32_FIXED_CTR_CTRL nibble: PMI on overflow.
    pub const FIXED_PMI: u64 = 0x8;
    /// IA32_PERF_GLOBAL_STATUS: Trace ToPA PMI (v4).
    pub const STATUS_TRACE_TOPA_PMI: u64 = 1 << 55;
    /// IA32_PERF_GLOBAL_STATUS: LBR_Frz (v4).
    pub const STATUS_LBR_FRZ: u64 = 1 << 58;
    /// IA32_PERF_GLOBAL_STATUS: CTR_Frz (v4): the counters are frozen.
    pub const STATUS_CTR_FRZ: u64 = 1 << 59;
    /// IA32_PERF_GLOBAL_STATUS: ASCI (v4).
    pub const STATUS_ASCI: u64 = 1 << 60;
    /// IA32_PERF_GLOBAL_STATUS: Ovf_Uncore (v3).
    pub const STATUS_OVF_UNCORE: u64 = 1 << 61;
    /// IA32_PERF_GLOBAL_STATUS: OvfBuffer (DS buffer overflow, v2).
    pub const STATUS_OVF_BUF: u64 = 1 << 62;
    /// IA32_PERF_GLOBAL_STATUS: CondChgd (v2).
    pub const STATUS_COND_CHGD: u64 = 1 << 63;
    /// IA32_PERF_GLOBAL_INUSE: PMI_InUse.
    pub const INUSE_PMI: u64 = 1 << 63;
    /// IA32_DEBUGCTL: FREEZE_PERFMON_ON_PMI (v2+).
    pub const DEBUGCTL_FREEZE_PERFMON_ON_PMI: u64 = 1 << 12;
    /// LVT entry: vector, bits 7:0.
    pub const LVT_VECTOR: u64 = 0xFF;
    /// LVT entry: delivery mode, bits 10:8 (000 fixed, 010 SMI, 100 NMI).
    pub const LVT_DELIVERY_MODE: u64 = 0x7 << 8;
    /// LVT entry: delivery status (read-only; always idle here).
    pub const LVT_DELIVERY_STATUS: u64 = 1 << 12;
    /// LVT entry: mask.
    pub const LVT_MASK: u64 = 1 << 16;
}

use bits::*;

const FIXED_NIBBLE_ENABLE: u64 = FIXED_OS | FIXED_USR;

/// The CPU's privilege level while a block executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ring {
    /// CPL 0: counted by counters with OS set.
    Kernel,
    /// CPL 3: counted by counters with USR set.
    User,
}

impl Ring {
    /// The ring's index in per-ring arrays (kernel 0, user 1).
    pub(crate) const fn index(self) -> usize {
        match self {
            Ring::Kernel => 0,
            Ring::User => 1,
        }
    }
}

/// Ground truth: every event retired in one ring on one CPU since reset, whatever the counters were
/// programmed to do (and even while they were frozen or absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventTotals {
    arch: [u128; 8],
    raw: BTreeMap<(u8, u8, u8), u128>,
    offcore: BTreeMap<u64, u128>,
    blocks: u128,
}

impl EventTotals {
    /// Total occurrences of architectural event `event`.
    pub fn arch(&self, event: ArchEvent) -> u128 {
        self.arch[usize::from(event.index())]
    }
    /// Total occurrences of raw event (`event_select`, `umask`) passed in [`Work::raw`].
    pub fn raw(&self, event_select: u8, umask: u8) -> u128 {
        self.raw_umask2(event_select, umask, 0)
    }
    /// Total occurrences of raw event (`event_select`, `umask`, `umask2`).
    pub fn raw_umask2(&self, event_select: u8, umask: u8, umask2: u8) -> u128 {
        self.raw.get(&(event_select, umask, umask2)).copied().unwrap_or(0)
    }
    /// Total offcore requests selected by the response value `response` ([`Work::offcore`]).
    pub fn offcore(&self, response: u64) -> u128 {
        self.offcore.get(&response).copied().unwrap_or(0)
    }
    /// Blocks retired (each repetition counts).
    pub fn blocks(&self) -> u128 {
        self.blocks
    }
    /// Adds `repeat` executions of `work`.
    pub(crate) fn record(&mut self, work: &Work, repeat: u64, slots_per_cycle: u8) {
        let repeat = u128::from(repeat);
        for event in ArchEvent::ALL {
            self.arch[usize::from(event.index())] +=
                u128::from(work.arch(event, slots_per_cycle)) * repeat;
        }
        for raw in &work.raw {
            *self.raw.entry((raw.event_select, raw.umask, raw.umask2)).or_default() +=
                u128::from(raw.count) * repeat;
        }
        for request in &work.offcore {
            *self.offcore.entry(request.response).or_default() +=
                u128::from(request.count) * repeat;
        }
        self.blocks += repeat;
    }

    /// What was added since the snapshot `earlier` (panics if it is not an earlier snapshot).
    pub(crate) fn since(&self, earlier: &EventTotals) -> EventTotals {
        let less = |now: u128, then: u128| {
            now.checked_sub(then).expect("EventTotals::since: not an earlier snapshot")
        };
        let mut arch = [0; 8];
        for (i, value) in arch.iter_mut().enumerate() {
            *value = less(self.arch[i], earlier.arch[i]);
        }
        let mut raw = self.raw.clone();
        for (key, &then) in &earlier.raw {
            let now = raw.entry(*key).or_default();
            *now = less(*now, then);
        }
        let mut offcore = self.offcore.clone();
        for (key, &then) in &earlier.offcore {
            let now = offcore.entry(*key).or_default();
            *now = less(*now, then);
        }
        EventTotals { arch, raw, offcore, blocks: less(self.blocks, earlier.blocks) }
    }

    /// Adds `other`'s totals.
    pub(crate) fn merge(&mut self, other: &EventTotals) {
        for (mine, theirs) in self.arch.iter_mut().zip(other.arch) {
            *mine += theirs;
        }
        for (key, value) in &other.raw {
            *self.raw.entry(*key).or_default() += value;
        }
        for (key, value) in &other.offcore {
            *self.offcore.entry(*key).or_default() += value;
        }
        self.blocks += other.blocks;
    }
}

/// Events in cycle `k` (0-based) of a block whose `events` are spread evenly over its `cycles`:
/// `floor((k+1)·events/cycles) − floor(k·events/cycles)`. Every cycle gets `floor(events/cycles)`
/// or one more, and the cycles sum to `events`. 0 when `cycles` is 0 or `k ≥ cycles`.
pub fn events_in_cycle(events: u64, cycles: u64, k: u64) -> u64 {
    if k >= cycles {
        return 0;
    }
    let at = |i: u64| (u128::from(i) * u128::from(events) / u128::from(cycles)) as u64;
    at(k + 1) - at(k)
}

/// The CMASK / INV / EDGE stage of a GP counter (SDM Vol. 3B §21.2.1.1, Figure 21-1), with this
/// simulator's exact timing model.
///
/// # The model
///
/// Within one execution of a block of `c` core cycles, the counter's `n` events are spread evenly:
/// cycle `k` gets `e_k = floor((k+1)·n/c) − floor(k·n/c)` events ([`events_in_cycle`]). With
/// `q = floor(n/c)` and `r = n mod c`, every `e_k` is `q` or `q + 1`, exactly `r` cycles get
/// `q + 1`, cycle 0 gets `q` when `r > 0` and cycle `c − 1` gets `q + 1` when `r > 0`.
///
/// * CMASK = 0 and EDGE clear: the counter adds `n` per execution (INV is ignored, as the SDM
///   says for CMASK = 0).
/// * CMASK = m > 0: the *condition* of a cycle is `e_k ≥ m`, or `e_k < m` with INV. The counter
///   adds one per cycle whose condition holds.
/// * EDGE: the counter adds one per deasserted-to-asserted transition of the condition from one
///   cycle to the next. EDGE with CMASK = 0 uses threshold 1 (and ignores INV). The condition's
///   value in the last counted cycle is carried across blocks (`asserted`); a cycle the counter
///   does not count (wrong ring, disabled, frozen) deasserts it.
///
/// # Closed forms (per execution)
///
/// | case | cycles asserted | first | last | rising edges inside (k ≥ 1) |
/// |---|---|---|---|---|
/// | `m ≤ q` | `c` | 1 | 1 | 0 |
/// | `m = q + 1`, `r > 0` | `r` | 0 | 1 | `min(r, c − r)` |
/// | otherwise | 0 | 0 | 0 | 0 |
///
/// The middle row is a Beatty (mechanical) word: for `2r ≤ c` its ones are isolated, so there are
/// `r` rising edges; for `2r > c` its zeros are isolated and each is followed by a one, so there
/// are `c − r`. INV complements the pattern: asserted `c − ones`, first and last negated, and
/// rising edges become the falling edges of the original, `inner + first − last`. Over `R`
/// repetitions starting from carried state `p`, the counter adds `R · asserted` cycles, or with
/// EDGE `R · inner + [first ∧ ¬p] + (R − 1) · [first ∧ ¬last]` edges, and carries `last`.
/// A block with 0 cycles adds nothing in cycle modes and leaves the carried state alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CycleFilter {
    /// CMASK, IA32_PERFEVTSELx bits 31:24.
    pub cmask: u8,
    /// INV, bit 23.
    pub inv: bool,
    /// EDGE, bit 18.
    pub edge: bool,
}

/// The result of [`CycleFilter::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Filtered {
    /// What the counter adds.
    pub count: u128,
    /// The condition in the last cycle (the carried edge-detector state).
    pub asserted: bool,
}

impl CycleFilter {
    /// The filter fields of an IA32_PERFEVTSELx value.
    pub const fn from_evtsel(evtsel: u64) -> Self {
        CycleFilter {
            cmask: (evtsel >> 24) as u8,
            inv: evtsel & EVTSEL_INV != 0,
            edge: evtsel & EVTSEL_EDGE != 0,
        }
    }

    /// Whether the counter adds events (CMASK = 0, no EDGE) rather than cycles or edges.
    pub const fn counts_events(self) -> bool {
        self.cmask == 0 && !self.edge
    }

    /// The threshold compared with each cycle's events (1 for EDGE with CMASK = 0).
    pub const fn threshold(self) -> u64 {
        if self.cmask == 0 { 1 } else { self.cmask as u64 }
    }

    /// Whether the comparison is inverted (INV with CMASK > 0).
    pub const fn inverted(self) -> bool {
        self.inv && self.cmask != 0
    }

    /// The condition of a cycle with `events` events (meaningful when not
    /// [`counts_events`](Self::counts_events)).
    pub const fn condition(self, events: u64) -> bool {
        (events >= self.threshold()) != self.inverted()
    }

    /// What the counter adds for `repeat` executions of a block of `events` events over `cycles`
    /// core cycles, starting with the edge detector in state `asserted`, in O(1) (see the type's
    /// documentation for the closed forms).
    pub fn apply(self, events: u64, cycles: u64, repeat: u64, asserted: bool) -> Filtered {
        if self.counts_events() {
            let count = u128::from(events) * u128::from(repeat);
            return Filtered { count, asserted };
        }
        if cycles == 0 || repeat == 0 {
            return Filtered { count: 0, asserted };
        }
        let (q, r) = (events / cycles, events % cycles);
        let m = self.threshold();
        let (mut ones, mut first, mut last, mut inner) = if m <= q {
            (cycles, true, true, 0)
        } else if m == q + 1 && r > 0 {
            (r, false, true, r.min(cycles - r))
        } else {
            (0, false, false, 0)
        };
        if self.inverted() {
            inner = inner + u64::from(first) - u64::from(last);
            (ones, first, last) = (cycles - ones, !first, !last);
        }
        let repeat = u128::from(repeat);
        let count = if self.edge {
            repeat * u128::from(inner)
                + u128::from(first && !asserted)
                + (repeat - 1) * u128::from(first && !last)
        } else {
            repeat * u128::from(ones)
        };
        Filtered { count, asserted: last }
    }
}

/// How an access failed: the instruction and its operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// RDMSR of `msr`.
    Rdmsr {
        /// The MSR address (ECX).
        msr: u32,
    },
    /// WRMSR of `value` to `msr`.
    Wrmsr {
        /// The MSR address (ECX).
        msr: u32,
        /// The value (EDX:EAX).
        value: u64,
    },
    /// RDPMC of `index`.
    Rdpmc {
        /// The counter selector (ECX).
        index: u32,
    },
}

/// Why an access raised #GP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// The MSR does not exist on this model.
    UnknownMsr,
    /// The write sets bits the register reserves on this model (these bits).
    ReservedBits(u64),
    /// The MSR is read-only.
    ReadOnly,
    /// The value is not valid for the register (e.g. a reserved LVT delivery mode).
    InvalidValue,
    /// RDPMC of a counter that does not exist.
    NoSuchCounter,
}

/// A simulated general-protection fault (#GP(0)) raised by RDMSR, WRMSR or RDPMC.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fault {
    /// The faulting access.
    pub access: Access,
    /// The reason.
    pub kind: FaultKind,
    /// The rule that was broken, in words.
    pub detail: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#GP(0): ")?;
        match self.access {
            Access::Rdmsr { msr } => write!(f, "RDMSR {}", msr_name(msr))?,
            Access::Wrmsr { msr, value } => write!(f, "WRMSR {} <- {value:#x}", msr_name(msr))?,
            Access::Rdpmc { index } => write!(f, "RDPMC {index:#x}")?,
        }
        match self.kind {
            FaultKind::UnknownMsr => write!(f, ": no such MSR")?,
            FaultKind::ReservedBits(bits) => write!(f, ": reserved bits {bits:#x}")?,
            FaultKind::ReadOnly => write!(f, ": read-only MSR")?,
            FaultKind::InvalidValue => write!(f, ": invalid value")?,
            FaultKind::NoSuchCounter => write!(f, ": no such counter")?,
        }
        write!(f, " ({})", self.detail)
    }
}

impl std::error::Error for Fault {}

/// The architectural name and address of an MSR, e.g. `IA32_PERFEVTSEL2 (0x188)`.
pub fn msr_name(address: u32) -> String {
    use msr::*;
    let indexed = |base: u32, name: &str| format!("{name}{} ({address:#x})", address - base);
    match address {
        IA32_TIME_STAMP_COUNTER => format!("IA32_TIME_STAMP_COUNTER ({address:#x})"),
        0x0C1..=0x0C8 => indexed(IA32_PMC0, "IA32_PMC"),
        0x186..=0x18D => indexed(IA32_PERFEVTSEL0, "IA32_PERFEVTSEL"),
        0x1A6 | 0x1A7 => indexed(MSR_OFFCORE_RSP_0, "MSR_OFFCORE_RSP_"),
        IA32_DEBUGCTL => format!("IA32_DEBUGCTL ({address:#x})"),
        0x309..=0x30F => indexed(IA32_FIXED_CTR0, "IA32_FIXED_CTR"),
        IA32_PERF_CAPABILITIES => format!("IA32_PERF_CAPABILITIES ({address:#x})"),
        IA32_FIXED_CTR_CTRL => format!("IA32_FIXED_CTR_CTRL ({address:#x})"),
        IA32_PERF_GLOBAL_STATUS => format!("IA32_PERF_GLOBAL_STATUS ({address:#x})"),
        IA32_PERF_GLOBAL_CTRL => format!("IA32_PERF_GLOBAL_CTRL ({address:#x})"),
        IA32_PERF_GLOBAL_OVF_CTRL => format!("IA32_PERF_GLOBAL_OVF_CTRL ({address:#x})"),
        IA32_PERF_GLOBAL_STATUS_SET => format!("IA32_PERF_GLOBAL_STATUS_SET ({address:#x})"),
        IA32_PERF_GLOBAL_INUSE => format!("IA32_PERF_GLOBAL_INUSE ({address:#x})"),
        0x4C1..=0x4C8 => indexed(IA32_A_PMC0, "IA32_A_PMC"),
        IA32_X2APIC_LVT_PMI => format!("IA32_X2APIC_LVT_PMI ({address:#x})"),
        _ if amd::msr_name(address).is_some() => amd::msr_name(address).unwrap_or_default(),
        _ => format!("MSR {address:#x}"),
    }
}

/// The LVT entry's delivery mode (SDM Vol. 3A §11.5.1; INIT and ExtINT are not allowed for the
/// performance-monitoring entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryMode {
    /// 000: a maskable interrupt with the entry's vector.
    Fixed,
    /// 010: SMI.
    Smi,
    /// 100: NMI (what hwpmc uses).
    Nmi,
}

/// A PMI the local APIC delivered to the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pmi {
    /// How it was delivered.
    pub mode: DeliveryMode,
    /// The LVT vector (meaningful for [`DeliveryMode::Fixed`]).
    pub vector: u8,
}

/// What happens to a PMI raised while the LVT entry is masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MaskedPmi {
    /// It is held and delivered as soon as software unmasks the entry (the default).
    #[default]
    Held,
    /// It is lost (counted in [`PmiStats::dropped`]), as KVM's emulated APIC does; a stricter
    /// model for drivers that must not depend on a masked PMI being latched.
    Dropped,
    /// Level-triggered: unmasking the entry raises a PMI again while GLOBAL_STATUS has the bit
    /// of a counter whose INT (fixed: PMI) bit is set, whether or not one was raised while it
    /// was masked (perfmon v1, without a status register, holds the PMI as [`MaskedPmi::Held`]).
    Level,
}

/// PMI counters of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PmiStats {
    /// PMIs the PMU raised.
    pub raised: u64,
    /// PMIs the APIC delivered (a delivery while one is still untaken merges with it).
    pub delivered: u64,
    /// PMIs lost because the entry was masked, under [`MaskedPmi::Dropped`].
    pub dropped: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct GpCounter {
    value: u64,
    evtsel: u64,
    /// The CMASK/INV/EDGE condition in the last counted cycle.
    asserted: bool,
    /// TSC ticks counted towards the next tick of a slower reference clock
    /// ([`Quirks::gp_ref_cycles_divisor`](crate::quirks::Quirks::gp_ref_cycles_divisor)).
    ref_remainder: u64,
}

/// The performance-monitoring unit, TSC and LVT performance-monitoring entry of one simulated
/// Intel CPU.
#[derive(Debug, Clone)]
pub struct SimPmu {
    cpuid: CpuidModel,
    gp: Vec<GpCounter>,
    fixed: [u64; 7],
    fixed_ctrl: u64,
    global_ctrl: u64,
    global_status: u64,
    debugctl: u64,
    lvt: u64,
    held: bool,
    delivered: Option<Pmi>,
    masked_pmi: MaskedPmi,
    stats: PmiStats,
    tsc: u64,
    truth: [EventTotals; 2],
    /// MSR_OFFCORE_RSP_0 and _1.
    offcore_rsp: [u64; 2],
}

/// A mask of the low `n` bits (`n` up to 64).
const fn low_bits(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1 << n) - 1 }
}

impl SimPmu {
    /// The PMU of CPU `model` in its reset state, with initial APIC ID 0: counters, event selects,
    /// FIXED_CTR_CTRL, GLOBAL_STATUS and DEBUGCTL zero; IA32_PERF_GLOBAL_CTRL with the enable bit of
    /// every GP counter set and those of the fixed counters clear (its power-up value, so that v1
    /// software works, SDM Vol. 3B §21.2.2); the LVT entry masked (0x10000, SDM Vol. 3A §11.5.1).
    ///
    /// # Panics
    /// If [`PmuModel::validate`] refuses the model.
    pub fn new(model: PmuModel) -> Self {
        if let Err(why) = model.validate() {
            panic!("invalid PMU model: {why}");
        }
        let gp = vec![GpCounter::default(); usize::from(model.gp_counter_count())];
        // AMD's PerfCntrGlobalCtl also resets to every counter enabled.
        let global_ctrl = if model.has_global_ctrl() || model.amd.is_some_and(|a| a.perfmon_v2()) {
            low_bits(u32::from(model.gp_counters))
        } else {
            0
        };
        SimPmu {
            cpuid: CpuidModel::new(model, 0),
            gp,
            fixed: [0; 7],
            fixed_ctrl: 0,
            global_ctrl,
            global_status: 0,
            debugctl: 0,
            lvt: LVT_MASK,
            held: false,
            delivered: None,
            masked_pmi: if model.quirks.drops_masked_pmis {
                MaskedPmi::Dropped
            } else {
                MaskedPmi::Held
            },
            stats: PmiStats::default(),
            tsc: 0,
            truth: Default::default(),
            offcore_rsp: [0; 2],
        }
    }

    /// The same PMU on the CPU whose initial APIC ID is `apic_id`.
    pub fn with_apic_id(mut self, apic_id: u32) -> Self {
        self.cpuid = CpuidModel::new(*self.cpuid.model(), apic_id);
        self
    }

    /// The CPU model.
    pub fn model(&self) -> &PmuModel {
        self.cpuid.model()
    }

    /// This CPU's CPUID.
    pub fn cpuid(&self) -> CpuidModel {
        self.cpuid
    }

    /// Chooses what happens to PMIs raised while the LVT entry is masked ([`MaskedPmi::Held`]
    /// at reset).
    pub fn set_masked_pmi(&mut self, policy: MaskedPmi) {
        self.masked_pmi = policy;
    }

    fn version(&self) -> u8 {
        if self.model().has_pmu() { self.model().version } else { 0 }
    }

    fn gp_width(&self) -> u32 {
        u32::from(self.model().gp_width)
    }

    fn fixed_width(&self) -> u32 {
        u32::from(self.model().fixed_width)
    }

    /// Every counter, in the GLOBAL_CTRL / GLOBAL_STATUS layout (GP `i` at bit `i`, fixed `i` at
    /// bit `32 + i`).
    pub fn counter_bits(&self) -> u64 {
        low_bits(self.gp.len() as u32) | u64::from(self.model().fixed_mask()) << 32
    }

    /// The bits IA32_PERF_GLOBAL_OVF_CTRL / STATUS_RESET accepts: the counters, OvfBuffer and
    /// CondChgd (v2, Figure 21-4), Ovf_Uncore (v3, Figure 21-8), Trace ToPA PMI, LBR_Frz, CTR_Frz
    /// and ASCI (v4, Figure 21-14).
    pub fn status_reset_valid(&self) -> u64 {
        let version = self.version();
        let mut valid = self.counter_bits() | STATUS_OVF_BUF | STATUS_COND_CHGD;
        if version >= 3 {
            valid |= STATUS_OVF_UNCORE;
        }
        if version >= 4 {
            valid |= STATUS_TRACE_TOPA_PMI | STATUS_LBR_FRZ | STATUS_CTR_FRZ | STATUS_ASCI;
        }
        valid
    }

    /// The bits IA32_PERF_GLOBAL_STATUS_SET accepts (v4, Figure 21-16): those of STATUS_RESET but
    /// CondChgd.
    pub fn status_set_valid(&self) -> u64 {
        self.status_reset_valid() & !STATUS_COND_CHGD
    }

    /// The bits IA32_PERFEVTSELx accepts: 31:0, without AnyThread unless it is supported, and
    /// UMASK2 (47:40) where the model has it, and IN_TX / IN_TXCP (bits 32 and 33) on a part with
    /// TSX.
    pub fn evtsel_valid(&self) -> u64 {
        let any = if self.model().anythread_supported() { 0 } else { EVTSEL_ANY };
        let umask2 = if self.model().umask2 { EVTSEL_UMASK2 } else { 0 };
        (0xFFFF_FFFF & !any) | umask2 | self.model().quirks.evtsel_high_valid()
    }

    /// The bits IA32_FIXED_CTR_CTRL accepts: OS, USR, PMI (and AnyThread where supported) in the
    /// nibble of every fixed counter that exists.
    pub fn fixed_ctrl_valid(&self) -> u64 {
        let nibble = FIXED_OS
            | FIXED_USR
            | FIXED_PMI
            | if self.model().anythread_supported() { FIXED_ANY } else { 0 };
        let mask = self.model().fixed_mask();
        (0..7).filter(|i| mask >> i & 1 != 0).fold(0, |acc, i| acc | nibble << (4 * i))
    }

    /// Whether v4 streamlined freeze has frozen the counters (GLOBAL_STATUS.CTR_FRZ).
    pub fn frozen(&self) -> bool {
        self.global_status & STATUS_CTR_FRZ != 0
    }

    /// The time-stamp counter.
    pub fn tsc(&self) -> u64 {
        self.tsc
    }

    /// Advances the TSC by `ticks` without retiring anything (time the CPU spends halted).
    pub fn advance_tsc(&mut self, ticks: u64) {
        self.tsc = self.tsc.wrapping_add(ticks);
    }

    /// Every event retired in `ring` on this CPU since reset, regardless of programming.
    pub fn ground_truth(&self, ring: Ring) -> &EventTotals {
        &self.truth[ring.index()]
    }

    /// The PMI counters.
    pub fn pmi_stats(&self) -> PmiStats {
        self.stats
    }

    /// Whether the APIC has delivered a PMI the CPU has not taken yet.
    pub fn pmi_pending(&self) -> bool {
        self.delivered.is_some()
    }

    /// Takes the delivered PMI, if any: the simulated kernel polls this after each block and calls
    /// the driver's interrupt handler when it returns an NMI.
    pub fn take_pmi(&mut self) -> Option<Pmi> {
        self.delivered.take()
    }

    /// Whether a PMI was raised while the LVT entry was masked and waits for it to be unmasked.
    pub fn pmi_held(&self) -> bool {
        self.held
    }

    /// RDMSR.
    pub fn read_msr(&self, address: u32) -> Result<u64, Fault> {
        if self.model().amd.is_some() {
            return self.amd_read_msr(address);
        }
        let access = Access::Rdmsr { msr: address };
        let fault = |kind, detail: String| Err(Fault { access, kind, detail });
        let model = *self.model();
        let version = self.version();
        if let Some(i) = self.gp_index(address, msr::IA32_PMC0) {
            return Ok(self.gp[i].value);
        }
        if let Some(i) = self.gp_index(address, msr::IA32_A_PMC0) {
            if model.full_width_write() {
                return Ok(self.gp[i].value);
            }
            return fault(FaultKind::UnknownMsr, "IA32_A_PMCx exist only with FW_WRITE".into());
        }
        if let Some(i) = self.gp_index(address, msr::IA32_PERFEVTSEL0) {
            return Ok(self.gp[i].evtsel);
        }
        if let Some(i) = self.fixed_index(address) {
            return Ok(self.fixed[i]);
        }
        if let Some(i) = offcore::msr_index(address).filter(|&i| model.offcore_rsp_valid[i] != 0) {
            return Ok(self.offcore_rsp[i]);
        }
        match address {
            msr::IA32_TIME_STAMP_COUNTER => Ok(self.tsc),
            msr::IA32_DEBUGCTL => Ok(self.debugctl),
            msr::IA32_X2APIC_LVT_PMI => Ok(self.lvt),
            msr::IA32_PERF_CAPABILITIES if model.pdcm => Ok(model.perf_capabilities),
            msr::IA32_PERF_CAPABILITIES => {
                fault(FaultKind::UnknownMsr, "IA32_PERF_CAPABILITIES needs CPUID.1:ECX.PDCM".into())
            }
            msr::IA32_FIXED_CTR_CTRL if version >= 2 => Ok(self.fixed_ctrl),
            msr::IA32_PERF_GLOBAL_STATUS if version >= 2 => Ok(self.global_status),
            msr::IA32_PERF_GLOBAL_CTRL if version >= 2 => Ok(self.global_ctrl),
            msr::IA32_PERF_GLOBAL_OVF_CTRL if version >= 2 => Ok(0),
            msr::IA32_PERF_GLOBAL_STATUS_SET if version >= 4 => Ok(0),
            msr::IA32_PERF_GLOBAL_INUSE if version >= 4 => Ok(self.in_use()),
            _ => fault(FaultKind::UnknownMsr, self.absent_reason(address)),
        }
    }

    /// WRMSR.
    pub fn write_msr(&mut self, address: u32, value: u64) -> Result<(), Fault> {
        if self.model().amd.is_some() {
            return self.amd_write_msr(address, value);
        }
        let access = Access::Wrmsr { msr: address, value };
        let fault = |kind, detail: String| Err(Fault { access, kind, detail });
        // The detail is worded only for a fault: a write that succeeds allocates nothing (the
        // driver's interrupt path is checked for allocations through these writes).
        let reserved = |valid: u64, detail: &dyn Fn() -> String| {
            if value & !valid != 0 {
                let kind = FaultKind::ReservedBits(value & !valid);
                Err(Fault { access, kind, detail: detail() })
            } else {
                Ok(())
            }
        };
        let model = *self.model();
        let version = self.version();
        if let Some(i) = self.gp_index(address, msr::IA32_PMC0) {
            // §21.2.6: without a full-width write, bits 31:0 are written and bit 31 is
            // sign-extended into the upper bits; EDX is ignored.
            let extended = value as u32 as i32 as i64 as u64;
            self.gp[i].value = extended & low_bits(self.gp_width());
            return Ok(());
        }
        if let Some(i) = self.gp_index(address, msr::IA32_A_PMC0) {
            if !model.full_width_write() {
                return fault(FaultKind::UnknownMsr, "IA32_A_PMCx exist only with FW_WRITE".into());
            }
            let width = self.gp_width();
            let detail = || format!("the value is wider than the {width}-bit counter");
            if !model.quirks.truncating_counter_writes {
                reserved(low_bits(width), &detail)?;
            }
            self.gp[i].value = value & low_bits(width);
            return Ok(());
        }
        if let Some(i) = self.gp_index(address, msr::IA32_PERFEVTSEL0) {
            let detail = || {
                if value & EVTSEL_ANY != 0 && !model.anythread_supported() {
                    format!("AnyThread (bit 21) is not supported: {}", self.anythread_reason())
                } else if model.umask2 && model.quirks.tsx {
                    "bits 63:48 and 39:34 are reserved".into()
                } else if model.umask2 {
                    "bits 63:48 and 39:32 are reserved".into()
                } else if model.quirks.tsx {
                    "bits 63:34 are reserved".into()
                } else {
                    "bits 63:32 are reserved".into()
                }
            };
            reserved(self.evtsel_valid(), &detail)?;
            self.gp[i] =
                GpCounter { evtsel: value, asserted: false, ref_remainder: 0, ..self.gp[i] };
            return Ok(());
        }
        if let Some(i) = self.fixed_index(address) {
            let width = self.fixed_width();
            let detail = || format!("the value is wider than the {width}-bit counter");
            if !model.quirks.truncating_counter_writes {
                reserved(low_bits(width), &detail)?;
            }
            self.fixed[i] = value & low_bits(width);
            return Ok(());
        }
        if let Some(i) = offcore::msr_index(address).filter(|&i| model.offcore_rsp_valid[i] != 0) {
            let detail = || "a bit this model leaves undefined in the offcore response".to_string();
            reserved(model.offcore_rsp_valid[i], &detail)?;
            self.offcore_rsp[i] = value;
            return Ok(());
        }
        match address {
            msr::IA32_TIME_STAMP_COUNTER => {
                self.tsc = value;
                Ok(())
            }
            msr::IA32_DEBUGCTL => {
                let valid = model.quirks.debugctl_valid(model.freeze_on_pmi);
                let detail = || {
                    if value & DEBUGCTL_FREEZE_PERFMON_ON_PMI != 0 && !model.freeze_on_pmi {
                        "FREEZE_PERFMON_ON_PMI (bit 12) is not implemented".into()
                    } else {
                        format!("this model implements IA32_DEBUGCTL bits {valid:#x}")
                    }
                };
                reserved(valid, &detail)?;
                self.debugctl = value;
                Ok(())
            }
            msr::IA32_X2APIC_LVT_PMI => self.write_lvt(value, access),
            msr::IA32_PERF_CAPABILITIES if model.pdcm => {
                fault(FaultKind::ReadOnly, "IA32_PERF_CAPABILITIES is read-only".into())
            }
            msr::IA32_FIXED_CTR_CTRL if version >= 2 => {
                let stray = value & !self.fixed_ctrl_valid();
                reserved(self.fixed_ctrl_valid(), &|| self.fixed_ctrl_reason(stray))?;
                self.fixed_ctrl = value;
                Ok(())
            }
            msr::IA32_PERF_GLOBAL_STATUS if version >= 2 => fault(
                FaultKind::ReadOnly,
                "IA32_PERF_GLOBAL_STATUS is read-only: clear it through IA32_PERF_GLOBAL_OVF_CTRL"
                    .into(),
            ),
            msr::IA32_PERF_GLOBAL_CTRL if version >= 2 => {
                let detail = || self.missing_counters_reason(value & !self.counter_bits());
                reserved(self.counter_bits(), &detail)?;
                self.global_ctrl = value;
                Ok(())
            }
            msr::IA32_PERF_GLOBAL_OVF_CTRL if version >= 2 => {
                let stray = value & !self.status_reset_valid();
                let detail = || {
                    if stray & !self.counter_bits() & 0xFFFF_FFFF_FFFF != 0 {
                        self.missing_counters_reason(stray)
                    } else {
                        format!("bits not defined for perfmon v{version}")
                    }
                };
                reserved(self.status_reset_valid(), &detail)?;
                self.global_status &= !value;
                Ok(())
            }
            msr::IA32_PERF_GLOBAL_STATUS_SET if version >= 4 => {
                let detail = || format!("bits not defined in STATUS_SET for perfmon v{version}");
                reserved(self.status_set_valid(), &detail)?;
                self.global_status |= value;
                Ok(())
            }
            msr::IA32_PERF_GLOBAL_INUSE if version >= 4 => {
                fault(FaultKind::ReadOnly, "IA32_PERF_GLOBAL_INUSE is read-only".into())
            }
            _ => fault(FaultKind::UnknownMsr, self.absent_reason(address)),
        }
    }

    /// RDPMC: GP counter `index`, or fixed counter `i` as `1 << 30 | i` (SDM Vol. 2B, RDPMC). Any
    /// other selector (including the ECX\[31\] fast-read form) raises #GP.
    pub fn read_pmc(&self, index: u32) -> Result<u64, Fault> {
        if self.model().amd.is_some() {
            return self.amd_read_pmc(index);
        }
        if let Some(counter) = self.gp.get(index as usize) {
            return Ok(counter.value);
        }
        if index & !0x3FFF_FFFF == 1 << 30 {
            let i = index & 0x3FFF_FFFF;
            if i < 7 && self.model().has_fixed(i as u8) {
                return Ok(self.fixed[i as usize]);
            }
        }
        let detail = format!(
            "this CPU has GP counters 0..{} and fixed counters {:#b}",
            self.gp.len(),
            self.model().fixed_mask()
        );
        Err(Fault { access: Access::Rdpmc { index }, kind: FaultKind::NoSuchCounter, detail })
    }

    /// Retires one execution of a block in `ring`. See [`SimPmu::retire_repeated`].
    pub fn retire(&mut self, ring: Ring, work: &Work) {
        self.retire_repeated(ring, work, 1);
    }

    /// Retires `repeat` executions of a block in `ring`, in O(counters): updates the ground truth,
    /// advances the TSC by the reference cycles, and, unless CTR_FRZ is set, makes every enabled
    /// counter count.
    ///
    /// A GP counter counts when EN is set, its GLOBAL_CTRL bit is set (v2+) and USR (CPL 3) or OS
    /// (CPL 0) matches `ring`; it counts its (event select, unit mask): the architectural events
    /// the model reports as available plus every matching [`RawCount`], through [`CycleFilter`]
    /// (AnyThread counts this thread only; PC has no effect). Fixed counter 0 counts instructions,
    /// 1 core cycles, 2 reference cycles and 3 TOPDOWN.SLOTS, gated by its FIXED_CTR_CTRL nibble
    /// and GLOBAL_CTRL bit; fixed counters above 3 count nothing.
    ///
    /// A counter that passes 2^width − 1 wraps and keeps the remainder (however many times it
    /// wraps), sets its GLOBAL_STATUS bit (v2+), and raises a PMI at the end of the block when its
    /// INT (GP) or PMI (fixed) bit is set.
    pub fn retire_repeated(&mut self, ring: Ring, work: &Work, repeat: u64) {
        if repeat == 0 {
            return;
        }
        let model = *self.model();
        let slots_per_cycle = model.topdown_slots_per_cycle;
        self.truth[ring.index()].record(work, repeat, slots_per_cycle);
        self.tsc = self.tsc.wrapping_add(work.ref_cycles.wrapping_mul(repeat));
        let global = self.version() >= 2 || self.amd_perfmon_v2();
        let mut overflowed = 0u64;
        let mut interrupt = false;
        let gp_width = self.gp_width();
        for i in 0..self.gp.len() {
            let counter = self.gp[i];
            let sel = counter.evtsel;
            if !self.gp_counts(i, ring) {
                if work.core_cycles > 0 {
                    self.gp[i].asserted = false;
                }
                continue;
            }
            let events = Self::gp_events(&model, work, sel, self.offcore_rsp);
            let filter = CycleFilter::from_evtsel(sel);
            let mut filtered = filter.apply(events, work.core_cycles, repeat, counter.asserted);
            if filter.counts_events() && self.counts_slow_ref_clock(sel) {
                let divisor = u128::from(model.quirks.gp_ref_cycles_divisor);
                let ticks = u128::from(work.ref_cycles) * u128::from(repeat)
                    + u128::from(counter.ref_remainder);
                filtered.count = ticks / divisor;
                self.gp[i].ref_remainder = (ticks % divisor) as u64;
            }
            let (value, wrapped) = add_wrapping(counter.value, filtered.count, gp_width);
            self.gp[i].value = value;
            self.gp[i].asserted = filtered.asserted;
            if wrapped {
                overflowed |= 1 << i;
                interrupt |= sel & EVTSEL_INT != 0;
            }
        }
        let fixed_width = self.fixed_width();
        for i in 0..7u8 {
            if !self.fixed_counts(i, ring) {
                continue;
            }
            let nibble = self.fixed_ctrl >> (4 * i) & 0xF;
            let per_block = Self::fixed_events(&model, work, i);
            let increment = u128::from(per_block) * u128::from(repeat);
            let (value, wrapped) = add_wrapping(self.fixed[usize::from(i)], increment, fixed_width);
            self.fixed[usize::from(i)] = value;
            if wrapped {
                overflowed |= 1 << (32 + i);
                interrupt |= nibble & FIXED_PMI != 0;
            }
        }
        if global {
            self.global_status |= overflowed;
        }
        if interrupt {
            self.raise_pmi();
        }
    }

    /// Whether GP counter `i` counts in `ring`: the PMU runs (not frozen), EN is set, its
    /// GLOBAL_CTRL bit is set (v2+) and USR or OS matches the ring.
    fn gp_counts(&self, i: usize, ring: Ring) -> bool {
        let ring_bit = match ring {
            Ring::Kernel => EVTSEL_OS,
            Ring::User => EVTSEL_USR,
        };
        if self.model().amd.is_some() {
            return self.amd_counts(i, ring);
        }
        let sel = self.gp[i].evtsel;
        self.version() >= 1
            && !self.frozen()
            && sel & EVTSEL_EN != 0
            && (self.version() < 2 || self.global_ctrl >> i & 1 != 0)
            && sel & ring_bit != 0
    }

    /// Whether fixed counter `i` counts in `ring`: it exists, the PMU runs, its GLOBAL_CTRL bit
    /// is set and its FIXED_CTR_CTRL nibble enables the ring.
    fn fixed_counts(&self, i: u8, ring: Ring) -> bool {
        let ring_bits = match ring {
            Ring::Kernel => FIXED_OS,
            Ring::User => FIXED_USR,
        };
        self.model().has_fixed(i)
            && self.version() >= 1
            && !self.frozen()
            && self.global_ctrl >> (32 + i) & 1 != 0
            && self.fixed_ctrl >> (4 * i) & ring_bits != 0
    }

    /// Events fixed counter `i` counts in one execution of `work`.
    fn fixed_events(model: &PmuModel, work: &Work, i: u8) -> u64 {
        match i {
            0 => work.instructions,
            1 => work.core_cycles,
            2 => work.ref_cycles,
            3 => work.arch(ArchEvent::TopdownSlots, model.topdown_slots_per_cycle),
            _ => 0,
        }
    }

    /// How many executions of `work` in `ring` reach the next overflow that raises a PMI, so that
    /// a machine retiring huge repeated blocks can stop there and deliver every PMI on time:
    /// the least over interrupting counters of ⌈(2^width − value) / events per execution⌉.
    /// `None` when no interrupting counter counts events here, or the only ones count filtered
    /// cycles or edges (CMASK/EDGE), whose overflow point has no closed form.
    pub fn executions_to_next_pmi(&self, ring: Ring, work: &Work) -> Option<u64> {
        let model = *self.model();
        let until = |value: u64, width: u32, per_execution: u64| {
            let left = (1u128 << width) - u128::from(value);
            let executions = left.div_ceil(u128::from(per_execution.max(1)));
            u64::try_from(executions).unwrap_or(u64::MAX)
        };
        let gp = (0..self.gp.len()).filter_map(|i| {
            let sel = self.gp[i].evtsel;
            let exact = CycleFilter::from_evtsel(sel).counts_events() && sel & EVTSEL_INV == 0;
            if sel & EVTSEL_INT == 0 || !exact || !self.gp_counts(i, ring) {
                return None;
            }
            let events = Self::gp_events(&model, work, sel, self.offcore_rsp);
            (events > 0).then(|| until(self.gp[i].value, self.gp_width(), events))
        });
        let fixed = (0..7u8).filter_map(|i| {
            let nibble = self.fixed_ctrl >> (4 * i) & 0xF;
            if nibble & FIXED_PMI == 0 || !self.fixed_counts(i, ring) {
                return None;
            }
            let events = Self::fixed_events(&model, work, i);
            (events > 0).then(|| until(self.fixed[usize::from(i)], self.fixed_width(), events))
        });
        gp.chain(fixed).min()
    }

    /// Events a GP (or AMD core) counter with control `sel` counts in one execution of `work`:
    /// AMD's 12-bit event selects name the architectural events by their own codes
    /// ([`crate::amd::amd_event`]); on Intel, those of its (event select, unit mask, UMASK2, the
    /// offcore-response MSRs' `offcore_rsp`), none with IN_TX (no transaction runs here), and
    /// reference cycles at the slower clock of
    /// [`Quirks::gp_ref_cycles_divisor`](crate::quirks::Quirks) (rounded down:
    /// [`SimPmu::retire_repeated`] counts that clock exactly over a repeat).
    fn gp_events(model: &PmuModel, work: &Work, sel: u64, offcore_rsp: [u64; 2]) -> u64 {
        if model.amd.is_some() {
            let umask = (sel >> 8) as u8;
            let event = amd::event_select(sel);
            let arch = arch_event_of(event, umask).map_or(0, |e| work.arch(e, 0));
            let raw = work
                .raw
                .iter()
                .filter(|raw| u16::from(raw.event_select) == event && raw.umask == umask);
            return raw.fold(arch, |sum, raw| sum.saturating_add(raw.count));
        }
        if sel & EVTSEL_IN_TX != 0 {
            return 0;
        }
        let (event_select, umask) = (sel as u8, (sel >> 8) as u8);
        let events = Self::events(model, work, sel, offcore_rsp);
        let divisor = u64::from(model.quirks.gp_ref_cycles_divisor.max(1));
        if divisor > 1
            && ArchEvent::from_encoding(event_select, umask) == Some(ArchEvent::RefCycles)
        {
            return events / divisor;
        }
        events
    }

    /// Whether a GP counter with event select `sel` counts reference cycles at a clock slower
    /// than the TSC's.
    fn counts_slow_ref_clock(&self, sel: u64) -> bool {
        let model = self.model();
        model.quirks.gp_ref_cycles_divisor > 1
            && sel & EVTSEL_IN_TX == 0
            && ArchEvent::from_encoding(sel as u8, (sel >> 8) as u8) == Some(ArchEvent::RefCycles)
            && model.arch_event_available(ArchEvent::RefCycles)
    }

    /// Events of event select `sel`'s (event select, unit mask, UMASK2) in one execution of
    /// `work` (saturating at 2^64 − 1), with the offcore-response MSRs holding `offcore_rsp`.
    /// Architectural and offcore-response events have UMASK2 0.
    fn events(model: &PmuModel, work: &Work, sel: u64, offcore_rsp: [u64; 2]) -> u64 {
        let (event_select, umask, umask2) = (sel as u8, (sel >> 8) as u8, (sel >> 40) as u8);
        if umask2 != 0 {
            return work
                .raw
                .iter()
                .filter(|raw| {
                    (raw.event_select, raw.umask, raw.umask2) == (event_select, umask, umask2)
                })
                .fold(0, |sum, raw| sum.saturating_add(raw.count));
        }
        let arch = ArchEvent::from_encoding(event_select, umask)
            .filter(|&e| model.arch_event_available(e))
            .map_or(0, |e| work.arch(e, model.topdown_slots_per_cycle));
        work.raw
            .iter()
            .filter(|raw| (raw.event_select, raw.umask, raw.umask2) == (event_select, umask, 0))
            .fold(arch, |sum, raw| sum.saturating_add(raw.count))
            .saturating_add(offcore::events(
                work,
                offcore_rsp,
                model.offcore_rsp_valid,
                (event_select, umask),
            ))
    }

    /// Another user of the PMU (Intel PT's ToPA, the DS buffer, the LBR stack, the uncore) sets
    /// `bits` in IA32_PERF_GLOBAL_STATUS, whatever the version defines, and with `raise`
    /// requests a PMI of its own through the LVT entry (without freezing the counters): what
    /// the driver's handler must leave alone.
    pub fn inject_foreign_status(&mut self, bits: u64, raise: bool) {
        self.global_status |= bits;
        if raise {
            self.stats.raised += 1;
            self.signal_pmi();
        }
    }

    /// The PMU requests a PMI: freeze (when DEBUGCTL.FREEZE_PERFMON_ON_PMI is set), then signal
    /// the LVT entry.
    fn raise_pmi(&mut self) {
        self.stats.raised += 1;
        if self.debugctl & DEBUGCTL_FREEZE_PERFMON_ON_PMI != 0 {
            if self.model().streamlined_freeze() {
                self.global_status |= STATUS_CTR_FRZ;
            } else if self.model().legacy_freeze() {
                self.global_ctrl = 0;
            }
        }
        self.signal_pmi();
    }

    /// The LVT entry delivers a PMI, or holds, drops or forgets it while masked.
    fn signal_pmi(&mut self) {
        if self.lvt & LVT_MASK == 0 {
            self.deliver();
        } else {
            match self.masked_pmi {
                MaskedPmi::Held => self.held = true,
                MaskedPmi::Dropped => self.stats.dropped += 1,
                MaskedPmi::Level if self.version() >= 2 => {}
                MaskedPmi::Level => self.held = true,
            }
        }
    }

    /// The APIC delivers the PMI through the LVT entry and sets the entry's mask bit.
    fn deliver(&mut self) {
        let mode = match self.lvt & LVT_DELIVERY_MODE {
            0x200 => DeliveryMode::Smi,
            0x400 => DeliveryMode::Nmi,
            _ => DeliveryMode::Fixed,
        };
        self.delivered = Some(Pmi { mode, vector: self.lvt as u8 });
        self.lvt |= LVT_MASK;
        self.held = false;
        self.stats.delivered += 1;
    }

    fn write_lvt(&mut self, value: u64, access: Access) -> Result<(), Fault> {
        let valid = LVT_VECTOR | LVT_DELIVERY_MODE | LVT_DELIVERY_STATUS | LVT_MASK;
        if value & !valid != 0 {
            let detail = "the LVT entry defines bits 7:0, 10:8, 12 and 16".into();
            return Err(Fault { access, kind: FaultKind::ReservedBits(value & !valid), detail });
        }
        let invalid = |detail: &str| {
            Err(Fault { access, kind: FaultKind::InvalidValue, detail: detail.into() })
        };
        match value & LVT_DELIVERY_MODE {
            0x000 | 0x200 | 0x400 => {}
            _ => {
                return invalid(
                    "delivery mode must be fixed (000), SMI (010) or NMI (100) for the PMI entry",
                );
            }
        }
        if value & LVT_DELIVERY_MODE == 0 && value & LVT_MASK == 0 && value & LVT_VECTOR < 16 {
            return invalid("unmasked fixed delivery with an illegal vector (0 to 15)");
        }
        // Delivery status is read-only (always idle here).
        self.lvt = value & !LVT_DELIVERY_STATUS;
        if self.lvt & LVT_MASK == 0 && (self.held || self.level_asserted()) {
            self.deliver();
        }
        Ok(())
    }

    /// Under [`MaskedPmi::Level`], whether an interrupting counter's overflow is still pending
    /// in GLOBAL_STATUS (its status bit set, with its INT or fixed PMI bit).
    fn level_asserted(&self) -> bool {
        if self.masked_pmi != MaskedPmi::Level || self.version() < 2 {
            return false;
        }
        let mut interrupting = 0;
        for (i, counter) in self.gp.iter().enumerate() {
            interrupting |= u64::from(counter.evtsel & EVTSEL_INT != 0) << i;
        }
        for i in 0..7 {
            interrupting |= u64::from(self.fixed_ctrl >> (4 * i) & FIXED_PMI != 0) << (32 + i);
        }
        self.global_status & interrupting != 0
    }

    /// IA32_PERF_GLOBAL_INUSE (Figure 21-17): GP counter `i` in use when PERFEVTSELi\[7:0\] ≠ 0,
    /// fixed counter `i` when its OS/USR bits are not both 0, PMI_InUse when any INT or fixed PMI
    /// bit is set.
    fn in_use(&self) -> u64 {
        let mut bits = 0;
        let mut pmi = false;
        for (i, counter) in self.gp.iter().enumerate() {
            bits |= u64::from(counter.evtsel & 0xFF != 0) << i;
            pmi |= counter.evtsel & EVTSEL_INT != 0;
        }
        for i in 0..7 {
            let nibble = self.fixed_ctrl >> (4 * i) & 0xF;
            bits |= u64::from(nibble & FIXED_NIBBLE_ENABLE != 0) << (32 + i);
            pmi |= nibble & FIXED_PMI != 0;
        }
        bits | if pmi { INUSE_PMI } else { 0 }
    }

    fn gp_index(&self, address: u32, base: u32) -> Option<usize> {
        let i = address.checked_sub(base)? as usize;
        (i < self.gp.len()).then_some(i)
    }

    fn fixed_index(&self, address: u32) -> Option<usize> {
        let i = address.checked_sub(msr::IA32_FIXED_CTR0)?;
        (i < 7 && self.model().has_fixed(i as u8)).then_some(i as usize)
    }

    fn anythread_reason(&self) -> String {
        let model = self.model();
        if model.has_pmu() && model.version >= 3 {
            "deprecated by CPUID.0AH:EDX[15]".into()
        } else {
            format!("it needs perfmon v3, this is v{}", self.version())
        }
    }

    fn fixed_ctrl_reason(&self, stray: u64) -> String {
        let mask = self.model().fixed_mask();
        let missing: Vec<u32> = (0..16).filter(|i| stray >> (4 * i) & 0xF != 0).collect();
        if let Some(&i) = missing.iter().find(|&&i| i >= 7 || mask >> i & 1 == 0) {
            return format!("fixed counter {i} does not exist (fixed counters {mask:#b})");
        }
        if stray & 0x4444_4444_4444_4444 != 0 {
            return format!("AnyThread is not supported: {}", self.anythread_reason());
        }
        "reserved IA32_FIXED_CTR_CTRL bits".into()
    }

    fn missing_counters_reason(&self, stray: u64) -> String {
        let gp = (0..32).find(|i| stray >> i & 1 != 0);
        let fixed = (0..32).find(|i| stray >> (32 + i) & 1 != 0);
        match (gp, fixed) {
            (Some(i), _) => {
                format!("GP counter {i} does not exist ({} GP counters)", self.gp.len())
            }
            (None, Some(i)) => format!(
                "fixed counter {i} does not exist (fixed counters {:#b})",
                self.model().fixed_mask()
            ),
            (None, None) => "reserved bits".into(),
        }
    }

    fn absent_reason(&self, address: u32) -> String {
        let version = self.version();
        match address {
            0x0C1..=0x0C8 | 0x186..=0x18D | 0x4C1..=0x4C8 => {
                format!("this CPU has {} GP counters", self.gp.len())
            }
            0x309..=0x30F if version >= 2 => {
                format!("fixed counters {:#b}", self.model().fixed_mask())
            }
            0x309..=0x30F | 0x38D..=0x390 => {
                format!("fixed counters and global MSRs need perfmon v2, this is v{version}")
            }
            0x391 | 0x392 => format!("this MSR needs perfmon v4, this is v{version}"),
            _ => "not implemented by this model".into(),
        }
    }
}

/// Adds `increment` to a `width`-bit counter: the new value modulo 2^width and whether it wrapped
/// (passed 2^width − 1) at least once.
fn add_wrapping(value: u64, increment: u128, width: u32) -> (u64, bool) {
    let modulus = 1u128 << width;
    let sum = u128::from(value) + increment % modulus;
    ((sum % modulus) as u64, increment >= modulus || sum >= modulus)
}

/// A #GP recorded by [`SimHardware`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpuFault {
    /// The CPU that faulted.
    pub cpu: usize,
    /// The fault.
    pub fault: Fault,
}

impl fmt::Display for CpuFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CPU {}: {}", self.cpu, self.fault)
    }
}

struct Machine {
    cpus: Vec<RefCell<SimPmu>>,
    current: Cell<usize>,
    faults: RefCell<Vec<CpuFault>>,
    /// Called after each MSR or counter access the driver makes through the traits (see
    /// [`SimHardware::after_each_access`]), unless it is already running.
    access_hook: RefCell<Option<Rc<dyn Fn()>>>,
    in_access_hook: Cell<bool>,
    /// The last MSR or counter access the driver made through the traits.
    last_access: Cell<Option<Access>>,
}

impl fmt::Debug for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Machine")
            .field("cpus", &self.cpus)
            .field("current", &self.current)
            .field("faults", &self.faults)
            .field("access_hook", &self.access_hook.borrow().is_some())
            .finish()
    }
}

/// The PMUs of the CPUs of a simulated machine, seen as "the CPU the caller runs on": implements
/// the driver's [`Msrs`], [`Lapic`] and [`Hardware`] traits for the current CPU
/// ([`SimHardware::set_current_cpu`]). Cloning gives another handle to the same machine.
///
/// A simulated #GP fails the test: the trait methods record the [`Fault`] (see
/// [`SimHardware::faults`]) and then panic with its message. Tests and the simulated kernel reach
/// the PMUs themselves through [`SimHardware::pmu`]; a borrow of a PMU must not be held while the
/// driver runs.
#[derive(Debug, Clone)]
pub struct SimHardware {
    machine: Rc<Machine>,
}

impl SimHardware {
    /// A machine of `cpus` identical CPUs of `model`, with APIC IDs 0 to `cpus − 1`; CPU 0 is
    /// current.
    ///
    /// # Panics
    /// If `cpus` is 0 or the model is invalid.
    pub fn new(model: PmuModel, cpus: usize) -> Self {
        let apic_ids = 0..u32::try_from(cpus).expect("CPU count fits u32");
        SimHardware::from_pmus(apic_ids.map(|id| SimPmu::new(model).with_apic_id(id)).collect())
    }

    /// A machine of the given PMUs (for example of different core types); CPU 0 is current.
    ///
    /// # Panics
    /// If `pmus` is empty.
    pub fn from_pmus(pmus: Vec<SimPmu>) -> Self {
        assert!(!pmus.is_empty(), "a machine needs at least one CPU");
        let machine = Machine {
            cpus: pmus.into_iter().map(RefCell::new).collect(),
            current: Cell::new(0),
            faults: RefCell::new(Vec::new()),
            access_hook: RefCell::new(None),
            in_access_hook: Cell::new(false),
            last_access: Cell::new(None),
        };
        SimHardware { machine: Rc::new(machine) }
    }

    /// The number of CPUs.
    pub fn cpu_count(&self) -> usize {
        self.machine.cpus.len()
    }

    /// Calls `hook` after every MSR and counter access the driver makes through the
    /// [`Msrs`] trait (not those of [`SimHardware::read_msr`] and the like), except those it
    /// makes itself: the machine's mode that delivers a PMI in the middle of every driver
    /// operation uses it. `None` removes the hook.
    pub fn after_each_access(&self, hook: Option<Rc<dyn Fn()>>) {
        *self.machine.access_hook.borrow_mut() = hook;
    }

    /// The last MSR or counter access the driver made through the [`Msrs`] trait (an access
    /// hook can tell from it where in the driver it runs).
    pub fn last_access(&self) -> Option<Access> {
        self.machine.last_access.get()
    }

    /// Records `access` and runs the access hook, if there is one and it is not running already.
    fn accessed(&self, access: Access) {
        let machine = &*self.machine;
        machine.last_access.set(Some(access));
        if machine.in_access_hook.get() {
            return;
        }
        let Some(hook) = machine.access_hook.borrow().clone() else { return };
        machine.in_access_hook.set(true);
        hook();
        machine.in_access_hook.set(false);
    }

    /// The CPU the trait methods act on.
    pub fn current_cpu(&self) -> usize {
        self.machine.current.get()
    }

    /// Makes `cpu` the current CPU.
    ///
    /// # Panics
    /// If there is no such CPU.
    pub fn set_current_cpu(&self, cpu: usize) {
        assert!(cpu < self.cpu_count(), "no CPU {cpu} (the machine has {})", self.cpu_count());
        self.machine.current.set(cpu);
    }

    /// The PMU of `cpu`, mutably borrowed.
    ///
    /// # Panics
    /// If there is no such CPU or it is already borrowed.
    pub fn pmu(&self, cpu: usize) -> RefMut<'_, SimPmu> {
        self.machine.cpus[cpu].borrow_mut()
    }

    /// The PMU of the current CPU, mutably borrowed.
    pub fn current_pmu(&self) -> RefMut<'_, SimPmu> {
        self.pmu(self.current_cpu())
    }

    /// Every #GP raised through the traits so far, in order.
    pub fn faults(&self) -> Vec<CpuFault> {
        self.machine.faults.borrow().clone()
    }

    /// Returns and forgets the recorded faults.
    pub fn take_faults(&self) -> Vec<CpuFault> {
        std::mem::take(&mut *self.machine.faults.borrow_mut())
    }

    /// Panics, listing them, if any #GP was recorded.
    pub fn assert_no_faults(&self) {
        let faults = self.machine.faults.borrow();
        if !faults.is_empty() {
            let list: Vec<String> = faults.iter().map(ToString::to_string).collect();
            panic!("{} simulated #GP: {}", faults.len(), list.join("; "));
        }
    }

    fn check<T>(&self, result: Result<T, Fault>) -> T {
        match result {
            Ok(value) => value,
            Err(fault) => {
                let record = CpuFault { cpu: self.current_cpu(), fault };
                let message = record.to_string();
                self.machine.faults.borrow_mut().push(record);
                panic!("simulated {message}");
            }
        }
    }
}

/// The current CPU's MSRs, checked: a bad access is a recorded fault and a panic, never undefined
/// behaviour, so these need none of the real instructions' `unsafe`.
impl SimHardware {
    /// RDMSR on the current CPU.
    pub fn read_msr(&self, msr: u32) -> u64 {
        let result = self.current_pmu().read_msr(msr);
        self.check(result)
    }

    /// WRMSR on the current CPU.
    pub fn write_msr(&self, msr: u32, value: u64) {
        let result = self.current_pmu().write_msr(msr, value);
        self.check(result)
    }

    /// RDPMC on the current CPU.
    pub fn read_pmc(&self, index: u32) -> u64 {
        let result = self.current_pmu().read_pmc(index);
        self.check(result)
    }
}

// The methods are `unsafe` on real hardware; here every access is checked and a bad one is a
// recorded fault, so nothing the callers do can be unsound.
#[allow(unsafe_code)]
impl Msrs for SimHardware {
    unsafe fn read_msr(&self, msr: u32) -> u64 {
        let value = SimHardware::read_msr(self, msr);
        self.accessed(Access::Rdmsr { msr });
        value
    }

    unsafe fn write_msr(&self, msr: u32, value: u64) {
        SimHardware::write_msr(self, msr, value);
        self.accessed(Access::Wrmsr { msr, value });
    }

    unsafe fn read_pmc(&self, index: u32) -> u64 {
        let value = SimHardware::read_pmc(self, index);
        self.accessed(Access::Rdpmc { index });
        value
    }
}

impl Lapic for SimHardware {
    /// Writes the LVT entry: NMI delivery, unmasked (a held PMI is delivered at once).
    fn unmask_pmi(&self) {
        self.write_msr(msr::IA32_X2APIC_LVT_PMI, 0x400);
    }

    /// Writes the LVT entry: NMI delivery, masked.
    fn mask_pmi(&self) {
        self.write_msr(msr::IA32_X2APIC_LVT_PMI, 0x400 | LVT_MASK);
    }
}

impl Hardware for SimHardware {
    type Cpuid = CpuidModel;

    fn cpuid(&self) -> CpuidModel {
        self.current_pmu().cpuid()
    }

    fn read_tsc(&self) -> u64 {
        self.current_pmu().tsc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The per-cycle reference: walks every cycle of every repetition.
    fn brute_force(
        filter: CycleFilter,
        events: u64,
        cycles: u64,
        repeat: u64,
        asserted: bool,
    ) -> Filtered {
        if filter.counts_events() {
            return Filtered { count: u128::from(events * repeat), asserted };
        }
        let (mut count, mut previous) = (0u128, asserted);
        for _ in 0..repeat {
            for k in 0..cycles {
                let condition = filter.condition(events_in_cycle(events, cycles, k));
                if filter.edge {
                    count += u128::from(condition && !previous);
                } else {
                    count += u128::from(condition);
                }
                previous = condition;
            }
        }
        Filtered { count, asserted: previous }
    }

    #[test]
    fn events_are_spread_evenly_over_cycles() {
        let spread: Vec<u64> = (0..4).map(|k| events_in_cycle(6, 4, k)).collect();
        assert_eq!(spread, [1, 2, 1, 2]);
        let spread: Vec<u64> = (0..5).map(|k| events_in_cycle(2, 5, k)).collect();
        assert_eq!(spread, [0, 0, 1, 0, 1]);
        assert_eq!(events_in_cycle(7, 0, 0), 0);
        assert_eq!((0..10).map(|k| events_in_cycle(1234, 10, k)).sum::<u64>(), 1234);
    }

    #[test]
    fn closed_forms_on_hand_checked_blocks() {
        let cmask = |cmask, inv, edge| CycleFilter { cmask, inv, edge };
        // 6 events over 4 cycles: 1, 2, 1, 2.
        assert_eq!(cmask(2, false, false).apply(6, 4, 1, false).count, 2);
        assert_eq!(cmask(2, true, false).apply(6, 4, 1, false).count, 2);
        assert_eq!(cmask(1, false, false).apply(6, 4, 1, false).count, 4);
        assert_eq!(cmask(3, false, false).apply(6, 4, 1, false).count, 0);
        // Edges of 0101 repeated 3 times from deasserted: 2 per block.
        assert_eq!(
            cmask(2, false, true).apply(6, 4, 3, false),
            Filtered { count: 6, asserted: true }
        );
        // INV: 1010 repeated 3 times: 2 per block (the boundary 0 -> 1 counts).
        assert_eq!(
            cmask(2, true, true).apply(6, 4, 3, false),
            Filtered { count: 6, asserted: false }
        );
        // ...and from asserted the first rising edge is lost.
        assert_eq!(cmask(2, true, true).apply(6, 4, 3, true).count, 5);
        // Always asserted: one edge at the start, none after.
        assert_eq!(cmask(1, false, true).apply(10, 10, 1000, false).count, 1);
        assert_eq!(cmask(1, false, true).apply(10, 10, 1000, true).count, 0);
        // EDGE with CMASK 0 uses threshold 1 and ignores INV.
        assert_eq!(cmask(0, true, true).apply(2, 5, 1, false).count, 2);
        // CMASK 0 ignores INV and counts events.
        assert_eq!(cmask(0, true, false).apply(7, 3, 2, false).count, 14);
        // No cycles: nothing in cycle modes, state kept.
        assert_eq!(
            cmask(1, true, true).apply(5, 0, 9, true),
            Filtered { count: 0, asserted: true }
        );
    }

    #[test]
    fn closed_forms_stay_exact_for_huge_repeats() {
        let filter = CycleFilter { cmask: 1, inv: false, edge: true };
        // 3 events over 7 cycles: 0010101 -> 3 edges per block, the block ends asserted and
        // starts deasserted, so every boundary is silent.
        let result = filter.apply(3, 7, 1_000_000_000_000, false);
        assert_eq!(result.count, 3_000_000_000_000);
        let cycles = CycleFilter { cmask: 1, inv: true, edge: false };
        assert_eq!(cycles.apply(3, 7, 1_000_000_000_000, false).count, 4_000_000_000_000);
    }

    proptest! {
        #[test]
        fn closed_forms_match_a_per_cycle_loop(
            events in 0u64..40,
            cycles in 0u64..24,
            repeat in 0u64..5,
            cmask in 0u8..6,
            inv: bool,
            edge: bool,
            asserted: bool,
        ) {
            let filter = CycleFilter { cmask, inv, edge };
            prop_assert_eq!(
                filter.apply(events, cycles, repeat, asserted),
                brute_force(filter, events, cycles, repeat, asserted)
            );
        }

        #[test]
        fn add_wrapping_is_exact_modulo_the_width(
            value in any::<u64>(),
            increment in any::<u128>(),
            width in 32u32..=64,
        ) {
            let value = value & low_bits(width);
            let (sum, wrapped) = add_wrapping(value, increment, width);
            let modulus = 1u128 << width;
            let exact = increment.checked_add(u128::from(value));
            let (expected_sum, expected_wrap) = match exact {
                Some(exact) => (exact % modulus, exact >= modulus),
                None => ((increment % modulus + u128::from(value)) % modulus, true),
            };
            prop_assert_eq!(u128::from(sum), expected_sum);
            prop_assert_eq!(wrapped, expected_wrap);
        }
    }
}
