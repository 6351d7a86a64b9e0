//! pmcstat on a simulated hybrid machine (`PMC_SIM_MODEL=alderlake`: CPU 0 a P-core, CPU 1 an
//! E-core): perf's `cpu_core/EVENT/` and `cpu_atom/EVENT/` count on one core type each, and
//! together exactly what the event counts on every CPU.
//!
//! `forker`: the parent and its child each run hot (900 blocks of 10 000 instructions and 1 000
//! branches), one on each CPU.

use hwpmc_tests::{Host, Run, pmcstat_env};

#[test]
fn core_and_atom_counts_add_up_to_the_whole() {
    let (run, values) = count_forker_on_alder_lake(&[
        "cpu_core/INST_RETIRED.ANY_P/",
        "cpu_atom/INST_RETIRED.ANY_P/",
        "instructions",
        "cpu_core/BR_INST_RETIRED.ALL_BRANCHES/",
        "cpu_atom/BR_INST_RETIRED.ALL_BRANCHES/",
    ]);
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

/// BACLEARS.ANY is 0x60/0x01 on Alder Lake's P-cores and 0xE6/0x01 on its E-cores; every block
/// of the simulated programs retires 7 of the former and 4 of the latter. Without a core type,
/// one PMC loads each core type's encoding where the process runs: 7 per block on the P-core
/// plus 4 per block on the E-core, exactly what `cpu_core/` and `cpu_atom/` count together.
#[test]
fn an_event_both_core_types_encode_differently_counts_with_each_ones_encoding() {
    let (run, values) = count_forker_on_alder_lake(&[
        "cpu_core/INST_RETIRED.ANY_P/",
        "cpu_atom/INST_RETIRED.ANY_P/",
        "BACLEARS.ANY",
        "cpu_core/BACLEARS.ANY/",
        "cpu_atom/BACLEARS.ANY/",
    ]);
    let [core, atom, both, core_only, atom_only] = values[..] else {
        panic!("five columns:\n{}", run.stderr)
    };
    let (core_blocks, atom_blocks) = (core / 10_000, atom / 10_000);
    assert!(core_blocks > 0 && atom_blocks > 0, "both core types ran:\n{}", run.stderr);
    assert_eq!(both, core_blocks * 7 + atom_blocks * 4, "{}", run.stderr);
    assert_eq!(both, core_only + atom_only, "{}", run.stderr);
}

/// An event of one core type's table only is refused without that core type, naming it and the
/// prefix that counts it there.
#[test]
fn an_event_of_one_core_type_needs_its_prefix() {
    for (event, cores, prefix) in [
        ("MEM_SCHEDULER_BLOCK.ALL", "E-cores only", "cpu_atom/MEM_SCHEDULER_BLOCK.ALL/"),
        ("LD_BLOCKS.STORE_FORWARD", "P-cores only", "cpu_core/LD_BLOCKS.STORE_FORWARD/"),
    ] {
        let env = [("PMC_SIM_MODEL", "alderlake")];
        let run = pmcstat_env(Host::Sim, &env, &["-p", event, "forker"]);
        assert_ne!(run.status, 0, "{event}:\n{}", run.stderr);
        assert!(run.stderr.contains("EINVAL"), "{}", run.stderr);
        assert!(run.stderr.contains(cores) && run.stderr.contains(prefix), "{}", run.stderr);
        let run = pmcstat_env(Host::Sim, &env, &["-p", prefix, "forker"]);
        run.assert_status(0);
    }
}

/// `pmcstat -u` shows both core types' encodings of an event they encode differently.
#[test]
fn describing_an_event_shows_each_core_types_encoding() {
    let run = pmcstat_env(Host::Sim, &[("PMC_SIM_MODEL", "alderlake")], &["-u", "BACLEARS.ANY"]);
    run.assert_status(0);
    assert!(run.stdout.contains("P-cores:        0x00030160 (cpu_core"), "{}", run.stdout);
    assert!(run.stdout.contains("E-cores:        0x000301e6 (cpu_atom"), "{}", run.stdout);
    let run =
        pmcstat_env(Host::Sim, &[("PMC_SIM_MODEL", "alderlake")], &["-u", "INST_RETIRED.ANY_P"]);
    run.assert_status(0);
    assert!(!run.stdout.contains("E-cores:"), "one encoding:\n{}", run.stdout);
}

/// `pmcstat -L` says which CPUs have which counters when they differ: the P-core's 8 GP and 4
/// fixed counters, the E-core's 6 and 3; nothing on a machine whose CPUs are alike.
#[test]
fn the_listing_names_each_core_types_counters() {
    let run = pmcstat_env(Host::Sim, &[("PMC_SIM_MODEL", "alderlake")], &["-L"]);
    run.assert_status(0);
    let line = "# counters: CPU 0: IAP 8, IAF 4; CPU 1: IAP 6, IAF 3\n";
    assert!(run.stdout.ends_with(line), "{}", &run.stdout[run.stdout.len().saturating_sub(300)..]);
    let run = pmcstat_env(Host::Sim, &[], &["-L"]);
    run.assert_status(0);
    assert!(!run.stdout.contains("# counters:"), "a Skylake's CPUs are alike");
}

/// A simulated Alder Lake of one CPU has its P-core only: not a hybrid machine, so an event is
/// looked up and encoded as on any CPU (BACLEARS.ANY with the P-cores' encoding, 7 a block;
/// an E-core event is not refused for lacking a P-core encoding).
#[test]
fn a_machine_of_one_core_type_encodes_events_once() {
    let env = [("PMC_SIM_MODEL", "alderlake"), ("PMC_SIM_CPUS", "1")];
    let run = pmcstat_env(Host::Sim, &env, &["-d", "-p", "BACLEARS.ANY", "forker"]);
    run.assert_status(0);
    let value = run.stderr.lines().nth(1).unwrap_or_default().trim().to_string();
    assert_eq!(value, "12600", "1 800 blocks:\n{}", run.stderr);
    let run = pmcstat_env(Host::Sim, &env, &["-p", "MEM_SCHEDULER_BLOCK.ALL", "forker"]);
    run.assert_status(0);
}

/// `pmcstat -d -p EVENT… forker` on the simulated Alder Lake: the run, and the counts of its
/// final line (FreeBSD's layout: a header line, then one column per PMC).
fn count_forker_on_alder_lake(events: &[&str]) -> (Run, Vec<u64>) {
    let mut args = vec!["-d"];
    for event in events {
        args.extend(["-p", event]);
    }
    args.push("forker");
    let run = pmcstat_env(Host::Sim, &[("PMC_SIM_MODEL", "alderlake")], &args);
    run.assert_status(0);
    let line = run.stderr.lines().nth(1).unwrap_or_default();
    let counts = line.split_whitespace().map(|v| v.parse().unwrap()).collect();
    (run, counts)
}
