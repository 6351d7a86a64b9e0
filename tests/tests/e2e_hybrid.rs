//! pmcstat on a simulated hybrid machine (`PMC_SIM_MODEL=alderlake`: CPU 0 a P-core, CPU 1 an
//! E-core): perf's `cpu_core/EVENT/` and `cpu_atom/EVENT/` count on one core type each, and
//! together exactly what the event counts on every CPU.
//!
//! `forker`: the parent and its child each run hot (900 blocks of 10 000 instructions and 1 000
//! branches), one on each CPU.

use hwpmc_tests::{Host, pmcstat_env};

#[test]
fn core_and_atom_counts_add_up_to_the_whole() {
    let run = pmcstat_env(
        Host::Sim,
        &[("PMC_SIM_MODEL", "alderlake")],
        &[
            "-d",
            "-p",
            "cpu_core/INST_RETIRED.ANY_P/",
            "-p",
            "cpu_atom/INST_RETIRED.ANY_P/",
            "-p",
            "instructions",
            "-p",
            "cpu_core/BR_INST_RETIRED.ALL_BRANCHES/",
            "-p",
            "cpu_atom/BR_INST_RETIRED.ALL_BRANCHES/",
            "forker",
        ],
    );
    run.assert_status(0);
    let values: Vec<u64> = run
        .stderr
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let [core, atom, all, core_br, atom_br] = values[..] else {
        panic!("five columns:\n{}", run.stderr)
    };
    assert_eq!(all, 18_000_000, "{}", run.stderr);
    assert_eq!(core + atom, all, "{}", run.stderr);
    assert!(core > 0 && atom > 0, "both core types ran a process:\n{}", run.stderr);
    assert_eq!(core_br + atom_br, 1_800_000, "{}", run.stderr);
    assert_eq!((core_br * 10, atom_br * 10), (core, atom), "one branch per 10 instructions");
}

#[test]
fn a_core_type_the_machine_lacks_is_refused() {
    let run = pmcstat_env(Host::Sim, &[], &["-p", "cpu_atom/INST_RETIRED.ANY_P/", "hot-cold"]);
    assert_ne!(run.status, 0, "a Skylake has no E-core:\n{}", run.stderr);
    assert!(run.stderr.contains("EINVAL"), "{}", run.stderr);
}
