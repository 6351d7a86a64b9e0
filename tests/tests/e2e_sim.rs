//! pmcstat end to end on the simulated machine (`PMC_HOST=sim`): exact counts and exact sample
//! counts for the built-in programs.
//!
//! `hot-cold`: main calls hot (900 blocks) then cold (100 blocks); every block retires exactly
//! 10 000 instructions, 1 000 branches and 12 500 core cycles, all in user mode. So the program
//! retires 10 000 000 instructions, and sampling every 100 000 instructions gives 100 samples,
//! 90 in hot and 10 in cold. `forker`: the parent and its child each run hot (900 blocks).
//!
//! The simulated program is not a file (`/usr/sim/bin/hot-cold` does not exist on this machine):
//! pmcstat names its functions from libpmc's description of the simulator's programs. An image
//! that is neither a file nor a simulated program has its frames named by address (`%p`), with
//! one warning that its symbols are unavailable.

use hwpmc_tests::{
    Host, allocations, arg, counting_output, parse_callgraph, parse_folded, pmcstat, pmcstat_env,
    samples_per_pmc,
};

/// The simulated program's path, as the simulated kernel reports it.
const IMAGE: &str = "/usr/sim/bin/hot-cold";

/// Where the functions of `hot-cold` start (where its samples fall: each block of hot and cold
/// is the whole function's one block).
struct Layout {
    hot: u64,
    cold: u64,
}

fn layout() -> Layout {
    let program = pmc::host::sim::program("hot-cold").unwrap();
    let function = |name: &str| program.function(program.function_id(name).unwrap());
    Layout { hot: function("hot").start(), cold: function("cold").start() }
}

#[test]
fn counting_instructions_of_hot_cold_prints_exactly_ten_million() {
    let run = pmcstat(Host::Sim, &["-p", "instructions", "--", "hot-cold"]);
    run.assert_status(0);
    assert_eq!(run.stderr, counting_output(&[("instructions", 10_000_000)]));
    // Spelled out once, so that the layout itself is pinned down.
    assert_eq!(run.stderr, "#  p/instructions \n         10000000 \n");
    assert_eq!(run.stdout, "");
}

#[test]
fn counting_fixed_programmable_and_branch_events_is_exact() {
    let run = pmcstat(
        Host::Sim,
        &["-p", "INSTR_RETIRED.ANY", "-p", "INST_RETIRED.ANY_P", "-p", "branches", "hot-cold"],
    );
    run.assert_status(0);
    assert_eq!(
        run.stderr,
        counting_output(&[
            ("INSTR_RETIRED.ANY", 10_000_000),
            ("INST_RETIRED.ANY_P", 10_000_000),
            // 1 000 branches per block.
            ("branches", 1_000_000),
        ])
    );
}

#[test]
fn counting_cycles_and_ring_qualifiers_is_exact() {
    let run = pmcstat(
        Host::Sim,
        &[
            "-p",
            "unhalted-cycles",
            "-p",
            "instructions,usr",
            "-p",
            "INST_RETIRED.ANY_P,os",
            "--",
            "hot-cold",
        ],
    );
    run.assert_status(0);
    assert_eq!(
        run.stderr,
        counting_output(&[
            ("unhalted-cycles", 12_500_000),
            ("instructions,usr", 10_000_000),
            // Every block runs in user mode.
            ("INST_RETIRED.ANY_P,os", 0),
        ])
    );
}

#[test]
fn counting_offcore_response_events_is_exact() {
    // Every block of hot-cold makes 40 offcore demand data reads (selected by response value
    // 0x10001) and 8 demand RFOs (0x10002): the JSON's event on MSR_OFFCORE_RSP_0, a raw
    // encoding on MSR_OFFCORE_RSP_1 (0xBB) with its own value.
    let run = pmcstat(
        Host::Sim,
        &[
            "-p",
            "OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE",
            "-p",
            "event=0xbb,umask=0x01,offcore_rsp=0x10002",
            "hot-cold",
        ],
    );
    run.assert_status(0);
    assert_eq!(
        run.stderr,
        counting_output(&[
            ("OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE", 40_000),
            ("event=0xbb,umask=0x01,offcore_rsp=0x10002", 8_000),
        ])
    );
}

#[test]
fn a_second_response_value_takes_the_other_msr_and_a_third_is_ebusy() {
    // The second event's value is not the first's: it is allocated on MSR_OFFCORE_RSP_1.
    let two = pmcstat(
        Host::Sim,
        &[
            "-p",
            "OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE",
            "-p",
            "OFFCORE_RESPONSE,offcore_rsp=0x10002",
            "hot-cold",
        ],
    );
    two.assert_status(0);
    assert_eq!(
        two.stderr,
        counting_output(&[
            ("OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE", 40_000),
            ("OFFCORE_RESPONSE,offcore_rsp=0x10002", 8_000),
        ])
    );
    // Both MSRs are held: a third value has nowhere to go.
    let three = pmcstat(
        Host::Sim,
        &[
            "-p",
            "OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE",
            "-p",
            "OFFCORE_RESPONSE,offcore_rsp=0x10002",
            "-p",
            "OFFCORE_RESPONSE,offcore_rsp=0x10004",
            "hot-cold",
        ],
    );
    assert_ne!(three.status, 0, "{}", three.describe());
    assert!(three.stderr.contains("EBUSY"), "{}", three.stderr);
    assert!(three.stderr.contains("offcore_rsp=0x10004"), "{}", three.stderr);
}

#[test]
fn listing_and_encoding_show_the_offcore_value() {
    let list = pmcstat(Host::Sim, &["-L"]);
    list.assert_status(0);
    let line = list
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE "))
        .unwrap_or_else(|| panic!("listed:\n{}", list.stdout));
    assert!(line.contains("offcore_rsp=0x10001"), "{line}");
    let encoding = pmcstat(Host::Sim, &["-u", "OFFCORE_RESPONSE.DEMAND_RFO.ANY_RESPONSE"]);
    encoding.assert_status(0);
    assert!(encoding.stdout.contains("PERFEVTSEL:     0x000301b7"), "{}", encoding.stdout);
    assert!(
        encoding.stdout.contains("offcore_rsp:    0x10002 (MSR_OFFCORE_RSP_0, 1A6h)"),
        "{}",
        encoding.stdout
    );
    let umask2 =
        pmcstat_env(Host::Sim, &[("PMC_SIM_MODEL", "arrowlake")], &["-u", "ITLB_MISSES.STLB_HIT"]);
    umask2.assert_status(0);
    assert!(umask2.stdout.contains("umask2:         0x01 (bits 47:40)"), "{}", umask2.stdout);
    assert!(umask2.stdout.contains("PERFEVTSEL:     0x10000032011"), "{}", umask2.stdout);
}

#[test]
fn topdown_slots_counts_on_fixed_counter_3_of_the_simulated_ice_lake() {
    // Ice Lake: 5 slots per unhalted core cycle, 12 500 cycles per block, 1 000 blocks.
    let run = pmcstat_env(
        Host::Sim,
        &[("PMC_SIM_MODEL", "icelake")],
        &["-p", "TOPDOWN.SLOTS", "-p", "cpu_clk_unhalted.thread", "hot-cold"],
    );
    run.assert_status(0);
    assert_eq!(
        run.stderr,
        counting_output(&[("TOPDOWN.SLOTS", 62_500_000), ("cpu_clk_unhalted.thread", 12_500_000)])
    );
    let encoding =
        pmcstat_env(Host::Sim, &[("PMC_SIM_MODEL", "icelake")], &["-u", "TOPDOWN.SLOTS"]);
    encoding.assert_status(0);
    assert!(encoding.stdout.contains("fixed counter 3 (TOPDOWN.SLOTS)"), "{}", encoding.stdout);
}

#[test]
fn an_architectural_event_the_simulated_cpu_lacks_is_refused_naming_cpuid_leaf_0xa() {
    // Skylake's leaf 0xA lists 7 architectural events: TOPDOWN.SLOTS (bit 7) is not one of
    // them, so it is refused rather than programmed on a general counter that counts nothing.
    let run = pmcstat(Host::Sim, &["-p", "TOPDOWN.SLOTS", "hot-cold"]);
    assert_ne!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("CPUID leaf 0xA (EBX bit 7)") && run.stderr.contains("TOPDOWN.SLOTS"),
        "{}",
        run.stderr
    );
    // The events it has are still counted.
    let run = pmcstat(Host::Sim, &["-p", "LLC_MISSES", "hot-cold"]);
    run.assert_status(0);
}

#[test]
fn an_event_with_a_second_unit_mask_counts_exactly_on_the_simulated_arrow_lake() {
    // Every block of hot-cold has 3 ITLB_MISSES.STLB_HIT (0x11/0x20, UMASK2 0x01); the same
    // event without UMASK2 counts nothing there.
    let run = pmcstat_env(
        Host::Sim,
        &[("PMC_SIM_MODEL", "arrowlake")],
        &["-p", "ITLB_MISSES.STLB_HIT", "-p", "ITLB_MISSES.STLB_HIT,umask2=0", "hot-cold"],
    );
    run.assert_status(0);
    assert_eq!(
        run.stderr,
        counting_output(&[("ITLB_MISSES.STLB_HIT", 3_000), ("ITLB_MISSES.STLB_HIT,umask2=0", 0)])
    );
    // Skylake has no UMASK2: the driver refuses the bits.
    let skylake = pmcstat(Host::Sim, &["-p", "event=0x11,umask=0x20,umask2=1", "hot-cold"]);
    assert_ne!(skylake.status, 0, "{}", skylake.describe());
    assert!(skylake.stderr.contains("EINVAL"), "{}", skylake.stderr);
}

#[test]
fn the_descendants_toggle_counts_the_child_of_forker_too() {
    // -d applies to the PMCs after it: the first counts the parent only.
    let run =
        pmcstat(Host::Sim, &["-p", "instructions", "-d", "-p", "INST_RETIRED.ANY_P", "forker"]);
    run.assert_status(0);
    assert_eq!(
        run.stderr,
        counting_output(&[("instructions", 9_000_000), ("INST_RETIRED.ANY_P", 18_000_000)])
    );
}

#[test]
fn json_counts_are_exact() {
    let run =
        pmcstat(Host::Sim, &["--json", "-p", "instructions", "-p", "branches", "--", "hot-cold"]);
    run.assert_status(0);
    assert_eq!(
        run.stdout,
        "{\"pmcs\":[\
         {\"event\":\"instructions\",\"mode\":\"process\",\"cpu\":null,\"value\":10000000},\
         {\"event\":\"branches\",\"mode\":\"process\",\"cpu\":null,\"value\":1000000}\
         ],\"exit_status\":0,\"log_error\":null}\n"
    );
    assert_eq!(run.stderr, "", "--json prints no counting table");
}

/// Samples `hot-cold` every 100 000 instructions into a log in `dir`; returns the log's path.
fn sample_hot_cold(dir: &std::path::Path) -> std::path::PathBuf {
    let log = dir.join("hot-cold.log");
    let run = pmcstat(
        Host::Sim,
        &["-n", "100000", "-P", "INST_RETIRED.ANY", "-O", arg(&log), "hot-cold"],
    );
    run.assert_status(0);
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("", ""), "-O: no report, no drops");
    log
}

#[test]
fn sampling_hot_cold_gives_exactly_100_samples_90_in_hot_and_10_in_cold() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let bytes = std::fs::read(&log).unwrap();
    // The log itself, read with pmclog: one PMC, 10 000 000 / 100 000 samples.
    let pmcs = allocations(&bytes);
    assert_eq!(pmcs.len(), 1);
    assert_eq!((pmcs[0].1.as_str(), pmcs[0].2), ("INSTR_RETIRED_ANY", 100_000));
    assert_eq!(samples_per_pmc(&bytes)[&pmcs[0].0], 100);

    let run = pmcstat(Host::Sim, &["-R", arg(&log), "-G", "-"]);
    run.assert_status(0);
    // Parsed back: 90.00% and 10.00% of 100 samples, in hot and in cold, both called by main.
    let graph = parse_callgraph(&run.stdout);
    assert_eq!(graph.len(), 1);
    let roots: Vec<(&str, u64, &str)> =
        graph[0].roots().iter().map(|r| (r.percent.as_str(), r.count, r.name.as_str())).collect();
    assert_eq!(roots, [("90.00", 90, "hot"), ("10.00", 10, "cold")]);
}

#[test]
fn an_unreadable_image_gives_address_frames_in_that_image_and_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    // The same log with its image renamed (same length) to a path that is neither a file nor a
    // simulated program.
    const OTHER: &str = "/usr/sim/bin/cold-hot";
    let bytes = std::fs::read(&log).unwrap();
    let renamed = replace_all(&bytes, IMAGE.as_bytes(), OTHER.as_bytes());
    let other_log = dir.path().join("renamed.log");
    std::fs::write(&other_log, renamed).unwrap();
    let run = pmcstat(Host::Sim, &["-R", arg(&other_log), "-G", "-"]);
    run.assert_status(0);
    let graph = parse_callgraph(&run.stdout);
    let l = layout();
    let roots: Vec<(u64, &str)> =
        graph[0].roots().iter().map(|r| (r.count, r.name.as_str())).collect();
    let (hot, cold) = (format!("{:#x}", l.hot), format!("{:#x}", l.cold));
    assert_eq!(roots, [(90, hot.as_str()), (10, cold.as_str())]);
    for tree in &graph[0].trees {
        assert_eq!(tree[0].image.as_deref(), Some(OTHER), "frames keep the log's image path");
        for line in tree {
            assert!(line.name.starts_with("0x"), "unresolved frames are addresses: {line:?}");
        }
    }
    let warning = format!("pmcstat: warning: symbols of {OTHER} unavailable: ");
    assert!(run.stderr.starts_with(&warning), "{}", run.describe());
    assert_eq!(run.stderr.lines().count(), 1, "one warning per image\n{}", run.describe());
    // -q keeps it quiet.
    let quiet = pmcstat(Host::Sim, &["-q", "-R", arg(&other_log), "-G", "-"]);
    quiet.assert_status(0);
    assert_eq!(quiet.stderr, "");
    assert_eq!(quiet.stdout, run.stdout);
}

/// `bytes` with every occurrence of `from` replaced by `to` (of the same length).
fn replace_all(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn sampled_simulated_functions_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let run = pmcstat(Host::Sim, &["-R", arg(&log), "-G", "-"]);
    run.assert_status(0);
    assert_eq!(
        run.stdout,
        format!(
            "@ INSTR_RETIRED_ANY [100 samples]\n\
             \n\
             90.00%  [90]       hot @ {IMAGE}\n \
             100.0%  [90]        main\n\
             \n\
             10.00%  [10]       cold @ {IMAGE}\n \
             100.0%  [10]        main\n\
             \n"
        )
    );
    assert_eq!(run.stderr, "", "no warning: the names are known");
}

#[test]
fn folded_stacks_of_hot_cold_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let folded = dir.path().join("out.folded");
    let run = pmcstat(Host::Sim, &["-q", "-R", arg(&log), "--folded", arg(&folded)]);
    run.assert_status(0);
    assert_eq!(run.stdout, "");
    let text = std::fs::read_to_string(&folded).unwrap();
    // Sorted by stack, as folded files are.
    assert_eq!(text, "main;cold 10\nmain;hot 90\n");
    let counts: Vec<u64> = parse_folded(&text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(counts, [10, 90]);
}

#[test]
fn top_of_hot_cold_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let run = pmcstat(Host::Sim, &["-q", "-R", arg(&log), "--top", "2"]);
    run.assert_status(0);
    assert_eq!(
        run.stdout,
        format!(
            "@ INSTR_RETIRED_ANY [100 samples]\n \
             self%     self  total%    total  function  image\n \
             90.00       90   90.00       90  hot       {IMAGE}\n \
             10.00       10   10.00       10  cold      {IMAGE}\n\
             (1 more function: --top N shows N)\n"
        )
    );
}

#[test]
fn sampling_without_a_log_file_prints_the_flat_profile() {
    let run = pmcstat(Host::Sim, &["-q", "-n", "100000", "-P", "INST_RETIRED.ANY", "hot-cold"]);
    run.assert_status(0);
    let blocks = hwpmc_tests::parse_top(&run.stdout);
    assert_eq!(blocks.len(), 1);
    let (name, samples, rows) = &blocks[0];
    assert_eq!((name.as_str(), *samples), ("INSTR_RETIRED_ANY", 100));
    let top: Vec<(u64, &str)> =
        rows.iter().take(2).map(|r| (r.self_samples, r.function.as_str())).collect();
    assert_eq!(top, [(90, "hot"), (10, "cold")]);
}

#[test]
fn the_rate_applies_to_the_sampling_pmcs_that_follow_it() {
    // As on FreeBSD, -n sets the rate of the -P/-S options after it: fixed counter 0 keeps the
    // default rate (65 536), fixed counter 1 samples every 100 000 cycles.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("rates.log");
    let run = pmcstat(
        Host::Sim,
        &[
            "-P",
            "INST_RETIRED.ANY",
            "-n",
            "100000",
            "-P",
            "CPU_CLK_UNHALTED.THREAD",
            "-O",
            arg(&log),
            "hot-cold",
        ],
    );
    run.assert_status(0);
    let bytes = std::fs::read(&log).unwrap();
    let pmcs = allocations(&bytes);
    let rates: Vec<(&str, u64)> = pmcs.iter().map(|(_, n, r)| (n.as_str(), *r)).collect();
    assert_eq!(rates, [("INSTR_RETIRED_ANY", 65_536), ("CPU_CLK_UNHALTED_CORE", 100_000)]);
    // 12 500 cycles per block: 12 500 000 cycles, one sample per 100 000 (8 whole blocks).
    assert_eq!(samples_per_pmc(&bytes)[&pmcs[1].0], 125);
}

#[test]
fn two_programmable_events_stay_apart_in_the_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("two.log");
    // 1 000 000 branches every 10 000, 10 000 000 instructions every 100 000: 100 samples each.
    let run = pmcstat(
        Host::Sim,
        &[
            "-n",
            "10000",
            "-P",
            "branches",
            "-n",
            "100000",
            "-P",
            "INST_RETIRED.ANY_P",
            "-O",
            arg(&log),
            "hot-cold",
        ],
    );
    run.assert_status(0);
    let top = pmcstat(Host::Sim, &["-q", "-R", arg(&log), "--top", "1"]);
    top.assert_status(0);
    let blocks = hwpmc_tests::parse_top(&top.stdout);
    let names: Vec<&str> = blocks.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(blocks.len(), 2, "one block per event: {names:?}\n{}", top.describe());
    assert_ne!(names[0], names[1]);
    for (name, samples, _) in &blocks {
        assert!(!name.contains("unknown event"), "{name}");
        assert_eq!(*samples, 100, "{name}");
    }
}

#[test]
fn the_same_run_writes_the_same_log_byte_for_byte() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (first, second) = (sample_hot_cold(a.path()), sample_hot_cold(b.path()));
    assert_eq!(std::fs::read(first).unwrap(), std::fs::read(second).unwrap());
}

#[test]
fn the_thread_filter_analyses_one_threads_samples() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("threads.log");
    let run =
        pmcstat(Host::Sim, &["-n", "100000", "-P", "instructions", "-O", arg(&log), "threads"]);
    run.assert_status(0);
    let bytes = std::fs::read(&log).unwrap();
    let mut per_thread = std::collections::BTreeMap::<i32, u64>::new();
    for entry in pmclog::Records::new(&bytes) {
        if let pmclog::Record::Callchain(cc) = entry.unwrap().record {
            *per_thread.entry(cc.tid).or_default() += 1;
        }
    }
    assert_eq!(per_thread.len(), 2, "two threads sampled: {per_thread:?}");
    for (tid, samples) in per_thread {
        let run =
            pmcstat(Host::Sim, &["-q", "-R", arg(&log), "-i", &tid.to_string(), "--top", "1"]);
        run.assert_status(0);
        let blocks = hwpmc_tests::parse_top(&run.stdout);
        assert_eq!(blocks[0].1, samples, "thread {tid}");
    }
}

#[test]
fn json_profile_of_hot_cold_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let run = pmcstat(Host::Sim, &["-q", "-R", arg(&log), "--json"]);
    run.assert_status(0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let pmcs = v["pmcs"].as_array().unwrap();
    assert_eq!(pmcs.len(), 1);
    assert_eq!(
        (pmcs[0]["event"].as_str(), pmcs[0]["samples"].as_u64()),
        (Some("INSTR_RETIRED_ANY"), Some(100))
    );
    let rows: Vec<(&str, u64, u64)> = pmcs[0]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["image"].as_str(), Some(IMAGE));
            (
                f["function"].as_str().unwrap(),
                f["self"].as_u64().unwrap(),
                f["total"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [("hot", 90, 90), ("cold", 10, 10), ("main", 0, 100)]);
}

#[test]
fn a_thread_without_samples_is_an_error_that_lists_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let tids: Vec<i32> = {
        let bytes = std::fs::read(&log).unwrap();
        let mut tids: Vec<i32> = pmclog::Records::new(&bytes)
            .filter_map(|e| match e.unwrap().record {
                pmclog::Record::Callchain(cc) => Some(cc.tid),
                _ => None,
            })
            .collect();
        tids.sort();
        tids.dedup();
        tids
    };
    assert_eq!(tids.len(), 1);
    let ok = pmcstat(Host::Sim, &["-q", "-R", arg(&log), "-i", &tids[0].to_string(), "--top", "1"]);
    ok.assert_status(0);
    let missing = pmcstat(Host::Sim, &["-R", arg(&log), "-i", "99999", "--top", "1"]);
    missing.assert_status(64);
    let message = hwpmc_tests::one_line_error(&missing);
    assert!(
        message.contains("no samples of thread 99999")
            && message.contains(&format!("threads with samples: {}", tids[0])),
        "{message}"
    );
}

#[test]
fn the_summary_of_hot_cold_has_exact_counts_and_instructions_per_cycle() {
    let run = pmcstat(
        Host::Sim,
        &["--summary", "-p", "instructions", "-p", "unhalted-cycles", "-p", "branches", "hot-cold"],
    );
    run.assert_status(0);
    let summary = run.stderr.split_once("Performance counter stats for 'hot-cold':").unwrap().1;
    // 10 000 000 instructions in 12 500 000 cycles: 0.80 per cycle.
    assert!(
        summary.contains("10,000,000      instructions     #     0.80  insn per cycle\n"),
        "{summary}"
    );
    assert!(summary.contains("12,500,000      unhalted-cycles  # "), "{summary}");
    assert!(summary.contains("1,000,000      branches         # "), "{summary}");
}
