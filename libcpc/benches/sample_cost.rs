//! Cost of `cpc_set_sample` on a bound set of four requests against four `pmc_read` calls of
//! four PMCs counting the same events, on the Linux host (software events) and the simulator
//! host (general-purpose counters). The target: at most 1.5 times the four reads.
//!
//! `cargo bench -p libcpc --bench sample_cost` prints nanoseconds per call for the host in
//! `PMC_HOST` (default: Linux, then the simulator in a second process); `cargo test --benches`
//! runs each loop a few times only (a smoke run).

use std::hint::black_box;
use std::time::Instant;

use cpc::capi::{
    cpc_buf_create, cpc_open, cpc_set_add_request, cpc_set_create, cpc_set_destroy, cpc_set_sample,
};
use cpc::consts::{CPC_COUNT_USER, CPC_VER_CURRENT};
use pmc::PmcSpec;

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

/// The four events of each host: (libcpc name, libpmc spec of the same event).
fn events(host: &str) -> [(&'static std::ffi::CStr, &'static str); 4] {
    if host == "sim" {
        [
            (c"PAPI_tot_ins", "event=0xc0,umask=0x00,usr"),
            (c"PAPI_tot_cyc", "event=0x3c,umask=0x00,usr"),
            (c"PAPI_br_ins", "event=0xc4,umask=0x00,usr"),
            (c"PAPI_br_msp", "event=0xc5,umask=0x00,usr"),
        ]
    } else {
        [
            (c"task-clock", "task-clock"),
            (c"page-faults", "page-faults"),
            (c"context-switches", "context-switches"),
            (c"cpu-migrations", "cpu-migrations"),
        ]
    }
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let iterations = if quick { 10 } else { 200_000 };
    let chosen = std::env::var("PMC_HOST").ok().filter(|h| !h.is_empty());
    let host = chosen.clone().unwrap_or_else(|| "linux".into());
    let host = host.as_str();
    pmc::host::select(if host == "sim" {
        pmc::host::HostKind::Sim
    } else {
        pmc::host::HostKind::Linux
    })
    .expect("the host");
    let events = events(host);

    let cpc = cpc_open(CPC_VER_CURRENT);
    assert!(!cpc.is_null(), "cpc_open");
    // The two in turn, three times: the best of each, so that a busy moment of the machine
    // does not fall on one side only. (They cannot run side by side: the simulator has four
    // general-purpose rows.)
    let (mut reads_ns, mut sample_ns) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        let pmcs: Vec<_> = events
            .iter()
            .map(|(_, spec)| {
                let pmc = PmcSpec::new(spec).allocate().expect("allocate");
                pmc.attach(0).expect("attach to self");
                pmc.start().expect("start");
                pmc
            })
            .collect();
        reads_ns = reads_ns.min(ns_per_call(iterations, || {
            for pmc in &pmcs {
                black_box(pmc.read().expect("read"));
            }
        }));
        drop(pmcs);
        // SAFETY: a live handle, its set and buffer, and NUL-terminated event names.
        sample_ns = sample_ns.min(unsafe {
            let set = cpc_set_create(cpc);
            for (name, _) in &events {
                let index = cpc_set_add_request(
                    cpc,
                    set,
                    name.as_ptr(),
                    0,
                    CPC_COUNT_USER,
                    0,
                    std::ptr::null(),
                );
                assert!(index >= 0, "add {name:?}");
            }
            assert_eq!(cpc::capi::cpc_bind_curlwp(cpc, set, 0), 0, "bind");
            let buf = cpc_buf_create(cpc, set);
            let ns = ns_per_call(iterations, || {
                black_box(cpc_set_sample(cpc, set, buf));
            });
            assert_eq!(cpc_set_destroy(cpc, set), 0, "destroy");
            ns
        });
    }
    println!("host {host}: four pmc_read calls        {reads_ns:8.1} ns");
    println!(
        "host {host}: cpc_set_sample, 4 requests  {sample_ns:8.1} ns  ({:.2}x the four reads; target <= 1.5x)",
        sample_ns / reads_ns
    );
    if chosen.is_none() {
        let status = std::process::Command::new(std::env::current_exe().expect("own path"))
            .args(std::env::args().skip(1))
            .env("PMC_HOST", "sim")
            .status()
            .expect("run the simulator half");
        assert!(status.success(), "the simulator half failed");
    }
}
