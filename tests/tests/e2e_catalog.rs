//! `pmcstat -L` and `-u` for the CPU model `PMC_CPUID` names (FreeBSD's `pmc_cpuid` format),
//! on the simulator host (its CPU is replaced by the named one for the catalog).

use hwpmc_tests::{Host, one_line_error, pmcstat_env};

#[test]
fn describe_shows_the_perf_ctl_of_an_amd_event_with_the_event_select_split() {
    let env = [("PMC_CPUID", "AuthenticAMD-25-11-1")];
    let run = pmcstat_env(Host::Sim, &env, &["-u", "ic_tag_hit_miss.instruction_cache_hit"]);
    run.assert_status(0);
    // Zen 4: event 0x18E, umask 0x07 — bits 7:0 = 0x8E, bits 35:32 = 0x1.
    assert!(run.stdout.contains("class:          K8 (AMD core counter)\n"), "{}", run.stdout);
    assert!(run.stdout.contains("event select:   0x18e\n"), "{}", run.stdout);
    assert!(run.stdout.contains("PERF_CTL:       0x010003078e\n"), "{}", run.stdout);
    // The simulator has no AMD counters: -u says so after the encoding.
    assert!(run.stdout.contains("on this host:   no: "), "{}", run.stdout);
}

#[test]
fn describe_answers_for_the_model_pmc_cpuid_names() {
    // Skylake-SP (stepping 4) and Cascade Lake (stepping 7) share the model number.
    let skx = [("PMC_CPUID", "GenuineIntel-6-55-4")];
    let run = pmcstat_env(Host::Sim, &skx, &["-u", "MEM_LOAD_RETIRED.LOCAL_PMM"]);
    assert_ne!(run.status, 0, "Skylake-SP has no PMM events: {}", run.describe());
    let clx = [("PMC_CPUID", "GenuineIntel-6-55-7")];
    let run = pmcstat_env(Host::Sim, &clx, &["-u", "MEM_LOAD_RETIRED.LOCAL_PMM"]);
    run.assert_status(0);
    assert!(run.stdout.contains("PERFEVTSEL:     0x000380d1\n"), "{}", run.stdout);
}

#[test]
fn list_shows_class_and_category_for_the_model() {
    let env = [("PMC_CPUID", "GenuineIntel-6-8F-8")];
    let run = pmcstat_env(Host::Sim, &env, &["-L"]);
    run.assert_status(0);
    let line = |name: &str| {
        run.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not listed"))
            .to_string()
    };
    assert!(line("BR_MISP_RETIRED.ALL_BRANCHES").ends_with(" branch"));
    // Each offered event shows its default rate with its unit: Intel's sample-after value.
    let rate = |name: &str| {
        let text = line(name);
        let (_, after) = text.split_once(" every ").unwrap_or_else(|| panic!("{text}"));
        after.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
    };
    assert_eq!(rate("BR_MISP_RETIRED.ALL_BRANCHES"), "400009 events");
    assert!(line("L2_RQSTS.ALL_DEMAND_MISS").ends_with(" cache"));
    // Sapphire Rapids places TOPDOWN.SLOTS on fixed counter 3, which the driver lacks.
    assert!(line("TOPDOWN.SLOTS").contains("fixed counter 3"));
    assert!(run.stdout.lines().any(|l| l == "IAP"), "the simulated CPU counts IAP");
    assert!(run.stdout.ends_with("# CPU GenuineIntel-6-8F-8, event tables: sapphirerapids\n"));
}

#[test]
fn a_malformed_pmc_cpuid_is_an_error_that_shows_the_format() {
    for bad in ["GenuineIntel-6", "GenuineIntel-6-8G-8", "Cyrix-6-8F-8", "GenuineIntel-6-8F-1F"] {
        let env = [("PMC_CPUID", bad)];
        let run = pmcstat_env(Host::Sim, &env, &["-L"]);
        assert_ne!(run.status, 0, "{bad}: {}", run.describe());
        let line = one_line_error(&run);
        assert!(line.contains(bad) && line.contains("GenuineIntel-6-8F-8"), "{bad}: {line}");
        assert_eq!(run.stdout, "");
    }
}

#[test]
fn list_shows_the_linux_clock_events_rates_in_nanoseconds() {
    let run = hwpmc_tests::pmcstat(Host::Linux, &["-L"]);
    run.assert_status(0);
    let line = |name: &str| {
        run.stdout.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap().to_string()
    };
    assert!(line("cpu-clock").ends_with(" every 1000000 ns"), "{}", line("cpu-clock"));
    assert!(line("page-faults").ends_with(" every 1 events"), "{}", line("page-faults"));
}
