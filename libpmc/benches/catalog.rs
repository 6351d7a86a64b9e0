//! The event catalog's speed and size: looking an event up by name (target ≤ 1 µs), parsing a
//! vendor table on first use, listing a model's events (`pmcstat -L`), and the bytes of
//! generated tables compiled into libpmc.
//!
//! `cargo bench -p libpmc --bench catalog` prints the numbers; `cargo test --benches` runs each
//! loop a few times only (a smoke run).

use std::hint::black_box;
use std::time::Instant;

use pmc::Class;
use pmc::events::HostEvents;
use pmc::events::model::CpuId;
use pmc::events::table::Table;

/// A host counting every class on CPU `cpuid`, with perf's software events.
fn host(cpuid: &str) -> HostEvents {
    HostEvents {
        classes: vec![Class::Iaf, Class::Iap, Class::K8, Class::Tsc, Class::Soft],
        soft_events: ["task-clock", "cpu-clock", "page-faults", "context-switches"]
            .map(String::from)
            .to_vec(),
        cpu: Some(CpuId::parse(cpuid).expect("valid cpuid")),
        ..HostEvents::default()
    }
}

/// Nanoseconds per call of `f`, over `iterations` calls.
fn per_call(iterations: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let iterations = if quick { 10 } else { 200_000 };

    // First use: each table is parsed and indexed once per process.
    let start = Instant::now();
    let mut events = 0;
    for name in Table::names() {
        events += Table::by_table_name(name).expect("generated table").events().len();
    }
    println!(
        "parse and index every table on first use: {:.2} ms for {} tables, {events} events",
        start.elapsed().as_secs_f64() * 1e3,
        Table::names().count()
    );

    let cases = [
        ("GenuineIntel-6-5E-3", "INST_RETIRED.ANY_P"),
        ("GenuineIntel-6-5E-3", "br-misp-retired.all-branches"),
        ("GenuineIntel-6-5E-3", "UOPS_RETIRED.TOTAL_CYCLES,usr,cmask=2"),
        ("GenuineIntel-6-5E-3", "instructions"),
        ("GenuineIntel-6-5E-3", "unhalted-cycles"),
        ("GenuineIntel-6-5E-3", "task-clock"),
        ("GenuineIntel-6-97-2", "LD_HEAD.ANY_AT_RET"),
        ("GenuineIntel-6-8F-8", "event=0xc0,umask=0x00"),
        ("AuthenticAMD-25-11-1", "ex_ret_instr"),
        ("AuthenticAMD-25-11-1", "ls_dispatch.ld_dispatch,usr"),
    ];
    for (cpuid, spec) in cases {
        let host = host(cpuid);
        host.lookup(spec).expect("the event resolves");
        let ns = per_call(iterations, || {
            black_box(host.lookup(black_box(spec)).ok());
        });
        println!("lookup {spec:<40} on {cpuid:<22} {ns:>8.0} ns");
    }

    let list_iterations = if quick { 2 } else { 200 };
    for cpuid in ["GenuineIntel-6-8F-8", "GenuineIntel-6-97-2", "AuthenticAMD-26-2-0"] {
        let host = host(cpuid);
        let ns = per_call(list_iterations, || {
            black_box(host.listing());
        });
        println!("listing (pmcstat -L) of {cpuid:<22} {:>8.2} ms", ns / 1e6);
    }

    let bytes: usize =
        Table::names().map(|name| Table::by_table_name(name).map_or(0, Table::text_len)).sum();
    println!(
        "generated table text compiled into libpmc: {:.2} MiB",
        bytes as f64 / (1 << 20) as f64
    );
}
