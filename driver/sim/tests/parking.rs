//! Parking (the driver's `parking.rs`): a switch-out leaves a process's counting PMCs stopped
//! and loaded when the process came back to the CPU with no other process's PMCs loaded in
//! between; its next switch-in there only starts them again; anything else that loads PMCs there
//! evicts them first. Counts stay exact through every path.

use std::cell::RefCell;
use std::rc::Rc;

use hwpmc::abi::Mode;
use hwpmc::{Pid, Tid, Tunables};
use hwpmc_sim::pmu::msr::{IA32_PERF_GLOBAL_CTRL, IA32_PERFEVTSEL0};
use hwpmc_sim::pmu::{Access, Ring, Work};
use hwpmc_sim::{AllocateRequest, Credentials, PmcClient, PmuModel, SimDriver, load_driver};

/// One block of work: 1000 instructions, 1500 core cycles.
fn work() -> Work {
    Work { instructions: 1000, core_cycles: 1500, ..Work::default() }
}

/// A process of its own, with its thread.
fn process(driver: &SimDriver) -> (Pid, Tid) {
    let kernel = driver.kernel();
    let pid = kernel.spawn(None, Credentials::user(1000));
    (pid, kernel.threads(pid)[0])
}

/// Allocates and starts a PMC counting instructions (IAP 0xC0) and one counting core cycles
/// (IAP 0x3C) for `pid`, its own process.
fn count_both(driver: &SimDriver, pid: Pid) -> [u32; 2] {
    let client = PmcClient::new(driver, pid);
    [0x00C0, 0x003C].map(|event| {
        let id = client.allocate(AllocateRequest::iap(event)).expect("allocate");
        client.start(id).expect("start");
        id
    })
}

/// Runs thread `tid` of `pid` on `cpu` for `blocks` blocks of [`work`].
fn run(driver: &SimDriver, cpu: u32, (pid, tid): (Pid, Tid), blocks: u64) {
    let hw = driver.kernel().hardware();
    hw.set_current_cpu(cpu as usize);
    driver.switch_in(cpu, pid, tid);
    hw.pmu(cpu as usize).retire_repeated(Ring::User, &work(), blocks);
    driver.switch_out(cpu, pid, tid);
}

/// What `pid`'s two PMCs read.
fn counts(driver: &SimDriver, pid: Pid, ids: [u32; 2]) -> [u64; 2] {
    let client = PmcClient::new(driver, pid);
    ids.map(|id| client.read(id).expect("read"))
}

/// The counts of `blocks` blocks of [`work`].
fn expected(blocks: u64) -> [u64; 2] {
    [1000 * blocks, 1500 * blocks]
}

/// The MSR and counter accesses the driver makes while `f` runs.
fn accesses(driver: &SimDriver, f: impl FnOnce()) -> Vec<Access> {
    let hw = driver.kernel().hardware();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let record = {
        let (seen, hw) = (Rc::clone(&seen), hw.clone());
        move || seen.borrow_mut().extend(hw.last_access())
    };
    hw.after_each_access(Some(Rc::new(record)));
    f();
    hw.after_each_access(None);
    seen.take()
}

/// The owner of the PMC in row IAP-0 of CPU 0 (GETPMCINFO, asked by `viewer`), or -1.
fn iap0_owner(driver: &SimDriver, viewer: Pid) -> Pid {
    let info = PmcClient::new(driver, viewer).pmc_info(0).unwrap();
    let name = |i: &hwpmc::abi::PmcInfo| i.pm_name.split(|&b| b == 0).next().map(<[u8]>::to_vec);
    let row = info.iter().find(|i| name(i).as_deref() == Some(&b"IAP-0"[..])).expect("IAP-0");
    row.pm_ownerpid
}

/// The value of MSR `msr` on `cpu`.
fn msr(driver: &SimDriver, cpu: usize, msr: u32) -> u64 {
    driver.kernel().hardware().pmu(cpu).read_msr(msr).expect("the MSR exists")
}

#[test]
fn a_process_back_on_the_cpu_it_left_only_has_its_counters_started_again() {
    let driver = load_driver(PmuModel::skylake(), 2, Tunables::default());
    let thread = process(&driver);
    let ids = count_both(&driver, thread.0);
    run(&driver, 0, thread, 1);
    assert_eq!(msr(&driver, 0, IA32_PERFEVTSEL0), 0, "the first visit unloads");
    run(&driver, 0, thread, 2);
    // Back with nobody measured in between: parked, stopped, still programmed.
    assert_eq!(msr(&driver, 0, IA32_PERF_GLOBAL_CTRL), 0, "stopped");
    assert_ne!(msr(&driver, 0, IA32_PERFEVTSEL0), 0, "still programmed");
    let hw = driver.kernel().hardware();
    let switch_in = accesses(&driver, || driver.switch_in(0, thread.0, thread.1));
    assert_eq!(
        switch_in,
        [Access::Wrmsr { msr: IA32_PERF_GLOBAL_CTRL, value: 0b11 }],
        "one write starts both counters"
    );
    hw.pmu(0).retire_repeated(Ring::User, &work(), 4);
    let switch_out = accesses(&driver, || driver.switch_out(0, thread.0, thread.1));
    assert_eq!(switch_out, [Access::Wrmsr { msr: IA32_PERF_GLOBAL_CTRL, value: 0 }]);
    for _ in 0..10 {
        run(&driver, 0, thread, 2);
    }
    assert_eq!(counts(&driver, thread.0, ids), expected(3 + 4 + 20));
    hw.assert_no_faults();
}

#[test]
fn a_parked_pmc_reads_exactly_while_its_process_is_away_and_after_it_comes_back() {
    let driver = load_driver(PmuModel::skylake(), 2, Tunables::default());
    let thread = process(&driver);
    let ids = count_both(&driver, thread.0);
    run(&driver, 0, thread, 2);
    run(&driver, 0, thread, 3);
    assert_eq!(iap0_owner(&driver, thread.0), thread.0, "parked");
    assert_eq!(counts(&driver, thread.0, ids), expected(5), "read from the parked counters");
    assert_eq!(counts(&driver, thread.0, ids), expected(5), "reading changes nothing");
    run(&driver, 0, thread, 2);
    // On the other CPU too, while parked on the first.
    run(&driver, 1, thread, 3);
    assert_eq!(counts(&driver, thread.0, ids), expected(10));
    driver.kernel().hardware().assert_no_faults();
}

#[test]
fn another_process_switching_in_evicts_the_parked_pmcs_and_both_count_exactly() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let (first, second) = (process(&driver), process(&driver));
    let (first_ids, second_ids) = (count_both(&driver, first.0), count_both(&driver, second.0));
    run(&driver, 0, first, 1);
    run(&driver, 0, first, 2);
    // (GETPMCINFO names the owner of the PMC a counter holds: each process owns its own.)
    assert_eq!(iap0_owner(&driver, first.0), first.0, "parked for the first process");
    run(&driver, 0, second, 4);
    assert_eq!(iap0_owner(&driver, first.0), -1, "evicted, and the second one unloaded");
    run(&driver, 0, second, 5);
    assert_eq!(iap0_owner(&driver, first.0), second.0, "the second one is back: parked");
    assert_eq!(counts(&driver, first.0, first_ids), expected(3));
    assert_eq!(counts(&driver, second.0, second_ids), expected(9));
    run(&driver, 0, first, 6);
    assert_eq!(counts(&driver, first.0, first_ids), expected(9));
    assert_eq!(counts(&driver, second.0, second_ids), expected(9));
    driver.kernel().hardware().assert_no_faults();
}

#[test]
fn a_pmc_started_for_the_thread_running_where_another_process_parked_counts_at_once() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let (parked, runner) = (process(&driver), process(&driver));
    let parked_ids = count_both(&driver, parked.0);
    run(&driver, 0, parked, 2);
    run(&driver, 0, parked, 2);
    assert_eq!(iap0_owner(&driver, parked.0), parked.0, "parked");
    // The runner has no PMC when it switches in: the parked ones stay.
    let hw = driver.kernel().hardware();
    driver.switch_in(0, runner.0, runner.1);
    hw.pmu(0).retire_repeated(Ring::User, &work(), 1);
    let runner_ids = count_both(&driver, runner.0);
    hw.pmu(0).retire_repeated(Ring::User, &work(), 6);
    driver.switch_out(0, runner.0, runner.1);
    assert_eq!(counts(&driver, runner.0, runner_ids), expected(6), "counted from its start");
    assert_eq!(counts(&driver, parked.0, parked_ids), expected(4), "the parked count is kept");
    run(&driver, 0, parked, 1);
    assert_eq!(counts(&driver, parked.0, parked_ids), expected(5));
    hw.assert_no_faults();
}

#[test]
fn a_pmc_attached_to_a_parked_process_counts_from_its_next_switch_in() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let target = process(&driver);
    let ids = count_both(&driver, target.0);
    run(&driver, 0, target, 1);
    run(&driver, 0, target, 1);
    // A tool attaches a third PMC to the process while it is away: a newer image map.
    let tool = PmcClient::new(&driver, driver.kernel().spawn(None, Credentials::user(1000)));
    // (On a fixed counter: the process's own PMCs hold the first GP rows.)
    let request = AllocateRequest::iaf(hwpmc::abi::event::IAF_INSTR_RETIRED_ANY);
    let id = tool.allocate(request).unwrap();
    tool.attach(id, target.0).unwrap();
    tool.start(id).unwrap();
    run(&driver, 0, target, 3);
    assert_eq!(tool.read(id).unwrap(), 3000);
    assert_eq!(counts(&driver, target.0, ids), expected(5));
    driver.kernel().hardware().assert_no_faults();
}

#[test]
fn stopping_or_releasing_a_parked_pmc_takes_its_count_and_frees_its_counter() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let thread = process(&driver);
    let [instructions, cycles] = count_both(&driver, thread.0);
    run(&driver, 0, thread, 1);
    run(&driver, 0, thread, 2);
    assert_eq!(iap0_owner(&driver, thread.0), thread.0, "parked");
    let client = PmcClient::new(&driver, thread.0);
    client.stop(instructions).unwrap();
    assert_eq!(client.read(instructions).unwrap(), 3000, "final while stopped");
    run(&driver, 0, thread, 2);
    assert_eq!(client.read(instructions).unwrap(), 3000, "stopped counts nothing more");
    assert_eq!(client.read(cycles).unwrap(), 7500);
    client.release(cycles).unwrap();
    client.release(instructions).unwrap();
    let info = client.pmc_info(0).unwrap();
    assert!(info.iter().all(|i| i.pm_ownerpid == -1), "every row free");
    assert_eq!(msr(&driver, 0, IA32_PERFEVTSEL0), 0, "unprogrammed");
    driver.kernel().hardware().assert_no_faults();
}

#[test]
fn a_process_that_exits_while_parked_is_detached_with_its_exact_count() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let target = process(&driver);
    let tool = PmcClient::new(&driver, driver.kernel().spawn(None, Credentials::user(1000)));
    let id = tool.allocate(AllocateRequest::iap(0x00C0)).unwrap();
    tool.attach(id, target.0).unwrap();
    tool.start(id).unwrap();
    run(&driver, 0, target, 3);
    run(&driver, 0, target, 4);
    assert_eq!(iap0_owner(&driver, tool.pid()), tool.pid(), "parked");
    driver.process_exit(target.0);
    assert_eq!(tool.read(id).unwrap(), 7000);
    assert_eq!(iap0_owner(&driver, tool.pid()), -1, "nothing stays parked for a gone process");
    driver.kernel().hardware().assert_no_faults();
}

#[test]
fn a_cpu_going_offline_hands_back_what_it_parked() {
    let driver = load_driver(PmuModel::skylake(), 2, Tunables::default());
    let thread = process(&driver);
    let ids = count_both(&driver, thread.0);
    run(&driver, 1, thread, 1);
    run(&driver, 1, thread, 3);
    assert_ne!(msr(&driver, 1, IA32_PERFEVTSEL0), 0, "parked");
    driver.kernel().hardware().set_current_cpu(1);
    driver.cpu_offline(1);
    assert_eq!(msr(&driver, 1, IA32_PERFEVTSEL0), 0, "unprogrammed");
    let info = PmcClient::new(&driver, thread.0).pmc_info(1).unwrap();
    assert!(info.iter().all(|i| i.pm_ownerpid == -1), "nothing left on CPU 1");
    assert_eq!(counts(&driver, thread.0, ids), expected(4));
    run(&driver, 1, thread, 1);
    assert_eq!(counts(&driver, thread.0, ids), expected(5), "loaded again when it comes back");
    driver.kernel().hardware().assert_no_faults();
}

#[test]
fn sampling_pmcs_and_perfmon_v1_counters_are_unloaded_at_every_switch_out() {
    // A sampling PMC: a lost overflow would delay its next sample by a whole counter range.
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let thread = process(&driver);
    let client = PmcClient::new(&driver, thread.0);
    let request = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
    let id = client.allocate(request.with_count(1_000_000)).unwrap();
    client.start(id).unwrap();
    run(&driver, 0, thread, 1);
    assert_eq!(msr(&driver, 0, IA32_PERFEVTSEL0), 0, "a sampling PMC is unloaded");
    // Perfmon v1 stops a counter only by unprogramming it.
    let driver = load_driver(PmuModel::yonah(), 1, Tunables::default());
    let thread = process(&driver);
    let client = PmcClient::new(&driver, thread.0);
    let id = client.allocate(AllocateRequest::iap(0x00C0)).unwrap();
    client.start(id).unwrap();
    run(&driver, 0, thread, 2);
    assert_eq!(msr(&driver, 0, IA32_PERFEVTSEL0), 0, "perfmon v1 unloads");
    driver.kernel().hardware().pmu(0).retire_repeated(Ring::User, &work(), 5);
    run(&driver, 0, thread, 1);
    assert_eq!(client.read(id).unwrap(), 3000, "nothing counted while away");
}

#[test]
fn parked_counters_count_nothing_while_other_processes_run() {
    for (name, model) in
        [("skylake", PmuModel::skylake()), ("zen4", PmuModel::zen4()), ("k10", PmuModel::k10())]
    {
        let driver = load_driver(model, 1, Tunables::default());
        let thread = process(&driver);
        let client = PmcClient::new(&driver, thread.0);
        let request = AllocateRequest::arch(&model, hwpmc_sim::ArchEvent::Instructions, 0);
        let id = client.allocate(request).unwrap();
        client.start(id).unwrap();
        run(&driver, 0, thread, 1);
        run(&driver, 0, thread, 1);
        // Unmeasured work while the PMC is parked.
        driver.kernel().hardware().pmu(0).retire_repeated(Ring::User, &work(), 9);
        run(&driver, 0, thread, 1);
        assert_eq!(client.read(id).unwrap(), 3000, "{name}");
        driver.kernel().hardware().assert_no_faults();
    }
}

#[test]
fn a_parked_software_pmc_counts_no_event_of_another_process() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let event = driver.register_soft_event("PAGE_FAULT.ALL").unwrap();
    let thread = process(&driver);
    let client = PmcClient::new(&driver, thread.0);
    let soft = client.allocate(AllocateRequest::soft(event)).unwrap();
    let hard = client.allocate(AllocateRequest::iap(0x00C0)).unwrap();
    client.start(soft).unwrap();
    client.start(hard).unwrap();
    let fire = |times| {
        for _ in 0..times {
            driver.soft_event(0, event, &hwpmc::TrapFrame::default());
        }
    };
    driver.kernel().hardware().set_current_cpu(0);
    for times in [1, 2] {
        driver.switch_in(0, thread.0, thread.1);
        fire(times);
        driver.switch_out(0, thread.0, thread.1);
    }
    // Parked: another process's events are not the PMC's.
    let other = process(&driver);
    driver.switch_in(0, other.0, other.1);
    fire(5);
    driver.switch_out(0, other.0, other.1);
    let switch_in = accesses(&driver, || driver.switch_in(0, thread.0, thread.1));
    assert_eq!(switch_in.len(), 1, "started again, not loaded: {switch_in:?}");
    fire(4);
    driver.switch_out(0, thread.0, thread.1);
    assert_eq!(client.read(soft).unwrap(), 7);
    driver.kernel().hardware().assert_no_faults();
}

#[test]
fn processes_taking_turns_with_pmcs_on_a_cpu_are_unloaded_not_parked() {
    // Parking would only move each switch-out's work to the other process's switch-in.
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let (first, second) = (process(&driver), process(&driver));
    let (first_ids, second_ids) = (count_both(&driver, first.0), count_both(&driver, second.0));
    for round in 1..=4 {
        run(&driver, 0, first, round);
        assert_eq!(msr(&driver, 0, IA32_PERFEVTSEL0), 0, "round {round}: unloaded");
        run(&driver, 0, second, 2 * round);
        assert_eq!(msr(&driver, 0, IA32_PERFEVTSEL0), 0, "round {round}: unloaded");
    }
    assert_eq!(counts(&driver, first.0, first_ids), expected(10));
    assert_eq!(counts(&driver, second.0, second_ids), expected(20));
    driver.kernel().hardware().assert_no_faults();
}
