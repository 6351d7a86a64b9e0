//! pmcstat end to end on the simulated AMD machines (`PMC_HOST=sim PMC_SIM_MODEL=zen4`, `zen2`,
//! `k10`): the same exact counts and samples of the built-in programs as on the simulated Intel
//! CPUs (see `e2e_sim.rs` for the programs), through the K8 class: FreeBSD's AMD aliases, Linux
//! perf's AMD event names, raw `event=` specs with 12-bit event selects, `-u` with the PERF_CTL
//! image, and `-L`.

use hwpmc_tests::{
    Host, Run, allocations, arg, counting_output, parse_callgraph, pmcstat_env, samples_per_pmc,
};

fn on(model: &str, args: &[&str]) -> Run {
    pmcstat_env(Host::Sim, &[("PMC_SIM_MODEL", model)], args)
}

#[test]
fn freebsd_s_amd_aliases_count_hot_cold_exactly_on_every_amd_model() {
    // Zen 4 and Zen 2 resolve the aliases through their event tables (FreeBSD's AMD alias
    // table); family 10h has none, and its static aliases count the same AMD events.
    for model in ["zen4", "zen2", "k10"] {
        let args = ["-p", "instructions", "-p", "unhalted-cycles", "-p", "branches"];
        let run = on(model, &[&args[..], &["-p", "branch-mispredicts", "hot-cold"]].concat());
        run.assert_status(0);
        let expected = counting_output(&[
            ("instructions", 10_000_000),
            ("unhalted-cycles", 12_500_000),
            ("branches", 1_000_000),
            ("branch-mispredicts", 10_000),
        ]);
        assert_eq!(run.stderr, expected, "{model}");
    }
}

#[test]
fn amd_event_names_raw_specs_and_ring_qualifiers_are_exact() {
    let run = on(
        "zen4",
        &[
            "-p",
            "ex_ret_instr",
            "-p",
            "ls_not_halted_cyc,usr",
            "-p",
            "event=0xc0,umask=0x0,os",
            "-p",
            "event=0xc2",
            "hot-cold",
        ],
    );
    run.assert_status(0);
    assert_eq!(
        run.stderr,
        counting_output(&[
            ("ex_ret_instr", 10_000_000),
            ("ls_not_halted_cyc,usr", 12_500_000),
            // Every block runs in user mode.
            ("event=0xc0,umask=0x0,os", 0),
            ("event=0xc2", 1_000_000),
        ])
    );
}

#[test]
fn descendants_of_forker_and_both_threads_are_counted_on_zen4() {
    let run = on("zen4", &["-p", "instructions", "-d", "-p", "ex_ret_instr", "forker"]);
    run.assert_status(0);
    assert_eq!(
        run.stderr,
        counting_output(&[("instructions", 9_000_000), ("ex_ret_instr", 18_000_000)])
    );
    // threads: each thread runs hot (up to 900 blocks); whatever the worker ran before main's
    // exit ended the process is counted, and a sampling run sees the same instructions.
    let run = on("zen4", &["-p", "instructions", "threads"]);
    run.assert_status(0);
    let counted: u64 = run.stderr.lines().nth(1).unwrap().trim().parse().unwrap();
    assert!(counted >= 9_000_000 && counted % 10_000 == 0, "{counted}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("threads.log");
    let run = on("zen4", &["-n", "10000", "-P", "instructions", "-O", arg(&log), "threads"]);
    run.assert_status(0);
    let bytes = std::fs::read(&log).unwrap();
    let samples: u64 = samples_per_pmc(&bytes).values().sum();
    assert_eq!(samples, counted / 10_000, "one sample per 10 000 instructions counted");
}

#[test]
fn sampling_hot_cold_on_zen4_gives_exactly_100_samples_90_in_hot_and_10_in_cold() {
    for model in ["zen4", "zen2"] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("hot-cold.log");
        let run = on(model, &["-n", "100000", "-P", "ex_ret_instr", "-O", arg(&log), "hot-cold"]);
        run.assert_status(0);
        let bytes = std::fs::read(&log).unwrap();
        let pmcs = allocations(&bytes);
        assert_eq!(pmcs.len(), 1, "{model}");
        assert_eq!(pmcs[0].2, 100_000, "{model}");
        assert_eq!(samples_per_pmc(&bytes)[&pmcs[0].0], 100, "{model}");
        let run = on(model, &["-R", arg(&log), "-G", "-"]);
        run.assert_status(0);
        let graph = parse_callgraph(&run.stdout);
        let roots: Vec<(&str, u64, &str)> = graph[0]
            .roots()
            .iter()
            .map(|r| (r.percent.as_str(), r.count, r.name.as_str()))
            .collect();
        assert_eq!(roots, [("90.00", 90, "hot"), ("10.00", 10, "cold")], "{model}");
    }
}

#[test]
fn sampling_forker_with_descendants_samples_parent_and_child() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("forker.log");
    let run = on("zen4", &["-d", "-n", "100000", "-P", "instructions", "-O", arg(&log), "forker"]);
    run.assert_status(0);
    let bytes = std::fs::read(&log).unwrap();
    let mut per_pid = std::collections::BTreeMap::<i32, u64>::new();
    for entry in pmclog::Records::new(&bytes) {
        if let pmclog::Record::Callchain(cc) = entry.unwrap().record {
            *per_pid.entry(cc.pid).or_default() += 1;
        }
    }
    assert_eq!(per_pid.values().copied().collect::<Vec<_>>(), [90, 90], "{per_pid:?}");
}

#[test]
fn encode_shows_the_perf_ctl_image_with_the_twelve_bit_event_split() {
    let run = on("zen4", &["-u", "instructions,usr"]);
    run.assert_status(0);
    assert!(run.stdout.contains("class:          K8"), "{}", run.stdout);
    assert!(run.stdout.contains("PERF_CTL:       0x00000100c0"), "{}", run.stdout);
    // A 12-bit event select: bits 11:8 go to PERF_CTL bits 35:32.
    let run = on("zen4", &["-u", "event=0x1c7,umask=0x3f,usr,os"]);
    run.assert_status(0);
    assert!(run.stdout.contains("PERF_CTL:       0x0100033fc7"), "{}", run.stdout);
}

#[test]
fn the_listing_offers_the_k8_class_on_amd_models() {
    for model in ["zen4", "zen2"] {
        let run = on(model, &["-L"]);
        run.assert_status(0);
        let classes: Vec<&str> =
            run.stdout.lines().filter(|l| !l.starts_with('\t') && !l.is_empty()).collect();
        assert!(classes.contains(&"K8"), "{model}: {classes:?}");
        assert!(!classes.contains(&"IAP") && !classes.contains(&"IAF"), "{model}: {classes:?}");
        assert!(run.stdout.contains("\tex_ret_instr "), "{model}");
    }
}
