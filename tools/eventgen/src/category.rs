//! A short category for Intel events (Intel's files have none), from the event name's prefix.

/// Name prefixes and their category; the first match wins.
const PREFIXES: &[(&str, &str)] = &[
    ("BR_", "branch"),
    ("BACLEAR", "branch"),
    ("BTCLEAR", "branch"),
    ("DTLB", "tlb"),
    ("ITLB", "tlb"),
    ("STLB", "tlb"),
    ("PAGE_WALK", "tlb"),
    ("EPT", "tlb"),
    ("TLB", "tlb"),
    ("FP_", "floating-point"),
    ("ARITH", "floating-point"),
    ("SIMD", "floating-point"),
    ("X87", "floating-point"),
    ("AVX", "floating-point"),
    ("SSE", "floating-point"),
    ("IDQ", "frontend"),
    ("FRONTEND", "frontend"),
    ("DSB", "frontend"),
    ("DECODE", "frontend"),
    ("ILD", "frontend"),
    ("LSD", "frontend"),
    ("ICACHE", "frontend"),
    ("FETCH", "frontend"),
    ("L1D", "cache"),
    ("L1I", "cache"),
    ("L2", "cache"),
    ("LLC", "cache"),
    ("LONGEST_LAT_CACHE", "cache"),
    ("OFFCORE_REQUESTS", "cache"),
    ("SQ_", "cache"),
    ("CORE_SNOOP", "cache"),
    ("MEM_LOAD", "cache"),
    ("OCR", "memory"),
    ("OFFCORE_RESPONSE", "memory"),
    ("MEM", "memory"),
    ("LD_", "memory"),
    ("LOAD", "memory"),
    ("STORE", "memory"),
    ("SB_", "memory"),
    ("MISALIGN", "memory"),
    ("HW_INTERRUPTS", "interrupts"),
];

/// The category of Intel event `name`: `pipeline` unless a prefix says otherwise.
pub(crate) fn intel(name: &str) -> &'static str {
    PREFIXES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map_or("pipeline", |&(_, category)| category)
}

#[cfg(test)]
mod tests {
    use super::intel;

    #[test]
    fn prefixes_give_categories_and_the_rest_is_pipeline() {
        assert_eq!(intel("BR_MISP_RETIRED.ALL_BRANCHES"), "branch");
        assert_eq!(intel("L2_RQSTS.MISS"), "cache");
        assert_eq!(intel("MEM_LOAD_RETIRED.L3_MISS"), "cache");
        assert_eq!(intel("OCR.DEMAND_DATA_RD.ANY_RESPONSE"), "memory");
        assert_eq!(intel("DTLB_LOAD_MISSES.WALK_ACTIVE"), "tlb");
        assert_eq!(intel("FP_ARITH_INST_RETIRED.SCALAR_DOUBLE"), "floating-point");
        assert_eq!(intel("IDQ.DSB_UOPS"), "frontend");
        assert_eq!(intel("UOPS_RETIRED.SLOTS"), "pipeline");
    }
}
