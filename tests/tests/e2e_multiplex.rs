//! pmcstat `--multiplex` end to end on the simulated machine (`PMC_HOST=sim`, a Skylake with 4
//! GP counters): more counting PMCs than counters are scaled and their shares of time printed;
//! PMCs that fit the counters print FreeBSD's layout unchanged.
//!
//! `hot-cold` retires 10 000 000 instructions and 1 000 000 branches, at the same rate all along.

use hwpmc_tests::{Host, pmcstat};

/// Eight GP events on four counters.
fn eight_events() -> Vec<&'static str> {
    let mut args = vec!["--multiplex"];
    for i in 0..8 {
        args.extend(["-p", if i % 2 == 0 { "INST_RETIRED.ANY_P" } else { "branches" }]);
    }
    args.push("hot-cold");
    args
}

#[test]
fn oversubscribed_counts_are_scaled_and_followed_by_their_shares_of_time() {
    let run = pmcstat(Host::Sim, &eight_events());
    run.assert_status(0);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 3, "header, values, shares:\n{}", run.stderr);
    assert!(lines[0].starts_with("# ") && lines[0].contains("p/INST_RETIRED.ANY_P"));
    let values: Vec<f64> = lines[1].split_whitespace().map(|v| v.parse().unwrap()).collect();
    assert_eq!(values.len(), 8);
    for (i, v) in values.iter().enumerate() {
        let expected = if i % 2 == 0 { 10_000_000.0 } else { 1_000_000.0 };
        assert!((v - expected).abs() / expected < 0.02, "column {i}: {v}\n{}", run.stderr);
    }
    let shares: Vec<f64> = lines[2]
        .trim_start_matches('#')
        .split_whitespace()
        .map(|s| s.trim_end_matches('%').parse().unwrap())
        .collect();
    assert_eq!(shares.len(), 8);
    for s in &shares {
        assert!(*s > 30.0 && *s < 70.0, "two turns: {s}\n{}", run.stderr);
    }
    // The shares sit under the titles.
    assert_eq!(lines[2].len(), lines[0].len());
}

#[test]
fn pmcs_that_fit_the_counters_print_freebsds_layout_unchanged() {
    let plain = pmcstat(Host::Sim, &["-p", "instructions", "-p", "branches", "hot-cold"]);
    let muxed =
        pmcstat(Host::Sim, &["--multiplex", "-p", "instructions", "-p", "branches", "hot-cold"]);
    plain.assert_status(0);
    muxed.assert_status(0);
    assert_eq!(muxed.stderr, plain.stderr);
}

#[test]
fn the_summary_and_json_carry_the_shares() {
    let mut args = eight_events();
    args.insert(0, "--summary");
    let run = pmcstat(Host::Sim, &args);
    run.assert_status(0);
    let counted = run.stderr.lines().filter(|l| l.contains("branches") && l.ends_with("%)"));
    assert_eq!(counted.count(), 4, "{}", run.stderr);
    let mut args = eight_events();
    args.insert(0, "--json");
    let run = pmcstat(Host::Sim, &args);
    run.assert_status(0);
    assert_eq!(run.stdout.matches("\"time_running\":").count(), 8, "{}", run.stdout);
    assert!(run.stdout.contains("\"raw_value\":"));
}
