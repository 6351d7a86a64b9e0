//! FreeBSD's names for the numbers a log carries: `enum pmc_event` values (as
//! `pmc_name_of_event(3)` spells them) and `enum pmc_cputype` values (as `pmc_name_of_cputype(3)`).
//!
//! Only the static event blocks are here (TSC, IBS, K8, IAF, RAPL). SOFT event names travel in
//! the log itself (PMCALLOCATEDYN), and PMU-table events (`PMC_F_EV_PMU`) are indexes into a
//! libpmc build's table, which the [`crate::EventNames`] trait lets a caller resolve.

/// First value of the SOFT event block (`PMC_EV_SOFT_FIRST`).
pub const EVENT_SOFT_FIRST: u32 = 0x20000;
/// Last value of the SOFT event block (`PMC_EV_SOFT_LAST`).
pub const EVENT_SOFT_LAST: u32 = 0x20FFF;
/// `PMC_F_EV_PMU`: the event of a PMCALLOCATE record is a PMU table index.
pub const PMC_F_EV_PMU: u32 = 0x200;
/// The major version this crate writes and reads (`PMC_VERSION_MAJOR`).
pub const PMC_VERSION_MAJOR: u32 = 0x0A;

/// The first value of each static event block and its names, in order.
const EVENT_BLOCKS: &[(u32, &[&str])] = &[
    (0x1000, &["TSC"]),
    (0x2000, &["IBS_FETCH", "IBS_OP"]),
    (0x2080, K8_EVENTS),
    (0x10000, &["INSTR_RETIRED_ANY", "CPU_CLK_UNHALTED_CORE", "CPU_CLK_UNHALTED_REF"]),
    (0x14700, &["ENERGY_PKG", "ENERGY_CORES", "ENERGY_DRAM"]),
];

/// The AMD K8 block, `PMC_EV_K8_FP_DISPATCHED_FPU_OPS` (0x2080) to
/// `PMC_EV_K8_NB_HT_BUS2_BANDWIDTH` (0x20CF).
const K8_EVENTS: &[&str] = &[
    "FP_DISPATCHED_FPU_OPS",
    "FP_CYCLES_WITH_NO_FPU_OPS_RETIRED",
    "FP_DISPATCHED_FPU_FAST_FLAG_OPS",
    "LS_SEGMENT_REGISTER_LOAD",
    "LS_MICROARCHITECTURAL_RESYNC_BY_SELF_MODIFYING_CODE",
    "LS_MICROARCHITECTURAL_RESYNC_BY_SNOOP",
    "LS_BUFFER2_FULL",
    "LS_LOCKED_OPERATION",
    "LS_MICROARCHITECTURAL_LATE_CANCEL",
    "LS_RETIRED_CFLUSH_INSTRUCTIONS",
    "LS_RETIRED_CPUID_INSTRUCTIONS",
    "DC_ACCESS",
    "DC_MISS",
    "DC_REFILL_FROM_L2",
    "DC_REFILL_FROM_SYSTEM",
    "DC_COPYBACK",
    "DC_L1_DTLB_MISS_AND_L2_DTLB_HIT",
    "DC_L1_DTLB_MISS_AND_L2_DTLB_MISS",
    "DC_MISALIGNED_DATA_REFERENCE",
    "DC_MICROARCHITECTURAL_LATE_CANCEL",
    "DC_MICROARCHITECTURAL_EARLY_CANCEL",
    "DC_ONE_BIT_ECC_ERROR",
    "DC_DISPATCHED_PREFETCH_INSTRUCTIONS",
    "DC_DCACHE_ACCESSES_BY_LOCKS",
    "BU_CPU_CLK_UNHALTED",
    "BU_INTERNAL_L2_REQUEST",
    "BU_FILL_REQUEST_L2_MISS",
    "BU_FILL_INTO_L2",
    "IC_FETCH",
    "IC_MISS",
    "IC_REFILL_FROM_L2",
    "IC_REFILL_FROM_SYSTEM",
    "IC_L1_ITLB_MISS_AND_L2_ITLB_HIT",
    "IC_L1_ITLB_MISS_AND_L2_ITLB_MISS",
    "IC_MICROARCHITECTURAL_RESYNC_BY_SNOOP",
    "IC_INSTRUCTION_FETCH_STALL",
    "IC_RETURN_STACK_HIT",
    "IC_RETURN_STACK_OVERFLOW",
    "FR_RETIRED_X86_INSTRUCTIONS",
    "FR_RETIRED_UOPS",
    "FR_RETIRED_BRANCHES",
    "FR_RETIRED_BRANCHES_MISPREDICTED",
    "FR_RETIRED_TAKEN_BRANCHES",
    "FR_RETIRED_TAKEN_BRANCHES_MISPREDICTED",
    "FR_RETIRED_FAR_CONTROL_TRANSFERS",
    "FR_RETIRED_RESYNCS",
    "FR_RETIRED_NEAR_RETURNS",
    "FR_RETIRED_NEAR_RETURNS_MISPREDICTED",
    "FR_RETIRED_TAKEN_BRANCHES_MISPREDICTED_BY_ADDR_MISCOMPARE",
    "FR_RETIRED_FPU_INSTRUCTIONS",
    "FR_RETIRED_FASTPATH_DOUBLE_OP_INSTRUCTIONS",
    "FR_INTERRUPTS_MASKED_CYCLES",
    "FR_INTERRUPTS_MASKED_WHILE_PENDING_CYCLES",
    "FR_TAKEN_HARDWARE_INTERRUPTS",
    "FR_DECODER_EMPTY",
    "FR_DISPATCH_STALLS",
    "FR_DISPATCH_STALL_FROM_BRANCH_ABORT_TO_RETIRE",
    "FR_DISPATCH_STALL_FOR_SERIALIZATION",
    "FR_DISPATCH_STALL_FOR_SEGMENT_LOAD",
    "FR_DISPATCH_STALL_WHEN_REORDER_BUFFER_IS_FULL",
    "FR_DISPATCH_STALL_WHEN_RESERVATION_STATIONS_ARE_FULL",
    "FR_DISPATCH_STALL_WHEN_FPU_IS_FULL",
    "FR_DISPATCH_STALL_WHEN_LS_IS_FULL",
    "FR_DISPATCH_STALL_WHEN_WAITING_FOR_ALL_TO_BE_QUIET",
    "FR_DISPATCH_STALL_WHEN_FAR_XFER_OR_RESYNC_BRANCH_PENDING",
    "FR_FPU_EXCEPTIONS",
    "FR_NUMBER_OF_BREAKPOINTS_FOR_DR0",
    "FR_NUMBER_OF_BREAKPOINTS_FOR_DR1",
    "FR_NUMBER_OF_BREAKPOINTS_FOR_DR2",
    "FR_NUMBER_OF_BREAKPOINTS_FOR_DR3",
    "NB_MEMORY_CONTROLLER_PAGE_ACCESS_EVENT",
    "NB_MEMORY_CONTROLLER_PAGE_TABLE_OVERFLOW",
    "NB_MEMORY_CONTROLLER_DRAM_COMMAND_SLOTS_MISSED",
    "NB_MEMORY_CONTROLLER_TURNAROUND",
    "NB_MEMORY_CONTROLLER_BYPASS_SATURATION",
    "NB_SIZED_COMMANDS",
    "NB_PROBE_RESULT",
    "NB_HT_BUS0_BANDWIDTH",
    "NB_HT_BUS1_BANDWIDTH",
    "NB_HT_BUS2_BANDWIDTH",
];

/// FreeBSD's name of a static event (`pmc_name_of_event`), e.g. `INSTR_RETIRED_ANY` for 0x10000.
pub fn event_name(event: u32) -> Option<&'static str> {
    EVENT_BLOCKS.iter().find_map(|&(first, names)| {
        let index = event.checked_sub(first)?;
        names.get(usize::try_from(index).ok()?).copied()
    })
}

/// The static event called `name` (exact spelling, as [`event_name`] returns it).
pub fn event_code(name: &str) -> Option<u32> {
    EVENT_BLOCKS.iter().find_map(|&(first, names)| {
        let index = names.iter().position(|&n| n == name)?;
        Some(first + index as u32)
    })
}

/// `enum pmc_cputype` values and their names.
const CPU_TYPES: &[(u32, &str)] = &[
    (0x01, "AMD_K8"),
    (0x87, "INTEL_CORE"),
    (0x88, "INTEL_CORE2"),
    (0x89, "INTEL_CORE2EXTREME"),
    (0x8A, "INTEL_ATOM"),
    (0x8B, "INTEL_COREI7"),
    (0x8C, "INTEL_WESTMERE"),
    (0x8D, "INTEL_SANDYBRIDGE"),
    (0x8E, "INTEL_IVYBRIDGE"),
    (0x8F, "INTEL_SANDYBRIDGE_XEON"),
    (0x90, "INTEL_IVYBRIDGE_XEON"),
    (0x91, "INTEL_HASWELL"),
    (0x92, "INTEL_ATOM_SILVERMONT"),
    (0x93, "INTEL_NEHALEM_EX"),
    (0x94, "INTEL_WESTMERE_EX"),
    (0x95, "INTEL_HASWELL_XEON"),
    (0x96, "INTEL_BROADWELL"),
    (0x97, "INTEL_BROADWELL_XEON"),
    (0x98, "INTEL_SKYLAKE"),
    (0x99, "INTEL_SKYLAKE_XEON"),
    (0x9A, "INTEL_ATOM_GOLDMONT"),
    (0x9B, "INTEL_ICELAKE"),
    (0x9C, "INTEL_ICELAKE_XEON"),
    (0x9D, "INTEL_ALDERLAKE"),
    (0x9E, "INTEL_ATOM_GOLDMONT_P"),
    (0x9F, "INTEL_ATOM_TREMONT"),
    (0xA0, "INTEL_EMERALD_RAPIDS"),
    (0xA1, "INTEL_ALDERLAKEN"),
    (0xA2, "INTEL_GRANITE_RAPIDS"),
    (0xA3, "INTEL_METEOR_LAKE"),
    (0xA4, "INTEL_SAPPHIRE_RAPIDS"),
    (0x300, "PPC_7450"),
    (0x340, "PPC_E500"),
    (0x380, "PPC_970"),
    (0x390, "PPC_POWER8"),
    (0x400, "GENERIC"),
    (0x500, "ARMV7_CORTEX_A5"),
    (0x501, "ARMV7_CORTEX_A7"),
    (0x502, "ARMV7_CORTEX_A8"),
    (0x503, "ARMV7_CORTEX_A9"),
    (0x504, "ARMV7_CORTEX_A15"),
    (0x505, "ARMV7_CORTEX_A17"),
    (0x600, "ARMV8_CORTEX_A53"),
    (0x601, "ARMV8_CORTEX_A57"),
    (0x602, "ARMV8_CORTEX_A76"),
];

/// FreeBSD's name of a CPU type (`pmc_name_of_cputype`), e.g. `INTEL_SKYLAKE` for 0x98.
pub fn cpu_type_name(cpu_type: u32) -> Option<&'static str> {
    CPU_TYPES.iter().find(|&&(code, _)| code == cpu_type).map(|&(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k8_block_ends_at_nb_ht_bus2_bandwidth() {
        assert_eq!(K8_EVENTS.len(), 80);
        assert_eq!(event_name(0x2080), Some("FP_DISPATCHED_FPU_OPS"));
        assert_eq!(event_name(0x20CF), Some("NB_HT_BUS2_BANDWIDTH"));
        assert_eq!(event_name(0x20D0), None);
    }

    #[test]
    fn static_events_round_trip_by_name() {
        for &(first, names) in EVENT_BLOCKS {
            for (i, name) in names.iter().enumerate() {
                let code = first + i as u32;
                assert_eq!(event_name(code), Some(*name));
                assert_eq!(event_code(name), Some(code));
            }
        }
        assert_eq!(event_name(0x1000), Some("TSC"));
        assert_eq!(event_name(0x10001), Some("CPU_CLK_UNHALTED_CORE"));
        assert_eq!(event_name(EVENT_SOFT_FIRST), None);
        assert_eq!(event_name(0), None);
        assert_eq!(event_name(u32::MAX), None);
    }

    #[test]
    fn cpu_types_have_freebsd_names() {
        assert_eq!(cpu_type_name(0x98), Some("INTEL_SKYLAKE"));
        assert_eq!(cpu_type_name(0x01), Some("AMD_K8"));
        assert_eq!(cpu_type_name(0x400), Some("GENERIC"));
        assert_eq!(cpu_type_name(0x02), None);
    }
}
