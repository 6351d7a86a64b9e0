//! The generic (`PAPI_*`) events of each backend, as (generic name, libpmc spec) in list
//! order: what `cpc_walk_generic_events_*` list and what a request naming one counts.
//!
//! Intel: the architectural events (CPUID leaf 0xA), which every Intel PMU has.
//!
//! AMD: illumos's tables for family 10h and Zen (`opteron_pcbe`, as the reference describes
//! them), with event codes and unit masks from AMD's data (Linux perf's `amdzen2` and
//! `amdzen4` JSON for Zen, illumos's table for family 10h, which that data does not cover).
//! Where illumos has no generic event that Linux perf's generic hardware events for AMD
//! (`arch/x86/events/amd/core.c`: branch-misses, cache-references, cache-misses) count, the
//! generic is perf's: `PAPI_br_msp` on Zen, `PAPI_l2_tca` and `PAPI_l2_tcm` on Zen and 10h
//! (on Zen these are perf's 0xff60 and 0x0964, on 10h 0x077d and 0x077e). Each entry says
//! which source it follows.

/// A generic event: its `PAPI_*` name and the libpmc spec that counts it.
pub type Generic = (&'static str, &'static str);

/// The generic events of Intel's general-purpose counters.
pub const INTEL_GP: &[Generic] = &[
    ("PAPI_tot_cyc", "event=0x3c,umask=0x00"),
    ("PAPI_tot_ins", "event=0xc0,umask=0x00"),
    ("PAPI_br_ins", "event=0xc4,umask=0x00"),
    ("PAPI_br_msp", "event=0xc5,umask=0x00"),
    ("PAPI_l3_tca", "event=0x2e,umask=0x4f"),
    ("PAPI_l3_tcm", "event=0x2e,umask=0x41"),
];

/// The generic events of Intel's fixed counters 0, 1 and 2.
pub const INTEL_FIXED: [&[Generic]; 3] =
    [&[("PAPI_tot_ins", "INSTR_RETIRED.ANY")], &[("PAPI_tot_cyc", "CPU_CLK_UNHALTED.THREAD")], &[]];

/// Family 17h (Zen 1, Zen 2): illumos's Zen table without `PAPI_fpu_idl` (illumos has it on
/// Zen 1 only), plus Linux perf's.
pub const AMD_FAMILY_17H: &[Generic] = &[
    // illumos: LsNotHaltedCyc, ExRetInstr, ExRetBrn, ExRetCond (JSON: ls_not_halted_cyc,
    // ex_ret_instr, ex_ret_brn, ex_ret_cond).
    ("PAPI_tot_cyc", "event=0x76,umask=0x00"),
    ("PAPI_tot_ins", "event=0xc0,umask=0x00"),
    ("PAPI_br_ins", "event=0xc2,umask=0x00"),
    ("PAPI_br_cn", "event=0xd1,umask=0x00"),
    // illumos: LsL1DTlbMiss, BpL1TlbMissL2Miss (JSON: ls_l1_d_tlb_miss.all,
    // bp_l1_tlb_miss_l2_tlb_miss).
    ("PAPI_tlb_dm", "event=0x45,umask=0xff"),
    ("PAPI_tlb_im", "event=0x85,umask=0xff"),
    // Linux perf: branch-misses (JSON: ex_ret_brn_misp), cache-references (0xff60: L2
    // requests, all), cache-misses (0x0964: l2_cache_req_stat, IC and DC misses in L2).
    ("PAPI_br_msp", "event=0xc3,umask=0x00"),
    ("PAPI_l2_tca", "event=0x60,umask=0xff"),
    ("PAPI_l2_tcm", "event=0x64,umask=0x09"),
];

/// Family 19h (Zen 3, Zen 4): family 17h's, with illumos's `BpL1TlbMissL2TlbMiss`
/// for `PAPI_tlb_im` (JSON: bp_l1_tlb_miss_l2_tlb_miss.all, unit mask 0x0f).
pub const AMD_FAMILY_19H: &[Generic] = &[
    ("PAPI_tot_cyc", "event=0x76,umask=0x00"),
    ("PAPI_tot_ins", "event=0xc0,umask=0x00"),
    ("PAPI_br_ins", "event=0xc2,umask=0x00"),
    ("PAPI_br_cn", "event=0xd1,umask=0x00"),
    ("PAPI_tlb_dm", "event=0x45,umask=0xff"),
    ("PAPI_tlb_im", "event=0x85,umask=0x0f"),
    ("PAPI_br_msp", "event=0xc3,umask=0x00"),
    ("PAPI_l2_tca", "event=0x60,umask=0xff"),
    ("PAPI_l2_tcm", "event=0x64,umask=0x09"),
];

/// Family 10h: illumos's table (its 0Fh/11h rows, the 10h unit masks of the TLB events, and
/// the 10h L3 rows), plus Linux perf's L2 requests and misses.
pub const AMD_FAMILY_10H: &[Generic] = &[
    ("PAPI_tot_cyc", "event=0x76,umask=0x00"),
    ("PAPI_tot_ins", "event=0xc0,umask=0x00"),
    ("PAPI_br_ins", "event=0xc2,umask=0x00"),
    ("PAPI_br_msp", "event=0xc3,umask=0x00"),
    ("PAPI_br_tkn", "event=0xc4,umask=0x00"),
    ("PAPI_hw_int", "event=0xcf,umask=0x00"),
    ("PAPI_fp_ops", "event=0x00,umask=0x03"),
    ("PAPI_fad_ins", "event=0x00,umask=0x01"),
    ("PAPI_fml_ins", "event=0x00,umask=0x02"),
    ("PAPI_fpu_idl", "event=0x01,umask=0x00"),
    ("PAPI_l1_dca", "event=0x40,umask=0x00"),
    ("PAPI_l1_dcm", "event=0x41,umask=0x00"),
    ("PAPI_l1_ldm", "event=0x42,umask=0x0e"),
    ("PAPI_l1_stm", "event=0x42,umask=0x10"),
    ("PAPI_l1_ica", "event=0x80,umask=0x00"),
    ("PAPI_l1_icr", "event=0x80,umask=0x00"),
    ("PAPI_l1_icm", "event=0x81,umask=0x00"),
    ("PAPI_l2_dch", "event=0x42,umask=0x1e"),
    ("PAPI_l2_dcm", "event=0x43,umask=0x1e"),
    ("PAPI_l2_dcr", "event=0x42,umask=0x0e"),
    ("PAPI_l2_dcw", "event=0x42,umask=0x10"),
    ("PAPI_l2_ich", "event=0x82,umask=0x00"),
    ("PAPI_l2_icm", "event=0x83,umask=0x00"),
    ("PAPI_l2_ldm", "event=0x43,umask=0x0e"),
    ("PAPI_l2_stm", "event=0x43,umask=0x10"),
    ("PAPI_l3_dcr", "event=0x4e0,umask=0xf1"),
    ("PAPI_l3_icr", "event=0x4e0,umask=0xf2"),
    ("PAPI_l3_tcr", "event=0x4e0,umask=0xf7"),
    ("PAPI_l3_ldm", "event=0x4e1,umask=0xf3"),
    ("PAPI_l3_stm", "event=0x4e1,umask=0xf4"),
    ("PAPI_l3_tcm", "event=0x4e1,umask=0xf7"),
    ("PAPI_tlb_dm", "event=0x46,umask=0x07"),
    ("PAPI_tlb_im", "event=0x85,umask=0x03"),
    ("PAPI_res_stl", "event=0xd1,umask=0x00"),
    ("PAPI_stl_icy", "event=0xd0,umask=0x00"),
    // Linux perf: cache-references 0x077d, cache-misses 0x077e (L2 requests and misses).
    ("PAPI_l2_tca", "event=0x7d,umask=0x07"),
    ("PAPI_l2_tcm", "event=0x7e,umask=0x07"),
];

/// The generic events of an AMD CPU of `family`: families 10h, 17h and 19h; none for the
/// others (0Fh, 11h–16h, 1Ah and later are not mapped).
pub fn amd(family: u32) -> &'static [Generic] {
    match family {
        0x10 => AMD_FAMILY_10H,
        0x17 => AMD_FAMILY_17H,
        0x19 => AMD_FAMILY_19H,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amd_tables_by_family() {
        assert_eq!(amd(0x10), AMD_FAMILY_10H);
        assert_eq!(amd(0x17), AMD_FAMILY_17H);
        assert_eq!(amd(0x19), AMD_FAMILY_19H);
        assert!(amd(0x1a).is_empty());
        assert!(amd(0x0f).is_empty());
        assert!(amd(0x15).is_empty());
    }

    #[test]
    fn every_generic_is_named_once_per_table() {
        for table in [INTEL_GP, AMD_FAMILY_10H, AMD_FAMILY_17H, AMD_FAMILY_19H] {
            let mut names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            names.sort_unstable();
            let len = names.len();
            names.dedup();
            assert_eq!(names.len(), len, "a generic twice in {table:?}");
            assert!(table.iter().all(|(n, _)| n.starts_with("PAPI_")));
        }
    }
}
