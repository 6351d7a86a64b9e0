//! How the analysis scales with the number of mappings: a JIT-like log in which one process maps
//! `n` code regions (MAP_IN), takes a sample in each right after mapping it, and unmaps every
//! other one (MAP_OUT), read into a profile in every report mode's way (`Profile::from_log`).
//! Printed: the time per log size and per record, which stays flat when the mapping tables
//! grow in O(log n) per record.
//!
//! `cargo bench -p pmcprof --bench mappings` runs 10^4, 10^5 and 10^6 mappings; `cargo test
//! --benches` runs 10^4 (a smoke run). Only that every sample is kept is checked.

use std::time::Instant;

use pmclog::{MapOut, Record};
use pmcprof::{Profile, ResolveOptions};
use pmcprof_fixtures::LogBuilder;

/// The log: `n` regions of 4 KiB, mapped in an order that is not the address order (a
/// multiplicative permutation), each sampled once; every other one unmapped after its sample.
/// Each region is its own file (`distinct`: the worst case, an image look-up per region) or
/// all are one file (as a JIT's regions named after its perf map are).
fn jit_log(n: u64, distinct: bool) -> Vec<u8> {
    let mut log = LogBuilder::new();
    log.allocate(0x100, 0x10000);
    for i in 0..n {
        // 7919 is prime, so i ↦ i·7919 mod n is a permutation whenever n is not its multiple.
        let region = (i * 7919) % n;
        let start = 0x7f00_0000_0000 + region * 0x1000;
        let path = if distinct {
            format!("/nonexistent/jit-{region}.so")
        } else {
            "/nonexistent/jit.so".to_owned()
        };
        log.map_in(7, start, &path).samples(7, 0x100, &[start + 0x10], 1);
        if i % 2 == 1 {
            log.push(&Record::MapOut(MapOut { pid: 7, start, end: start + 0x1000 }));
        }
    }
    log.bytes()
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    // PMCSTAT_BENCH_MAPPINGS=10000,100000 chooses the sizes (a quadratic table takes hours at
    // 10^6).
    let sizes: Vec<u64> = match std::env::var("PMCSTAT_BENCH_MAPPINGS") {
        Ok(list) => list.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) if full => vec![10_000, 100_000, 1_000_000],
        Err(_) => vec![10_000],
    };
    println!(
        "{:>10} {:>9} {:>10} {:>12} {:>14}",
        "mappings", "images", "log MiB", "seconds", "ns per record"
    );
    for (n, distinct) in sizes.iter().flat_map(|&n| [(n, false), (n, true)]) {
        let log = jit_log(n, distinct);
        let start = Instant::now();
        let profile = Profile::from_log(&log, &ResolveOptions::default()).expect("the log reads");
        let seconds = start.elapsed().as_secs_f64();
        assert_eq!(profile.total_samples(), n, "every sample is kept");
        let records = profile.records();
        println!(
            "{n:>10} {:>9} {:>10.1} {seconds:>12.3} {:>14.0}",
            if distinct { "distinct" } else { "one" },
            log.len() as f64 / (1024.0 * 1024.0),
            seconds * 1e9 / records as f64
        );
    }
}
