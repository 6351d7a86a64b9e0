//! Counter multiplexing on the simulated machine: more PMCs than counters, rotated at the tick,
//! with exact times enabled and running, event groups counted together, and the error of scaled
//! counts against the machine's ground truth.
//!
//! The exact scenarios run a user-mode block whose events are fixed multiples of its reference
//! cycles, and the TSC advances by exactly those cycles: so a PMC's count is its time on a
//! counter times the block's ratio, and its time enabled is the TSC between its start and stop.

use hwpmc::Errno;
use hwpmc::abi::{Mode, PmcFlags};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{AllocateRequest, ArchEvent, Credentials, Machine, MachineConfig, PmuModel};
use hwpmc_sim::{GroundTruth, ProgramBuilder};

/// One block: 1 000 instructions in 1 300 reference cycles.
fn steady_work() -> Work {
    Work::every_event_distinct()
}

/// A kernel block with other rates than [`steady_work`].
fn system_work() -> Work {
    Work::kernel_events_distinct()
}

/// An IA32_PERFEVTSEL image of `event` in both rings.
fn config(event: ArchEvent) -> u32 {
    u32::from(event.event_select()) | u32::from(event.umask()) << 8 | 3 << 16
}

/// A program that runs `blocks` steady blocks in user mode, `per_loop` at a time, and exits.
fn steady_program(blocks: u64, per_loop: u64) -> std::rc::Rc<hwpmc_sim::Program> {
    ProgramBuilder::new("/bin/steady")
        .function("main", move |f| {
            f.repeat(Ring::User, steady_work(), per_loop).loop_to(0, blocks / per_loop).exit()
        })
        .build()
}

fn mux() -> PmcFlags {
    PmcFlags::MULTIPLEX
}

#[test]
fn without_the_flag_allocation_fails_when_the_counters_run_out_as_freebsds() {
    let model = PmuModel::skylake();
    let mut m = Machine::new(MachineConfig::new(model, 1));
    let tool = m.spawn_tool(Credentials::root());
    let gp = u32::from(model.gp_counter_count());
    let request = AllocateRequest::iap(config(ArchEvent::Instructions))
        .in_mode(Mode::SystemCounting, Some(0));
    let plain: Vec<u32> =
        (0..gp).map(|_| m.client(tool).allocate(request).expect("a free counter")).collect();
    assert_eq!(m.client(tool).allocate(request), Err(Errno::Inval), "no counter left");
    // A multiplexed PMC never takes turns with one that is not: none fits either.
    assert_eq!(m.client(tool).allocate(request.with_flags(mux())), Err(Errno::Inval));
    // Once a counter is free, multiplexed PMCs share it, one per turn.
    m.client(tool).release(plain[0]).unwrap();
    for turn in 0..4 {
        let id = m.client(tool).allocate(request.with_flags(mux()));
        assert!(id.is_ok(), "turn {turn}: {id:?}");
    }
    assert_eq!(m.client(tool).allocate(request), Err(Errno::Inval), "the counter takes turns");
}

/// System counting: 4× the GP counters on CPU 0; each PMC's time enabled is exactly the TSC
/// between its start and its stop, the turns' running times add up to it, and each count is
/// exactly its running time at the block's rate.
#[test]
fn system_pmcs_take_turns_with_exact_times() {
    let model = PmuModel::skylake();
    let mut m = Machine::new(MachineConfig::new(model, 1).quantum(7));
    let tool = m.spawn_tool(Credentials::root());
    let gp = usize::from(model.gp_counter_count());
    let request = AllocateRequest::iap(config(ArchEvent::Instructions))
        .in_mode(Mode::SystemCounting, Some(0))
        .with_flags(mux());
    let ids: Vec<u32> =
        (0..4 * gp).map(|_| m.client(tool).allocate(request).expect("multiplexed")).collect();
    let tsc_start = m.hardware().pmu(0).tsc();
    for &id in &ids {
        m.client(tool).start(id).unwrap();
    }
    m.spawn(&steady_program(5_000, 10), Credentials::user(1001));
    m.run_until_idle();
    let tsc_stop = m.hardware().pmu(0).tsc();
    for &id in &ids {
        m.client(tool).stop(id).unwrap();
    }
    let truth = m.cpu_truth(0).arch(ArchEvent::Instructions);
    let elapsed = tsc_stop - tsc_start;
    assert_eq!(u128::from(elapsed), m.cpu_truth(0).arch(ArchEvent::RefCycles));
    let mut running_sum = 0;
    for (i, &id) in ids.iter().enumerate() {
        let t = m.client(tool).read_times(id).unwrap();
        assert_eq!(t.pm_enabled, elapsed, "PMC {i}: enabled from start to stop");
        assert!(t.pm_running > 0 && t.pm_running < elapsed, "PMC {i} took turns: {t:?}");
        assert_eq!(t.pm_value * 1_300, t.pm_running * 1_000, "PMC {i}: count at the rate");
        running_sum += t.pm_running;
        let scaled = t.pm_value as f64 * t.pm_enabled as f64 / t.pm_running as f64;
        let error = (scaled - truth as f64).abs() / truth as f64;
        assert!(error < 0.05, "PMC {i}: scaled {scaled} against {truth}");
    }
    // One turn is on the counters at any time: the turns' running times cover the run, once.
    assert_eq!(running_sum, elapsed * gp as u64);
    m.hardware().assert_no_faults();
}

/// Process counting: a tool attaches 4× the GP counters to a two-thread process on two CPUs;
/// each PMC is enabled exactly while a thread of the process runs.
#[test]
fn process_pmcs_take_turns_with_exact_times() {
    let model = PmuModel::icelake();
    let mut m = Machine::new(MachineConfig::new(model, 2).quantum(5).seed(3));
    let tool = m.spawn_tool(Credentials::root());
    let program = ProgramBuilder::new("/bin/two")
        .function("main", |f| f.spawn_thread("worker").call("body").exit())
        .function("worker", |f| f.call("body").exit_thread())
        .function("body", |f| f.repeat(Ring::User, steady_work(), 9).loop_to(0, 400))
        .build();
    let pid = m.spawn(&program, Credentials::user(1002));
    let gp = usize::from(model.gp_counter_count());
    let request = AllocateRequest::iap(config(ArchEvent::Instructions)).with_flags(mux());
    let ids: Vec<u32> =
        (0..4 * gp).map(|_| m.client(tool).allocate(request).expect("multiplexed")).collect();
    for &id in &ids {
        m.client(tool).attach(id, pid).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    let truth: GroundTruth = m.process_truth(pid);
    let on_cpu = u64::try_from(truth.arch(ArchEvent::RefCycles)).unwrap();
    let mut running_sum = 0;
    for (i, &id) in ids.iter().enumerate() {
        let t = m.client(tool).read_times(id).unwrap();
        assert_eq!(t.pm_enabled, on_cpu, "PMC {i}: enabled while the process ran");
        assert!(t.pm_running > 0 && t.pm_running < on_cpu, "PMC {i}: {t:?}");
        assert_eq!(t.pm_value * 1_300, t.pm_running * 1_000, "PMC {i}: count at the rate");
        running_sum += t.pm_running;
    }
    assert_eq!(running_sum, on_cpu * gp as u64, "one turn at a time on each CPU");
    m.hardware().assert_no_faults();
}

/// A PMC that is not multiplexed keeps its counter all the time, next to multiplexed ones.
#[test]
fn a_pmc_that_is_not_multiplexed_counts_everything_among_multiplexed_ones() {
    let model = PmuModel::skylake();
    let mut m = Machine::new(MachineConfig::new(model, 1).quantum(4));
    let tool = m.spawn_tool(Credentials::root());
    let request =
        AllocateRequest::iap(config(ArchEvent::Branches)).in_mode(Mode::SystemCounting, Some(0));
    let plain = m.client(tool).allocate(request).unwrap();
    let gp = usize::from(model.gp_counter_count());
    let muxed: Vec<u32> = (0..3 * gp)
        .map(|_| m.client(tool).allocate(request.with_flags(mux())).expect("multiplexed"))
        .collect();
    for &id in std::iter::once(&plain).chain(&muxed) {
        m.client(tool).start(id).unwrap();
    }
    m.spawn(&steady_program(600, 6), Credentials::user(1003));
    m.run_until_idle();
    let truth = m.cpu_truth(0).arch(ArchEvent::Branches);
    let plain_times = m.client(tool).read_times(plain).unwrap();
    assert_eq!(u128::from(plain_times.pm_value), truth, "exact, as without multiplexing");
    assert_eq!((plain_times.pm_enabled, plain_times.pm_running), (0, 0), "not multiplexed");
    for &id in &muxed {
        let t = m.client(tool).read_times(id).unwrap();
        assert!(t.pm_running < t.pm_enabled, "{t:?}");
    }
}

/// Groups: a leader and its members are always on the counters together (their running times
/// are equal and their counts belong to the same intervals), and a group larger than the
/// counters is refused.
#[test]
fn a_group_is_counted_all_or_nothing() {
    let model = PmuModel::skylake();
    let mut m = Machine::new(MachineConfig::new(model, 1).quantum(3));
    let tool = m.spawn_tool(Credentials::root());
    let gp = usize::from(model.gp_counter_count());
    let on_cpu0 = |e| AllocateRequest::iap(config(e)).in_mode(Mode::SystemCounting, Some(0));
    // Filler PMCs take turn 0 partly, so the group cannot go there.
    let filler: Vec<u32> = (0..gp - 1)
        .map(|_| m.client(tool).allocate(on_cpu0(ArchEvent::LlcReferences).with_flags(mux())))
        .collect::<Result<_, _>>()
        .unwrap();
    let leader = m
        .client(tool)
        .allocate(on_cpu0(ArchEvent::Instructions).with_flags(PmcFlags::GROUP_LEADER))
        .unwrap();
    let member = m
        .client(tool)
        .allocate(on_cpu0(ArchEvent::Branches).with_flags(PmcFlags::GROUP_MEMBER))
        .unwrap();
    let mut group = vec![leader, member];
    while group.len() < gp {
        let id = m
            .client(tool)
            .allocate(on_cpu0(ArchEvent::CoreCycles).with_flags(PmcFlags::GROUP_MEMBER))
            .unwrap();
        group.push(id);
    }
    assert_eq!(
        m.client(tool).allocate(on_cpu0(ArchEvent::CoreCycles).with_flags(PmcFlags::GROUP_MEMBER)),
        Err(Errno::Busy),
        "a group of more PMCs than counters cannot be counted together"
    );
    for &id in filler.iter().chain(&group) {
        m.client(tool).start(id).unwrap();
    }
    m.spawn(&steady_program(900, 9), Credentials::user(1004));
    m.run_until_idle();
    let times: Vec<_> = group.iter().map(|&id| m.client(tool).read_times(id).unwrap()).collect();
    let running = times[0].pm_running;
    assert!(running > 0 && running < times[0].pm_enabled, "{:?}", times[0]);
    for t in &times {
        assert_eq!(t.pm_running, running, "every member on the counters with the leader");
    }
    // Counted over the same intervals: instructions and branches in the block's ratio.
    assert_eq!(times[0].pm_value * 180, times[1].pm_value * 1_000);
    assert_eq!(
        m.client(tool).allocate(AllocateRequest::iap(0xC0).with_flags(PmcFlags::GROUP_MEMBER)),
        Err(Errno::Inval),
        "a member without a leader"
    );
    assert_eq!(
        m.client(tool).allocate(
            AllocateRequest::iap(0xC0)
                .in_mode(Mode::ThreadSampling, None)
                .with_count(10_000)
                .with_flags(mux())
        ),
        Err(Errno::Inval),
        "sampling PMCs are not multiplexed"
    );
}

/// The error of scaled counts against the ground truth at 4× oversubscription on a steady
/// workload with several threads (printed; the assertion is a generous bound).
#[test]
fn scaled_counts_error_at_four_times_oversubscription() {
    let model = PmuModel::icelake();
    let mut m = Machine::new(MachineConfig::new(model, 4).quantum(4).seed(11));
    let tool = m.spawn_tool(Credentials::root());
    let program = ProgramBuilder::new("/bin/steady4")
        .function("main", |f| (0..5).fold(f, |f, _| f.spawn_thread("worker")).call("body").exit())
        .function("worker", |f| f.call("body").exit_thread())
        // A loop of two blocks with different rates: a turn that ends inside an iteration
        // sees a different mix than the whole run.
        .function("body", |f| {
            f.repeat(Ring::User, steady_work(), 3)
                .repeat(Ring::Kernel, system_work(), 1)
                .loop_to(0, 2_000)
        })
        .build();
    let pid = m.spawn(&program, Credentials::user(1005));
    let events = [
        ArchEvent::Instructions,
        ArchEvent::CoreCycles,
        ArchEvent::Branches,
        ArchEvent::LlcReferences,
        ArchEvent::BranchMispredicts,
        ArchEvent::RefCycles,
        ArchEvent::LlcMisses,
    ];
    let gp = usize::from(model.gp_counter_count());
    let counters: Vec<(u32, ArchEvent)> = (0..4 * gp)
        .map(|i| {
            let event = events[i % events.len()];
            let request = AllocateRequest::iap(config(event)).with_flags(mux());
            (m.client(tool).allocate(request).expect("multiplexed"), event)
        })
        .collect();
    for &(id, _) in &counters {
        m.client(tool).attach(id, pid).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    let truth = m.process_truth(pid);
    let mut errors = Vec::new();
    for &(id, event) in &counters {
        let t = m.client(tool).read_times(id).unwrap();
        assert!(t.pm_running > 0, "{event:?} counted");
        let scaled = t.pm_value as f64 * t.pm_enabled as f64 / t.pm_running as f64;
        let expected = truth.arch(event) as f64;
        errors.push((scaled - expected).abs() / expected);
    }
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    let worst = errors.iter().copied().fold(0.0, f64::max);
    println!(
        "multiplexing: {} PMCs on {gp} counters, scaled-count error: mean {:.3} %, worst {:.3} %",
        counters.len(),
        mean * 100.0,
        worst * 100.0
    );
    assert!(mean < 0.05, "mean absolute error {mean}");
}

/// PMCADMIN cannot disable a counter that multiplexed PMCs use in a later turn.
#[test]
fn a_counter_used_in_a_later_turn_cannot_be_disabled() {
    let model = PmuModel::skylake();
    let mut m = Machine::new(MachineConfig::new(model, 1));
    let tool = m.spawn_tool(Credentials::root());
    let gp = u32::from(model.gp_counter_count());
    let request = AllocateRequest::iap(config(ArchEvent::Instructions))
        .in_mode(Mode::SystemCounting, Some(0))
        .with_flags(mux());
    let ids: Vec<u32> =
        (0..=gp).map(|_| m.client(tool).allocate(request).expect("multiplexed")).collect();
    // The first IAP row: SOFT's 16 and TSC's 1 come first.
    let first_iap = 17;
    m.client(tool).release(ids[0]).unwrap();
    // Its counter is still used by the PMC of turn 1 (the last one allocated).
    let disabled = m.client(tool).admin(0, first_iap, hwpmc::abi::State::Disabled);
    assert_eq!(disabled, Err(Errno::Busy));
    m.client(tool).release(ids[gp as usize]).unwrap();
    assert_eq!(m.client(tool).admin(0, first_iap, hwpmc::abi::State::Disabled), Ok(()));
}
