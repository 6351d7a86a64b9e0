//! The thread scope (`PMC_F_THREAD`, an extension): a process PMC that counts only the thread
//! that attaches it, with `PMC_F_THREAD_INHERIT` the threads that thread creates afterwards too.
//!
//! Each PMC counts user-mode instructions, which the driver's own ring-0 work, late PMIs and
//! the injected PMIs leave untouched, so every count is exact under each mode of
//! `hwpmc_test_support::modes` (the suite runs once per mode, in a module named after it): it
//! is compared with the machine's ground truth of the threads it must count, from the instant
//! the thread started its PMC (a hook, run as the thread on its CPU).

use std::cell::RefCell;
use std::rc::Rc;

use hwpmc::abi::{Mode, PmcFlags};
use hwpmc::{Errno, Pid, Tid};
use hwpmc_sim::modes::SimModes;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{
    AllocateRequest, ArchEvent, Credentials, GroundTruth, Machine, MachineConfig, PmuModel,
    ProgramBuilder,
};

/// PERFEVTSEL / PERF_CTL's USR bit.
const USR: u32 = 1 << 16;

fn machine(modes: &SimModes, model: PmuModel, cpus: usize, seed: u64) -> Machine {
    let config = MachineConfig::new(model, cpus).seed(seed).quantum(3);
    Machine::new(config.modes(modes))
}

/// User-mode instructions, as a process-counting request with `flags`.
fn instructions(model: &PmuModel, flags: PmcFlags) -> AllocateRequest {
    AllocateRequest::arch(model, ArchEvent::Instructions, USR).with_flags(flags)
}

fn user_instructions(truth: &GroundTruth) -> u64 {
    u64::try_from(truth.arch_in(Ring::User, ArchEvent::Instructions)).unwrap()
}

/// A thread PMC a hook started: its id, its thread and that thread's truth at the start.
#[derive(Clone)]
struct Started {
    id: u32,
    tid: Tid,
    at_start: GroundTruth,
}

type Log = Rc<RefCell<Vec<(&'static str, Started)>>>;

/// A hook that allocates a thread PMC with `flags` (and PMC_F_THREAD) as the calling thread and
/// starts it (PMCSTART attaches it; with `explicit`, PMCATTACH to the caller's own pid first),
/// logging it under `name`.
fn start_thread_pmc(
    log: &Log,
    name: &'static str,
    flags: PmcFlags,
    explicit: bool,
) -> impl Fn(&hwpmc_sim::HookContext<'_>) + 'static {
    let log = Rc::clone(log);
    move |ctx| {
        let model = *ctx.machine().hardware().pmu(0).model();
        let client = ctx.client();
        let request = instructions(&model, flags | PmcFlags::THREAD);
        let id = client.allocate(request).unwrap_or_else(|e| panic!("{name}: allocate: {e:?}"));
        if explicit {
            client.attach(id, ctx.pid()).unwrap_or_else(|e| panic!("{name}: attach: {e:?}"));
        }
        client.start(id).unwrap_or_else(|e| panic!("{name}: start: {e:?}"));
        let at_start = ctx.machine().thread_truth(ctx.tid());
        log.borrow_mut().push((name, Started { id, tid: ctx.tid(), at_start }));
    }
}

fn started(log: &Log, name: &str) -> Started {
    log.borrow().iter().find(|(n, _)| *n == name).map(|(_, s)| s.clone()).expect(name)
}

fn read(m: &Machine, pid: Pid, id: u32) -> u64 {
    m.client(pid).read(id).unwrap_or_else(|e| panic!("read {id:#x}: {e:?}"))
}

/// Two threads of one process each count themselves, on CPUs they share with the other
/// threads; one thread exits before the end.
fn two_threads_count_their_own(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 2, 7);
    let log: Log = Rc::default();
    let program = ProgramBuilder::new("/bin/lwps")
        .function("main", |f| {
            f.hook(start_thread_pmc(&log, "main", PmcFlags::empty(), false))
                .spawn_thread("worker")
                .spawn_thread("other")
                .call("body")
                .repeat(Ring::User, Work::every_event_distinct(), 9)
                .sleep()
        })
        .function("worker", |f| {
            f.hook(start_thread_pmc(&log, "worker", PmcFlags::empty(), true))
                .call("body")
                .call("body")
                .exit_thread()
        })
        .function("other", |f| f.call("body").call("body").call("body").exit_thread())
        .function("body", |f| {
            f.repeat(Ring::User, Work::every_event_distinct(), 5)
                .repeat(Ring::Kernel, Work::kernel_events_distinct(), 2)
                .loop_to(0, 20)
        })
        .build();
    let pid = m.spawn(&program, Credentials::user(1001));
    m.run_until_idle();
    assert_eq!(m.threads_of(pid).len(), 3);
    let (main, worker) = (started(&log, "main"), started(&log, "worker"));
    assert_ne!(main.tid, worker.tid);
    assert_ne!(main.id, worker.id, "each thread has its own PMC (and row)");
    let main_truth = user_instructions(&m.thread_truth(main.tid).since(&main.at_start));
    let worker_truth = user_instructions(&m.thread_truth(worker.tid).since(&worker.at_start));
    assert_eq!(worker_truth, 2 * 20 * 5 * 1_000, "the worker's own instructions");
    assert!(main_truth >= (20 * 5 + 9) * 1_000);
    assert_eq!(read(&m, pid, main.id), main_truth, "the main thread's PMC counts it alone");
    // The worker exited: its PMC was detached, its count kept, and nobody was signalled.
    assert_eq!(read(&m, pid, worker.id), worker_truth, "the worker's PMC counts it alone");
    assert!(m.kernel().take_signals().is_empty(), "a thread's exit signals nobody");
    let whole = user_instructions(&m.process_truth(pid));
    assert!(whole > main_truth + worker_truth, "the third thread was counted by neither");
    m.hardware().assert_no_faults();
}

/// With PMC_F_THREAD_INHERIT, the thread and the threads it creates afterwards (and theirs)
/// are counted, in one value; a thread created before the start, and a thread created by it,
/// are not.
fn inheriting_thread_pmc_counts_later_threads(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 3, 11);
    let log: Log = Rc::default();
    let program = ProgramBuilder::new("/bin/lwps")
        .function("main", |f| {
            f.spawn_thread("early")
                .hook(start_thread_pmc(&log, "main", PmcFlags::THREAD_INHERIT, false))
                .spawn_thread("late")
                .call("body")
                .sleep()
        })
        .function("early", |f| f.call("body").spawn_thread("early_child").exit_thread())
        .function("early_child", |f| f.call("body").exit_thread())
        .function("late", |f| f.call("body").spawn_thread("grandchild").exit_thread())
        .function("grandchild", |f| f.call("body").call("body").exit_thread())
        .function("body", |f| {
            f.repeat(Ring::User, Work::every_event_distinct(), 4)
                .repeat(Ring::Kernel, Work::kernel_events_distinct(), 1)
                .loop_to(0, 25)
        })
        .build();
    let pid = m.spawn(&program, Credentials::user(1002));
    m.run_until_idle();
    let main = started(&log, "main");
    let threads = m.threads_of(pid);
    assert_eq!(threads.len(), 5);
    // In creation order: main, early, late, then early's and late's children in whichever
    // order they came; the counted ones are late and its child.
    let (early, late) = (threads[1], threads[2]);
    let grandchild = *threads[3..]
        .iter()
        .find(|&&t| user_instructions(&m.thread_truth(t)) == 2 * 25 * 4 * 1_000)
        .expect("the grandchild ran two bodies");
    let counted = user_instructions(&m.thread_truth(main.tid).since(&main.at_start))
        + user_instructions(&m.thread_truth(late))
        + user_instructions(&m.thread_truth(grandchild));
    assert_eq!(read(&m, pid, main.id), counted, "main since its start, late and its child");
    let early_truth = user_instructions(&m.thread_truth(early));
    assert!(early_truth > 0 && user_instructions(&m.process_truth(pid)) > counted + early_truth);
    m.hardware().assert_no_faults();
}

/// Without PMC_F_THREAD_INHERIT, a thread created by the counted thread is not counted.
fn thread_pmc_without_inherit_skips_new_threads(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 2, 3);
    let log: Log = Rc::default();
    let program = ProgramBuilder::new("/bin/lwps")
        .function("main", |f| {
            f.hook(start_thread_pmc(&log, "main", PmcFlags::empty(), false))
                .spawn_thread("child")
                .call("body")
                .sleep()
        })
        .function("child", |f| f.call("body").exit_thread())
        .function("body", |f| f.repeat(Ring::User, Work::every_event_distinct(), 6).loop_to(0, 10))
        .build();
    let pid = m.spawn(&program, Credentials::user(1003));
    m.run_until_idle();
    let main = started(&log, "main");
    let own = user_instructions(&m.thread_truth(main.tid).since(&main.at_start));
    assert_eq!(read(&m, pid, main.id), own);
    m.hardware().assert_no_faults();
}

/// The errno of the thread scope: EINVAL for another process, and for the flags it cannot
/// go with.
fn thread_scope_errors(model: PmuModel, modes: &SimModes) {
    let mut m = machine(modes, model, 2, 5);
    let program = ProgramBuilder::new("/bin/idle")
        .function("main", |f| f.repeat(Ring::User, Work::every_event_distinct(), 3).sleep())
        .build();
    let target = m.spawn(&program, Credentials::user(1004));
    let tool = m.spawn_tool(Credentials::user(1004));
    m.run_until_idle();
    let client = m.client(tool);
    let thread = |flags| instructions(&model, flags);
    let id = client.allocate(thread(PmcFlags::THREAD)).unwrap();
    assert_eq!(client.attach(id, target), Err(Errno::Inval), "another process's thread");
    // The caller's own pid, or 0: the calling thread (the tool's, from outside any program).
    client.attach(id, tool).unwrap();
    assert_eq!(client.attach(id, 0), Err(Errno::Exist), "already attached");
    client.detach(id, 0).unwrap();
    client.attach(id, 0).unwrap();
    for (flags, what) in [
        (PmcFlags::THREAD_INHERIT, "THREAD_INHERIT without THREAD"),
        (PmcFlags::THREAD | PmcFlags::DESCENDANTS, "with DESCENDANTS"),
        (PmcFlags::THREAD | PmcFlags::MULTIPLEX, "multiplexed"),
    ] {
        assert_eq!(client.allocate(thread(flags)), Err(Errno::Inval), "{what}");
    }
    let system = thread(PmcFlags::THREAD).in_mode(Mode::SystemCounting, Some(0));
    assert_eq!(client.allocate(system), Err(Errno::Inval), "a system PMC");
    m.hardware().assert_no_faults();
}

/// The scenarios on each model, under the modes of the enclosing module.
macro_rules! on_models {
    ($($model:ident),*) => {$(
        mod $model {
            use hwpmc_sim::PmuModel;
            fn model() -> PmuModel {
                PmuModel::$model()
            }
            #[test]
            fn two_threads_count_their_own() {
                super::super::two_threads_count_their_own(model(), &super::modes());
            }
            #[test]
            fn inheriting_thread_pmc_counts_later_threads() {
                super::super::inheriting_thread_pmc_counts_later_threads(model(), &super::modes());
            }
            #[test]
            fn thread_pmc_without_inherit_skips_new_threads() {
                super::super::thread_pmc_without_inherit_skips_new_threads(model(), &super::modes());
            }
            #[test]
            fn thread_scope_errors() {
                super::super::thread_scope_errors(model(), &super::modes());
            }
        }
    )*};
}

/// The suite under one mode of `hwpmc_test_support::modes`, in a module named after it.
macro_rules! suite {
    ($mode:ident, $modes:expr) => {
        mod $mode {
            use hwpmc_sim::modes::SimModes;

            fn modes() -> SimModes {
                $modes
            }

            on_models!(skylake, zen4);
        }
    };
}

hwpmc_test_support::for_each_sim_mode!(suite);
