//! CPUID leaf 23H, the architectural performance monitoring extended leaf (Intel SDM Vol. 2A,
//! CPUID; Meteor Lake and later): which counters and architectural events a CPU has, as bitmaps,
//! and the event-select extensions. Where it is present, discovery takes the counters from it
//! rather than from leaf 0xA, as Linux's `update_pmu_cap` does.
//!
//! Layout (from the SDM): the leaf exists when CPUID.(EAX=07H,ECX=01H):EAX\[8\] is set; sub-leaf
//! 0 EAX is the bitmap of valid sub-leaves, EBX bit 0 says IA32_PERFEVTSELx has UMASK2 (bits
//! 47:40) and bit 1 the EQ bit (36); sub-leaf 1 EAX is the bitmap of the GP counters and EBX that
//! of the fixed counters; sub-leaf 3 EAX is the bitmap of the architectural events supported
//! (bit `i` set: event `i`, not inverted as leaf 0xA EBX is).

use crate::hw::CpuIdReader;

/// CPUID leaf 23H.
pub const ARCH_PERFMON_EXT_LEAF: u32 = 0x23;

/// CPUID.(EAX=07H,ECX=01H):EAX bit 8: leaf 23H exists.
const LEAF_7_1_EAX_ARCH_PERFMON_EXT: u32 = 1 << 8;

/// Sub-leaf 1: the counter bitmaps.
const COUNTERS_SUBLEAF: u32 = 1;
/// Sub-leaf 3: the architectural events bitmap.
const ARCH_EVENTS_SUBLEAF: u32 = 3;

/// What leaf 23H reports for one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PerfmonExt {
    /// IA32_PERFEVTSELx has UMASK2 (sub-leaf 0 EBX\[0\]).
    pub umask2: bool,
    /// IA32_PERFEVTSELx has the EQ bit (sub-leaf 0 EBX\[1\]).
    pub eq: bool,
    /// Bit `i` set when GP counter `i` exists (sub-leaf 1 EAX), if sub-leaf 1 is valid.
    pub gp_counters: Option<u32>,
    /// Bit `i` set when fixed counter `i` exists (sub-leaf 1 EBX), if sub-leaf 1 is valid.
    pub fixed_counters: Option<u32>,
    /// Bit `i` set when architectural event `i` is supported (sub-leaf 3 EAX), if valid.
    pub arch_events: Option<u32>,
}

impl PerfmonExt {
    /// Leaf 23H of the CPU whose CPUID `cpuid` answers for, if it has the leaf.
    pub fn discover<R: CpuIdReader>(cpuid: &R) -> Option<PerfmonExt> {
        let max_leaf = cpuid.cpuid1(0).eax;
        if max_leaf < ARCH_PERFMON_EXT_LEAF
            || cpuid.cpuid2(7, 1).eax & LEAF_7_1_EAX_ARCH_PERFMON_EXT == 0
        {
            return None;
        }
        let main = cpuid.cpuid2(ARCH_PERFMON_EXT_LEAF, 0);
        let valid = |subleaf: u32| main.eax >> subleaf & 1 != 0;
        let counters =
            valid(COUNTERS_SUBLEAF).then(|| cpuid.cpuid2(ARCH_PERFMON_EXT_LEAF, COUNTERS_SUBLEAF));
        let arch_events = valid(ARCH_EVENTS_SUBLEAF)
            .then(|| cpuid.cpuid2(ARCH_PERFMON_EXT_LEAF, ARCH_EVENTS_SUBLEAF).eax);
        Some(PerfmonExt {
            umask2: main.ebx & 1 != 0,
            eq: main.ebx & 1 << 1 != 0,
            gp_counters: counters.map(|c| c.eax),
            fixed_counters: counters.map(|c| c.ebx),
            arch_events,
        })
    }
}
