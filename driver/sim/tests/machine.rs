//! The simulated machine itself: deterministic scheduling, ground-truth bookkeeping, and the
//! fork / exec / thread / exit plumbing and call stacks of workloads.

use std::cell::RefCell;
use std::rc::Rc;

use hwpmc::Tid;
use hwpmc_sim::machine::{STACK_SIZE, stack_base};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{
    ArchEvent, Credentials, GroundTruth, Machine, MachineConfig, PmuModel, ProgramBuilder,
    ThreadState,
};

fn work(instructions: u64) -> Work {
    Work {
        instructions,
        core_cycles: instructions * 3 / 2,
        ref_cycles: instructions,
        branches: instructions / 5,
        branch_mispredicts: instructions / 50,
        llc_references: instructions / 20,
        llc_misses: instructions / 100,
        raw: Vec::new(),
        offcore: Vec::new(),
    }
    .with_raw(0xD1, 0x01, 3)
}

fn machine(cpus: usize, seed: u64, quantum: u64) -> Machine {
    Machine::new(MachineConfig::new(PmuModel::skylake(), cpus).seed(seed).quantum(quantum))
}

/// Several processes with loops and calls, to keep 3 CPUs busy.
fn busy_machine(seed: u64) -> Machine {
    let mut m = machine(3, seed, 5);
    let program = ProgramBuilder::new("/bin/busy")
        .function("main", |f| f.repeat(Ring::User, work(100), 7).call("sys").loop_to(0, 20).exit())
        .function("sys", |f| f.repeat(Ring::Kernel, work(40), 3))
        .build();
    for _ in 0..6 {
        m.spawn(&program, Credentials::user(1000));
    }
    m
}

#[test]
fn the_same_seed_gives_the_same_interleaving_and_another_seed_another() {
    let mut a = busy_machine(42);
    let mut b = busy_machine(42);
    let mut c = busy_machine(43);
    let ticks = a.run_until_idle();
    assert_eq!(b.run_until_idle(), ticks);
    c.run_until_idle();
    assert_eq!(a.trace(), b.trace());
    assert_eq!(a.stats(), b.stats());
    for cpu in 0..3 {
        assert_eq!(a.cpu_truth(cpu), b.cpu_truth(cpu));
    }
    assert_ne!(a.trace(), c.trace(), "another seed, another interleaving");
    assert!(a.stats().migrations > 0, "threads migrate: {:?}", a.stats());
    // Whatever the interleaving, every process did the same work.
    let pids: Vec<_> = a.trace().iter().map(|d| d.pid).collect();
    for pid in pids {
        assert_eq!(a.process_truth(pid), c.process_truth(pid));
    }
    assert_eq!(a.total_truth(), c.total_truth());
    a.hardware().assert_no_faults();
}

#[test]
fn ground_truth_follows_the_program_and_matches_the_pmu() {
    let mut m = machine(2, 7, 4);
    let (a, b, c) = (work(1000), work(30), work(7));
    let program = ProgramBuilder::new("/bin/exact")
        .function("main", |f| {
            f.repeat(Ring::User, a.clone(), 7)
                .call("f")
                .loop_to(0, 3)
                .block(Ring::Kernel, b.clone())
                .exit()
        })
        .function("f", |f| f.repeat(Ring::Kernel, c.clone(), 5))
        .build();
    let pid = m.spawn(&program, Credentials::user(1000));
    let other = m.spawn(&program, Credentials::user(1000));
    m.run_until_idle();

    let mut expected = GroundTruth::default();
    expected.record(Ring::User, &a, 3 * 7, 4);
    expected.record(Ring::User, &Work::default(), 6, 4); // the call and loop blocks
    expected.record(Ring::Kernel, &c, 3 * 5, 4);
    expected.record(Ring::Kernel, &b, 1, 4);
    expected.record(Ring::User, &Work::default(), 1, 4); // the exit block
    assert_eq!(m.process_truth(pid), expected);
    assert_eq!(m.process_truth(other), expected);
    let tid = m.threads_of(pid)[0];
    assert_eq!(m.thread_truth(tid), expected);
    assert_eq!(expected.arch_in(Ring::User, ArchEvent::Instructions), 21_000);
    assert_eq!(expected.arch_in(Ring::Kernel, ArchEvent::Instructions), 3 * 5 * 7 + 30);
    assert_eq!(expected.arch(ArchEvent::TopdownSlots), 4 * expected.arch(ArchEvent::CoreCycles));
    assert_eq!(expected.raw(0xD1, 0x01), 3 * (21 + 15 + 1));
    assert_eq!(expected.blocks(), 21 + 6 + 15 + 1 + 1);

    // Per CPU: the machine's totals are the PMU's, and they add up to the processes'.
    for cpu in 0..2 {
        let truth = m.cpu_truth(cpu);
        let pmu = m.hardware().pmu(cpu as usize);
        for ring in [Ring::User, Ring::Kernel] {
            for event in ArchEvent::ALL {
                assert_eq!(truth.arch_in(ring, event), pmu.ground_truth(ring).arch(event));
            }
            assert_eq!(truth.ring(ring).raw(0xD1, 0x01), pmu.ground_truth(ring).raw(0xD1, 0x01));
            assert_eq!(truth.ring(ring).blocks(), pmu.ground_truth(ring).blocks());
        }
    }
    assert_eq!(m.total_truth(), expected.clone() + &expected);
    assert_eq!(m.total_truth().since(&expected), expected);
    assert!(!m.kernel().exists(pid), "reaped");
    assert_eq!(m.thread(tid).unwrap().state(), ThreadState::Exited);
    m.hardware().assert_no_faults();
}

#[test]
fn a_huge_repeat_is_exact_and_cheap() {
    let mut m = Machine::new(MachineConfig::new(PmuModel::core2(), 1).quantum(u64::MAX));
    let block = Work { instructions: 1 << 20, core_cycles: 1 << 21, ..Work::default() };
    let program = ProgramBuilder::new("/bin/huge")
        .function("main", |f| f.repeat(Ring::User, block.clone(), 3 << 20))
        .build();
    let pid = m.spawn(&program, Credentials::user(1));
    assert_eq!(m.run_until_idle(), 1);
    let truth = m.process_truth(pid);
    assert_eq!(truth.arch(ArchEvent::Instructions), 3 << 40);
    assert_eq!(truth.arch(ArchEvent::CoreCycles), 3 << 41);
    assert_eq!(truth.blocks(), 3 << 20);
    assert_eq!(m.hardware().pmu(0).ground_truth(Ring::User).arch(ArchEvent::Instructions), 3 << 40);
}

#[test]
fn hooks_see_the_call_stack_and_frame_records_are_in_user_memory() {
    let mut m = machine(1, 0, 100);
    /// What the hook saw: the stack, the PC, the frame pointer and the CPU.
    type Seen = (Vec<u64>, u64, u64, u32);
    let seen: Rc<RefCell<Vec<Seen>>> = Rc::default();
    let record = seen.clone();
    let program = ProgramBuilder::new("/bin/stack")
        .function("main", |f| f.block(Ring::User, work(10)).call("f").exit())
        .function("f", |f| f.call("g").len(7).ret())
        .function("g", move |f| {
            f.block(Ring::Kernel, work(3)).hook(move |ctx| {
                let thread = ctx.thread();
                record.borrow_mut().push((
                    thread.stack(),
                    thread.pc().unwrap(),
                    thread.frame_pointer().unwrap(),
                    ctx.cpu(),
                ));
                // Walk the frame records as a kernel would.
                let kernel = ctx.machine().kernel();
                let mut fp = thread.frame_pointer().unwrap();
                let mut walked = Vec::new();
                while fp != 0 {
                    let bytes = kernel.read_memory(ctx.pid(), fp, 16).unwrap();
                    let caller = u64::from_le_bytes(bytes[..8].try_into().unwrap());
                    let ret = u64::from_le_bytes(bytes[8..].try_into().unwrap());
                    if ret != 0 {
                        walked.push(ret);
                    }
                    fp = caller;
                }
                assert_eq!(walked, thread.stack());
            })
        })
        .build();
    let pid = m.spawn(&program, Credentials::user(5));
    let tid = m.threads_of(pid)[0];
    m.run_until_idle();
    let seen = seen.borrow();
    assert_eq!(seen.len(), 1);
    let (stack, pc, fp, cpu) = &seen[0];
    let main = program.function(program.function_id("main").unwrap());
    let f = program.function(program.function_id("f").unwrap());
    let g = program.function(program.function_id("g").unwrap());
    // Innermost first: the return into f (after its 7-byte call block), then into main.
    assert_eq!(stack, &vec![f.block(0).end(), main.block(1).end()]);
    assert_eq!(f.block(0).end(), f.start() + 7);
    // The hook block has run; the thread's next block is the end of g (about to return).
    assert_eq!(*pc, g.end());
    assert_eq!(*fp, stack_base(tid) + STACK_SIZE - 3 * 16);
    assert_eq!(*cpu, 0);
}

#[test]
fn fork_exec_threads_and_exit_reach_the_kernel() {
    let mut m = machine(2, 3, 8);
    let log: Rc<RefCell<Vec<String>>> = Rc::default();
    let l = log.clone();
    let setuid = ProgramBuilder::new("/usr/bin/su")
        .function("main", move |f| {
            f.block(Ring::User, work(50)).hook(move |ctx| {
                let kernel = ctx.machine().kernel();
                let (euid, set_id) =
                    kernel.with_process(ctx.pid(), |p| (p.credentials.euid, p.set_id)).unwrap();
                let threads = kernel.threads(ctx.pid()).len();
                l.borrow_mut().push(format!("su euid={euid} set_id={set_id} threads={threads}"));
            })
        })
        .build();
    let root = Credentials { euid: 0, ..Credentials::user(1000) };
    let program = ProgramBuilder::new("/bin/parent")
        .function("main", |f| {
            f.block(Ring::User, work(10))
                .spawn_thread("worker")
                .spawn_thread("worker")
                .fork("child")
                .fork("child")
                .block(Ring::User, work(20))
                .exec(setuid.clone(), Some(root.clone()))
        })
        .function("worker", |f| f.repeat(Ring::User, work(5), 1000).exit_thread())
        .function("child", |f| f.repeat(Ring::Kernel, work(3), 10).fork("grandchild"))
        .function("grandchild", |f| f.block(Ring::User, work(1)))
        .build();
    let pid = m.spawn(&program, Credentials::user(1000));
    m.run_until_idle();

    assert_eq!(m.children(pid).len(), 2);
    let descendants = m.descendants(pid);
    assert_eq!(descendants.len(), 4, "2 children and a grandchild each");
    for &child in &m.children(pid) {
        assert_eq!(m.parent(child), Some(pid));
        assert_eq!(m.children(child).len(), 1);
        let mut expected = GroundTruth::default();
        expected.record(Ring::Kernel, &work(3), 10, 4);
        expected.record(Ring::User, &Work::default(), 1, 4);
        assert_eq!(m.process_truth(child), expected);
    }
    for p in std::iter::once(pid).chain(descendants) {
        assert!(!m.process_alive(p));
        assert!(!m.kernel().exists(p));
    }
    // The exec ended the workers (wherever they were) and ran the set-id program as root.
    assert_eq!(*log.borrow(), ["su euid=0 set_id=true threads=1"]);
    assert_eq!(m.threads_of(pid).len(), 3);
    let stats = m.stats();
    assert_eq!((stats.forks, stats.execs, stats.threads_created, stats.exits), (4, 1, 2, 5));
    let tree: GroundTruth = m.tree_truth(pid);
    assert_eq!(tree, m.total_truth());
    m.hardware().assert_no_faults();
}

#[test]
fn the_process_exits_with_main_or_with_its_last_thread() {
    let mut m = machine(2, 1, 3);
    let program = ProgramBuilder::new("/bin/t")
        .function("main", |f| f.spawn_thread("worker").spawn_thread("worker").ret())
        .function("worker", |f| f.repeat(Ring::User, work(10), 1_000_000))
        .build();
    // `main` returns at once: the process exits and its workers with it.
    let quick = m.spawn(&program, Credentials::user(1));
    let program = ProgramBuilder::new("/bin/t")
        .function("main", |f| f.spawn_thread("worker").spawn_thread("worker").exit_thread())
        .function("worker", |f| f.repeat(Ring::User, work(10), 100))
        .build();
    // `main` exits its thread only: the workers finish.
    let patient = m.spawn(&program, Credentials::user(1));
    m.run_until_idle();
    let done = |pid| m.process_truth(pid).arch(ArchEvent::Instructions);
    assert!(done(quick) < 2 * 10 * 1_000_000);
    assert_eq!(done(patient), 2 * 10 * 100);
    for pid in [quick, patient] {
        assert_eq!(m.threads_of(pid).len(), 3);
        assert!(m.live_threads(pid).is_empty());
        assert!(!m.kernel().exists(pid));
    }
}

#[test]
fn sleep_wake_yield_and_kill() {
    let mut m = machine(1, 9, 1_000);
    let program = ProgramBuilder::new("/bin/t")
        .function("main", |f| {
            f.block(Ring::User, work(10)).yield_now().block(Ring::User, work(10)).sleep().exit()
        })
        .build();
    let sleeper = m.spawn(&program, Credentials::user(1));
    let spinner_program = ProgramBuilder::new("/bin/spin")
        .function("main", |f| f.repeat(Ring::User, work(1), u64::MAX))
        .build();
    let spinner = m.spawn(&spinner_program, Credentials::user(1));
    let tid: Tid = m.threads_of(sleeper)[0];
    assert!(m.run_until(|m| m.thread(tid).unwrap().state() == ThreadState::Sleeping));
    assert_eq!(m.process_truth(sleeper).arch(ArchEvent::Instructions), 20);
    // The yield let the spinner run between the two blocks.
    let first = m.trace().iter().position(|d| d.pid == spinner).unwrap();
    let back = m.trace().iter().rposition(|d| d.pid == sleeper).unwrap();
    assert!(first < back, "{:?}", m.trace());
    m.run_for(3);
    assert_eq!(m.running_on(0).map(|t| t.pid()), Some(spinner));
    m.wake(tid);
    m.kill(spinner);
    assert!(m.running_on(0).is_none(), "the killed spinner left its CPU");
    assert!(!m.kernel().exists(spinner));
    m.run_until_idle();
    assert!(!m.process_alive(sleeper));
    m.hardware().assert_no_faults();
}

#[test]
fn idle_work_is_counted_on_the_cpu_only() {
    let idle = Work { instructions: 3, core_cycles: 100, ..Work::default() };
    let mut m =
        Machine::new(MachineConfig::new(PmuModel::skylake(), 2).quantum(10).idle_work(idle));
    let program = ProgramBuilder::new("/bin/t")
        .function("main", |f| f.repeat(Ring::User, work(10), 50))
        .build();
    let pid = m.spawn(&program, Credentials::user(1));
    let ticks = m.run_until_idle();
    // 5 quanta of 10 executions, and a tick to return from `main`.
    assert_eq!(ticks, 6);
    let total = m.total_truth();
    let process = m.process_truth(pid);
    // One CPU was idle in every tick.
    assert_eq!(total.arch_in(Ring::Kernel, ArchEvent::Instructions), 3 * 6);
    assert_eq!(total.arch_in(Ring::User, ArchEvent::Instructions), 500);
    assert_eq!(process.arch_in(Ring::Kernel, ArchEvent::Instructions), 0);
    let tool = m.spawn_tool(Credentials::root());
    assert!(m.is_idle(), "a tool sleeps");
    assert!(m.process_alive(tool));
}
