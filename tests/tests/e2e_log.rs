//! `pmcstat -R` on logs written by pmcstat on the simulated machine: the text dump is the pmclog
//! crate's, byte for byte, and the `-G` call graph accounts for every sample of every PMC.

use hwpmc_tests::{
    Host, allocations, arg, parse_callgraph, pmcstat, record_offsets, samples_per_pmc,
};
use pmc::events::pmu_table::PmuEventNames;

/// A log of `hot-cold` with three sampling PMCs at different rates, written into `dir`:
/// instructions every 100 000 (100 samples), core cycles every 250 000 (12 500 000 cycles: 50)
/// and branches every 50 000 (1 000 000 branches: 20).
fn three_pmc_log(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let log = dir.join("three.log");
    let run = pmcstat(
        Host::Sim,
        &[
            "-n",
            "100000",
            "-P",
            "instructions",
            "-n",
            "250000",
            "-P",
            "unhalted-cycles",
            "-n",
            "50000",
            "-P",
            "branches",
            "-O",
            arg(&log),
            "--",
            "hot-cold",
        ],
    );
    run.assert_status(0);
    let bytes = std::fs::read(&log).unwrap();
    (log, bytes)
}

#[test]
fn the_dump_is_pmclogs_text_dump_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (log, bytes) = three_pmc_log(dir.path());
    let run = pmcstat(Host::Sim, &["-R", arg(&log)]);
    run.assert_status(0);
    assert_eq!(run.stderr, "");
    let mut expected = Vec::new();
    assert_eq!(
        pmclog::dump_bytes_with_names(&bytes, PmuEventNames, &mut expected).unwrap(),
        pmclog::DumpEnd::Finished
    );
    assert_eq!(run.stdout.as_bytes(), expected.as_slice());
    // And it is the dump of this log: FreeBSD's record names, 170 samples.
    assert!(run.stdout.starts_with("initlog   "), "{}", &run.stdout[..200]);
    assert_eq!(run.stdout.lines().filter(|l| l.starts_with("callchain ")).count(), 170);
}

#[test]
fn the_dump_goes_to_the_output_file_of_o() {
    let dir = tempfile::tempdir().unwrap();
    let (log, bytes) = three_pmc_log(dir.path());
    let out = dir.path().join("dump.txt");
    let run = pmcstat(Host::Sim, &["-R", arg(&log), "-o", arg(&out)]);
    run.assert_status(0);
    assert_eq!(run.stdout, "");
    let mut expected = Vec::new();
    pmclog::dump_bytes_with_names(&bytes, PmuEventNames, &mut expected).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), expected);
}

#[test]
fn the_callgraph_reproduces_the_sample_count_of_every_pmc() {
    let dir = tempfile::tempdir().unwrap();
    let (log, bytes) = three_pmc_log(dir.path());
    let run = pmcstat(Host::Sim, &["-q", "-R", arg(&log), "-G", "-"]);
    run.assert_status(0);
    let graph = parse_callgraph(&run.stdout);
    // The log, read with pmclog: PMCs in allocation order and their CALLCHAIN records.
    let per_pmc = samples_per_pmc(&bytes);
    let expected: Vec<(String, u64)> = allocations(&bytes)
        .into_iter()
        .map(|(id, name, _)| (name, per_pmc.get(&id).copied().unwrap_or(0)))
        .collect();
    let printed: Vec<(String, u64)> = graph.iter().map(|p| (p.name.clone(), p.samples)).collect();
    assert_eq!(printed, expected);
    let counts: Vec<u64> = printed.iter().map(|(_, n)| *n).collect();
    assert_eq!(counts, [100, 50, 20]);
    for pmc in &graph {
        // Every sample is in exactly one tree; 90% of each PMC's samples are in hot.
        assert_eq!(pmc.root_total(), pmc.samples, "{}", pmc.name);
        let roots: Vec<(&str, u64)> =
            pmc.roots().iter().map(|r| (r.percent.as_str(), r.count)).collect();
        let n = pmc.samples;
        let (hot, cold) = (format!("{:05.2}", 90.0), format!("{:05.2}", 10.0));
        assert_eq!(roots, [(hot.as_str(), n * 9 / 10), (cold.as_str(), n / 10)], "{}", pmc.name);
    }
}

#[test]
fn a_corrupt_log_dumps_what_precedes_the_bad_record_then_names_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut bytes) = three_pmc_log(dir.path());
    // Break the magic byte (the header word's top byte) of the tenth record.
    let offset = record_offsets(&bytes)[9];
    bytes[offset as usize + 3] = 0xab;
    let corrupt = dir.path().join("corrupt.log");
    std::fs::write(&corrupt, &bytes).unwrap();

    let run = pmcstat(Host::Sim, &["-R", arg(&corrupt)]);
    let line = hwpmc_tests::one_line_error(&run);
    let mut expected = Vec::new();
    let end = pmclog::dump_bytes_with_names(&bytes, PmuEventNames, &mut expected).unwrap();
    assert_eq!(run.stdout.as_bytes(), expected.as_slice(), "the nine good records");
    assert_eq!(run.stdout.lines().filter(|l| !l.starts_with("...")).count(), 9);
    assert_eq!(line, format!("pmcstat: {}: {}", arg(&corrupt), end.error_message().unwrap()));
    assert!(line.contains(&format!("record 10, offset {offset:#x}")), "{line}");
}
