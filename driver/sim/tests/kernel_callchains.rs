//! Kernel callchains: a kernel-mode sample of a PMC with PMC_F_CALLCHAIN carries the interrupted
//! PC and the return addresses of the kernel stack's frame records, walked in the interrupt;
//! with PMC_F_USERCALLCHAIN the user stack the thread returns to follows. The workloads make
//! system calls into kernel functions whose frames the machine keeps on each thread's kernel
//! stack, so every expected callchain is known exactly from the programs' layout.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

use hwpmc::abi::{Mode, PmcFlags};
use hwpmc::{TrapFrame, Tunables};
use hwpmc_sim::kernel::{KERNEL_STACK_SIZE, SCRATCH_BASE, kernel_stack_base};
use hwpmc_sim::machine::{Machine, MachineConfig};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::workload::{KERNEL_TEXT_BASE, Program, ProgramBuilder};
use hwpmc_sim::{AllocateRequest, Credentials, PmuModel, SinkKind};
use hwpmc_test_support::world::World;
use pmclog::{Record, Records};

/// Counts the allocations (and frees) of the current thread while it is armed, to show that
/// the interrupt path allocates nothing.
struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note_allocation() {
    let counting = COUNTING.try_with(Cell::get).unwrap_or(false);
    if counting {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every method forwards its arguments unchanged to the system allocator, which upholds
// the `GlobalAlloc` contract; the counting touches only const-initialized thread-locals, which
// never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller's contract for `alloc` is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller's contract for `alloc_zeroed` is the system allocator's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: `ptr` came from this allocator, that is from the system allocator, with
        // `layout`; the caller's contract for `realloc` is the system allocator's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_allocation();
        // SAFETY: `ptr` came from the system allocator with `layout` (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs `f` and returns what it returned and how many allocations and frees it made.
fn counting_allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let value = f();
    COUNTING.with(|c| c.set(false));
    (value, ALLOCATIONS.with(Cell::get))
}

/// The sampling period; every kernel block retires 1000 instructions, 300 times.
const PERIOD: u64 = 10_000;
const SAMPLES: usize = 30;

/// A program that makes one system call: `main` calls `f`, `f` makes the system call
/// `sys_read`, which calls `k1` … `k{depth}` (each calling the next), the last of which calls
/// `copyout`. `copyout` first runs `hook` (as the thread, in kernel mode), then a kernel block
/// of 1000 instructions 300 times: every sample is taken there.
fn syscall_program(
    depth: usize,
    hook: impl Fn(&hwpmc_sim::HookContext<'_>) + 'static,
) -> Rc<Program> {
    let work = Work { instructions: 1000, core_cycles: 1200, ..Work::default() };
    let mut builder = ProgramBuilder::new("/usr/bin/reader")
        .function("main", |f| f.call("f").exit())
        .function("f", |f| f.syscall("sys_read").ret())
        .kernel_function("sys_read", |f| f.call(if depth == 0 { "copyout" } else { "k1" }).ret());
    for level in 1..=depth {
        let callee = if level == depth { "copyout".to_owned() } else { format!("k{}", level + 1) };
        builder = builder.kernel_function(&format!("k{level}"), move |f| f.call(&callee).ret());
    }
    builder
        .kernel_function("copyout", move |f| {
            f.hook(hook).repeat(Ring::Kernel, work.clone(), 300).ret()
        })
        .build()
}

/// The callchain of every sample of [`syscall_program`], from its layout alone: the PC of
/// `copyout`'s work block, the return addresses into `k{depth}` … `k1`, `sys_read`, then the user
/// part: the address after `f`'s system call block, and the return address into `main`.
fn expected_chain(program: &Program, depth: usize) -> (Vec<u64>, Vec<u64>) {
    let function = |name: &str| program.function(program.function_id(name).unwrap());
    let mut kernel = vec![function("copyout").block(1).start];
    for level in (1..=depth).rev() {
        kernel.push(function(&format!("k{level}")).block(0).end());
    }
    kernel.push(function("sys_read").block(0).end());
    let user = vec![function("f").block(0).end(), function("main").block(0).end()];
    (kernel, user)
}

/// What a run logged for the sampling PMC: each sample's callchain and whether it was flagged
/// as taken in user mode.
type Samples = Vec<(Vec<u64>, bool)>;

/// Runs `program` on one CPU (with `quantum` and `tunables`) under a process-sampling PMC of
/// instructions with `flags`, attached from a tool process, and returns its samples.
fn sample(program: &Rc<Program>, flags: PmcFlags, quantum: u64, tunables: Tunables) -> Samples {
    sample_on(PmuModel::skylake(), program, flags, quantum, tunables)
}

/// [`sample`] on a machine of `model`.
fn sample_on(
    model: PmuModel,
    program: &Rc<Program>,
    flags: PmcFlags,
    quantum: u64,
    tunables: Tunables,
) -> Samples {
    let config = MachineConfig::new(model, 1).quantum(quantum).tunables(tunables);
    let mut machine = Machine::new(config);
    let tool = machine.spawn_tool(Credentials::user(1000));
    let kernel = machine.kernel().clone();
    let fd = kernel.open_sink(tool, SinkKind::Writable);
    machine.client(tool).configure_log(fd).unwrap();
    let target = machine.spawn(program, Credentials::user(1000));
    let request = AllocateRequest::arch(&model, hwpmc_sim::ArchEvent::Instructions, 0);
    let request = request.in_mode(Mode::ThreadSampling, None);
    let id = machine.client(tool).allocate(request.with_count(PERIOD).with_flags(flags)).unwrap();
    machine.client(tool).attach(id, target).unwrap();
    machine.client(tool).start(id).unwrap();
    machine.run_until_idle();
    machine.client(tool).flush_log().unwrap();
    machine.hardware().assert_no_faults();
    let bytes = kernel.sink_bytes(kernel.sink_of(tool, fd).unwrap());
    Records::new(&bytes)
        .map(|e| e.expect("the log decodes").record)
        .filter_map(|r| match r {
            Record::Callchain(cc) if cc.pmcid == id => {
                Some((cc.pcs.iter().collect(), cc.cpuflags.is_user()))
            }
            _ => None,
        })
        .collect()
}

/// A quantum long enough for the whole system call to run in one time slice (the drain logs a
/// sample that waited two ticks for its user stack without it).
const ONE_SLICE: u64 = 100_000;

/// What [`recording`] hooks saw: the thread's kernel stack and whole stack, at each run.
type Seen = Rc<RefCell<Vec<(Vec<u64>, Vec<u64>)>>>;

/// A hook that records the stacks the thread has where it runs.
fn recording(seen: Seen) -> impl Fn(&hwpmc_sim::HookContext<'_>) {
    move |ctx| {
        let thread = ctx.thread();
        seen.borrow_mut().push((thread.kernel_stack(), thread.stack()));
    }
}

#[test]
fn a_kernel_mode_sample_carries_its_pc_then_the_kernel_return_addresses() {
    let seen: Seen = Rc::default();
    let program = syscall_program(2, recording(seen.clone()));
    let (kernel_chain, user_chain) = expected_chain(&program, 2);
    assert_eq!(kernel_chain.len(), 4, "copyout, k2, k1, sys_read");
    assert!(kernel_chain.iter().all(|&pc| pc >= KERNEL_TEXT_BASE), "{kernel_chain:x?}");
    let samples = sample(&program, PmcFlags::CALLCHAIN, ONE_SLICE, Tunables::default());
    assert_eq!(samples.len(), SAMPLES, "300 000 kernel instructions, one sample per 10 000");
    for (chain, user) in &samples {
        assert_eq!(chain, &kernel_chain, "{chain:x?} != {kernel_chain:x?}");
        assert!(!user, "a kernel-mode sample has no PMC_CC_F_USERSPACE");
    }
    // The machine's own view of the thread agrees with the layout.
    let seen = seen.borrow();
    let (kernel_stack, stack) = &seen[0];
    assert_eq!(kernel_stack[..], kernel_chain[1..]);
    assert_eq!(stack[..], [&kernel_chain[1..], &user_chain[..]].concat());
}

#[test]
fn with_usercallchain_the_user_frames_follow_the_kernel_frames() {
    let program = syscall_program(2, |_| {});
    let (kernel_chain, user_chain) = expected_chain(&program, 2);
    let expected = [kernel_chain, user_chain].concat();
    let flags = PmcFlags::CALLCHAIN | PmcFlags::USERCALLCHAIN;
    let samples = sample(&program, flags, ONE_SLICE, Tunables::default());
    assert_eq!(samples.len(), SAMPLES);
    for (chain, user) in &samples {
        assert_eq!(chain, &expected, "{chain:x?} != {expected:x?}");
        assert!(!user, "the user stack does not make a kernel-mode sample a user-mode one");
    }
}

#[test]
fn kernel_and_user_callchains_are_the_same_on_amd_machines() {
    let program = syscall_program(2, |_| {});
    let (kernel_chain, user_chain) = expected_chain(&program, 2);
    let both = [kernel_chain.clone(), user_chain].concat();
    for model in [PmuModel::zen2(), PmuModel::zen4()] {
        let samples =
            sample_on(model, &program, PmcFlags::CALLCHAIN, ONE_SLICE, Tunables::default());
        assert_eq!(samples.len(), SAMPLES, "{model:?}");
        assert!(samples.iter().all(|(chain, user)| *chain == kernel_chain && !user), "{model:?}");
        let flags = PmcFlags::CALLCHAIN | PmcFlags::USERCALLCHAIN;
        let samples = sample_on(model, &program, flags, ONE_SLICE, Tunables::default());
        assert_eq!(samples.len(), SAMPLES, "{model:?}");
        assert!(samples.iter().all(|(chain, user)| *chain == both && !user), "{model:?}");
    }
}

#[test]
fn a_system_call_that_outlasts_two_ticks_logs_its_early_samples_with_kernel_frames_only() {
    // 64 block executions per tick: the 300 executions take five ticks, and a sample waits for
    // its user stack two ticks at most.
    let program = syscall_program(1, |_| {});
    let (kernel_chain, user_chain) = expected_chain(&program, 1);
    let full = [kernel_chain.clone(), user_chain].concat();
    let flags = PmcFlags::CALLCHAIN | PmcFlags::USERCALLCHAIN;
    let samples = sample(&program, flags, 64, Tunables::default());
    assert_eq!(samples.len(), SAMPLES, "no sample is lost");
    let kernel_only = samples.iter().filter(|(c, _)| *c == kernel_chain).count();
    let complete = samples.iter().filter(|(c, _)| *c == full).count();
    assert_eq!(kernel_only + complete, SAMPLES, "{samples:x?}");
    assert!(kernel_only > 0 && complete > 0, "{kernel_only} kernel-only, {complete} complete");
}

#[test]
fn callchains_are_cut_at_the_callchain_depth() {
    let program = syscall_program(4, |_| {});
    let (kernel_chain, user_chain) = expected_chain(&program, 4);
    assert_eq!(kernel_chain.len(), 6);
    let full = [kernel_chain, user_chain].concat();
    let flags = PmcFlags::CALLCHAIN | PmcFlags::USERCALLCHAIN;
    for depth in [1, 3, 6, 7, 8, 9, 512] {
        let tunables = Tunables { callchain_depth: depth, ..Tunables::default() };
        let expected = &full[..full.len().min(depth as usize)];
        for flags in [PmcFlags::CALLCHAIN, flags] {
            let samples = sample(&program, flags, ONE_SLICE, tunables);
            let expected = if flags.contains(PmcFlags::USERCALLCHAIN) {
                expected
            } else {
                &expected[..expected.len().min(6)]
            };
            assert_eq!(samples.len(), SAMPLES);
            for (chain, _) in &samples {
                assert_eq!(chain, expected, "depth {depth}, {flags:?}");
            }
        }
    }
}

/// How a test hook corrupts `copyout`'s saved frame pointer (its caller's), given that frame
/// pointer and the thread's kernel stack base.
type Corruption = fn(u64, u64) -> u64;

#[test]
fn a_corrupted_saved_frame_pointer_ends_the_kernel_callchain_without_a_fault() {
    let corruptions: [(&str, Corruption); 7] = [
        ("garbage", |_, _| 0x4141_4141_4141_4141),
        ("below its callee's", |fp, _| fp - 16),
        ("its callee's own", |fp, _| fp),
        ("misaligned inside the stack", |fp, _| fp + 20),
        ("just past the stack's top", |_, base| base + KERNEL_STACK_SIZE),
        ("the last aligned address", |_, _| u64::MAX - 7),
        ("into user memory", |_, _| SCRATCH_BASE),
    ];
    for (what, corrupt) in corruptions {
        // copyout overwrites the first word of its own frame record (its caller's frame
        // pointer) before it works; the return address next to it stays good.
        let program = syscall_program(1, move |ctx| {
            let fp = ctx.thread().frame_pointer().unwrap();
            let base = kernel_stack_base(ctx.tid());
            let bad = corrupt(fp, base);
            ctx.machine().kernel().write_kernel_stack(ctx.tid(), fp, &bad.to_le_bytes()).unwrap();
        });
        let (kernel_chain, _) = expected_chain(&program, 1);
        for flags in [PmcFlags::CALLCHAIN, PmcFlags::CALLCHAIN | PmcFlags::USERCALLCHAIN] {
            let samples = sample(&program, flags, ONE_SLICE, Tunables::default());
            assert_eq!(samples.len(), SAMPLES, "{what}");
            for (chain, _) in &samples {
                let expected = if flags.contains(PmcFlags::USERCALLCHAIN) {
                    let user = expected_chain(&program, 1).1;
                    [&kernel_chain[..2], &user[..]].concat()
                } else {
                    kernel_chain[..2].to_vec()
                };
                assert_eq!(chain, &expected, "{what}: the walk stops after copyout's record");
            }
        }
    }
}

#[test]
fn kernel_samples_without_callchain_carry_only_the_pc() {
    let program = syscall_program(2, |_| {});
    let (kernel_chain, _) = expected_chain(&program, 2);
    let samples = sample(&program, PmcFlags::empty(), ONE_SLICE, Tunables::default());
    assert_eq!(samples, vec![(vec![kernel_chain[0]], false); SAMPLES]);
}

/// A process on a bare driver (no machine) with a log, for driving the interrupt directly.
fn bare() -> World {
    World::builder(PmuModel::skylake()).logging().build()
}

/// What the tests do with a bare driver.
trait Bare {
    /// Starts a process-sampling PMC of instructions every 1000, with `flags`; its id.
    fn start(&self, flags: PmcFlags) -> u32;
    /// Retires 1000 instructions in `ring` and delivers the PMI with `frame`; returns how many
    /// allocations the interrupt made.
    fn interrupt(&self, ring: Ring, frame: &TrapFrame) -> u64;
    /// The flushed log's callchains: (pmcid, PCs, user flag).
    fn chains(&self) -> Vec<(u32, Vec<u64>, bool)>;
}

impl Bare for World {
    fn start(&self, flags: PmcFlags) -> u32 {
        let request = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
        let id = self.client().allocate(request.with_count(1000).with_flags(flags)).unwrap();
        self.client().start(id).unwrap();
        id
    }

    fn interrupt(&self, ring: Ring, frame: &TrapFrame) -> u64 {
        let hw = self.driver.kernel().hardware().clone();
        hw.set_current_cpu(0);
        hw.pmu(0).retire(ring, &Work { instructions: 1000, ..Work::default() });
        assert!(hw.pmu(0).take_pmi().is_some(), "the counters overflowed");
        let (claimed, allocations) = counting_allocations(|| self.driver.interrupt(0, frame));
        assert!(claimed, "the PMI is the driver's");
        allocations
    }

    fn chains(&self) -> Vec<(u32, Vec<u64>, bool)> {
        self.client().flush_log().unwrap();
        let bytes = self.log_bytes();
        Records::new(&bytes)
            .map(|e| e.expect("the log decodes").record)
            .filter_map(|r| match r {
                Record::Callchain(cc) => {
                    Some((cc.pmcid, cc.pcs.iter().collect(), cc.cpuflags.is_user()))
                }
                _ => None,
            })
            .collect()
    }
}

/// Writes frame records at the top of `tid`'s kernel stack, innermost first, each returning to
/// one of `returns` (the outermost record is two zeros); returns the innermost frame pointer.
fn kernel_frames(bare: &World, returns: &[u64]) -> u64 {
    let kernel = bare.driver.kernel();
    let top = kernel_stack_base(bare.tid) + KERNEL_STACK_SIZE;
    let records = returns.len() as u64 + 1;
    let innermost = top - 16 * records;
    for (i, &ret) in returns.iter().chain(&[0]).enumerate() {
        let fp = innermost + 16 * i as u64;
        let caller = if ret == 0 { 0 } else { fp + 16 };
        let record = [caller.to_le_bytes(), ret.to_le_bytes()].concat();
        kernel.write_kernel_stack(bare.tid, fp, &record).unwrap();
    }
    innermost
}

const KERNEL_PC: u64 = 0xffff_ffff_8000_0040;
const KERNEL_RETURNS: [u64; 2] = [0xffff_ffff_8000_0110, 0xffff_ffff_8000_0220];
const USER_PC: u64 = 0x40_1000;
const USER_RETURNS: [u64; 2] = [0x40_1111, 0x40_2222];

/// Two user frame records in the process's memory; the innermost frame pointer.
fn user_frames(bare: &World) -> u64 {
    let (a, b) = (SCRATCH_BASE + 0x100, SCRATCH_BASE + 0x200);
    let record = |caller: u64, ret: u64| [caller.to_le_bytes(), ret.to_le_bytes()].concat();
    let kernel = bare.driver.kernel();
    kernel.write_memory(bare.pid, a, &record(b, USER_RETURNS[0])).unwrap();
    kernel.write_memory(bare.pid, b, &record(0, USER_RETURNS[1])).unwrap();
    a
}

#[test]
fn the_interrupt_path_allocates_nothing_with_or_without_callchains() {
    let bare = bare();
    let kernel = bare.driver.kernel().clone();
    let plain = bare.start(PmcFlags::empty());
    let callchain = bare.start(PmcFlags::CALLCHAIN);
    let user_callchain = bare.start(PmcFlags::CALLCHAIN | PmcFlags::USERCALLCHAIN);
    let kfp = kernel_frames(&bare, &KERNEL_RETURNS);
    let ufp = user_frames(&bare);
    kernel.set_running(0, Some(bare.tid));
    bare.driver.switch_in(0, bare.pid, bare.tid);
    // A PMI in the kernel (three samples: the PC; the kernel chain into the ring; the kernel
    // chain into the pending table) and one in user mode (the PC; two parked samples).
    let kernel_frame = TrapFrame { pc: KERNEL_PC, fp: kfp, sp: kfp, user: false };
    assert_eq!(bare.interrupt(Ring::Kernel, &kernel_frame), 0, "kernel-mode PMI");
    let user_frame = TrapFrame { pc: USER_PC, fp: ufp, sp: ufp, user: true };
    assert_eq!(bare.interrupt(Ring::User, &user_frame), 0, "user-mode PMI");
    // The return to user mode completes the parked samples; the drain logs the rest.
    kernel.set_caller(bare.pid);
    bare.driver.user_return(0, bare.pid, bare.tid, &user_frame);
    bare.driver.tick(0);
    bare.driver.switch_out(0, bare.pid, bare.tid);
    let kernel_chain = [&[KERNEL_PC][..], &KERNEL_RETURNS].concat();
    let user_chain = [&[USER_PC][..], &USER_RETURNS].concat();
    let mut chains = bare.chains();
    chains.sort();
    let mut expected = vec![
        (plain, vec![KERNEL_PC], false),
        (plain, vec![USER_PC], true),
        (callchain, kernel_chain.clone(), false),
        (callchain, user_chain.clone(), true),
        (user_callchain, [kernel_chain, user_chain.clone()].concat(), false),
        (user_callchain, user_chain, true),
    ];
    expected.sort();
    assert_eq!(chains, expected);
    kernel.hardware().assert_no_faults();
}

#[test]
fn the_kernel_walk_reads_only_the_interrupted_thread_s_kernel_stack() {
    let bare = bare();
    let kernel = bare.driver.kernel().clone();
    let id = bare.start(PmcFlags::CALLCHAIN);
    let kfp = kernel_frames(&bare, &KERNEL_RETURNS);
    let ufp = user_frames(&bare);
    bare.driver.switch_in(0, bare.pid, bare.tid);
    let at = |fp: u64| TrapFrame { pc: KERNEL_PC, fp, sp: fp, user: false };
    // No thread is running as far as the kernel knows (an idle CPU): nothing is read.
    kernel.set_running(0, None);
    assert_eq!(bare.interrupt(Ring::Kernel, &at(kfp)), 0);
    kernel.set_running(0, Some(bare.tid));
    // A frame pointer into user memory, where a frame record looks fine: not a kernel stack.
    assert_eq!(bare.interrupt(Ring::Kernel, &at(ufp)), 0);
    // Another thread's kernel stack (a thread of the same process, with the same records).
    let other = kernel.add_thread(bare.pid).unwrap();
    let other_fp = kfp - kernel_stack_base(bare.tid) + kernel_stack_base(other);
    for offset in (0..48).step_by(8) {
        let word = kernel.read_kernel_stack_of(bare.tid, kfp + offset, 8).unwrap();
        kernel.write_kernel_stack(other, other_fp + offset, &word).unwrap();
    }
    assert_eq!(bare.interrupt(Ring::Kernel, &at(other_fp)), 0);
    // The thread's own: the whole chain.
    assert_eq!(bare.interrupt(Ring::Kernel, &at(kfp)), 0);
    bare.driver.tick(0);
    bare.driver.switch_out(0, bare.pid, bare.tid);
    let chains: Vec<Vec<u64>> =
        bare.chains().into_iter().filter(|c| c.0 == id).map(|c| c.1).collect();
    let full = [&[KERNEL_PC][..], &KERNEL_RETURNS].concat();
    assert_eq!(chains, [vec![KERNEL_PC], vec![KERNEL_PC], vec![KERNEL_PC], full]);
}

#[test]
fn kernel_functions_are_not_part_of_the_process_s_executable_mapping() {
    let program = syscall_program(1, |_| {});
    let mut machine = Machine::new(MachineConfig::new(PmuModel::skylake(), 1));
    let pid = machine.spawn(&program, Credentials::user(1000));
    let mappings = machine.kernel().with_process(pid, |p| p.mappings.clone()).unwrap();
    let user_end = program.user_functions().map(|f| f.end()).max().unwrap();
    assert_eq!(mappings, [(0x40_0000, user_end, b"/usr/bin/reader".to_vec())]);
    assert!(user_end < KERNEL_TEXT_BASE);
}
