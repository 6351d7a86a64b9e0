//! FreeBSD's PMU event aliases (`pmu_alias_get` in libpmc's `libpmc_pmu_util.c`): on a CPU
//! with an event table, these names stand for a table event, matched case-insensitively as
//! FreeBSD's `strcasecmp` does (no separator folding). When the model's table lacks the target,
//! FreeBSD's lookup falls back to its static aliases, as the catalog does.

use super::model::Vendor;

/// The Intel table: alias, target event.
pub(super) const INTEL: &[(&str, &str)] = &[
    ("UNHALTED_CORE_CYCLES", "cpu_clk_unhalted.thread_p_any"),
    ("UNHALTED-CORE-CYCLES", "cpu_clk_unhalted.thread_p_any"),
    ("LLC_MISSES", "LONGEST_LAT_CACHE.MISS"),
    ("LLC-MISSES", "LONGEST_LAT_CACHE.MISS"),
    ("LLC_REFERENCE", "LONGEST_LAT_CACHE.REFERENCE"),
    ("LLC-REFERENCE", "LONGEST_LAT_CACHE.REFERENCE"),
    ("LLC_MISS_RHITM", "mem_load_l3_miss_retired.remote_hitm"),
    ("LLC-MISS-RHITM", "mem_load_l3_miss_retired.remote_hitm"),
    ("RESOURCE_STALL", "RESOURCE_STALLS.ANY"),
    ("RESOURCE_STALLS_ANY", "RESOURCE_STALLS.ANY"),
    ("BRANCH_INSTRUCTION_RETIRED", "BR_INST_RETIRED.ALL_BRANCHES"),
    ("BRANCH-INSTRUCTION-RETIRED", "BR_INST_RETIRED.ALL_BRANCHES"),
    ("BRANCH_MISSES_RETIRED", "BR_MISP_RETIRED.ALL_BRANCHES"),
    ("BRANCH-MISSES-RETIRED", "BR_MISP_RETIRED.ALL_BRANCHES"),
    ("unhalted-cycles", "cpu_clk_unhalted.thread_p_any"),
    ("instructions", "inst_retired.any_p"),
    ("branch-mispredicts", "br_misp_retired.all_branches"),
    ("branches", "br_inst_retired.all_branches"),
    ("interrupts", "hw_interrupts.received"),
    ("ic-misses", "frontend_retired.l1i_miss"),
];

/// The AMD table: alias, target event (Linux perf's names).
pub(super) const AMD: &[(&str, &str)] = &[
    ("UNHALTED_CORE_CYCLES", "ls_not_halted_cyc"),
    ("UNHALTED-CORE-CYCLES", "ls_not_halted_cyc"),
    ("LLC_MISSES", "l3_comb_clstr_state.request_miss"),
    ("LLC-MISSES", "l3_comb_clstr_state.request_miss"),
    ("LLC_REFERENCE", "l3_request_g1.caching_l3_cache_accesses"),
    ("LLC-REFERENCE", "l3_request_g1.caching_l3_cache_accesses"),
    ("BRANCH_INSTRUCTION_RETIRED", "ex_ret_brn"),
    ("BRANCH-INSTRUCTION-RETIRED", "ex_ret_brn"),
    ("BRANCH_MISSES_RETIRED", "ex_ret_brn_misp"),
    ("BRANCH-MISSES-RETIRED", "ex_ret_brn_misp"),
    ("unhalted-cycles", "ls_not_halted_cyc"),
    ("instructions", "ex_ret_instr"),
    ("branch-mispredicts", "ex_ret_brn_misp"),
    ("branches", "ex_ret_brn"),
    ("interrupts", "ls_int_taken"),
];

/// The table of `vendor`.
pub(super) const fn table(vendor: Vendor) -> &'static [(&'static str, &'static str)] {
    match vendor {
        Vendor::Intel => INTEL,
        Vendor::Amd => AMD,
    }
}

/// The event FreeBSD's alias `name` stands for on a `vendor` CPU.
pub(super) fn target(vendor: Vendor, name: &str) -> Option<&'static str> {
    table(vendor).iter().find(|(alias, _)| alias.eq_ignore_ascii_case(name)).map(|&(_, t)| t)
}
