//! Counting scenarios on the simulated machine, with exact expected counts.
//!
//! Every expected number comes from the workload definition or from the machine's ground truth
//! (what the simulated CPUs retired, per thread, process and CPU), never from the driver. The
//! suite runs under each mode of `hwpmc_test_support::modes` (masked-PMI policy, PMI latency,
//! freezing, the driver's own work, other users' status bits, PMIs injected at the driver's MSR
//! accesses), in a module named after it: where they make an exact count impossible
//! on hardware (a frozen PMU loses what retires before its PMI is served; an OS-mode counter
//! counts the driver), a count is checked against the range hardware guarantees, and the exact
//! mode keeps the exact assertion. Each
//! scenario runs on every architectural perfmon version: v1 (Yonah), v2 (Core 2), v3 (Nehalem),
//! v4 (Skylake) and v5 (Ice Lake), and on AMD's K10, Zen 2 and Zen 4, in the module named after the
//! model (`exact::skylake::counter_wrap`); and each ends by checking
//! that the driver never raised a simulated #GP.

use std::cell::RefCell;
use std::ops::RangeInclusive;
use std::rc::Rc;

use hwpmc::abi::{Caps, Class, Disposition, Mode, PmcFlags, event};
use hwpmc::{Errno, Pid, Signal};
use hwpmc_sim::machine::Dispatch;
use hwpmc_sim::modes::SimModes;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{
    AllocateRequest, ArchEvent, Credentials, GroundTruth, Machine, MachineConfig, PmuModel,
    ProgramBuilder,
};

/// The user-mode block every scenario uses: every architectural event, none equal.
fn user_work() -> Work {
    Work::every_event_distinct()
}

/// The kernel-mode block.
fn kernel_work() -> Work {
    Work::kernel_events_distinct()
}

/// An allocated PMC and what it must count.
#[derive(Debug, Clone)]
struct Counter {
    id: u32,
    event: ArchEvent,
    /// The ring it counts, or both.
    ring: Option<Ring>,
    what: String,
}

impl Counter {
    fn expected(&self, truth: &GroundTruth) -> u64 {
        let count = match self.ring {
            Some(ring) => truth.arch_in(ring, self.event),
            None => truth.arch(self.event),
        };
        u64::try_from(count).expect("counts fit 64 bits")
    }
}

/// The IAP events to count on `model`: as many of these architectural events as it has GP
/// counters (instructions, cycles and branches first), as IA32_PERFEVTSEL images.
fn gp_events(model: &PmuModel) -> Vec<ArchEvent> {
    [
        ArchEvent::Instructions,
        ArchEvent::CoreCycles,
        ArchEvent::Branches,
        ArchEvent::LlcReferences,
        ArchEvent::BranchMispredicts,
        ArchEvent::RefCycles,
        ArchEvent::LlcMisses,
        ArchEvent::TopdownSlots,
    ]
    .into_iter()
    .filter(|&e| model.arch_event_available(e))
    .take(usize::from(model.gp_counter_count()))
    .collect()
}

/// A request for a GP (AMD: core) counter counting architectural event `e` on `model`, in the
/// rings of `usr_os` (PERFEVTSEL / PERF_CTL bits 16 and 17; both from the caps when 0).
fn gp_request(model: &PmuModel, e: ArchEvent, usr_os: u32) -> AllocateRequest {
    AllocateRequest::arch(model, e, usr_os)
}

/// The fixed counters the driver offers on `model` (the contiguous ones, perfmon v2+).
fn fixed_events(model: &PmuModel) -> Vec<ArchEvent> {
    if !model.has_pmu() || !model.has_global_ctrl() {
        return Vec::new();
    }
    let count = model.fixed_mask().trailing_ones() as usize;
    [ArchEvent::Instructions, ArchEvent::CoreCycles, ArchEvent::RefCycles, ArchEvent::TopdownSlots]
        .into_iter()
        .take(count)
        .collect()
}

/// What to allocate to count everything `model` can count, in `ring` (both when `None`), with
/// `flags`: IAP events by IA32_PERFEVTSEL image (the ring in its USR/OS bits, or from the caps
/// when neither is set), fixed counters by their static IAF event (the ring from the caps) or,
/// for TOPDOWN.SLOTS, by image.
fn requests(
    model: &PmuModel,
    ring: Option<Ring>,
    flags: PmcFlags,
) -> Vec<(AllocateRequest, ArchEvent, String)> {
    let usr_os = match ring {
        None => 0,
        Some(Ring::User) => 1 << 16,
        Some(Ring::Kernel) => 1 << 17,
    };
    let caps = match ring {
        None => Caps::USER | Caps::SYSTEM,
        Some(Ring::User) => Caps::USER,
        Some(Ring::Kernel) => Caps::SYSTEM,
    };
    let mut out = Vec::new();
    for e in gp_events(model) {
        if model.is_amd() {
            let request = gp_request(model, e, usr_os).with_flags(flags);
            out.push((request, e, format!("K8 {e:?} config {:#x}", request.amd_config)));
            continue;
        }
        let config = u32::from(e.event_select()) | u32::from(e.umask()) << 8 | usr_os;
        let request = AllocateRequest::iap(config).with_flags(flags);
        out.push((request, e, format!("IAP {e:?} config {config:#x}")));
    }
    for (index, e) in fixed_events(model).into_iter().enumerate() {
        let request = match index {
            0 => AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY),
            1 => AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_CORE),
            2 => AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_REF),
            _ => AllocateRequest {
                flags: PmcFlags::EV_PMU.bits(),
                iap_config: 0x01A4,
                ..AllocateRequest::iaf(0)
            },
        };
        let request = AllocateRequest { caps: caps.bits(), ..request }.with_flags(flags);
        out.push((request, e, format!("IAF {index} ({e:?}) caps {caps:?}")));
    }
    out
}

/// Allocates everything of [`requests`] as `pid`.
fn allocate(m: &Machine, pid: Pid, ring: Option<Ring>, flags: PmcFlags) -> Vec<Counter> {
    let model = *m.hardware().pmu(0).model();
    allocate_from(m, pid, ring, requests(&model, ring, flags))
}

/// Allocates `requests` (of [`requests`], counting `ring`) as `pid`.
fn allocate_from(
    m: &Machine,
    pid: Pid,
    ring: Option<Ring>,
    requests: Vec<(AllocateRequest, ArchEvent, String)>,
) -> Vec<Counter> {
    requests
        .into_iter()
        .map(|(request, event, what)| {
            let id = m.client(pid).allocate(request).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            Counter { id, event, ring, what }
        })
        .collect()
}

fn start_all(m: &Machine, pid: Pid, counters: &[Counter]) {
    for c in counters {
        m.client(pid).start(c.id).unwrap_or_else(|e| panic!("start {}: {e:?}", c.what));
    }
}

fn stop_all(m: &Machine, pid: Pid, counters: &[Counter]) {
    for c in counters {
        m.client(pid).stop(c.id).unwrap_or_else(|e| panic!("stop {}: {e:?}", c.what));
    }
}

fn attach_all(m: &Machine, pid: Pid, counters: &[Counter], target: Pid) {
    for c in counters {
        m.client(pid).attach(c.id, target).unwrap_or_else(|e| panic!("attach {}: {e:?}", c.what));
    }
}

fn read(m: &Machine, pid: Pid, c: &Counter) -> u64 {
    m.client(pid).read(c.id).unwrap_or_else(|e| panic!("read {}: {e:?}", c.what))
}

/// Whether every count equals the ground truth under `modes`: unless PMIs are served late to a
/// freezing PMU, or the driver's own work is counted.
fn counts_are_exact(modes: &SimModes) -> bool {
    let frozen_late = modes.timing.max_latency > 0 && modes.freeze_on_pmi == Some(true);
    modes.timing.driver_work_percent == 0 && !frozen_late
}

/// The counts `c` may read on `m` (under `modes`) for `truth`: exactly its expected count in the
/// exact modes;
/// with PMIs served late to a freezing PMU, as little as that less everything that retired while
/// a PMI waited; with the driver's work, in kernel mode, as much as that plus all of it.
fn guaranteed(
    modes: &SimModes,
    m: &Machine,
    c: &Counter,
    truth: &GroundTruth,
) -> RangeInclusive<u64> {
    let expected = c.expected(truth);
    let of = |t: &GroundTruth| {
        let count = match c.ring {
            Some(ring) => t.arch_in(ring, c.event),
            None => t.arch(c.event),
        };
        u64::try_from(count).expect("counts fit 64 bits")
    };
    let mut low = expected;
    if modes.timing.max_latency > 0 && modes.freeze_on_pmi == Some(true) {
        low = low.saturating_sub(of(&m.total_late_truth()));
    }
    let mut high = expected;
    if c.ring != Some(Ring::User) {
        let driver: GroundTruth = (0..m.cpu_count()).map(|cpu| m.driver_truth(cpu as u32)).sum();
        high += u64::try_from(driver.arch_in(Ring::Kernel, c.event)).expect("fits 64 bits");
    }
    low..=high
}

/// Every counter of `owner` reads exactly what `truth` says, or within the range hardware
/// guarantees under `modes` ([`guaranteed`]) (all mismatches are reported, with
/// the missing amount in hexadecimal, where lost counter wraps stand out).
fn assert_counts(
    modes: &SimModes,
    m: &Machine,
    owner: Pid,
    counters: &[Counter],
    truth: &GroundTruth,
    context: &str,
) {
    assert!(!counters.is_empty());
    let mut wrong = Vec::new();
    for c in counters {
        let expected = c.expected(truth);
        assert!(expected > 0, "{context}: {} should count something", c.what);
        let actual = read(m, owner, c);
        let range = guaranteed(modes, m, c, truth);
        if !range.contains(&actual) {
            let missing = i128::from(expected) - i128::from(actual);
            wrong.push(format!(
                "{}: read {actual}, expected {expected} (missing {missing} = {missing:#x}), \
                 guaranteed {range:?}",
                c.what
            ));
        }
    }
    assert!(wrong.is_empty(), "{context}: {} wrong count(s):\n{}", wrong.len(), wrong.join("\n"));
}

/// No row is used on any CPU (seen by `viewer`).
fn assert_all_rows_free(m: &Machine, viewer: Pid) {
    for cpu in 0..m.cpu_count() {
        let infos = m.client(viewer).pmc_info(cpu as i32).unwrap();
        for (row, info) in infos.iter().enumerate() {
            assert_eq!(info.pm_rowdisp, Disposition::Free.as_u32(), "CPU {cpu} row {row}");
            assert_eq!(info.pm_ownerpid, -1, "CPU {cpu} row {row}");
        }
    }
}

/// A machine for the scenarios under `modes`: with PMIs injected at the driver's MSR accesses
/// the same exact counts must come out.
fn machine(modes: &SimModes, model: PmuModel, cpus: usize, seed: u64, quantum: u64) -> Machine {
    let config = MachineConfig::new(model, cpus).seed(seed).quantum(quantum);
    Machine::new(config.modes(modes))
}

// ----- 1. One single-threaded process counting itself -----

fn single_thread_self_attached(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 2, 1, 16);
    let program = ProgramBuilder::new("/bin/single")
        .function("main", |f| {
            f.repeat(Ring::User, user_work(), 50).call("sys").loop_to(0, 40).sleep().exit()
        })
        .function("sys", |f| f.repeat(Ring::Kernel, kernel_work(), 7))
        .build();
    let pid = m.spawn(&program, Credentials::user(1001));
    let counters = allocate(&m, pid, None, PmcFlags::empty());
    // PMCSTART without PMCATTACH attaches the PMC to its owner.
    start_all(&m, pid, &counters);
    m.run_until_idle();
    let truth = m.process_truth(pid);
    assert_eq!(truth.arch(ArchEvent::Instructions), 40 * (50 * 1_000 + 7 * 300));
    assert_eq!(truth.arch(ArchEvent::Branches), 40 * (50 * 180 + 7 * 41));
    assert_eq!(truth.arch(ArchEvent::CoreCycles), 40 * (50 * 1_700 + 7 * 650));
    assert_counts(modes, &m, pid, &counters, &truth, "self-attached, asleep");
    // Stopped, nothing changes; started again while the thread is off-CPU, still exact.
    stop_all(&m, pid, &counters);
    assert_counts(modes, &m, pid, &counters, &truth, "self-attached, stopped");
    start_all(&m, pid, &counters);
    assert_counts(modes, &m, pid, &counters, &truth, "self-attached, restarted off-CPU");
    let tid = m.threads_of(pid)[0];
    m.wake(tid);
    m.run_until_idle();
    assert!(!m.process_alive(pid));
    // Its exit released its PMCs.
    let viewer = m.spawn_tool(Credentials::user(1001));
    assert_all_rows_free(&m, viewer);
    m.hardware().assert_no_faults();
}

/// The same, with the program measuring itself while it runs: a hook allocates and starts at
/// the beginning (the thread is on its CPU), another stops and reads at the end.
fn self_measuring_program(model: PmuModel, modes: &SimModes) {
    #[derive(Default)]
    struct Shared {
        counters: Vec<Counter>,
        start: GroundTruth,
        reads: Vec<u64>,
        stop: GroundTruth,
    }
    let shared: Rc<RefCell<Shared>> = Rc::default();
    let (at_start, at_stop) = (shared.clone(), shared.clone());
    let program = ProgramBuilder::new("/bin/selfmeasure")
        .function("main", move |f| {
            f.repeat(Ring::User, user_work(), 9)
                .hook(move |ctx| {
                    let counters = allocate(ctx.machine(), ctx.pid(), None, PmcFlags::empty());
                    start_all(ctx.machine(), ctx.pid(), &counters);
                    let mut s = at_start.borrow_mut();
                    s.counters = counters;
                    s.start = ctx.machine().process_truth(ctx.pid());
                })
                .repeat(Ring::User, user_work(), 33)
                .repeat(Ring::Kernel, kernel_work(), 5)
                .loop_to(2, 17)
                .hook(move |ctx| {
                    let mut s = at_stop.borrow_mut();
                    stop_all(ctx.machine(), ctx.pid(), &s.counters);
                    s.reads =
                        s.counters.iter().map(|c| read(ctx.machine(), ctx.pid(), c)).collect();
                    s.stop = ctx.machine().process_truth(ctx.pid());
                })
                .repeat(Ring::User, user_work(), 100)
        })
        .build();
    let mut m = machine(modes, model, 3, 5, 10);
    m.spawn(&program, Credentials::user(1002));
    m.run_until_idle();
    let s = shared.borrow();
    let between = s.stop.since(&s.start);
    assert_eq!(between.arch(ArchEvent::Instructions), 17 * (33 * 1_000 + 5 * 300));
    for (c, &value) in s.counters.iter().zip(&s.reads) {
        let range = guaranteed(modes, &m, c, &between);
        assert!(range.contains(&value), "{}: {value} not in {range:?}", c.what);
    }
    m.hardware().assert_no_faults();
}

// ----- 2. Eight threads on four CPUs with a small quantum -----

fn eight_threads_on_four_cpus(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 4, 2, 3);
    let program = ProgramBuilder::new("/bin/threads")
        .function("main", |f| {
            (0..7).fold(f, |f, _| f.spawn_thread("worker")).call("body").sleep().exit()
        })
        .function("worker", |f| f.call("body").exit_thread())
        .function("body", |f| {
            f.repeat(Ring::User, user_work(), 5)
                .repeat(Ring::Kernel, kernel_work(), 2)
                .loop_to(0, 30)
        })
        .build();
    let pid = m.spawn(&program, Credentials::user(1003));
    let counters = allocate(&m, pid, None, PmcFlags::empty());
    start_all(&m, pid, &counters);
    m.run_until_idle();
    let threads = m.threads_of(pid);
    assert_eq!(threads.len(), 8);
    let truth = m.process_truth(pid);
    assert_eq!(truth.arch(ArchEvent::Instructions), 8 * 30 * (5 * 1_000 + 2 * 300));
    let by_thread: GroundTruth = threads.iter().map(|&t| m.thread_truth(t)).sum();
    assert_eq!(by_thread, truth);
    let stats = m.stats();
    assert!(stats.migrations >= 50, "many migrations: {stats:?}");
    assert_counts(modes, &m, pid, &counters, &truth, "8 threads on 4 CPUs");
    m.hardware().assert_no_faults();
}

// ----- 3. PMC_F_DESCENDANTS over a fork tree -----

fn fork_tree() -> Rc<hwpmc_sim::Program> {
    ProgramBuilder::new("/bin/tree")
        .function("main", |f| {
            f.repeat(Ring::User, user_work(), 20)
                .fork("child_a")
                .repeat(Ring::Kernel, kernel_work(), 10)
                .fork("child_b")
                .repeat(Ring::User, user_work(), 5)
        })
        .function("child_a", |f| {
            f.repeat(Ring::User, user_work(), 30).repeat(Ring::Kernel, kernel_work(), 3)
        })
        .function("child_b", |f| {
            f.repeat(Ring::Kernel, kernel_work(), 8).fork("grandchild").repeat(
                Ring::User,
                user_work(),
                12,
            )
        })
        .function("grandchild", |f| f.repeat(Ring::User, user_work(), 25).yield_now())
        .build()
}

fn descendants_over_a_fork_tree(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 3, 3, 4);
    let parent = m.spawn(&fork_tree(), Credentials::user(1004));
    let tool = m.spawn_tool(Credentials::user(1004));
    // The whole tree on every counter but the last GP one, which counts the parent alone.
    let mut wanted = requests(&model, None, PmcFlags::DESCENDANTS);
    let mut alone = Vec::new();
    if model.gp_counter_count() > 1 {
        let gp = |what: &str| what.starts_with("IAP") || what.starts_with("K8");
        let last_gp = wanted.iter().rposition(|(_, _, what)| gp(what)).unwrap();
        wanted.remove(last_gp);
        let request = gp_request(&model, ArchEvent::Instructions, 0);
        let id = m.client(tool).allocate(request).unwrap();
        let what = "GP instructions of the parent alone".into();
        alone.push(Counter { id, event: ArchEvent::Instructions, ring: None, what });
    }
    let tree = allocate_from(&m, tool, None, wanted);
    attach_all(&m, tool, &tree, parent);
    attach_all(&m, tool, &alone, parent);
    start_all(&m, tool, &tree);
    start_all(&m, tool, &alone);
    m.run_until_idle();

    let descendants = m.descendants(parent);
    assert_eq!(descendants.len(), 3, "two children and a grandchild");
    let whole = m.tree_truth(parent);
    let expected_instructions = 20 * 1_000 + 10 * 300 + 5 * 1_000 // parent
        + 30 * 1_000 + 3 * 300 // child a
        + 8 * 300 + 12 * 1_000 // child b
        + 25 * 1_000; // grandchild
    assert_eq!(whole.arch(ArchEvent::Instructions), expected_instructions);
    assert_counts(modes, &m, tool, &tree, &whole, "descendants");
    assert_counts(modes, &m, tool, &alone, &m.process_truth(parent), "parent only");
    // Each PMC lost its last target once: one SIGIO each.
    let n = tree.len() + alone.len();
    assert_eq!(m.kernel().take_signals(), vec![(tool, Signal::Io); n]);
    m.hardware().assert_no_faults();
}

// ----- 4. Attaching to a running process -----

fn spinner(iterations: u64) -> Rc<hwpmc_sim::Program> {
    ProgramBuilder::new("/bin/spinner")
        .function("main", |f| f.spawn_thread("spin").call("spin"))
        .function("spin", move |f| {
            f.repeat(Ring::User, user_work(), 3)
                .repeat(Ring::Kernel, kernel_work(), 1)
                .loop_to(0, iterations)
        })
        .build()
}

fn attach_to_a_running_process(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 3, 4, 5);
    let target = m.spawn(&spinner(100_000), Credentials::user(1005));
    let tool = m.spawn_tool(Credentials::user(1005));
    m.run_for(10);
    let on_cpu = (0..3).filter(|&c| m.running_on(c).is_some_and(|t| t.pid() == target)).count();
    assert!(on_cpu > 0, "the target runs at the moment of the start");
    let counters = allocate(&m, tool, None, PmcFlags::empty());
    attach_all(&m, tool, &counters, target);
    start_all(&m, tool, &counters);
    let start = m.process_truth(target);
    m.run_for(20);
    stop_all(&m, tool, &counters);
    let first = m.process_truth(target).since(&start);
    assert_counts(modes, &m, tool, &counters, &first, "first window");
    // Stopped: the target keeps running, the counts do not move.
    m.run_for(10);
    assert_counts(modes, &m, tool, &counters, &first, "stopped");
    // Restarted: the second window adds up.
    start_all(&m, tool, &counters);
    let restart = m.process_truth(target);
    m.run_for(15);
    let second = m.process_truth(target).since(&restart);
    stop_all(&m, tool, &counters);
    assert_counts(modes, &m, tool, &counters, &(first + &second), "two windows");
    assert!(m.process_alive(target));
    m.kill(target);
    assert_eq!(m.kernel().take_signals(), vec![(tool, Signal::Io); counters.len()]);
    m.hardware().assert_no_faults();
}

// ----- 5. User-only and kernel-only counting -----

fn user_only_and_kernel_only(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 2, 6, 7);
    let program = ProgramBuilder::new("/bin/rings")
        .function("main", |f| {
            f.repeat(Ring::User, user_work(), 11)
                .repeat(Ring::Kernel, kernel_work(), 13)
                .loop_to(0, 9)
                .sleep()
        })
        .build();
    let user = m.spawn(&program, Credentials::user(1006));
    let kernel = m.spawn(&program, Credentials::user(1006));
    let both = m.spawn(&program, Credentials::user(1006));
    let counters = [
        (user, allocate(&m, user, Some(Ring::User), PmcFlags::empty())),
        (kernel, allocate(&m, kernel, Some(Ring::Kernel), PmcFlags::empty())),
        (both, allocate(&m, both, None, PmcFlags::empty())),
    ];
    for (pid, set) in &counters {
        start_all(&m, *pid, set);
    }
    m.run_until_idle();
    for (pid, set) in &counters {
        let truth = m.process_truth(*pid);
        assert_eq!(truth.arch_in(Ring::User, ArchEvent::Instructions), 9 * 11 * 1_000);
        assert_eq!(truth.arch_in(Ring::Kernel, ArchEvent::Instructions), 9 * 13 * 300);
        assert_counts(modes, &m, *pid, set, &truth, "ring filter");
    }
    m.hardware().assert_no_faults();
}

// ----- 6. System counting per CPU -----

fn system_counting_per_cpu(model: PmuModel, modes: &SimModes) {
    let idle = Work { instructions: 17, core_cycles: 400, ref_cycles: 400, ..Work::default() };
    let mut m =
        Machine::new(MachineConfig::new(model, 4).seed(7).quantum(6).idle_work(idle.clone()));
    let root = m.spawn_tool(Credentials::root());
    // Instructions on every CPU (all on the first GP row), cycles in user mode on CPU 1, and
    // the fixed instruction counter on CPU 2.
    let mut counters: Vec<(u32, Counter)> = Vec::new();
    let sc = |request: AllocateRequest, cpu: u32| request.in_mode(Mode::SystemCounting, Some(cpu));
    for cpu in 0..4 {
        let request = gp_request(&model, ArchEvent::Instructions, 0);
        let id = m.client(root).allocate(sc(request, cpu)).unwrap();
        counters.push((
            cpu,
            Counter {
                id,
                event: ArchEvent::Instructions,
                ring: None,
                what: format!("SC instructions on CPU {cpu}"),
            },
        ));
    }
    if model.gp_counter_count() >= 3 {
        let request = gp_request(&model, ArchEvent::CoreCycles, 1 << 16);
        let id = m.client(root).allocate(sc(request, 1)).unwrap();
        let what = "SC user cycles on CPU 1".into();
        counters
            .push((1, Counter { id, event: ArchEvent::CoreCycles, ring: Some(Ring::User), what }));
    }
    if !fixed_events(&model).is_empty() {
        let request = sc(AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY), 2);
        let id = m.client(root).allocate(request).unwrap();
        let what = "SC fixed instructions on CPU 2".into();
        counters.push((2, Counter { id, event: ArchEvent::Instructions, ring: None, what }));
    }
    // Processes come and go on every CPU; one of them is also counted by a process PMC on a
    // row left free.
    let counted = m.spawn(&spinner(300), Credentials::user(1007));
    let id = m.client(root).allocate(gp_request(&model, ArchEvent::Branches, 0)).unwrap();
    let what = "TC branches of one process".into();
    let process = Counter { id, event: ArchEvent::Branches, ring: None, what };
    m.client(root).attach(id, counted).unwrap();
    m.client(root).start(id).unwrap();
    m.spawn(&fork_tree(), Credentials::user(1008));
    m.spawn(&spinner(200), Credentials::user(1009));
    m.run_for(3);
    for (_, c) in &counters {
        m.client(root).start(c.id).unwrap();
    }
    let start: Vec<GroundTruth> = (0..4).map(|cpu| m.cpu_truth(cpu)).collect();
    m.run_for(40);
    for (_, c) in &counters {
        m.client(root).stop(c.id).unwrap();
    }
    let window: Vec<GroundTruth> =
        (0..4).map(|cpu| m.cpu_truth(cpu).since(&start[cpu as usize])).collect();
    for (cpu, c) in &counters {
        assert_eq!(read(&m, root, c), c.expected(&window[*cpu as usize]), "{}", c.what);
    }
    m.run_until_idle();
    // Stopped system PMCs keep their counts; the process PMC saw its process only.
    for (cpu, c) in &counters {
        assert_eq!(read(&m, root, c), c.expected(&window[*cpu as usize]), "{}", c.what);
    }
    assert_counts(modes, &m, root, &[process], &m.process_truth(counted), "process PMC");
    m.hardware().assert_no_faults();
}

// ----- 7. Counter wrap -----

fn counter_wrap(model: PmuModel, modes: &SimModes) {
    let fixed_width = if fixed_events(&model).is_empty() { 64 } else { model.fixed_width };
    let width = u32::from(model.gp_width.min(fixed_width));
    let block = Work {
        instructions: 1 << 20,
        core_cycles: (1 << 21) + 3,
        ref_cycles: (1 << 20) + 5,
        llc_references: 1 << 16,
        llc_misses: 7,
        branches: (1 << 18) + 1,
        branch_mispredicts: 1 << 10,
        raw: Vec::new(),
        offcore: Vec::new(),
    };
    // A time slice retires 2^(width + 1) instructions, so every counter wraps at least twice
    // while loaded; each of 3 threads runs about 1.5 slices (3 threads on 2 CPUs: they are
    // switched out and migrate between wraps).
    let quantum = 1u64 << (width - 19);
    let repeat = 3 * (1u64 << (width - 20)) + 12_345;
    let program = ProgramBuilder::new("/bin/wrap")
        .function("main", |f| f.spawn_thread("worker").spawn_thread("worker").call("spin").sleep())
        .function("worker", |f| f.call("spin").exit_thread())
        .function("spin", move |f| {
            f.repeat(Ring::User, block.clone(), repeat).repeat(Ring::Kernel, block.clone(), 1_000)
        })
        .build();
    let mut m = machine(modes, model, 2, 8, quantum);
    let pid = m.spawn(&program, Credentials::user(1010));
    let counters = allocate(&m, pid, None, PmcFlags::empty());
    start_all(&m, pid, &counters);
    m.run_until_idle();
    let truth = m.process_truth(pid);
    assert_eq!(truth.arch(ArchEvent::Instructions), (3 * u128::from(repeat + 1_000)) << 20);
    assert!(truth.arch(ArchEvent::Instructions) > 9u128 << width);
    assert!(m.stats().migrations > 0, "{:?}", m.stats());
    let raised: u64 = (0..2).map(|cpu| m.hardware().pmu(cpu).pmi_stats().raised).sum();
    assert!(raised >= 3 * 2, "the counters wrapped while loaded: {raised} PMIs raised");
    assert_counts(modes, &m, pid, &counters, &truth, &format!("past 2^{width}"));
    m.hardware().assert_no_faults();
}

/// The simplest wrap: one thread alone on one CPU retires 2^width + 2^20 instructions, so each
/// counter wraps once, 2^20 instructions (at most) before the end.
fn counter_wraps_once(model: PmuModel, modes: &SimModes) {
    let fixed_width = if fixed_events(&model).is_empty() { 64 } else { model.fixed_width };
    let width = u32::from(model.gp_width.min(fixed_width));
    let block = Work { instructions: 1 << 20, ..Work::default() };
    let program = ProgramBuilder::new("/bin/wraponce")
        .function("main", |f| f.repeat(Ring::User, block, (1 << (width - 20)) + 1).sleep())
        .build();
    let mut m = machine(modes, model, 1, 0, u64::MAX);
    let pid = m.spawn(&program, Credentials::user(1015));
    let counters: Vec<Counter> = allocate(&m, pid, None, PmcFlags::empty())
        .into_iter()
        .filter(|c| c.event == ArchEvent::Instructions)
        .collect();
    start_all(&m, pid, &counters);
    m.run_until_idle();
    let truth = m.process_truth(pid);
    assert_eq!(truth.arch(ArchEvent::Instructions), (1u128 << width) + (1 << 20));
    assert_counts(modes, &m, pid, &counters, &truth, &format!("one wrap of 2^{width}"));
    m.hardware().assert_no_faults();
}

// ----- 8. What each model offers -----

fn each_model_offers_its_classes(modes: &SimModes) {
    let cases = [
        (PmuModel::yonah(), 2, 0),
        (PmuModel::core2(), 2, 3),
        (PmuModel::nehalem(), 4, 3),
        (PmuModel::skylake(), 4, 3),
        (PmuModel::icelake(), 8, 4),
    ];
    for (model, gp, fixed) in cases {
        let mut m = machine(modes, model, 2, 0, 10);
        let tool = m.spawn_tool(Credentials::user(1));
        let info = m.client(tool).cpu_info().unwrap();
        let classes: Vec<(u32, u32)> = info.pm_classes[..info.pm_nclass as usize]
            .iter()
            .map(|c| (c.pm_class, c.pm_num))
            .collect();
        let mut expected = vec![(Class::Soft.as_u32(), 16), (Class::Tsc.as_u32(), 1)];
        expected.push((Class::Iap.as_u32(), gp));
        if fixed > 0 {
            expected.push((Class::Iaf.as_u32(), fixed));
        }
        assert_eq!(classes, expected, "v{}", model.version);
        if fixed == 0 {
            let request = AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY);
            assert_eq!(m.client(tool).allocate(request), Err(Errno::Inval));
        }
    }
}

fn amd_models_offer_the_k8_class_with_their_core_counters(modes: &SimModes) {
    for (model, rows) in [(PmuModel::k10(), 4), (PmuModel::zen2(), 6), (PmuModel::zen4(), 6)] {
        let mut m = machine(modes, model, 2, 0, 10);
        let tool = m.spawn_tool(Credentials::user(1));
        let info = m.client(tool).cpu_info().unwrap();
        let classes: Vec<(u32, u32, u32, u32)> = info.pm_classes[..info.pm_nclass as usize]
            .iter()
            .map(|c| (c.pm_class, c.pm_num, c.pm_width, c.pm_caps))
            .collect();
        let k8 = (Class::K8.as_u32(), rows, 48, Caps::K8_CLASS.bits());
        assert_eq!(classes[2..], [k8], "{model:?}");
        assert_eq!(info.pm_cputype, hwpmc::abi::cpu_type::AMD_K8);
        // Intel's classes are not there.
        let request = AllocateRequest::iap(0x00C0);
        assert_eq!(m.client(tool).allocate(request), Err(Errno::Inval));
    }
}

fn a_vm_without_a_pmu_offers_only_soft_and_tsc(modes: &SimModes) {
    let mut m = machine(modes, PmuModel::no_pmu_vm(), 2, 0, 10);
    let root = m.spawn_tool(Credentials::root());
    let info = m.client(root).cpu_info().unwrap();
    assert_eq!(info.pm_nclass, 2);
    let classes: Vec<u32> = info.pm_classes[..2].iter().map(|c| c.pm_class).collect();
    assert_eq!(classes, [Class::Soft.as_u32(), Class::Tsc.as_u32()]);
    let client = m.client(root);
    assert_eq!(client.allocate(AllocateRequest::iap(0x00C0)), Err(Errno::Inval));
    let sc = AllocateRequest::iap(0x00C0).in_mode(Mode::SystemCounting, Some(0));
    assert_eq!(client.allocate(sc), Err(Errno::Inval));
    let iaf = AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY);
    assert_eq!(client.allocate(iaf), Err(Errno::Inval));
    // The TSC works and workloads run.
    let tsc = client.allocate(AllocateRequest::tsc(1)).unwrap();
    client.start(tsc).unwrap();
    let pid = m.spawn(&fork_tree(), Credentials::user(1));
    m.run_until_idle();
    assert!(m.tree_truth(pid).arch(ArchEvent::Instructions) > 0);
    let expected = m.hardware().pmu(1).tsc();
    assert!(expected > 0);
    assert_eq!(m.client(root).read(tsc), Ok(expected));
    m.hardware().assert_no_faults();
}

// ----- 9. Target exit and owner exit -----

fn a_target_that_exits_is_detached_and_its_count_stays_readable(modes: &SimModes) {
    let mut m = machine(modes, PmuModel::skylake(), 3, 9, 4);
    let tool = m.spawn_tool(Credentials::user(1011));
    let short = m.spawn(&fork_tree(), Credentials::user(1011));
    let long = m.spawn(&spinner(1_000_000), Credentials::user(1011));
    // Every other counter (GP and fixed) on each.
    let mut on_short = allocate(&m, tool, None, PmcFlags::empty());
    let on_long: Vec<Counter> =
        (1..on_short.len()).rev().step_by(2).map(|i| on_short.remove(i)).collect();
    attach_all(&m, tool, &on_short, short);
    attach_all(&m, tool, &on_long, long);
    start_all(&m, tool, &on_short);
    start_all(&m, tool, &on_long);
    let long_start = m.process_truth(long);
    assert!(m.run_until(|m| !m.process_alive(short)));
    // `short` exited: its PMC lost its last target, the owner was told once per PMC.
    assert_eq!(m.kernel().take_signals(), vec![(tool, Signal::Io); on_short.len()]);
    let truth = m.process_truth(short);
    assert_counts(modes, &m, tool, &on_short, &truth, "after the target's exit");
    m.run_for(20);
    assert_counts(modes, &m, tool, &on_short, &truth, "still, later");
    // Still running (as on FreeBSD, PMCSTART of a running PMC succeeds); once stopped it cannot
    // be restarted (it has no target left), and detaching fails.
    assert_eq!(m.client(tool).start(on_short[0].id), Ok(()));
    m.client(tool).stop(on_short[0].id).unwrap();
    assert_eq!(m.client(tool).start(on_short[0].id), Err(Errno::Srch));
    assert_eq!(m.client(tool).detach(on_short[0].id, short), Err(Errno::Srch));
    // Killed mid-run, `long` is detached with its count exact.
    assert!(m.process_alive(long));
    m.kill(long);
    assert_eq!(m.kernel().take_signals(), vec![(tool, Signal::Io); on_long.len()]);
    assert_counts(modes, &m, tool, &on_long, &m.process_truth(long).since(&long_start), "killed");
    for c in on_short.iter().chain(&on_long) {
        m.client(tool).release(c.id).unwrap();
    }
    assert_all_rows_free(&m, tool);
    m.hardware().assert_no_faults();
}

fn an_owner_that_exits_releases_everything(modes: &SimModes) {
    let model = PmuModel::skylake();
    let mut m = machine(modes, model, 3, 10, 5);
    let owner = m.spawn_tool(Credentials::root());
    let target = m.spawn(&spinner(1_000_000), Credentials::user(1012));
    let counters = allocate(&m, owner, None, PmcFlags::DESCENDANTS);
    // All but the first GP counter on the target (the first is needed for a system PMC).
    let (system_row, process): (Vec<Counter>, Vec<Counter>) =
        counters.into_iter().partition(|c| c.what.starts_with("IAP Instructions"));
    for c in &system_row {
        m.client(owner).release(c.id).unwrap();
    }
    let sc = AllocateRequest::iap(0x00C0).in_mode(Mode::SystemCounting, Some(1));
    let system = m.client(owner).allocate(sc).unwrap();
    attach_all(&m, owner, &process, target);
    start_all(&m, owner, &process);
    m.client(owner).start(system).unwrap();
    m.run_for(10);
    assert!((0..3).any(|c| m.running_on(c).is_some_and(|t| t.pid() == target)));
    m.kill(owner);
    // Every row is free again, nothing is left programmed, and a new owner can take every row.
    let other = m.spawn_tool(Credentials::root());
    assert_all_rows_free(&m, other);
    for cpu in 0..3 {
        let pmu = m.hardware().pmu(cpu);
        for i in 0..u32::from(model.gp_counters) {
            let evtsel = pmu.read_msr(hwpmc_sim::pmu::msr::IA32_PERFEVTSEL0 + i).unwrap();
            assert_eq!(evtsel & hwpmc_sim::pmu::bits::EVTSEL_EN, 0, "CPU {cpu} GP {i}");
        }
        assert_eq!(pmu.read_msr(hwpmc_sim::pmu::msr::IA32_FIXED_CTR_CTRL), Ok(0), "CPU {cpu}");
    }
    let fresh = allocate(&m, other, None, PmcFlags::empty());
    assert_eq!(fresh.len(), 4 + 3);
    attach_all(&m, other, &fresh, target);
    start_all(&m, other, &fresh);
    let start = m.process_truth(target);
    m.run_for(10);
    stop_all(&m, other, &fresh);
    assert_counts(modes, &m, other, &fresh, &m.process_truth(target).since(&start), "new owner");
    assert!(m.kernel().take_signals().is_empty(), "no target was lost");
    m.hardware().assert_no_faults();
}

// ----- 10. Determinism -----

struct Outcome {
    reads: Vec<u64>,
    processes: Vec<GroundTruth>,
    cpus: Vec<GroundTruth>,
    trace: Vec<Dispatch>,
}

fn mixed_run(modes: &SimModes, seed: u64) -> Outcome {
    let mut m = machine(modes, PmuModel::skylake(), 4, seed, 7);
    let root = m.spawn_tool(Credentials::root());
    let tree = m.spawn(&fork_tree(), Credentials::user(1013));
    let threads = m.spawn(&spinner(500), Credentials::user(1014));
    let counters = allocate(&m, root, None, PmcFlags::DESCENDANTS);
    attach_all(&m, root, &counters[..3], tree);
    attach_all(&m, root, &counters[3..], threads);
    start_all(&m, root, &counters);
    let sc = AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_REF);
    let sc = m.client(root).allocate(sc.in_mode(Mode::SystemCounting, Some(0)));
    assert_eq!(sc, Err(Errno::Inval), "the fixed rows are used by process PMCs");
    m.run_until_idle();
    let tree_truth = m.tree_truth(tree);
    let threads_truth = m.process_truth(threads);
    assert_counts(modes, &m, root, &counters[..3], &tree_truth, "tree");
    assert_counts(modes, &m, root, &counters[3..], &threads_truth, "threads");
    m.hardware().assert_no_faults();
    Outcome {
        reads: counters.iter().map(|c| read(&m, root, c)).collect(),
        processes: vec![tree_truth, threads_truth],
        cpus: (0..4).map(|cpu| m.cpu_truth(cpu)).collect(),
        trace: m.trace().to_vec(),
    }
}

fn the_same_seed_gives_the_same_counts_and_another_seed_the_same_totals(modes: &SimModes) {
    let a = mixed_run(modes, 11);
    let b = mixed_run(modes, 11);
    let c = mixed_run(modes, 12);
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.reads, b.reads);
    assert_eq!(a.processes, b.processes);
    assert_eq!(a.cpus, b.cpus);
    assert_ne!(a.trace, c.trace, "another interleaving");
    assert_ne!(a.cpus, c.cpus, "the work lands on other CPUs");
    if counts_are_exact(modes) {
        assert_eq!(a.reads, c.reads);
    }
    assert_eq!(a.processes, c.processes);
    let total = |o: &Outcome| o.cpus.iter().sum::<GroundTruth>();
    assert_eq!(total(&a), total(&c));
}

// ----- Exec -----

fn a_set_id_exec_detaches_owners_that_may_no_longer_debug_the_target(modes: &SimModes) {
    let mut m = machine(modes, PmuModel::skylake(), 2, 13, 6);
    let su = ProgramBuilder::new("/usr/bin/su")
        .function("main", |f| {
            f.repeat(Ring::User, user_work(), 25).repeat(Ring::Kernel, kernel_work(), 5).sleep()
        })
        .build();
    let root_credentials = Credentials { euid: 0, ..Credentials::user(1016) };
    let program = ProgramBuilder::new("/bin/sh")
        .function("main", move |f| {
            f.repeat(Ring::User, user_work(), 40).exec(su.clone(), Some(root_credentials.clone()))
        })
        .build();
    let target = m.spawn(&program, Credentials::user(1016));
    let user_tool = m.spawn_tool(Credentials::user(1016));
    let root_tool = m.spawn_tool(Credentials::root());
    // A process has one PMC per row: the user's on the first two GP rows, root's on the other
    // two (it holds the first two while it allocates) and the fixed rows.
    let model = PmuModel::skylake();
    let mut wanted = requests(&model, None, PmcFlags::empty());
    let as_user = allocate_from(&m, user_tool, None, wanted.drain(..2).collect());
    let placeholders: Vec<u32> = (0..2)
        .map(|_| m.client(root_tool).allocate(AllocateRequest::iap(0x00C0)).unwrap())
        .collect();
    let as_root = allocate_from(&m, root_tool, None, wanted);
    for id in placeholders {
        m.client(root_tool).release(id).unwrap();
    }
    attach_all(&m, user_tool, &as_user, target);
    attach_all(&m, root_tool, &as_root, target);
    start_all(&m, user_tool, &as_user);
    start_all(&m, root_tool, &as_root);
    m.run_until_idle();
    // The user may no longer debug the set-id program: detached at the exec, with a SIGIO per PMC;
    // its counts stop there. Root keeps counting everything.
    assert_eq!(m.kernel().take_signals(), vec![(user_tool, Signal::Io); as_user.len()]);
    let mut before_exec = GroundTruth::default();
    before_exec.record(Ring::User, &user_work(), 40, 4);
    assert_counts(modes, &m, user_tool, &as_user, &before_exec, "detached at the set-id exec");
    let whole = m.process_truth(target);
    assert_eq!(whole.arch(ArchEvent::Instructions), 40 * 1_000 + 25 * 1_000 + 5 * 300);
    assert_counts(modes, &m, root_tool, &as_root, &whole, "root follows the exec");
    m.hardware().assert_no_faults();
}

fn a_process_that_executes_loses_the_pmcs_it_owns(modes: &SimModes) {
    let mut m = machine(modes, PmuModel::skylake(), 2, 14, 6);
    let next = ProgramBuilder::new("/bin/next")
        .function("main", |f| f.repeat(Ring::User, user_work(), 10).sleep())
        .build();
    let program = ProgramBuilder::new("/bin/first")
        .function("main", move |f| f.repeat(Ring::User, user_work(), 10).exec(next.clone(), None))
        .build();
    let pid = m.spawn(&program, Credentials::user(1017));
    let counters = allocate(&m, pid, None, PmcFlags::empty());
    start_all(&m, pid, &counters);
    m.run_until_idle();
    assert_eq!(m.stats().execs, 1);
    assert_eq!(m.client(pid).read(counters[0].id), Err(Errno::Srch), "it owns no PMC now");
    let viewer = m.spawn_tool(Credentials::user(1017));
    assert_all_rows_free(&m, viewer);
    m.hardware().assert_no_faults();
}

/// The scenarios of sections 1 to 7 on each model, under the modes of the enclosing module; a
/// model's attributes go to its `counter_wrap` test.
macro_rules! on_every_model {
    ($($(#[$wrap:meta])* $model:ident),+) => {$(
        mod $model {
            use hwpmc_sim::PmuModel;

            #[test]
            fn single_thread_self_attached() {
                super::super::single_thread_self_attached(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn self_measuring_program() {
                super::super::self_measuring_program(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn eight_threads_on_four_cpus() {
                super::super::eight_threads_on_four_cpus(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn descendants_over_a_fork_tree() {
                super::super::descendants_over_a_fork_tree(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn attach_to_a_running_process() {
                super::super::attach_to_a_running_process(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn user_only_and_kernel_only() {
                super::super::user_only_and_kernel_only(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn system_counting_per_cpu() {
                super::super::system_counting_per_cpu(PmuModel::$model(), &super::modes());
            }

            #[test]
            $(#[$wrap])*
            fn counter_wrap() {
                super::super::counter_wrap(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn counter_wraps_once() {
                super::super::counter_wraps_once(PmuModel::$model(), &super::modes());
            }
        }
    )+};
}

/// The suite under one mode of `hwpmc_test_support::modes`, in a module named after it.
///
/// Nehalem's `counter_wrap` takes about a minute (its 48-bit counters wrap in the slowest
/// steps of all models): `cargo test` runs it in the exact mode, and `.ci/run` under the other
/// modes too (`cargo test -p hwpmc-sim --test counting -- --ignored`).
macro_rules! suite {
    (exact, $modes:expr) => {
        suite!(@with exact, $modes, nehalem);
    };
    ($mode:ident, $modes:expr) => {
        suite!(@with $mode, $modes, #[ignore = "long: .ci/run runs it in every mode"] nehalem);
    };
    (@with $mode:ident, $modes:expr, $(#[$long:meta])* nehalem) => {
        mod $mode {
            use hwpmc_sim::modes::SimModes;

            fn modes() -> SimModes {
                $modes
            }

            on_every_model!(yonah, core2, $(#[$long])* nehalem, skylake, icelake, k10, zen2, zen4);

            #[test]
            fn each_model_offers_its_classes() {
                super::each_model_offers_its_classes(&modes());
            }

            #[test]
            fn amd_models_offer_the_k8_class_with_their_core_counters() {
                super::amd_models_offer_the_k8_class_with_their_core_counters(&modes());
            }

            #[test]
            fn a_vm_without_a_pmu_offers_only_soft_and_tsc() {
                super::a_vm_without_a_pmu_offers_only_soft_and_tsc(&modes());
            }

            #[test]
            fn a_target_that_exits_is_detached_and_its_count_stays_readable() {
                super::a_target_that_exits_is_detached_and_its_count_stays_readable(&modes());
            }

            #[test]
            fn an_owner_that_exits_releases_everything() {
                super::an_owner_that_exits_releases_everything(&modes());
            }

            #[test]
            fn the_same_seed_gives_the_same_counts_and_another_seed_the_same_totals() {
                super::the_same_seed_gives_the_same_counts_and_another_seed_the_same_totals(
                    &modes(),
                );
            }

            #[test]
            fn a_set_id_exec_detaches_owners_that_may_no_longer_debug_the_target() {
                super::a_set_id_exec_detaches_owners_that_may_no_longer_debug_the_target(&modes());
            }

            #[test]
            fn a_process_that_executes_loses_the_pmcs_it_owns() {
                super::a_process_that_executes_loses_the_pmcs_it_owns(&modes());
            }
        }
    };
}

hwpmc_test_support::for_each_sim_mode!(suite);
