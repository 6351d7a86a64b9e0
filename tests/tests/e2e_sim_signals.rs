//! pmcstat interrupted on the simulated machine, which runs the measured command inside
//! pmcstat: a signal is acted on during the run, not when the command has run to its end —
//! the simulated command is ended as the signal would end it, its partial counts are printed,
//! the log is closed, and pmcstat exits 128 + the signal, the command's status.

use hwpmc_tests::{Host, arg, start_pmcstat};

/// The instructions `spin` retires when it runs to its end (20 000 000 blocks of 10 000).
const SPIN_INSTRUCTIONS: u64 = 200_000_000_000;

#[test]
fn sigint_ends_a_simulated_command_during_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("spin.log");
    let args = ["-p", "instructions", "-P", "instructions", "-O", arg(&log), "--", "spin"];
    let pmcstat = start_pmcstat(Host::Sim, &args);
    pmcstat.wait_until_catching_signals();
    pmcstat.signal(libc::SIGINT);
    let run = pmcstat.finish_within(std::time::Duration::from_secs(600));
    run.assert_status(128 + libc::SIGINT);
    // The counts are printed, and short of what a whole run retires.
    let count: u64 = run
        .stderr
        .lines()
        .chain(run.stdout.lines())
        .filter_map(|l| l.trim().parse().ok())
        .next()
        .unwrap_or_else(|| panic!("no count printed\n{}", run.describe()));
    assert!(count < SPIN_INSTRUCTIONS, "{count} instructions: the command ran to its end");
    // The log is whole and closed.
    let bytes = std::fs::read(&log).unwrap();
    let records: Vec<_> = pmclog::Records::new(&bytes).map(|e| e.unwrap().record).collect();
    assert!(matches!(records.last(), Some(pmclog::Record::CloseLog)), "{records:?}");
}

#[test]
fn an_uninterrupted_simulated_command_is_counted_whole() {
    // The counterpart: without a signal, pmcstat exits with the command's status and counts
    // every instruction (hot-cold: 10 000 000).
    let pmcstat = start_pmcstat(Host::Sim, &["-p", "instructions", "--", "hot-cold"]);
    let run = pmcstat.finish_within(std::time::Duration::from_secs(600));
    run.assert_status(0);
    let count: u64 = run
        .stderr
        .lines()
        .chain(run.stdout.lines())
        .filter_map(|l| l.trim().parse().ok())
        .next()
        .unwrap_or_else(|| panic!("no count printed\n{}", run.describe()));
    assert_eq!(count, 10_000_000);
}
