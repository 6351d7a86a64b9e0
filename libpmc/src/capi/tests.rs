//! The C entry points called from Rust: NULL pointers, bad values and the name functions. None
//! of these reaches a host, so they run whatever host this process would use.

use std::ffi::{CStr, c_char, c_int};
use std::ptr;

use super::*;

/// The calling thread's `errno`.
fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The string behind a name function's result, or `None` for NULL.
fn text(name: *const c_char) -> Option<&'static str> {
    // SAFETY: the name functions return NULL or a NUL-terminated static string.
    (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_str().unwrap())
}

/// Asserts that `result` is -1 with `errno` EINVAL.
#[track_caller]
fn assert_einval(result: c_int) {
    assert_eq!((result, errno()), (-1, libc::EINVAL));
}

#[test]
fn null_pointers_fail_with_einval_before_any_work() {
    let id = 0xFFF3_0F00;
    // SAFETY: every pointer is NULL or a valid local; NULL is what is being tested.
    unsafe {
        let mut pmcid = 0;
        assert_einval(pmc_allocate(ptr::null(), 3, 0, -1, &mut pmcid, 0));
        assert_einval(pmc_allocate(c"instructions".as_ptr(), 3, 0, -1, ptr::null_mut(), 0));
        assert_einval(pmc_read(id, ptr::null_mut()));
        assert_einval(pmc_rw(id, 1, ptr::null_mut()));
        assert_einval(pmc_capabilities(id, ptr::null_mut()));
        assert_einval(pmc_width(id, ptr::null_mut()));
        assert_einval(pmc_get_msr(id, ptr::null_mut()));
        assert_einval(pmc_get_driver_stats(ptr::null_mut()));
        assert_einval(pmc_cpuinfo(ptr::null_mut()));
        assert_einval(pmc_pmcinfo(0, ptr::null_mut()));
        let mut n = 0;
        let mut names = ptr::null_mut();
        assert_einval(pmc_event_names_of_class(0, ptr::null_mut(), &mut n));
        assert_einval(pmc_event_names_of_class(0, &mut names, ptr::null_mut()));
        assert_eq!((pmc_spawn(ptr::null()), errno()), (-1, libc::EINVAL));
        let empty = [ptr::null::<c_char>()];
        assert_eq!((pmc_spawn(empty.as_ptr()), errno()), (-1, libc::EINVAL));
        assert_eq!(pmc_pmu_pmcallocate(ptr::null(), ptr::null_mut()), libc::EINVAL);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(pmc_pmu_sample_rate_get(ptr::null()), 65536);
        assert_eq!(
            (pmc_pmu_idx_get_by_event(ptr::null(), ptr::null()), errno()),
            (-1, libc::EINVAL)
        );
    }
}

#[test]
fn a_bad_mode_fails_with_einval_and_leaves_the_id_alone() {
    let mut pmcid = 7;
    // SAFETY: valid string and local.
    assert_einval(unsafe { pmc_allocate(c"instructions".as_ptr(), 4, 0, -1, &mut pmcid, 0) });
    assert_eq!(pmcid, 7);
    assert!(text(pmc_host_error()).unwrap().contains("mode 4"), "{:?}", text(pmc_host_error()));
}

#[test]
fn class_names_are_freebsds() {
    assert_eq!(text(pmc_name_of_class(0x00)), Some("TSC"));
    assert_eq!(text(pmc_name_of_class(0x06)), Some("IAF"));
    assert_eq!(text(pmc_name_of_class(0x07)), Some("IAP"));
    assert_eq!(text(pmc_name_of_class(0x0F)), Some("SOFT"));
    assert_eq!(pmc_name_of_class(0x01), ptr::null(), "K7 is retired");
    assert_eq!(errno(), libc::EINVAL);
    assert_eq!(pmc_name_of_class(999), ptr::null());
    assert_eq!(errno(), libc::EINVAL);
    // The same pointer each time: the names are static.
    assert_eq!(pmc_name_of_class(7), pmc_name_of_class(7));
}

#[test]
fn capability_names_need_exactly_one_bit() {
    assert_eq!(text(pmc_name_of_capability(0x1)), Some("INTERRUPT"));
    assert_eq!(text(pmc_name_of_capability(0x20)), Some("READ"));
    assert_eq!(text(pmc_name_of_capability(0x2000)), Some("DOMWIDE"));
    for bad in [0, 0x3, 0x4000, 0x8000_0000] {
        assert_eq!(pmc_name_of_capability(bad), ptr::null(), "{bad:#x}");
        assert_eq!(errno(), libc::EINVAL);
    }
}

#[test]
fn mode_state_disposition_and_cputype_names() {
    let modes: Vec<_> = (0..4).map(|m| text(pmc_name_of_mode(m)).unwrap()).collect();
    assert_eq!(modes, ["SS", "SC", "TS", "TC"]);
    assert_eq!(pmc_name_of_mode(4), ptr::null());
    assert_eq!(text(pmc_name_of_state(4)), Some("RUNNING"));
    assert_eq!(text(pmc_name_of_state(6)), Some("MAX"));
    assert_eq!(pmc_name_of_state(7), ptr::null());
    assert_eq!(text(pmc_name_of_disposition(2)), Some("THREAD"));
    assert_eq!(pmc_name_of_disposition(3), ptr::null(), "UNKNOWN is past PMC_DISP_LAST");
    assert_eq!(text(pmc_name_of_cputype(0x98)), Some("INTEL_SKYLAKE"));
    assert_eq!(text(pmc_name_of_cputype(0x400)), Some("GENERIC"));
    assert_eq!(pmc_name_of_cputype(0x02), ptr::null());
    assert_eq!(errno(), libc::EINVAL);
}

#[test]
fn static_event_names() {
    assert_eq!(text(pmc_name_of_event(0x1000)), Some("TSC"));
    assert_eq!(text(pmc_name_of_event(0x10000)), Some("INSTR_RETIRED_ANY"));
    assert_eq!(text(pmc_name_of_event(0x20CF)), Some("NB_HT_BUS2_BANDWIDTH"));
    assert_eq!(pmc_name_of_event(0x5), ptr::null());
    assert_eq!(errno(), libc::EINVAL);
}

#[test]
fn pmu_tables_map_names_and_indexes_both_ways() {
    let cpuid = c"GenuineIntel-6-55-4";
    // SAFETY: valid strings.
    unsafe {
        let index = pmc_pmu_idx_get_by_event(cpuid.as_ptr(), c"inst_retired.any".as_ptr());
        assert!(index >= 0);
        assert_eq!(text(pmc_pmu_event_get_by_idx(cpuid.as_ptr(), index)), Some("INST_RETIRED.ANY"));
        // FreeBSD's alias `instructions` is inst_retired.any_p, on a programmable counter.
        let instructions = pmc_pmu_idx_get_by_event(cpuid.as_ptr(), c"instructions".as_ptr());
        let name = text(pmc_pmu_event_get_by_idx(cpuid.as_ptr(), instructions)).unwrap();
        assert_eq!(name, "INST_RETIRED.ANY_P");
        // `unhalted-cycles` (cpu_clk_unhalted.thread_p_any) is counted without AnyThread, and
        // logs name that event.
        let cycles = pmc_pmu_idx_get_by_event(cpuid.as_ptr(), c"unhalted-cycles".as_ptr());
        let name = text(pmc_pmu_event_get_by_idx(cpuid.as_ptr(), cycles)).unwrap();
        assert_eq!(name, "CPU_CLK_UNHALTED.THREAD_P");
        let branches = pmc_pmu_idx_get_by_event(cpuid.as_ptr(), c"branches".as_ptr());
        let name = text(pmc_pmu_event_get_by_idx(cpuid.as_ptr(), branches)).unwrap();
        assert_eq!(name, "BR_INST_RETIRED.ALL_BRANCHES");
        assert_eq!(pmc_pmu_event_get_by_idx(cpuid.as_ptr(), -1), ptr::null());
        assert_eq!(pmc_pmu_event_get_by_idx(cpuid.as_ptr(), 1 << 30), ptr::null());
        assert_eq!(pmc_pmu_event_get_by_idx(c"AuthenticAMD-21-01".as_ptr(), 0), ptr::null());
        assert_eq!(errno(), libc::EINVAL);
        let unknown = pmc_pmu_idx_get_by_event(cpuid.as_ptr(), c"NO_SUCH.EVENT".as_ptr());
        assert_eq!((unknown, errno()), (-1, libc::ENOENT));
    }
}

#[test]
fn pmclog_symbols_are_part_of_this_library() {
    // SAFETY: a memory parser, closed at once.
    unsafe {
        let parser = pmclog_open(-1);
        assert!(!parser.is_null());
        pmclog_close(parser);
    }
}
