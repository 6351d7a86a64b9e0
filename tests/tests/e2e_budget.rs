//! The analyses' memory budget end to end: a crafted log with more distinct stacks than the
//! `--analysis-memory` budget holds gives `-G`, `--folded` and `--top` reports that count the
//! dropped stacks' samples as `[other]` and say so on standard error; within the budget the
//! reports have no `[other]`.

use hwpmc_tests::{
    Host, arg, encode_log, parse_callgraph, parse_folded, parse_top, pmcstat, write_log,
};
use pmclog::{Callchain, CallchainFlags, PmcAllocateDyn, ProgramCounters, Record};

/// One PMC; one stack of two frames with 1 000 samples; then `distinct` different stacks of
/// 16 user addresses with one sample each (no mapping covers them: each address is a frame).
fn log(distinct: u64) -> Vec<u8> {
    let mut records = vec![Record::PmcAllocateDyn(PmcAllocateDyn {
        pmcid: 0x100,
        event: 0x20001,
        flags: 0,
        rate: 1000,
        name: b"CLOCK.PROF",
        layout: pmclog::DynLayout::Kernel,
    })];
    let hot = [0x1000u64, 0x2000];
    let stacks: Vec<Vec<u64>> = (0..distinct)
        .map(|i| (0..16).map(|d| 0x7000_0000_0000 + i * 256 + d * 8).collect())
        .collect();
    fn sample(pcs: &[u64]) -> Record<'_> {
        Record::Callchain(Callchain {
            pid: 5,
            tid: 5,
            pmcid: 0x100,
            cpuflags: CallchainFlags::new(0, 1),
            pcs: ProgramCounters::from_words(pcs),
        })
    }
    let hot_words: Vec<u64> = hot.to_vec();
    for _ in 0..1000 {
        records.push(sample(&hot_words));
    }
    for pcs in &stacks {
        records.push(sample(pcs));
    }
    records.push(Record::CloseLog);
    encode_log(&records)
}

const DISTINCT: u64 = 40_000;

#[test]
fn over_the_budget_every_report_counts_the_dropped_stacks_as_other_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), &log(DISTINCT));
    let folded = dir.path().join("folded");
    let graph = dir.path().join("graph");
    let run = pmcstat(
        Host::Linux,
        &[
            "-R",
            arg(&path),
            "--analysis-memory",
            "4",
            "--folded",
            arg(&folded),
            "-G",
            arg(&graph),
            "--top",
            "5",
        ],
    );
    run.assert_status(0);
    assert!(
        run.stderr.contains("analysis tables reached their 4 MiB limit")
            && run.stderr.contains("counted as [other]"),
        "{}",
        run.describe()
    );
    let total = 1000 + DISTINCT;
    // --folded: the hot stack whole, [other] with the rest, every sample counted once.
    let lines = parse_folded(&std::fs::read_to_string(&folded).unwrap());
    assert_eq!(lines.iter().map(|(_, n)| n).sum::<u64>(), total);
    let other = lines.iter().find(|(s, _)| s == &["[other]"]).expect("an [other] line").1;
    assert!(other > 0 && other < DISTINCT, "{other}");
    assert!(
        lines.iter().any(|(s, n)| s == &["0x2000 ([unknown])", "0x1000 ([unknown])"] && *n == 1000)
    );
    assert!(lines.len() < (DISTINCT / 2) as usize, "{} lines kept", lines.len());
    // -G: [other] is a sampled function of its own with the same count.
    let graph = parse_callgraph(&std::fs::read_to_string(&graph).unwrap());
    let roots = graph[0].roots();
    let other_root = roots.iter().find(|l| l.name == "[other]").expect("[other] in -G");
    assert_eq!(other_root.count, other);
    assert_eq!(graph[0].root_total(), total);
    // --top: [other] among the functions, with the same count.
    let top = parse_top(&run.stdout);
    let rows = &top[0].2;
    assert!(rows.iter().any(|r| r.function == "[other]" && r.self_samples == other), "{rows:?}");
}

#[test]
fn within_the_budget_the_reports_have_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), &log(2_000));
    let folded = dir.path().join("folded");
    let run = pmcstat(Host::Linux, &["-R", arg(&path), "--folded", arg(&folded)]);
    run.assert_status(0);
    assert!(!run.stderr.contains("[other]"), "{}", run.describe());
    let lines = parse_folded(&std::fs::read_to_string(&folded).unwrap());
    assert_eq!(lines.len(), 2_001);
    assert!(lines.iter().all(|(s, _)| s != &["[other]"]));
}

#[test]
fn analysis_memory_is_range_checked_and_needs_an_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), &log(10));
    let run = pmcstat(Host::Linux, &["-R", arg(&path), "--analysis-memory", "0", "--top", "3"]);
    assert_eq!(run.status, 64, "{}", run.describe());
    assert!(
        run.stderr.contains("--analysis-memory 0: MiB must be from 1 to"),
        "{}",
        run.describe()
    );
    let run = pmcstat(Host::Linux, &["-R", arg(&path), "--analysis-memory", "64"]);
    assert_eq!(run.status, 64, "{}", run.describe());
    assert!(run.stderr.contains("--analysis-memory bounds the analyses"), "{}", run.describe());
}
