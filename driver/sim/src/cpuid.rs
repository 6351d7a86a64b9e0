//! Simulated CPU models: what CPUID reports for a CPU and which performance-monitoring features it
//! has.
//!
//! A [`PmuModel`] describes one CPU type the way the hardware advertises it: the vendor and
//! signature of CPUID leaves 0 and 1, the architectural performance-monitoring leaf 0xA (Intel SDM
//! Vol. 3B §21.2, "Architectural Performance Monitoring", and Vol. 2A, CPUID, "Architectural
//! Performance Monitoring Leaf"), CPUID.1:ECX.PDCM and IA32_PERF_CAPABILITIES (SDM Vol. 4,
//! Table 2-2), and whether IA32_DEBUGCTL.FREEZE_PERFMON_ON_PMI is implemented. The same model
//! drives both [`CpuidModel`] (what the driver *reads*) and [`crate::pmu::SimPmu`] (how the
//! registers *behave*), so the two cannot disagree.
//!
//! Presets cover every architectural perfmon version: [`PmuModel::yonah`] (v1),
//! [`PmuModel::core2`] (v2), [`PmuModel::nehalem`] (v3), [`PmuModel::skylake`] (v4, the default),
//! [`PmuModel::icelake`] (v5), [`PmuModel::v5_sparse_fixed`] (v5 with a non-contiguous fixed-counter
//! bitmap), [`PmuModel::future_version`] (an unknown version above 5) and [`PmuModel::no_pmu_vm`]
//! (a virtual machine without a vPMU, like the one this project is developed on).

use crate::amd_features::{AUTHENTIC_AMD, AmdFeatures};
pub use crate::arch_event::ArchEvent;
use crate::arch_event::amd_event;
use crate::quirks::Quirks;
use raw_cpuid::{CpuIdReader, CpuIdResult};

/// IA32_PERF_CAPABILITIES bit 13, FW_WRITE: the GP counters can be written at full width through
/// IA32_A_PMCx (SDM Vol. 3B §21.2.6, "Full-Width Writes to Performance Counter Registers").
pub const PERF_CAPABILITIES_FW_WRITE: u64 = 1 << 13;

/// The vendor string of Intel CPUs (CPUID leaf 0, EBX:EDX:ECX).
pub const GENUINE_INTEL: [u8; 12] = *b"GenuineIntel";

/// A CPU's identity and performance-monitoring unit, as CPUID and IA32_PERF_CAPABILITIES
/// advertise it. The fields are the raw quantities the hardware reports; [`PmuModel::validate`]
/// checks that they describe something this simulator can model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PmuModel {
    /// CPUID leaf 0 vendor string.
    pub vendor: [u8; 12],
    /// Display family (6 for every Intel Core CPU).
    pub family: u32,
    /// Display model (extended model in the high nibble).
    pub model: u32,
    /// Stepping (4 bits).
    pub stepping: u32,
    /// The highest basic CPUID leaf (leaf 0 EAX). Leaf 0xA exists only when this is at least 0xA.
    pub max_basic_leaf: u32,
    /// Architectural perfmon version, leaf 0xA EAX\[7:0\]. 0 means no architectural PMU; versions
    /// above 5 behave as version 5 (every feature of versions 1 to 5).
    pub version: u8,
    /// Number of GP counters per logical processor, leaf 0xA EAX\[15:8\] (at most 8 here: the
    /// IA32_PMCx / IA32_PERFEVTSELx address ranges hold 8).
    pub gp_counters: u8,
    /// Width of the GP counters in bits, leaf 0xA EAX\[23:16\] (32 to 64 here).
    pub gp_width: u8,
    /// Number of contiguous fixed counters starting at 0, leaf 0xA EDX\[4:0\] (v2+).
    pub fixed_counters: u8,
    /// Bitmap of supported fixed counters, leaf 0xA ECX (v5+; reported as 0 before v5).
    pub fixed_bitmap: u32,
    /// Width of the fixed counters in bits, leaf 0xA EDX\[12:5\] (v2+; 32 to 64 here).
    pub fixed_width: u8,
    /// Length of the EBX architectural-event vector, leaf 0xA EAX\[31:24\].
    pub arch_events_len: u8,
    /// Leaf 0xA EBX: bit `i` set when architectural event `i` is *not* available.
    pub arch_events_unavailable: u32,
    /// Leaf 0xA EDX\[15\], AnyThread deprecation: the AnyThread bits of IA32_PERFEVTSELx and
    /// IA32_FIXED_CTR_CTRL are not supported.
    pub anythread_deprecated: bool,
    /// CPUID.1:ECX\[15\], PDCM: IA32_PERF_CAPABILITIES exists.
    pub pdcm: bool,
    /// The value of IA32_PERF_CAPABILITIES (only readable when [`PmuModel::pdcm`]); bit 13 is
    /// [`PERF_CAPABILITIES_FW_WRITE`]. The other bits (LBR and PEBS formats) are informational.
    pub perf_capabilities: u64,
    /// IA32_DEBUGCTL.FREEZE_PERFMON_ON_PMI (bit 12) is implemented. Architectural from v2 on
    /// (legacy freeze in v2/v3, streamlined freeze from v4, SDM Vol. 3B §21.2.4.1); a hypervisor may
    /// leave it out, in which case writing the bit raises #GP.
    pub freeze_on_pmi: bool,
    /// TOPDOWN.SLOTS per unhalted core cycle (the allocation width) for fixed counter 3 and event
    /// 0xA4/0x01: slots = this × core cycles.
    pub topdown_slots_per_cycle: u8,
    /// CPUID.1:ECX\[31\]: running under a hypervisor.
    pub hypervisor: bool,
    /// An AMD CPU's core counters ([`crate::amd`]); `None` for Intel CPUs. An AMD model reports
    /// no leaf 0xA (version 0) and has `gp_counters` core counters of `gp_width` bits.
    pub amd: Option<AmdFeatures>,
    /// The defined bits of MSR_OFFCORE_RSP_0 and MSR_OFFCORE_RSP_1 (SDM Vol. 4 for the model);
    /// 0: the MSR does not exist (see [`crate::offcore`]).
    pub offcore_rsp_valid: [u64; 2],
    /// IA32_PERFEVTSELx has UMASK2, bits 47:40, reported by CPUID leaf 23H sub-leaf 0 EBX\[0\]
    /// (needs [`PmuModel::max_basic_leaf`] ≥ 0x23).
    pub umask2: bool,
    /// How the part departs from the plain architectural registers (DEBUGCTL's bits, TSX,
    /// hypervisor and CPUID quirks).
    pub quirks: Quirks,
    /// The core type of a hybrid CPU, CPUID leaf 0x1A EAX\[31:24\] ([`CORE_TYPE_ATOM`] for an
    /// E-core, [`CORE_TYPE_CORE`] for a P-core); 0 for a CPU that is not hybrid. A hybrid CPU sets
    /// CPUID.07H:EDX\[15\] and answers leaf 0x1A (when the maximum basic leaf reaches it).
    pub core_type: u8,
}

/// Leaf 0x1A core type of an E-core (Intel Atom).
pub const CORE_TYPE_ATOM: u8 = 0x20;
/// Leaf 0x1A core type of a P-core (Intel Core).
pub const CORE_TYPE_CORE: u8 = 0x40;

impl Default for PmuModel {
    /// [`PmuModel::skylake`].
    fn default() -> Self {
        PmuModel::skylake()
    }
}

impl PmuModel {
    /// Skylake client (family 6 model 0x5E stepping 3, signature 0x506E3): perfmon v4, 4 GP
    /// counters and 3 fixed counters of 48 bits, 7 architectural events, PDCM with FW_WRITE,
    /// streamlined freeze, MSR_OFFCORE_RSP_0/1 with bits 0x3F_FFFF_8FFF. Its leaf 0xA is the real
    /// one: EAX 0x07300404, EDX 0x603.
    pub const fn skylake() -> Self {
        PmuModel {
            vendor: GENUINE_INTEL,
            family: 6,
            model: 0x5E,
            stepping: 3,
            max_basic_leaf: 0x16,
            version: 4,
            gp_counters: 4,
            gp_width: 48,
            fixed_counters: 3,
            fixed_bitmap: 0,
            fixed_width: 48,
            arch_events_len: 7,
            arch_events_unavailable: 0,
            anythread_deprecated: false,
            pdcm: true,
            // LBR format 5, PEBS trap, PEBS arch regs, PEBS record format 3, FW_WRITE.
            perf_capabilities: 0x05 | 1 << 6 | 1 << 7 | 3 << 8 | PERF_CAPABILITIES_FW_WRITE,
            freeze_on_pmi: true,
            topdown_slots_per_cycle: 4,
            hypervisor: false,
            amd: None,
            offcore_rsp_valid: [0x3F_FFFF_8FFF; 2],
            umask2: false,
            quirks: Quirks::BARE_METAL_TSX,
            core_type: 0,
        }
    }

    /// A Core 2 (Merom, family 6 model 0x0F): perfmon v2, 2 GP counters and 3 fixed counters of
    /// 40 bits, no PDCM (so no full-width writes), legacy freeze.
    pub const fn core2() -> Self {
        PmuModel {
            model: 0x0F,
            stepping: 6,
            max_basic_leaf: 0xA,
            version: 2,
            gp_counters: 2,
            gp_width: 40,
            fixed_counters: 3,
            fixed_width: 40,
            pdcm: false,
            perf_capabilities: 0,
            offcore_rsp_valid: [0; 2],
            quirks: Quirks::BARE_METAL,
            ..PmuModel::skylake()
        }
    }

    /// A Core Duo (Yonah, family 6 model 0x0E): perfmon v1, 2 GP counters of 40 bits, no fixed
    /// counters, no global control or status MSRs, no freeze.
    pub const fn yonah() -> Self {
        PmuModel {
            model: 0x0E,
            stepping: 8,
            max_basic_leaf: 0xA,
            version: 1,
            gp_counters: 2,
            gp_width: 40,
            fixed_counters: 0,
            fixed_width: 0,
            pdcm: false,
            perf_capabilities: 0,
            freeze_on_pmi: false,
            offcore_rsp_valid: [0; 2],
            quirks: Quirks::BARE_METAL,
            ..PmuModel::skylake()
        }
    }

    /// Nehalem (family 6 model 0x1A): perfmon v3 (AnyThread), 4 GP counters and 3 fixed counters
    /// of 48 bits, PDCM without FW_WRITE (so GP writes are 32-bit sign-extended), legacy freeze.
    pub const fn nehalem() -> Self {
        PmuModel {
            model: 0x1A,
            stepping: 5,
            max_basic_leaf: 0xB,
            version: 3,
            // LBR format 3, PEBS trap, PEBS arch regs, PEBS record format 1.
            perf_capabilities: 0x03 | 1 << 6 | 1 << 7 | 1 << 8,
            // MSR_OFFCORE_RSP_0 only, bits 15:0.
            offcore_rsp_valid: [0xFFFF, 0],
            quirks: Quirks::BARE_METAL,
            ..PmuModel::skylake()
        }
    }

    /// Ice Lake client (family 6 model 0x7E): perfmon v5, 8 GP counters and 4 fixed counters
    /// (the 4th is TOPDOWN.SLOTS) of 48 bits, fixed bitmap 0xF, 8 architectural events,
    /// AnyThread deprecated, FW_WRITE, streamlined freeze, 5 slots per cycle, MSR_OFFCORE_RSP_0/1
    /// with bits 0x3F_FFFF_BFFF.
    pub const fn icelake() -> Self {
        PmuModel {
            model: 0x7E,
            stepping: 5,
            max_basic_leaf: 0x1B,
            version: 5,
            gp_counters: 8,
            fixed_counters: 4,
            fixed_bitmap: 0xF,
            arch_events_len: 8,
            anythread_deprecated: true,
            perf_capabilities: 0x05 | 1 << 6 | 1 << 7 | 4 << 8 | PERF_CAPABILITIES_FW_WRITE,
            topdown_slots_per_cycle: 5,
            offcore_rsp_valid: [0x3F_FFFF_BFFF; 2],
            ..PmuModel::skylake()
        }
    }

    /// The P-core (Lion Cove) of Arrow Lake (family 6 model 0xC6) as a CPU of its own: perfmon
    /// v6 (driven as v5), 8 GP counters (the core has 10; the counters past 8 have MSR addresses
    /// this simulator does not model) and fixed counters 0 to 3 of 48 bits, UMASK2 (CPUID leaf
    /// 23H), 8 slots per cycle. CPUID leaf 1AH is not modelled, so the driver sees no core type
    /// and knows no offcore-response MSRs for it (they are absent here too).
    pub const fn arrowlake_p() -> Self {
        PmuModel {
            model: 0xC6,
            stepping: 2,
            max_basic_leaf: 0x23,
            version: 6,
            topdown_slots_per_cycle: 8,
            offcore_rsp_valid: [0; 2],
            umask2: true,
            // No TSX on Arrow Lake.
            quirks: Quirks::BARE_METAL,
            ..PmuModel::icelake()
        }
    }

    /// A hypothetical perfmon v5 CPU whose fixed counters are not contiguous: EDX\[4:0\] = 2 and
    /// ECX = 0b1011, so fixed counters 0, 1 and 3 exist and fixed counter 2 does not. Otherwise
    /// [`PmuModel::icelake`].
    pub const fn v5_sparse_fixed() -> Self {
        PmuModel { fixed_counters: 2, fixed_bitmap: 0b1011, ..PmuModel::icelake() }
    }

    /// [`PmuModel::icelake`] reporting perfmon version `version` (for "an unknown future version";
    /// the registers behave as version 5).
    pub const fn future_version(version: u8) -> Self {
        PmuModel { version, ..PmuModel::icelake() }
    }

    /// A virtual machine without a vPMU (family 6 model 0x55, hypervisor bit set): leaf 0xA exists
    /// but is all zero, there is no PDCM and no counter MSR. Only the TSC, IA32_DEBUGCTL and the
    /// LVT entry exist.
    pub const fn no_pmu_vm() -> Self {
        PmuModel {
            vendor: GENUINE_INTEL,
            family: 6,
            model: 0x55,
            stepping: 4,
            max_basic_leaf: 0xD,
            version: 0,
            gp_counters: 0,
            gp_width: 0,
            fixed_counters: 0,
            fixed_bitmap: 0,
            fixed_width: 0,
            arch_events_len: 0,
            arch_events_unavailable: 0,
            anythread_deprecated: false,
            pdcm: false,
            perf_capabilities: 0,
            freeze_on_pmi: false,
            topdown_slots_per_cycle: 4,
            hypervisor: true,
            amd: None,
            offcore_rsp_valid: [0; 2],
            umask2: false,
            quirks: Quirks { debugctl: crate::quirks::debugctl::KVM, ..Quirks::NONE },
            core_type: 0,
        }
    }

    /// An Alder Lake-like P-core (family 6 model 0x97, Golden Cove): perfmon v5, 8 GP counters and
    /// 4 fixed counters (the 4th is TOPDOWN.SLOTS) of 48 bits, 8 architectural events, leaf 0x1A
    /// core type [`CORE_TYPE_CORE`].
    pub const fn alder_lake_p() -> Self {
        PmuModel {
            model: 0x97,
            stepping: 2,
            max_basic_leaf: 0x20,
            topdown_slots_per_cycle: 6,
            core_type: CORE_TYPE_CORE,
            // TSX is disabled on hybrid parts.
            quirks: Quirks::BARE_METAL,
            ..PmuModel::icelake()
        }
    }

    /// An Alder Lake-like E-core (Gracemont) of the same package: 6 GP counters and 3 fixed
    /// counters, GP counters 44 bits wide (narrower than the P-core's, so the machine's process
    /// PMCs use the narrower width), 7 architectural events, core type [`CORE_TYPE_ATOM`].
    pub const fn alder_lake_e() -> Self {
        PmuModel {
            gp_counters: 6,
            gp_width: 44,
            fixed_counters: 3,
            fixed_bitmap: 0x7,
            arch_events_len: 7,
            topdown_slots_per_cycle: 5,
            core_type: CORE_TYPE_ATOM,
            ..PmuModel::alder_lake_p()
        }
    }

    /// A Meteor Lake-like P-core (family 6 model 0xAA, Redwood Cove): as
    /// [`PmuModel::alder_lake_p`], maximum basic leaf 0x23.
    pub const fn meteor_lake_p() -> Self {
        PmuModel { model: 0xAA, stepping: 4, max_basic_leaf: 0x23, ..PmuModel::alder_lake_p() }
    }

    /// A Meteor Lake-like E-core (Crestmont): 8 GP counters of 48 bits and 3 fixed counters,
    /// core type [`CORE_TYPE_ATOM`].
    pub const fn meteor_lake_e() -> Self {
        PmuModel {
            gp_counters: 8,
            gp_width: 48,
            ..PmuModel {
                model: 0xAA,
                stepping: 4,
                max_basic_leaf: 0x23,
                ..PmuModel::alder_lake_e()
            }
        }
    }

    /// A KVM guest on a Skylake host, as KVM's emulated PMU presents itself: perfmon v2 (KVM
    /// caps the version it reports), the hypervisor bit, 4 GP and 3 fixed counters of 48 bits
    /// with full-width writes, no FREEZE_PERFMON_ON_PMI (writing DEBUGCTL bit 12 raises #GP),
    /// AnyThread reserved, masked PMIs dropped, counter writes truncated ([`Quirks::KVM`]).
    pub const fn kvm_guest() -> Self {
        PmuModel {
            version: 2,
            hypervisor: true,
            freeze_on_pmi: false,
            // KVM sets CPUID.0AH:EDX[15] too.
            anythread_deprecated: true,
            quirks: Quirks::KVM,
            ..PmuModel::skylake()
        }
    }

    /// A Core 2 whose CPUID.0AH:EDX reports 0 (no fixed counter, width 0) though its three
    /// 40-bit fixed counters exist and count ([`Quirks::cpuid_hides_fixed_counters`]).
    pub const fn core2_hiding_fixed_counters() -> Self {
        let mut model = PmuModel::core2();
        model.quirks.cpuid_hides_fixed_counters = true;
        model
    }

    /// Whether leaf 0xA exists and reports an architectural PMU (version 1 or later).
    pub const fn has_pmu(&self) -> bool {
        self.amd.is_some() || self.max_basic_leaf >= 0xA && self.version >= 1
    }

    /// The number of GP counters that exist (0 without a PMU).
    pub const fn gp_counter_count(&self) -> u8 {
        if self.has_pmu() { self.gp_counters } else { 0 }
    }

    /// Bit `i` set when fixed counter `i` exists: none before v2; from v2 the contiguous count of
    /// EDX\[4:0\]; from v5 also the bitmap of ECX ("fixed counter i is supported if ECX\[i\] or
    /// EDX\[4:0\] > i", SDM Vol. 3B §21.2.5).
    pub const fn fixed_mask(&self) -> u32 {
        if !self.has_pmu() || self.version < 2 {
            return 0;
        }
        let contiguous =
            if self.fixed_counters >= 32 { u32::MAX } else { (1u32 << self.fixed_counters) - 1 };
        let bitmap = if self.version >= 5 { self.fixed_bitmap } else { 0 };
        contiguous | bitmap
    }

    /// Whether fixed counter `index` exists.
    pub const fn has_fixed(&self, index: u8) -> bool {
        index < 32 && self.fixed_mask() >> index & 1 != 0
    }

    /// Whether IA32_PERF_GLOBAL_CTRL, _STATUS, _OVF_CTRL and the fixed counters exist (v2+).
    pub const fn has_global_ctrl(&self) -> bool {
        self.has_pmu() && self.version >= 2
    }

    /// Whether the GP counters have full-width write aliases IA32_A_PMCx (PDCM and FW_WRITE).
    pub const fn full_width_write(&self) -> bool {
        self.pdcm && self.perf_capabilities & PERF_CAPABILITIES_FW_WRITE != 0
    }

    /// Whether the AnyThread bits exist: v3 and later, unless leaf 0xA EDX\[15\] deprecates them.
    pub const fn anythread_supported(&self) -> bool {
        self.has_pmu()
            && self.version >= 3
            && !self.anythread_deprecated
            && !self.quirks.anythread_reserved
    }

    /// Whether FREEZE_PERFMON_ON_PMI clears IA32_PERF_GLOBAL_CTRL (v2 and v3).
    pub const fn legacy_freeze(&self) -> bool {
        self.freeze_on_pmi && self.version >= 2 && self.version <= 3
    }

    /// Whether FREEZE_PERFMON_ON_PMI sets IA32_PERF_GLOBAL_STATUS.CTR_FRZ (v4 and later).
    pub const fn streamlined_freeze(&self) -> bool {
        self.freeze_on_pmi && self.version >= 4
    }

    /// Whether architectural event `event` is available: within the EBX vector length and its
    /// EBX bit clear.
    pub const fn arch_event_available(&self, event: ArchEvent) -> bool {
        if self.amd.is_some() {
            return amd_event(event).is_some();
        }
        let index = event.index();
        self.has_pmu()
            && index < self.arch_events_len
            && self.arch_events_unavailable >> index & 1 == 0
    }

    /// The CPUID.1:EAX signature: stepping, model, family and their extended fields.
    pub const fn signature(&self) -> u32 {
        let (base_family, extended_family) =
            if self.family >= 0xF { (0xF, self.family - 0xF) } else { (self.family, 0) };
        let extended_model =
            if base_family == 0x6 || base_family == 0xF { self.model >> 4 & 0xF } else { 0 };
        self.stepping & 0xF
            | (self.model & 0xF) << 4
            | base_family << 8
            | extended_model << 16
            | (extended_family & 0xFF) << 20
    }

    /// CPUID leaf 0xA as this CPU reports it (all zero without a PMU or before v1).
    pub const fn leaf_0a(&self) -> CpuIdResult {
        if self.max_basic_leaf < 0xA || self.version == 0 {
            return CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 };
        }
        let reported_gp = match self.quirks.leaf_0a_gp_counters {
            limit if limit != 0 && limit < self.gp_counters => limit,
            _ => self.gp_counters,
        };
        let eax = self.version as u32
            | (reported_gp as u32) << 8
            | (self.gp_width as u32) << 16
            | (self.arch_events_len as u32) << 24;
        let ebx = self.arch_events_unavailable
            & if self.arch_events_len >= 32 {
                u32::MAX
            } else {
                (1u32 << self.arch_events_len) - 1
            };
        let ecx = if self.version >= 5 { self.fixed_bitmap } else { 0 };
        let edx = if self.version >= 2 && !self.quirks.cpuid_hides_fixed_counters {
            (self.fixed_counters as u32 & 0x1F)
                | (self.fixed_width as u32) << 5
                | (self.anythread_deprecated as u32) << 15
        } else {
            0
        };
        CpuIdResult { eax, ebx, ecx, edx }
    }

    /// Whether the model has CPUID leaf 23H (the architectural performance monitoring extended
    /// leaf): every Intel model whose maximum basic leaf reaches it.
    pub const fn has_leaf_23(&self) -> bool {
        self.amd.is_none() && self.max_basic_leaf >= 0x23
    }

    /// CPUID leaf 23H sub-leaf `subleaf` as this CPU reports it (Intel SDM layout): sub-leaf 0
    /// EAX the valid sub-leaves (0, 1 and 3), EBX bit 0 UMASK2 (the EQ bit, EBX bit 1, is not
    /// modelled); sub-leaf 1 EAX the GP counters' bitmap, EBX the fixed counters'; sub-leaf 3
    /// EAX the supported architectural events (leaf 0xA EBX inverted, within its vector
    /// length). All zero for other sub-leaves.
    pub const fn leaf_23(&self, subleaf: u32) -> CpuIdResult {
        let zero = CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 };
        match subleaf {
            0 => CpuIdResult { eax: 1 | 1 << 1 | 1 << 3, ebx: self.umask2 as u32, ecx: 0, edx: 0 },
            1 => {
                let gp = self.gp_counter_count();
                let gp = if gp >= 32 { u32::MAX } else { (1u32 << gp) - 1 };
                CpuIdResult { eax: gp, ebx: self.fixed_mask(), ecx: 0, edx: 0 }
            }
            3 => {
                let len = self.arch_events_len;
                let vector = if len >= 32 { u32::MAX } else { (1u32 << len) - 1 };
                CpuIdResult { eax: !self.arch_events_unavailable & vector, ..zero }
            }
            _ => zero,
        }
    }

    /// Checks that the model is one this simulator can run: a signature that fits CPUID.1:EAX,
    /// at most 8 GP counters of 32 to 64 bits, fixed counters only at indexes 0 to 6 (MSRs
    /// 0x309–0x30F) of 32 to 64 bits, an EBX vector of at most 32 events, and freeze on PMI only
    /// from v2.
    pub fn validate(&self) -> Result<(), String> {
        if self.stepping > 0xF {
            return Err(format!("stepping {:#x} does not fit 4 bits", self.stepping));
        }
        if self.family > 0xF + 0xFF {
            return Err(format!("family {:#x} does not fit CPUID.1:EAX", self.family));
        }
        let model_limit = if self.family == 6 || self.family >= 0xF { 0xFF } else { 0xF };
        if self.model > model_limit {
            return Err(format!("model {:#x} does not fit family {:#x}", self.model, self.family));
        }
        if let Some(amd) = &self.amd {
            return self.validate_amd(amd);
        }
        if !self.has_pmu() {
            if self.freeze_on_pmi {
                return Err("freeze on PMI needs perfmon v2 or later".into());
            }
            return Ok(());
        }
        if self.gp_counters > 8 {
            return Err(format!("{} GP counters: at most 8 are modelled", self.gp_counters));
        }
        if self.gp_counters > 0 && !(32..=64).contains(&self.gp_width) {
            return Err(format!("GP counter width {} is not within 32..=64", self.gp_width));
        }
        let fixed = self.fixed_mask();
        if fixed & !0x7F != 0 {
            return Err(format!("fixed counters {fixed:#x}: only indexes 0 to 6 are modelled"));
        }
        if fixed != 0 && !(32..=64).contains(&self.fixed_width) {
            return Err(format!("fixed counter width {} is not within 32..=64", self.fixed_width));
        }
        if self.arch_events_len > 32 {
            return Err(format!("EBX vector length {} exceeds 32", self.arch_events_len));
        }
        if self.freeze_on_pmi && self.version < 2 {
            return Err("freeze on PMI needs perfmon v2 or later".into());
        }
        Ok(())
    }

    /// Checks that this AMD model, with features `amd`, describes counters this simulator runs:
    /// AMD's vendor, family 0Fh or later, the counters its CPUID describes (at most 6, PerfMonV2
    /// only with the extended layout), 48 bits wide, no Intel leaf 0xA.
    fn validate_amd(&self, amd: &AmdFeatures) -> Result<(), String> {
        if self.vendor != AUTHENTIC_AMD || self.family < 0xF {
            return Err("an AMD model needs vendor AuthenticAMD and family 0Fh or later".into());
        }
        if self.version != 0 || self.fixed_counters != 0 || self.freeze_on_pmi {
            return Err("an AMD model has no Intel leaf 0xA, fixed counters or freeze".into());
        }
        if amd.perfmon_v2() && !amd.perf_ctr_ext_core() {
            return Err("PerfMonV2 needs PerfCtrExtCore".into());
        }
        let counters = amd.core_counters();
        if counters == 0 || counters > 6 || self.gp_counters != counters {
            return Err(format!(
                "{} core counters: CPUID describes {counters} (1 to 6 are modelled)",
                self.gp_counters
            ));
        }
        if self.gp_width != 48 {
            return Err(format!("AMD core counters are 48 bits wide, not {}", self.gp_width));
        }
        Ok(())
    }
}

/// The CPUID instruction of one simulated CPU: answers leaves 0 (maximum basic leaf and vendor),
/// 1 (signature, initial APIC ID, PDCM, x2APIC and hypervisor bits), 7 (the hybrid bit), 0xA
/// (architectural performance monitoring), 0x1A (core type) and 0x23 (counter and event bitmaps, UMASK2) from a
/// [`PmuModel`], and all zero for every other leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuidModel {
    model: PmuModel,
    apic_id: u32,
}

impl CpuidModel {
    /// CPUID of the CPU with initial APIC ID `apic_id` (its low 8 bits go to CPUID.1:EBX\[31:24\]).
    pub const fn new(model: PmuModel, apic_id: u32) -> Self {
        CpuidModel { model, apic_id }
    }

    /// The CPU model.
    pub const fn model(&self) -> &PmuModel {
        &self.model
    }

    /// The initial APIC ID.
    pub const fn apic_id(&self) -> u32 {
        self.apic_id
    }

    /// CPUID leaf `leaf`, subleaf `subleaf` (leaf 7 answers sub-leaves 0 and 1).
    pub const fn query(&self, leaf: u32, subleaf: u32) -> CpuIdResult {
        let m = &self.model;
        let zero = CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 };
        match leaf {
            0 => {
                let v = &m.vendor;
                CpuIdResult {
                    eax: m.max_basic_leaf,
                    ebx: u32::from_le_bytes([v[0], v[1], v[2], v[3]]),
                    edx: u32::from_le_bytes([v[4], v[5], v[6], v[7]]),
                    ecx: u32::from_le_bytes([v[8], v[9], v[10], v[11]]),
                }
            }
            1 if m.max_basic_leaf >= 1 => {
                // EBX: CLFLUSH line size 8 × 8 bytes, 1 logical processor, initial APIC ID.
                let ebx = 8 << 8 | 1 << 16 | (self.apic_id & 0xFF) << 24;
                // ECX: PDCM (15), x2APIC (21), hypervisor (31).
                let ecx = (m.pdcm as u32) << 15 | 1 << 21 | (m.hypervisor as u32) << 31;
                // EDX: FPU (0), TSC (4), MSR (5), APIC (9).
                let edx = 1 | 1 << 4 | 1 << 5 | 1 << 9;
                CpuIdResult { eax: m.signature(), ebx, ecx, edx }
            }
            0xA => m.leaf_0a(),
            0x8000_0000.. => match &m.amd {
                Some(amd) => amd.extended_leaf(leaf, &m.vendor, m.signature()),
                None => zero,
            },
            0x23 if m.has_leaf_23() => m.leaf_23(subleaf),
            // EAX[8]: leaf 23H exists.
            7 if m.max_basic_leaf >= 7 && subleaf == 1 => {
                CpuIdResult { eax: (m.has_leaf_23() as u32) << 8, ebx: 0, ecx: 0, edx: 0 }
            }
            // EDX[15]: hybrid part.
            7 if m.max_basic_leaf >= 7 && subleaf == 0 => {
                CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: ((m.core_type != 0) as u32) << 15 }
            }
            // Core type in EAX[31:24] (the native model id below it is left 0).
            0x1A if m.max_basic_leaf >= 0x1A => {
                CpuIdResult { eax: (m.core_type as u32) << 24, ebx: 0, ecx: 0, edx: 0 }
            }
            _ => zero,
        }
    }
}

impl CpuIdReader for CpuidModel {
    fn cpuid2(&self, eax: u32, ecx: u32) -> CpuIdResult {
        self.query(eax, ecx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid() {
        for model in [
            PmuModel::skylake(),
            PmuModel::core2(),
            PmuModel::yonah(),
            PmuModel::nehalem(),
            PmuModel::icelake(),
            PmuModel::v5_sparse_fixed(),
            PmuModel::future_version(6),
            PmuModel::arrowlake_p(),
            PmuModel::no_pmu_vm(),
            PmuModel::kvm_guest(),
            PmuModel::core2_hiding_fixed_counters(),
            PmuModel::alder_lake_p(),
            PmuModel::alder_lake_e(),
            PmuModel::meteor_lake_p(),
            PmuModel::meteor_lake_e(),
        ] {
            assert_eq!(model.validate(), Ok(()), "{model:?}");
        }
    }

    #[test]
    fn validate_refuses_what_cannot_be_modelled() {
        let bad = [
            PmuModel { gp_counters: 9, ..PmuModel::skylake() },
            PmuModel { gp_width: 31, ..PmuModel::skylake() },
            PmuModel { fixed_width: 65, ..PmuModel::skylake() },
            PmuModel { fixed_bitmap: 1 << 7, ..PmuModel::icelake() },
            PmuModel { freeze_on_pmi: true, ..PmuModel::yonah() },
            PmuModel { stepping: 0x10, ..PmuModel::skylake() },
            PmuModel { arch_events_len: 33, ..PmuModel::skylake() },
        ];
        for model in bad {
            assert!(model.validate().is_err(), "{model:?}");
        }
    }

    #[test]
    fn arch_event_encodings_round_trip() {
        for event in ArchEvent::ALL {
            assert_eq!(ArchEvent::from_encoding(event.event_select(), event.umask()), Some(event));
        }
        assert_eq!(ArchEvent::from_encoding(0x3C, 0x02), None);
        assert_eq!(ArchEvent::TopdownSlots.index(), 7);
    }

    #[test]
    fn signatures_use_the_extended_fields() {
        assert_eq!(PmuModel::skylake().signature(), 0x0005_06E3);
        assert_eq!(PmuModel::core2().signature(), 0x0000_06F6);
        let family_17h = PmuModel { family: 0x17, model: 0x31, stepping: 0, ..PmuModel::skylake() };
        assert_eq!(family_17h.signature(), 0x0083_0F10);
    }
}
