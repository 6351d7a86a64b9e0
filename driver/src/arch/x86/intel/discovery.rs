//! Discovering an Intel CPU's performance-monitoring unit from CPUID and IA32_PERF_CAPABILITIES.
//!
//! No model table decides whether a CPU is supported: Intel architectural performance monitoring
//! (CPUID leaf 0xA) describes the counters completely. A perfmon version above 5 is driven as
//! version 5 (its architectural subset). A CPU whose leaf 0xA reports version 0 or no GP counters
//! (as virtual machines without a vPMU do) has no PMU, and the driver offers TSC and SOFT only.
//! Discovery runs on every CPU, so CPUs of different core types get their own descriptions.

use super::offcore::OffcoreLayout;
pub use super::perfmon_ext::{ARCH_PERFMON_EXT_LEAF, PerfmonExt};
use super::regs::{CounterSet, FixedFlags, PerfEvtSel, StatusFlags, low_bits};
use crate::arch::x86::cpuid::CpuSignature;
use crate::arch::x86::msr;
use crate::hw::{CpuIdReader, Msrs};

/// The highest perfmon version this driver programs with version-specific features.
pub const MAX_KNOWN_VERSION: u8 = 5;

/// How the PMU stops counting when it raises a PMI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FreezeMode {
    /// No freeze (perfmon v1): the handler stops counters itself.
    None,
    /// v2–v3 legacy freeze (IA32_DEBUGCTL.FREEZE_PERFMON_ON_PMI): the PMI clears GLOBAL_CTRL.
    Legacy,
    /// v4 streamlined freeze: the PMI sets GLOBAL_STATUS.CTR_FRZ; writing it to STATUS_RESET
    /// unfreezes.
    Streamlined,
}

/// The core type of a logical processor of a hybrid CPU (CPUID leaf 0x1A EAX\[31:24\]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoreType {
    /// An E-core (Intel Atom, 0x20).
    Atom,
    /// A P-core (Intel Core, 0x40).
    Core,
    /// Another value leaf 0x1A reports.
    Other(u8),
}

impl CoreType {
    /// The core type leaf 0x1A EAX\[31:24\] names.
    pub const fn from_leaf_1a(value: u8) -> CoreType {
        match value {
            0x20 => CoreType::Atom,
            0x40 => CoreType::Core,
            other => CoreType::Other(other),
        }
    }

    /// Its leaf 0x1A EAX\[31:24\] value.
    pub const fn code(self) -> u8 {
        match self {
            CoreType::Atom => 0x20,
            CoreType::Core => 0x40,
            CoreType::Other(other) => other,
        }
    }

    /// The core type of the CPU whose CPUID `cpuid` answers for: `None` unless it is hybrid
    /// (CPUID.07H:EDX\[15\]) and has leaf 0x1A.
    pub fn discover<R: CpuIdReader>(cpuid: &R) -> Option<CoreType> {
        let max_leaf = cpuid.cpuid1(0).eax;
        let hybrid = max_leaf >= 7 && cpuid.cpuid2(7, 0).edx & (1 << 15) != 0;
        (hybrid && max_leaf >= 0x1A)
            .then(|| Self::from_leaf_1a((cpuid.cpuid1(0x1A).eax >> 24) as u8))
    }
}

/// The Intel architectural PMU of one CPU (CPUID leaf 0xA, SDM Vol. 3B §21.2; PERF_CAPABILITIES,
/// SDM Vol. 4 Table 2-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntelPmu {
    /// The version leaf 0xA reports.
    pub reported_version: u8,
    /// The version the driver programs: the reported one, capped at [`MAX_KNOWN_VERSION`].
    pub version: u8,
    /// Number of GP counters.
    pub gp_counters: u8,
    /// Width of the GP counters in bits.
    pub gp_width: u8,
    /// Bit `i` set when fixed counter `i` exists (v2+: the contiguous count of EDX\[4:0\]; v5 also
    /// the bitmap of ECX).
    pub fixed_mask: u32,
    /// Width of the fixed counters in bits.
    pub fixed_width: u8,
    /// Bit `i` set when architectural event `i` is available (leaf 0xA EBX, inverted, limited to
    /// the vector length of EAX\[31:24\]): 0 core cycles, 1 instructions retired, 2 reference
    /// cycles, 3 LLC references, 4 LLC misses, 5 branches retired, 6 branch mispredicts retired,
    /// 7 top-down slots.
    pub arch_events: u32,
    /// IA32_PERF_CAPABILITIES.FW_WRITE: GP counters can be written at full width through
    /// IA32_A_PMCx.
    pub full_width_write: bool,
    /// Whether the AnyThread bit exists (v3+ unless leaf 0xA EDX\[15\] deprecates it).
    pub any_thread: bool,
    /// How the PMU freezes on a PMI (never under a hypervisor).
    pub freeze: FreezeMode,
    /// The offcore-response MSRs of the model (and core type), if the driver knows them.
    pub offcore: Option<OffcoreLayout>,
    /// IA32_PERFEVTSELx has UMASK2, bits 47:40 (CPUID.23H.0:EBX\[0\]).
    pub umask2: bool,
    /// What CPUID leaf 23H reported, where the CPU has it (its counter and event bitmaps are
    /// the ones above).
    pub extended_leaf: Option<PerfmonExt>,
    /// The core type of a hybrid CPU (leaf 0x1A): P-cores and E-cores have PMUs of their own, so
    /// discovery runs on every CPU. `None` on a CPU that is not hybrid.
    pub core_type: Option<CoreType>,
}

impl IntelPmu {
    /// Describes the PMU of the CPU whose CPUID `cpuid` answers for; reads PERF_CAPABILITIES
    /// through `msrs` when CPUID.1:ECX.PDCM says it exists. `None` when the CPU has no usable
    /// architectural PMU (not Intel, leaf 0xA absent, version 0, or no GP counters).
    ///
    /// Leaf 0xA is decoded by hand: raw-cpuid's `PerformanceMonitoringInfo` keeps neither ECX
    /// (the fixed-counter bitmap of perfmon v5) nor EBX bits past the seven events it names (the
    /// architectural events of newer parts), and both decide which counters the driver offers.
    pub fn discover<R: CpuIdReader, M: Msrs + ?Sized>(cpuid: &R, msrs: &M) -> Option<IntelPmu> {
        let signature = CpuSignature::read(cpuid);
        if !signature.is_intel() || cpuid.cpuid1(0).eax < 0xA {
            return None;
        }
        let leaf = cpuid.cpuid1(0xA);
        let reported_version = leaf.eax as u8;
        let ext = PerfmonExt::discover(cpuid);
        // Leaf 23H's bitmap, where present, over leaf 0xA's count. The driver numbers GP
        // counters from 0 without gaps: counters past a gap of the bitmap stay unused.
        let gp_counters = match ext.and_then(|e| e.gp_counters) {
            Some(bitmap) => bitmap.trailing_ones() as u8,
            None => (leaf.eax >> 8) as u8,
        };
        let gp_width = (leaf.eax >> 16) as u8;
        if reported_version == 0 || gp_counters == 0 || !(8..=64).contains(&gp_width) {
            return None;
        }
        let version = reported_version.min(MAX_KNOWN_VERSION);
        let vector_len = (leaf.eax >> 24) as u8;
        let arch_events = match ext.and_then(|e| e.arch_events) {
            Some(bitmap) => bitmap,
            None => !leaf.ebx & low_bits(u32::from(vector_len.min(32))) as u32,
        };
        // A hypervisor's vPMU may not implement DEBUGCTL.FREEZE_PERFMON_ON_PMI (writing it would
        // #GP), so a guest does without freezing, as FreeBSD does.
        let hypervisor = cpuid.cpuid1(1).ecx & (1 << 31) != 0;
        let (fixed_mask, fixed_width) = if version >= 2 {
            let mut count = leaf.edx & 0x1F;
            let mut width = (leaf.edx >> 5) as u8;
            // Early Core 2 parts report fewer fixed counters than the three every perfmon v2
            // to v4 part has (often none, with width 0): assume three, as wide as the GP
            // counters, as Linux does. Not under a hypervisor, whose vPMU may really lack them.
            if (2..=4).contains(&version) && count < 3 && !hypervisor {
                count = 3;
                if !(8..=64).contains(&width) {
                    width = gp_width;
                }
            }
            let contiguous = low_bits(count.min(32)) as u32;
            let bitmap = if version >= 5 { leaf.ecx } else { 0 };
            let mask = ext.and_then(|e| e.fixed_counters).unwrap_or(contiguous | bitmap);
            if (8..=64).contains(&width) { (mask, width) } else { (0, 0) }
        } else {
            (0, 0)
        };
        let pdcm = cpuid.cpuid1(1).ecx & (1 << 15) != 0;
        let capabilities = if pdcm {
            // SAFETY: IA32_PERF_CAPABILITIES exists when CPUID.1:ECX.PDCM says so.
            unsafe { msrs.read_msr(msr::IA32_PERF_CAPABILITIES) }
        } else {
            0
        };
        let full_width_write = capabilities & PERF_CAPABILITIES_FW_WRITE != 0;
        let any_thread = version >= 3 && leaf.edx & (1 << 15) == 0;
        let freeze = match version {
            _ if hypervisor => FreezeMode::None,
            1 => FreezeMode::None,
            2 | 3 => FreezeMode::Legacy,
            _ => FreezeMode::Streamlined,
        };
        Some(IntelPmu {
            reported_version,
            version,
            gp_counters: gp_counters.min(32),
            gp_width,
            fixed_mask: fixed_mask & 0xFFFF,
            fixed_width,
            arch_events,
            full_width_write,
            any_thread,
            freeze,
            offcore: OffcoreLayout::discover(cpuid, &signature),
            umask2: ext.is_some_and(|e| e.umask2),
            extended_leaf: ext,
            core_type: CoreType::discover(cpuid),
        })
    }

    /// Number of fixed counters (the highest existing index plus one).
    pub fn fixed_counters(&self) -> u8 {
        (32 - self.fixed_mask.leading_zeros()) as u8
    }

    /// Whether fixed counter `index` exists.
    pub fn has_fixed(&self, index: u8) -> bool {
        index < 32 && self.fixed_mask >> index & 1 != 0
    }

    /// Every counter, in the GLOBAL_CTRL layout.
    pub fn counters(&self) -> CounterSet {
        CounterSet::new(self.gp_counters, self.fixed_mask)
    }

    /// Whether IA32_PERF_GLOBAL_CTRL / STATUS / OVF_CTRL exist (v2+).
    pub fn has_global_ctrl(&self) -> bool {
        self.version >= 2
    }

    /// The IA32_PERFEVTSELx bits this PMU defines.
    pub fn evtsel_valid(&self) -> u64 {
        let any = if self.any_thread { PerfEvtSel::ANY } else { 0 };
        let umask2 = if self.umask2 { PerfEvtSel::UMASK2 } else { 0 };
        PerfEvtSel::ARCHITECTURAL | any | umask2
    }

    /// The IA32_FIXED_CTR_CTRL field bits this PMU defines.
    pub fn fixed_field_valid(&self) -> FixedFlags {
        let any = if self.any_thread { FixedFlags::ANY } else { FixedFlags::empty() };
        FixedFlags::OS | FixedFlags::USR | FixedFlags::PMI | any
    }

    /// The IA32_PERF_GLOBAL_STATUS bits that belong to the driver, the only ones its PMI handler
    /// acknowledges: its counters' overflow bits, and CTR_FRZ when it froze the counters itself
    /// (streamlined freeze). Intel PT's ToPA PMI, the DS buffer's overflow, LBR freezing and the
    /// uncore bits belong to other users of the PMU.
    pub fn status_owned(&self) -> u64 {
        let freeze =
            if self.freeze == FreezeMode::Streamlined { StatusFlags::CTR_FRZ.bits() } else { 0 };
        self.counters().bits() | freeze
    }

    /// The IA32_PERF_GLOBAL_OVF_CTRL bits this PMU defines: the counters, OvfBuf and CondChgd
    /// (v2), uncore (v3), and CTR_FRZ, LBR_FRZ, ASCI and ToPA (v4).
    pub fn status_reset_valid(&self) -> u64 {
        let mut valid = StatusFlags::OVF_BUF | StatusFlags::COND_CHGD;
        if self.version >= 3 {
            valid |= StatusFlags::OVF_UNCORE;
        }
        if self.version >= 4 {
            valid |= StatusFlags::CTR_FRZ
                | StatusFlags::LBR_FRZ
                | StatusFlags::ASCI
                | StatusFlags::TRACE_TOPA_PMI;
        }
        self.counters().bits() | valid.bits()
    }

    /// The MSR to write GP counter `index` through: the full-width alias when FW_WRITE, else the
    /// legacy address (which takes 32 bits, sign-extended from bit 31).
    pub fn gp_write_msr(&self, index: u8) -> u32 {
        let base = if self.full_width_write { msr::IA32_A_PMC0 } else { msr::IA32_PMC0 };
        base + u32::from(index)
    }
}

/// IA32_PERF_CAPABILITIES bit 13: full-width writes to IA32_A_PMCx.
pub const PERF_CAPABILITIES_FW_WRITE: u64 = 1 << 13;
