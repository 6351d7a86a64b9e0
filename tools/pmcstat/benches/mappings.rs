//! How the analysis scales with the number of mappings: a JIT-like log in which one process maps
//! `n` code regions (MAP_IN), takes a sample in each right after mapping it, and unmaps every
//! other one (MAP_OUT), read into a profile in every report mode's way (`Profile::from_log`).
//! Printed: the time per log size and per record, which stays flat when the mapping tables
//! grow in O(log n) per record.
//!
//! `cargo bench -p pmcstat --bench mappings` runs 10^4, 10^5 and 10^6 mappings; `cargo test
//! --benches` runs 10^4 (a smoke run). Nothing is asserted.

use std::time::Instant;

use pmclog::{
    Callchain, CallchainFlags, Initialize, MapIn, MapOut, PmcAllocate, ProgramCounters, Record,
};
use pmcstat::analysis::{Profile, ResolveOptions};

/// The log: `n` regions of 4 KiB, mapped in an order that is not the address order (a
/// multiplicative permutation), each sampled once; every other one unmapped after its sample.
fn jit_log(n: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
    let mut push = |record: &Record<'_>| {
        let len = pmclog::encode(record, 0, &mut buf).expect("encode");
        bytes.extend_from_slice(&buf[..len]);
    };
    push(&Record::Initialize(Initialize {
        version: 0x0A00_0000,
        cpu_type: 0x98,
        tsc_freq: 1_000_000_000,
        time_sec: 0,
        time_nsec: 0,
        cpuid: b"GenuineIntel-6-55",
    }));
    push(&Record::PmcAllocate(PmcAllocate { pmcid: 0x100, event: 0x10000, flags: 0x10, rate: 1 }));
    for i in 0..n {
        // 7919 is prime, so i ↦ i·7919 mod n is a permutation whenever n is not its multiple.
        let region = (i * 7919) % n;
        let start = 0x7f00_0000_0000 + region * 0x1000;
        let path = format!("/nonexistent/jit-{region}.so");
        push(&Record::MapIn(MapIn { pid: 7, start, path: path.as_bytes() }));
        push(&Record::Callchain(Callchain {
            pid: 7,
            tid: 7,
            pmcid: 0x100,
            cpuflags: CallchainFlags::new(0, 1),
            pcs: ProgramCounters::from_words(&[start + 0x10]),
        }));
        if i % 2 == 1 {
            push(&Record::MapOut(MapOut { pid: 7, start, end: start + 0x1000 }));
        }
    }
    bytes
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let sizes: &[u64] = if full { &[10_000, 100_000, 1_000_000] } else { &[10_000] };
    println!("{:>10} {:>10} {:>12} {:>14}", "mappings", "log MiB", "seconds", "ns per record");
    for &n in sizes {
        let log = jit_log(n);
        let start = Instant::now();
        let profile = Profile::from_log(&log, &ResolveOptions::default()).expect("the log reads");
        let seconds = start.elapsed().as_secs_f64();
        assert_eq!(profile.total_samples(), n, "every sample is kept");
        let records = profile.records();
        println!(
            "{n:>10} {:>10.1} {seconds:>12.3} {:>14.0}",
            log.len() as f64 / (1024.0 * 1024.0),
            seconds * 1e9 / records as f64
        );
    }
}
