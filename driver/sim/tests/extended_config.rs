//! The event-select bits above 31 and the fixed counters past 2: UMASK2 (IA32_PERFEVTSELx bits
//! 47:40, CPUID leaf 23H) and fixed counter 3 (TOPDOWN.SLOTS), allocated through the driver and
//! counted exactly by the simulated CPU where it has them, refused (EINVAL, before any write)
//! where it does not.

use hwpmc::Tunables;
use hwpmc::abi::{PmcFlags, event};
use hwpmc::errno::Errno;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{AllocateRequest, Credentials, PmcClient, PmuModel, SimDriver, load_driver};

/// ITLB_MISSES.STLB_HIT on Arrow Lake's P-core (its JSON): event 0x11, umask 0x20, UMASK2 0x01.
const STLB_HIT: u32 = 0x2011;

fn work() -> Work {
    Work { instructions: 400, core_cycles: 700, ..Work::default() }
        .with_raw_umask2(0x11, 0x20, 0x01, 6)
        .with_raw(0x11, 0x20, 9)
}

/// TOPDOWN.SLOTS as a PMU event for the IAF class (PMC_F_EV_PMU, 0xA4/0x01).
fn slots() -> AllocateRequest {
    AllocateRequest {
        flags: PmcFlags::EV_PMU.bits(),
        iap_config: 0x01A4,
        ..AllocateRequest::iaf(0)
    }
}

/// Runs `work()` `repeat` times for a process with `requests` allocated and started; returns
/// their counts.
fn count(driver: &SimDriver, requests: &[AllocateRequest], repeat: u64) -> Vec<u64> {
    let kernel = driver.kernel().clone();
    let pid = kernel.spawn(None, Credentials::user(1000));
    let tid = kernel.threads(pid)[0];
    let client = PmcClient::new(driver, pid);
    let ids: Vec<u32> = requests.iter().map(|r| client.allocate(*r).unwrap()).collect();
    for id in &ids {
        client.start(*id).unwrap();
    }
    kernel.hardware().set_current_cpu(0);
    driver.switch_in(0, pid, tid);
    kernel.hardware().pmu(0).retire_repeated(Ring::User, &work(), repeat);
    driver.switch_out(0, pid, tid);
    ids.iter().map(|id| client.read(*id).unwrap()).collect()
}

#[test]
fn umask2_events_count_exactly_where_the_cpu_has_umask2() {
    let driver = load_driver(PmuModel::arrowlake_p(), 1, Tunables::default());
    let with = AllocateRequest::iap(STLB_HIT).with_umask2(0x01);
    let without = AllocateRequest::iap(STLB_HIT);
    assert_eq!(count(&driver, &[with, without], 11), [6 * 11, 9 * 11]);
    driver.kernel().hardware().assert_no_faults();
}

#[test]
fn bits_above_31_the_cpu_leaves_undefined_are_einval() {
    let skylake = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let arrow = load_driver(PmuModel::arrowlake_p(), 1, Tunables::default());
    for driver in [&skylake, &arrow] {
        let client = PmcClient::new(driver, driver.kernel().spawn(None, Credentials::user(1000)));
        let mut request = AllocateRequest::iap(STLB_HIT);
        // Bits 39:32 (IN_TX, IN_TXCP, …) and 63:48 are refused everywhere.
        for high in [1u32, 1 << 7, 1 << 16, 1 << 31] {
            request.iap_config_high = high;
            assert_eq!(client.allocate(request), Err(Errno::Inval), "{high:#x}");
        }
        // A fixed counter takes no UMASK2.
        assert_eq!(client.allocate(slots().with_umask2(1)), Err(Errno::Inval));
    }
    // Skylake has no UMASK2.
    let client = PmcClient::new(&skylake, skylake.kernel().spawn(None, Credentials::user(1000)));
    let umask2 = AllocateRequest::iap(STLB_HIT).with_umask2(0x01);
    assert_eq!(client.allocate(umask2), Err(Errno::Inval));
    skylake.kernel().hardware().assert_no_faults();
    arrow.kernel().hardware().assert_no_faults();
}

#[test]
fn topdown_slots_counts_on_fixed_counter_3_where_it_exists() {
    // 8 slots per cycle on the Arrow Lake P-core, 5 on Ice Lake.
    for (model, per_cycle) in [(PmuModel::arrowlake_p(), 8), (PmuModel::icelake(), 5)] {
        let driver = load_driver(model, 1, Tunables::default());
        let cycles = AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_CORE);
        assert_eq!(count(&driver, &[slots(), cycles], 13), [700 * 13 * per_cycle, 700 * 13]);
        driver.kernel().hardware().assert_no_faults();
    }
    // Skylake's fixed counters are 0 to 2.
    let skylake = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let client = PmcClient::new(&skylake, skylake.kernel().spawn(None, Credentials::user(1000)));
    assert_eq!(client.allocate(slots()), Err(Errno::Inval));
}

#[test]
fn a_gap_in_the_v5_fixed_counter_bitmap_is_a_row_without_a_counter() {
    // Fixed counters 0, 1 and 3 (CPUID.0AH EDX[4:0] = 2, ECX = 0b1011): the IAF class has rows
    // 0 to 3; row 2 takes no PMC, row 3 counts TOPDOWN.SLOTS.
    let driver = load_driver(PmuModel::v5_sparse_fixed(), 1, Tunables::default());
    let client = PmcClient::new(&driver, driver.kernel().spawn(None, Credentials::user(1000)));
    let info = client.cpu_info().unwrap();
    let iaf = info.pm_classes[..info.pm_nclass as usize]
        .iter()
        .find(|c| c.pm_class == hwpmc::abi::Class::Iaf.as_u32())
        .map(|c| c.pm_num);
    assert_eq!(iaf, Some(4));
    let reference = AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_REF);
    assert_eq!(client.allocate(reference), Err(Errno::Inval));
    let instructions = AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY);
    assert_eq!(count(&driver, &[slots(), instructions], 7), [700 * 7 * 5, 400 * 7]);
    driver.kernel().hardware().assert_no_faults();
}
