//! Offcore response end to end: the driver checks `pm_iap_rsp` against the model's
//! MSR_OFFCORE_RSP_0/1, claims the MSR per CPU, writes it while the counter counts and clears it
//! when the PMC is unloaded (a switch-out parks it: stopped, still programmed); the simulated CPU
//! counts the requests the value selects and faults on reserved bits.

use hwpmc::Tunables;
use hwpmc::abi::Mode;
use hwpmc::errno::Errno;
use hwpmc_sim::pmu::msr::IA32_PERF_GLOBAL_CTRL;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{AllocateRequest, Credentials, PmcClient, PmuModel, SimDriver, load_driver};

/// OFFCORE_RESPONSE_0 (event 0xB7, umask 0x01) and _1 (0xBB, 0x01) on Skylake.
const RSP_0_EVENT: u32 = 0x01B7;
const RSP_1_EVENT: u32 = 0x01BB;
/// Two response values Skylake defines (request bit 0 or 1, response "any" bit 16).
const DEMAND_DATA_ANY: u64 = 0x1_0001;
const DEMAND_RFO_ANY: u64 = 0x1_0002;
const MSR_OFFCORE_RSP_0: u32 = 0x1A6;
const MSR_OFFCORE_RSP_1: u32 = 0x1A7;

fn offcore(event: u32, rsp: u64) -> AllocateRequest {
    AllocateRequest::iap(event).with_rsp(rsp)
}

fn system(request: AllocateRequest, cpu: u32) -> AllocateRequest {
    request.in_mode(Mode::SystemCounting, Some(cpu))
}

/// A block with offcore requests of both values (and some of a third nothing selects).
fn work() -> Work {
    Work { instructions: 500, core_cycles: 900, ..Work::default() }
        .with_offcore(DEMAND_DATA_ANY, 5)
        .with_offcore(DEMAND_RFO_ANY, 7)
        .with_offcore(0x1_0004, 11)
}

fn driver(model: PmuModel) -> SimDriver {
    load_driver(model, 2, Tunables::default())
}

#[test]
fn offcore_events_count_the_requests_their_response_values_select() {
    let driver = driver(PmuModel::skylake());
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware();
    let pid = kernel.spawn(None, Credentials::user(1000));
    let tid = kernel.threads(pid)[0];
    let client = PmcClient::new(&driver, pid);
    let data = client.allocate(offcore(RSP_0_EVENT, DEMAND_DATA_ANY)).unwrap();
    let rfo = client.allocate(offcore(RSP_1_EVENT, DEMAND_RFO_ANY)).unwrap();
    client.start(data).unwrap();
    client.start(rfo).unwrap();
    for (cpu, ring, repeat) in [(0, Ring::User, 10), (1, Ring::Kernel, 3), (0, Ring::User, 4)] {
        hw.set_current_cpu(cpu);
        driver.switch_in(cpu as u32, pid, tid);
        let pmu = || hw.pmu(cpu);
        assert_eq!(pmu().read_msr(MSR_OFFCORE_RSP_0), Ok(DEMAND_DATA_ANY), "loaded on {cpu}");
        assert_eq!(pmu().read_msr(MSR_OFFCORE_RSP_1), Ok(DEMAND_RFO_ANY));
        pmu().retire_repeated(ring, &work(), repeat);
        driver.switch_out(cpu as u32, pid, tid);
        // Parked for the process (see the driver's `parking.rs`): stopped, still programmed.
        assert_eq!(pmu().read_msr(IA32_PERF_GLOBAL_CTRL), Ok(0), "stopped on {cpu}");
    }
    let truth = |response| {
        (0..2)
            .flat_map(|cpu| [Ring::User, Ring::Kernel].map(|r| (cpu, r)))
            .map(|(cpu, ring)| hw.pmu(cpu).ground_truth(ring).offcore(response))
            .sum::<u128>() as u64
    };
    assert_eq!(truth(DEMAND_DATA_ANY), 5 * 17);
    assert_eq!(client.read(data).unwrap(), truth(DEMAND_DATA_ANY));
    assert_eq!(client.read(rfo).unwrap(), truth(DEMAND_RFO_ANY));
    client.release(data).unwrap();
    client.release(rfo).unwrap();
    for cpu in 0..2 {
        let pmu = hw.pmu(cpu);
        assert_eq!(pmu.read_msr(MSR_OFFCORE_RSP_0), Ok(0), "cleared when unloaded from {cpu}");
        assert_eq!(pmu.read_msr(MSR_OFFCORE_RSP_1), Ok(0));
    }
    hw.assert_no_faults();
}

#[test]
fn response_values_with_undefined_bits_are_refused_before_any_write() {
    // Skylake defines bits 0x3F_FFFF_8FFF: bit 12 and bit 38 are reserved.
    let driver = driver(PmuModel::skylake());
    let kernel = driver.kernel().clone();
    let client = PmcClient::new(&driver, kernel.spawn(None, Credentials::user(1000)));
    for rsp in [DEMAND_DATA_ANY | 1 << 12, DEMAND_DATA_ANY | 1 << 38] {
        assert_eq!(client.allocate(offcore(RSP_0_EVENT, rsp)), Err(Errno::Inval), "{rsp:#x}");
        assert_eq!(client.allocate(offcore(RSP_1_EVENT, rsp)), Err(Errno::Inval), "{rsp:#x}");
    }
    // A response value for an event that reads none.
    assert_eq!(client.allocate(offcore(0x00C0, DEMAND_DATA_ANY)), Err(Errno::Inval));
    // Nehalem has MSR_OFFCORE_RSP_0 only, with bits 15:0.
    let nehalem = self::driver(PmuModel::nehalem());
    let kernel = nehalem.kernel().clone();
    let client = PmcClient::new(&nehalem, kernel.spawn(None, Credentials::user(1000)));
    assert_eq!(client.allocate(offcore(RSP_0_EVENT, DEMAND_DATA_ANY)), Err(Errno::Inval));
    assert_eq!(client.allocate(offcore(RSP_1_EVENT, 0x0001)), Err(Errno::Inval));
    client.allocate(offcore(RSP_0_EVENT, 0x00FF)).expect("bits 15:0");
    // Core 2 has no offcore-response MSR.
    let core2 = self::driver(PmuModel::core2());
    let kernel = core2.kernel().clone();
    let client = PmcClient::new(&core2, kernel.spawn(None, Credentials::user(1000)));
    assert_eq!(client.allocate(offcore(RSP_0_EVENT, 0x0001)), Err(Errno::Inval));
    for hw in [driver.kernel().hardware(), nehalem.kernel().hardware(), core2.kernel().hardware()] {
        hw.assert_no_faults();
    }
}

#[test]
fn two_values_for_one_msr_on_one_cpu_are_ebusy() {
    let driver = driver(PmuModel::skylake());
    let kernel = driver.kernel().clone();
    let root = PmcClient::new(&driver, kernel.spawn(None, Credentials::root()));
    let cpu0 = root.allocate(system(offcore(RSP_0_EVENT, DEMAND_DATA_ANY), 0)).unwrap();
    // The same value shares the MSR; another value on the same CPU does not.
    let same = root.allocate(system(offcore(RSP_0_EVENT, DEMAND_DATA_ANY), 0)).unwrap();
    let other = system(offcore(RSP_0_EVENT, DEMAND_RFO_ANY), 0);
    assert_eq!(root.allocate(other), Err(Errno::Busy));
    // The other MSR, or the other CPU, is free.
    root.allocate(system(offcore(RSP_1_EVENT, DEMAND_RFO_ANY), 0)).unwrap();
    let cpu1 = root.allocate(system(offcore(RSP_0_EVENT, DEMAND_RFO_ANY), 1)).unwrap();
    // A process PMC may be loaded on either CPU: it conflicts with both values.
    let user = PmcClient::new(&driver, kernel.spawn(None, Credentials::user(1000)));
    assert_eq!(user.allocate(offcore(RSP_0_EVENT, DEMAND_DATA_ANY)), Err(Errno::Busy));
    assert_eq!(user.allocate(offcore(RSP_0_EVENT, DEMAND_RFO_ANY)), Err(Errno::Busy));
    // Releasing gives the claim back.
    root.release(cpu1).unwrap();
    let process = user.allocate(offcore(RSP_0_EVENT, DEMAND_DATA_ANY)).unwrap();
    root.release(cpu0).unwrap();
    root.release(same).unwrap();
    assert_eq!(root.allocate(system(offcore(RSP_0_EVENT, DEMAND_RFO_ANY), 0)), Err(Errno::Busy));
    user.release(process).unwrap();
    root.allocate(system(offcore(RSP_0_EVENT, DEMAND_RFO_ANY), 0)).unwrap();
    kernel.hardware().assert_no_faults();
}

#[test]
fn a_system_pmc_counts_offcore_requests_while_its_cpu_runs_anything() {
    let driver = driver(PmuModel::icelake());
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware();
    let root = PmcClient::new(&driver, kernel.spawn(None, Credentials::root()));
    hw.set_current_cpu(1);
    let id = root.allocate(system(offcore(RSP_1_EVENT, DEMAND_RFO_ANY), 1)).unwrap();
    root.start(id).unwrap();
    assert_eq!(hw.pmu(1).read_msr(MSR_OFFCORE_RSP_1), Ok(DEMAND_RFO_ANY));
    hw.pmu(1).retire_repeated(Ring::Kernel, &work(), 9);
    hw.pmu(0).retire_repeated(Ring::Kernel, &work(), 5);
    root.stop(id).unwrap();
    assert_eq!(root.read(id).unwrap(), 7 * 9);
    root.release(id).unwrap();
    assert_eq!(hw.pmu(1).read_msr(MSR_OFFCORE_RSP_1), Ok(0), "cleared at release");
    hw.assert_no_faults();
}

#[test]
fn a_guest_gets_no_offcore_response() {
    // Under a hypervisor the MSRs may not exist (the simulated guest has none): the driver
    // neither writes them nor accepts a response value.
    let guest = PmuModel { hypervisor: true, offcore_rsp_valid: [0; 2], ..PmuModel::skylake() };
    let driver = driver(guest);
    let kernel = driver.kernel().clone();
    let client = PmcClient::new(&driver, kernel.spawn(None, Credentials::user(1000)));
    assert_eq!(client.allocate(offcore(RSP_0_EVENT, DEMAND_DATA_ANY)), Err(Errno::Inval));
    client.allocate(AllocateRequest::iap(0x00C0)).unwrap();
    kernel.hardware().assert_no_faults();
}
