//! A first end-to-end check: count instructions of one process on the simulated Skylake.

use hwpmc::Tunables;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{AllocateRequest, Credentials, PmcClient, PmuModel, load_driver};

#[test]
fn counts_instructions_of_one_process_exactly() {
    let driver = load_driver(PmuModel::skylake(), 2, Tunables::default());
    let kernel = driver.kernel().clone();
    let pid = kernel.spawn(None, Credentials::user(1000));
    let tid = kernel.threads(pid)[0];
    let client = PmcClient::new(&driver, pid);
    let id = client.allocate(AllocateRequest::iap(0x00C0)).expect("allocate");
    assert_eq!(id >> 8 & 0xFF, 7, "class IAP");
    driver.kernel().hardware().set_current_cpu(0);
    driver.switch_in(0, pid, tid);
    client.start(id).expect("start");
    let work = Work { instructions: 1000, core_cycles: 2000, ..Work::default() };
    kernel.hardware().pmu(0).retire_repeated(Ring::User, &work, 7);
    driver.switch_out(0, pid, tid);
    kernel.hardware().set_current_cpu(1);
    driver.switch_in(1, pid, tid);
    kernel.hardware().pmu(1).retire_repeated(Ring::Kernel, &work, 3);
    driver.switch_out(1, pid, tid);
    assert_eq!(client.read(id).unwrap(), 10_000);
    kernel.hardware().assert_no_faults();
}
