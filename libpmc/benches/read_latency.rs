//! Latency of `pmc_read` on a running, self-attached counting PMC through each host, and its ratio
//! to a raw `read(2)` of an equivalent perf counter on Linux; on Linux also `pmc_read_scaled`
//! (the count with perf's times enabled and running).
//!
//! `cargo bench -p libpmc --bench read_latency` prints nanoseconds per call; `cargo test
//! --benches` runs each loop a few times only (a smoke run).

use std::hint::black_box;
use std::os::fd::AsRawFd;
use std::time::Instant;

use perf_event::Builder;
use perf_event::events::Software;
use pmc::PmcSpec;
use pmc::host::{self, HostKind};

/// Nanoseconds per call of `f`, best of five runs of `iterations` calls.
fn ns_per_call(iterations: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                f();
            }
            start.elapsed().as_nanos() as f64 / f64::from(iterations)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let iterations = if quick { 10 } else { 200_000 };
    let which = std::env::var("PMC_HOST").unwrap_or_default();
    if which == "sim" {
        sim(iterations);
        return;
    }
    host::select(HostKind::Linux).expect("the Linux host");

    // The raw baseline: read(2) of a perf task-clock counter on this thread, configured as the
    // Linux host configures a process PMC (both rings, inherited by new threads).
    let mut raw = Builder::new(Software::TASK_CLOCK);
    raw.observe_pid(0)
        .any_cpu()
        .inherit(true)
        .inherit_thread(true)
        .exclude_hv(true)
        .exclude_kernel(false);
    let mut counter = raw.build().expect("perf task-clock counter");
    counter.enable().expect("enable");
    let fd = counter.as_raw_fd();
    let mut buf = [0u64; 8];
    let raw_ns = ns_per_call(iterations, || {
        // SAFETY: `buf` has room for the counter's read format (at most 8 words here).
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), size_of_val(&buf)) };
        black_box((n, buf[0]));
    });

    let pmc = PmcSpec::new("task-clock").allocate().expect("allocate task-clock");
    pmc.attach(0).expect("attach to self");
    pmc.start().expect("start");
    let linux_ns = ns_per_call(iterations, || {
        black_box(pmc.read().expect("read"));
    });
    let scaled_ns = ns_per_call(iterations, || {
        black_box(pmc.read_scaled().expect("read_scaled"));
    });
    println!("read(2) of a perf task-clock counter: {raw_ns:8.1} ns/call");
    println!(
        "pmc_read, Linux host:                 {linux_ns:8.1} ns/call  ({:.2}x the raw read)",
        linux_ns / raw_ns
    );
    println!(
        "pmc_read_scaled, Linux host:          {scaled_ns:8.1} ns/call  ({:.2}x the raw read)",
        scaled_ns / raw_ns
    );
    println!("(PMC_HOST=sim cargo bench -p libpmc --bench read_latency: the simulator host)");
}

/// The simulator host: the embedded driver reading a running process PMC of a simulated process.
fn sim(iterations: u32) {
    host::select(HostKind::Sim).expect("the simulator host");
    let pmc = PmcSpec::new("instructions").allocate().expect("allocate");
    pmc.attach(0).expect("attach to self");
    pmc.start().expect("start");
    let sim_ns = ns_per_call(iterations, || {
        black_box(pmc.read().expect("read"));
    });
    println!("pmc_read, simulator host (embedded driver): {sim_ns:8.1} ns/call");
}
