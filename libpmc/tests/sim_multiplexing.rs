//! Multiplexed PMCs through the Rust API and the C ABI on the simulator host: more PMCs than
//! the simulated Skylake's 4 GP counters, read with their times and scaled.

use pmc::api;
use pmc::host::{self, HostKind};
use pmc::{PmcFlags, PmcSpec};

fn sim() {
    host::select(HostKind::Sim).expect("this test binary uses only the simulator");
}

/// hot-cold runs 10 000 000 instructions and 1 000 000 branches.
fn run_hot_cold(pmcs: &[pmc::Pmc]) {
    let pid = api::spawn(&["hot-cold".into()]).unwrap();
    for p in pmcs {
        p.attach(pid).unwrap();
        p.start().unwrap();
    }
    api::resume(pid).unwrap();
    assert_eq!(api::wait(pid).unwrap(), 0);
}

#[test]
fn without_multiplexing_the_fifth_gp_event_is_refused() {
    sim();
    let held: Vec<_> =
        (0..4).map(|_| PmcSpec::new("INST_RETIRED.ANY_P").allocate().unwrap()).collect();
    assert!(PmcSpec::new("INST_RETIRED.ANY_P").allocate().is_err());
    let extra = PmcSpec::new("INST_RETIRED.ANY_P").flags(PmcFlags::MULTIPLEX).allocate();
    assert!(extra.is_err(), "a multiplexed PMC does not take turns with unmultiplexed ones");
    drop(held);
}

#[test]
fn twice_the_counters_are_scaled_to_the_exact_counts() {
    sim();
    let spec = |name| PmcSpec::new(name).flags(PmcFlags::MULTIPLEX).allocate().unwrap();
    let pmcs: Vec<_> = (0..8)
        .map(|i| {
            if i % 2 == 0 {
                spec("INST_RETIRED.ANY_P")
            } else {
                spec("BR_INST_RETIRED.ALL_BRANCHES")
            }
        })
        .collect();
    run_hot_cold(&pmcs);
    for (i, p) in pmcs.iter().enumerate() {
        let read = p.read_scaled().unwrap();
        assert!(read.multiplexed(), "PMC {i}: {read:?}");
        assert_eq!(read.value, p.read().unwrap(), "the count is PMCRW's");
        let fraction = read.fraction_counted();
        assert!(fraction > 0.3 && fraction < 0.7, "two turns: {fraction}");
        let expected = if i % 2 == 0 { 10_000_000.0 } else { 1_000_000.0 };
        let scaled = read.scaled().unwrap() as f64;
        assert!((scaled - expected).abs() / expected < 0.02, "PMC {i}: {scaled}");
    }
}

#[test]
fn a_pmc_that_is_not_multiplexed_reads_with_no_times() {
    sim();
    let p = PmcSpec::new("instructions").allocate().unwrap();
    run_hot_cold(std::slice::from_ref(&p));
    let read = p.read_scaled().unwrap();
    assert_eq!((read.value, read.enabled, read.running), (10_000_000, 0, 0));
    assert!(!read.multiplexed());
    assert_eq!(read.scaled(), Some(10_000_000));
}

#[test]
fn the_c_function_stores_the_scaled_count_and_the_times() {
    sim();
    let spec = || PmcSpec::new("INST_RETIRED.ANY_P").flags(PmcFlags::MULTIPLEX).allocate();
    let pmcs: Vec<_> = (0..8).map(|_| spec().unwrap()).collect();
    run_hot_cold(&pmcs);
    let (mut value, mut enabled, mut running) = (0u64, 0u64, 0u64);
    // SAFETY: three writable u64s.
    let rc =
        unsafe { pmc::capi::pmc_read_scaled(pmcs[0].id(), &mut value, &mut enabled, &mut running) };
    assert_eq!(rc, 0);
    let expected = pmcs[0].read_scaled().unwrap();
    assert_eq!((enabled, running), (expected.enabled, expected.running));
    assert_eq!(value, expected.scaled().unwrap());
    // SAFETY: a NULL value is refused before anything is written.
    let rc = unsafe {
        pmc::capi::pmc_read_scaled(pmcs[0].id(), std::ptr::null_mut(), &mut enabled, &mut running)
    };
    assert_eq!(rc, -1);
}
