//! The SOFT and TSC classes, and direct counter reads granted by PMCGETMSR.

use hwpmc::abi::{Mode, event};
use hwpmc::{Errno, Tunables};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{AllocateRequest, Credentials, PmcClient, PmuModel, SimDriver, load_driver};

fn driver(model: PmuModel) -> SimDriver {
    load_driver(model, 2, Tunables::default())
}

/// Runs `pid`'s first thread on `cpu` while `f` happens there.
fn on_cpu(driver: &SimDriver, cpu: u32, pid: i32, f: impl FnOnce()) {
    let kernel = driver.kernel();
    let tid = kernel.threads(pid)[0];
    kernel.hardware().set_current_cpu(cpu as usize);
    driver.switch_in(cpu, pid, tid);
    f();
    driver.switch_out(cpu, pid, tid);
}

fn fire(driver: &SimDriver, cpu: u32, code: u32, times: usize) {
    for _ in 0..times {
        driver.soft_event(cpu, code, &Default::default());
    }
}

#[test]
fn soft_process_counting_counts_the_target_s_events_on_every_cpu() {
    let d = driver(PmuModel::skylake());
    let faults = d.register_soft_event("PAGE_FAULT.ALL").unwrap();
    let clock = d.register_soft_event("CLOCK.HARD").unwrap();
    let kernel = d.kernel().clone();
    let pid = kernel.spawn(None, Credentials::user(1000));
    let other = kernel.spawn(None, Credentials::user(1000));
    let c = PmcClient::new(&d, pid);
    let id = c.allocate(AllocateRequest::soft(faults)).unwrap();
    c.start(id).unwrap();
    on_cpu(&d, 0, pid, || {
        fire(&d, 0, faults, 5);
        fire(&d, 0, clock, 7);
    });
    on_cpu(&d, 1, pid, || fire(&d, 1, faults, 3));
    // Another process's page faults, and faults while nothing of the target runs, do not count.
    on_cpu(&d, 0, other, || fire(&d, 0, faults, 11));
    fire(&d, 1, faults, 2);
    assert_eq!(c.read(id), Ok(8));
    c.stop(id).unwrap();
    on_cpu(&d, 0, pid, || fire(&d, 0, faults, 4));
    assert_eq!(c.read(id), Ok(8), "a stopped PMC counts nothing");
}

#[test]
fn soft_system_counting_counts_everything_on_its_cpu() {
    let d = driver(PmuModel::no_pmu_vm());
    let faults = d.register_soft_event("PAGE_FAULT.ALL").unwrap();
    let kernel = d.kernel().clone();
    let root = kernel.spawn(None, Credentials::root());
    let user = kernel.spawn(None, Credentials::user(1000));
    let c = PmcClient::new(&d, root);
    let id =
        c.allocate(AllocateRequest::soft(faults).in_mode(Mode::SystemCounting, Some(1))).unwrap();
    c.start(id).unwrap();
    on_cpu(&d, 1, user, || fire(&d, 1, faults, 6));
    fire(&d, 1, faults, 4);
    fire(&d, 0, faults, 9);
    assert_eq!(c.read(id), Ok(10));
    d.kernel().hardware().assert_no_faults();
}

#[test]
fn the_soft_class_has_sixteen_rows() {
    let d = driver(PmuModel::skylake());
    let code = d.register_soft_event("CLOCK.STAT").unwrap();
    let pid = d.kernel().spawn(None, Credentials::user(1000));
    let c = PmcClient::new(&d, pid);
    for _ in 0..16 {
        c.allocate(AllocateRequest::soft(code)).unwrap();
    }
    assert_eq!(c.allocate(AllocateRequest::soft(code)), Err(Errno::Inval));
}

#[test]
fn tsc_reads_the_cpu_s_time_stamp_counter() {
    let d = driver(PmuModel::skylake());
    let root = d.kernel().spawn(None, Credentials::root());
    let c = PmcClient::new(&d, root);
    let id = c.allocate(AllocateRequest::tsc(1)).unwrap();
    // The TSC is shareable: a second TSC PMC on the same CPU is fine.
    let again = c.allocate(AllocateRequest::tsc(1)).unwrap();
    assert_eq!(id, again);
    c.start(id).unwrap();
    let hw = d.kernel().hardware().clone();
    let work = Work { instructions: 10, core_cycles: 30, ref_cycles: 25, ..Work::default() };
    hw.pmu(1).retire_repeated(Ring::User, &work, 1000);
    let expected = hw.pmu(1).tsc();
    assert!(expected >= 25_000);
    assert_eq!(c.read(id), Ok(expected));
    assert_eq!(c.caps(id), Ok(hwpmc::abi::Caps::READ.bits()));
}

#[test]
fn getmsr_grants_rdpmc_while_the_owner_runs() {
    let d = driver(PmuModel::skylake());
    let kernel = d.kernel().clone();
    let pid = kernel.spawn(None, Credentials::user(1000));
    let other = kernel.spawn(None, Credentials::user(1000));
    let c = PmcClient::new(&d, pid);
    let id = c.allocate(AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_CORE)).unwrap();
    c.start(id).unwrap();
    assert_eq!(c.get_msr(id), Ok(0x4000_0001), "RDPMC index of fixed counter 1");
    let tid = kernel.threads(pid)[0];
    kernel.hardware().set_current_cpu(1);
    d.switch_in(1, pid, tid);
    assert!(kernel.user_rdpmc(1));
    d.switch_out(1, pid, tid);
    assert!(!kernel.user_rdpmc(1));
    on_cpu(&d, 1, other, || assert!(!kernel.user_rdpmc(1)));
    d.kernel().hardware().assert_no_faults();
}
