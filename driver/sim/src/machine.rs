//! The simulated machine: N CPUs running the threads of [workload](crate::workload) programs
//! under a deterministic scheduler, calling the `hwpmc` driver's hooks exactly where a kernel
//! does, and keeping the ground truth of every event per thread, per process and per CPU.
//!
//! # Time and scheduling
//!
//! Time advances in *ticks*. In each tick every active CPU, in an order the machine's PRNG
//! shuffles, first *schedules* and then runs its thread for one *quantum*, measured in block
//! executions (a block repeated `r` times is `r` executions; a block that does no work costs one).
//! Scheduling: if no thread waits in the run queue, the CPU keeps its thread (or stays idle);
//! otherwise it switches its thread out to the back of the queue and switches in a thread the
//! PRNG picks among the oldest few (as many as there are CPUs), so threads migrate between CPUs.
//! Threads stay on their CPUs between ticks: when a test acts between two ticks, the threads that
//! ran last are still switched in, as on a live system.
//!
//! The PRNG is a SplitMix64 seeded from [`MachineConfig::seed`]: the same seed and the same
//! workloads give the same interleaving, the same hook calls and the same counts; another seed
//! gives another interleaving, but every thread still executes exactly the same blocks.
//!
//! # What the driver sees
//!
//! * A context switch calls `switch_out(cpu, pid, tid)` / `switch_in(cpu, pid, tid)` with the
//!   hardware's current CPU set to `cpu`.
//! * A block executes as [`SimPmu::retire_repeated`](crate::pmu::SimPmu::retire_repeated) on its
//!   CPU; if the PMU then delivers a PMI, the machine calls `interrupt(cpu, frame)` with the
//!   thread's [`TrapFrame`] (`pc` = the start of the block that was executing, its frame and stack
//!   pointers, and its mode; see [Stacks](#stacks)).
//! * With a [`PmiTiming`] latency (see [`crate::timing`]), a PMI raised by a block waits a
//!   seed-chosen number of block executions (retired one at a time) and is served with the
//!   frame of the block it lands in; one that waits past the thread's time slice is served at
//!   the next switch or tick, with the idle frame.
//! * A thread returning to user mode calls `user_return(cpu, pid, tid, frame)` with the user
//!   context it returns to, with the kernel's caller set to its process: after a PMI taken in
//!   user mode (`frame` is the interrupted one), when the kernel function a system call entered
//!   returns (the user PC after the system call block), when a kernel-mode block of a user
//!   function completes, and when it is switched in to go on in user mode.
//! * A block repeated many times is retired in chunks small enough that no counter can advance
//!   by more than half its range between two PMIs (as on real hardware, where a PMI follows an
//!   overflow within a few instructions), and that end at the execution in which the next
//!   interrupting counter overflows
//!   ([`SimPmu::executions_to_next_pmi`](crate::pmu::SimPmu::executions_to_next_pmi)), so a
//!   sampling PMC sees every overflow of a hot loop. (Counters filtered by CMASK/EDGE have no
//!   closed-form overflow point; for them the half-range bound alone applies.)
//! * Fork: [`SimKernel::fork`] then `process_fork(parent, child)`, before the child can run.
//! * Exec: the other threads exit (`switch_out` if running, `thread_exit`); for a set-id program
//!   the process takes its new credentials and is marked set-id; then `process_exec`.
//! * Thread creation and exit: `thread_create` / `thread_exit`.
//! * Process exit (as FreeBSD's `exit1`): [`SimKernel::begin_exit`]; the other threads are
//!   switched out and exit; the exiting thread is switched out; `process_exit(pid)`;
//!   `thread_exit` for the exiting thread; then the process is **reaped at once**
//!   ([`SimKernel::reap`]): there are no zombies and no `wait`, and the children of an exited
//!   process have no parent from then on. The machine keeps its own record of every process and
//!   thread (its ground truth, its parent and children) after it is gone.
//!
//! # Ground truth
//!
//! [`GroundTruth`] holds, per ring, every architectural event (Intel SDM Vol. 3B Table 21-1),
//! every raw event and the number of block executions. The machine keeps one per thread, per
//! process (all its threads, across execs), per CPU (including idle work) and lets tests take
//! snapshots and differences ([`GroundTruth::since`]). The per-CPU totals equal the PMU's own
//! [`ground_truth`](crate::pmu::SimPmu::ground_truth).
//!
//! # Stacks
//!
//! Each thread has a user stack of [`STACK_SIZE`] bytes mapped in its process at
//! [`stack_base`]`(tid)`, and a kernel stack the kernel allocates at
//! [`kernel_stack_base`]`(tid)`. Every call pushes an x86-64 frame record on one of them: at the
//! new frame pointer `fp`, the caller's frame pointer, and at `fp + 8`, the return address. Frames of user functions live on the user stack (the entry
//! frame's record is two zeros); frames of kernel functions live on the kernel stack, where the
//! outermost one, entered by a system call, also has a record of two zeros (what the user mode
//! resumes at is in the trap frame, not in a frame record), so a walk of the kernel stack ends
//! there. The stack pointer equals the innermost frame pointer (frames have no locals). A PMI
//! reports the frame pointer of the innermost frame of its mode: a user-mode block's user frame,
//! a kernel function's kernel frame; a kernel-mode block of a user function (a kernel excursion
//! without kernel frames) reports a frame pointer of 0. The kernel is told which thread runs on
//! each CPU ([`SimKernel::set_running`]), so the driver reads only the interrupted thread's
//! kernel stack.

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use hwpmc::{Cpu, ExecInfo, Pid, Tid, TrapFrame, Tunables};

use crate::arch_event::ArchEvent;
use crate::client::{PmcClient, SimDriver, load_driver};
use crate::cpuid::PmuModel;
pub use crate::ground_truth::{GroundTruth, RingTruth};
use crate::hook::HookContext;
use crate::kernel::{Credentials, KERNEL_STACK_SIZE, SimKernel, kernel_stack_base};
use crate::modes::{PmiInjection, SimModes};
use crate::pmu::{MaskedPmi, Ring, SimHardware, Work};
pub use crate::prng::SplitMix64;
use crate::timing::{PmiDelays, PmiTiming};
use crate::workload::{Action, Flow, FunctionId, Program, ProgramBuilder};

/// Size of each thread's user stack.
pub const STACK_SIZE: u64 = 64 * 1024;
/// Where thread stacks are mapped (see [`stack_base`]).
pub const STACKS_BASE: u64 = 0x7f00_0000_0000;
/// The address reported as the interrupted PC when a PMI arrives in the scheduler or an idle CPU.
pub const KERNEL_IDLE_PC: u64 = 0xffff_ffff_8010_0000;
/// The PC the mode that delivers a PMI at every MSR access reports: the driver's code.
pub const DRIVER_PC: u64 = 0xffff_ffff_8020_0000;
/// With [`MachineConfig::pmi_seed`], a PMI comes after about one in this many of the driver's
/// MSR and counter accesses.
pub const SEEDED_PMI_ONE_IN: u64 = 4;

/// The lowest address of thread `tid`'s stack: [`STACKS_BASE`] + (`tid` mod 65536) × 2 ×
/// [`STACK_SIZE`] (an unmapped guard gap separates stacks).
pub fn stack_base(tid: Tid) -> u64 {
    STACKS_BASE + (tid as u64 % 0x1_0000) * 2 * STACK_SIZE
}

/// How a [`Machine`] is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineConfig {
    /// The CPU model of every CPU.
    pub model: PmuModel,
    /// The number of CPUs.
    pub cpus: usize,
    /// The driver's load-time tunables.
    pub tunables: Tunables,
    /// The scheduler's seed.
    pub seed: u64,
    /// Block executions per time slice (at least 1).
    pub quantum: u64,
    /// Work an idle CPU retires in kernel mode once per tick (none by default), counted in the
    /// CPU's ground truth only.
    pub idle_work: Option<Work>,
    /// Whether to deliver a PMI at every MSR and counter access the driver makes (off by
    /// default): the held PMI if the LVT entry has one, else a spurious one, in the middle of
    /// whatever the driver was doing — system call, hook or drain — as an NMI can arrive.
    pub pmi_at_every_msr_access: bool,
    /// Whether to deliver a PMI (as [`MachineConfig::pmi_at_every_msr_access`] does) at about
    /// one in [`SEEDED_PMI_ONE_IN`] of the driver's MSR and counter accesses, chosen by this seed
    /// (off by default): the same seed picks the same accesses.
    pub pmi_seed: Option<u64>,
    /// What every CPU's local APIC does with a PMI raised while its entry is masked (held until
    /// unmasked by default; dropped on a model whose APIC drops them, like a KVM guest).
    pub masked_pmi: MaskedPmi,
    /// How late PMIs are served, and what else happens around the driver (the exact mode by
    /// default; see [`crate::timing`]).
    pub timing: PmiTiming,
}

impl MachineConfig {
    /// `cpus` CPUs of `model`, default tunables, seed 0, a quantum of 64 block executions, no idle
    /// work.
    pub fn new(model: PmuModel, cpus: usize) -> Self {
        MachineConfig {
            model,
            cpus,
            tunables: Tunables::default(),
            seed: 0,
            quantum: 64,
            idle_work: None,
            pmi_at_every_msr_access: false,
            pmi_seed: None,
            masked_pmi: if model.quirks.drops_masked_pmis {
                MaskedPmi::Dropped
            } else {
                MaskedPmi::Held
            },
            timing: PmiTiming::exact(),
        }
    }

    /// With this PMI timing.
    pub fn timing(mut self, timing: PmiTiming) -> Self {
        self.timing = timing;
        self
    }

    /// Under `modes` (a test suite's, see [`crate::modes`]): their masked-PMI policy and freeze
    /// tunable where they name one, their timing and their PMI injection.
    pub fn modes(mut self, modes: &SimModes) -> Self {
        if let Some(policy) = modes.masked_pmi {
            self.masked_pmi = policy;
        }
        if let Some(freeze) = modes.freeze_on_pmi {
            self.tunables.freeze_on_pmi = freeze;
        }
        self.timing = modes.timing.clone();
        let (every, seed) = match modes.pmi_injection {
            PmiInjection::None => (false, None),
            PmiInjection::EveryMsrAccess => (true, None),
            PmiInjection::SeededAccesses(seed) => (false, Some(seed)),
        };
        self.pmi_at_every_msr_access(every).pmi_at_seeded_accesses(seed)
    }

    /// With every CPU's local APIC treating a PMI raised while its entry is masked so.
    pub fn masked_pmi(mut self, policy: MaskedPmi) -> Self {
        self.masked_pmi = policy;
        self
    }

    /// Delivering a PMI at every MSR and counter access the driver makes, or not.
    pub fn pmi_at_every_msr_access(mut self, on: bool) -> Self {
        self.pmi_at_every_msr_access = on;
        self
    }

    /// Delivering a PMI at the MSR and counter accesses `seed` chooses (see
    /// [`MachineConfig::pmi_seed`]), or not (`None`).
    pub fn pmi_at_seeded_accesses(mut self, seed: Option<u64>) -> Self {
        self.pmi_seed = seed;
        self
    }

    /// With this scheduler seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// With this quantum (block executions per time slice).
    pub fn quantum(mut self, quantum: u64) -> Self {
        self.quantum = quantum;
        self
    }

    /// With these tunables.
    pub fn tunables(mut self, tunables: Tunables) -> Self {
        self.tunables = tunables;
        self
    }

    /// With this idle work.
    pub fn idle_work(mut self, work: Work) -> Self {
        self.idle_work = Some(work);
        self
    }
}

/// What a thread is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadState {
    /// Waiting in the run queue.
    Runnable,
    /// On this CPU.
    Running(Cpu),
    /// Asleep until [`Machine::wake`].
    Sleeping,
    /// Gone.
    Exited,
}

#[derive(Debug, Clone)]
struct Frame {
    function: FunctionId,
    /// Whether it is a kernel function's frame (on the kernel stack).
    kernel: bool,
    /// The block to execute next.
    block: usize,
    /// Executions left of a block interrupted by the end of a quantum.
    remaining: Option<u64>,
    /// Per loop block: jumps back still to do.
    loops: BTreeMap<usize, u64>,
    return_address: Option<u64>,
    fp: u64,
}

/// A simulated thread: its program, its call stack and its ground truth.
#[derive(Debug, Clone)]
pub struct Thread {
    pid: Pid,
    tid: Tid,
    program: Rc<Program>,
    frames: Vec<Frame>,
    state: ThreadState,
    main: bool,
    last_cpu: Option<Cpu>,
    truth: GroundTruth,
}

impl Thread {
    /// Its process.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Its id.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// What it is doing.
    pub fn state(&self) -> ThreadState {
        self.state
    }

    /// The program it runs.
    pub fn program(&self) -> &Rc<Program> {
        &self.program
    }

    /// Whether it is its process's main thread (its return from the entry function exits the
    /// process).
    pub fn is_main(&self) -> bool {
        self.main
    }

    /// The CPU it last ran on.
    pub fn last_cpu(&self) -> Option<Cpu> {
        self.last_cpu
    }

    /// Every event it retired.
    pub fn truth(&self) -> &GroundTruth {
        &self.truth
    }

    /// The return addresses of its call stack, innermost first (empty in the entry function;
    /// empty once exited). In a system call, the kernel frames' come first, then the address
    /// the user mode resumes at after the system call, then the user frames' return addresses:
    /// the callchain of a kernel-mode sample with the user stack appended, after its PC.
    pub fn stack(&self) -> Vec<u64> {
        self.frames.iter().rev().filter_map(|f| f.return_address).collect()
    }

    /// The return addresses a walk of its kernel stack finds, innermost first: those of its
    /// kernel frames but the outermost (which returns to user mode through the trap frame).
    /// Empty outside a system call.
    pub fn kernel_stack(&self) -> Vec<u64> {
        let kernel = self.frames.iter().filter(|f| f.kernel).skip(1);
        let mut stack: Vec<u64> = kernel.filter_map(|f| f.return_address).collect();
        stack.reverse();
        stack
    }

    /// The return addresses of its user frames, innermost first.
    pub fn user_stack(&self) -> Vec<u64> {
        self.frames.iter().rev().filter(|f| !f.kernel).filter_map(|f| f.return_address).collect()
    }

    /// Whether it is in a system call (its innermost frame is a kernel function's).
    pub fn in_kernel_function(&self) -> bool {
        self.frames.last().is_some_and(|f| f.kernel)
    }

    /// The user context it returns to from the kernel: the address its innermost user frame
    /// goes on at (after a system call, the end of the system call block), that frame's frame
    /// pointer as frame and stack pointer, user mode. `None` once exited.
    pub fn user_frame(&self) -> Option<TrapFrame> {
        let frame = self.frames.iter().rev().find(|f| !f.kernel)?;
        let pc = self.frame_pc(frame);
        Some(TrapFrame { pc, fp: frame.fp, sp: frame.fp, user: true })
    }

    /// The address `frame` goes on at: the start of its next block, or its function's end.
    fn frame_pc(&self, frame: &Frame) -> u64 {
        let function = self.program.function(frame.function);
        function.blocks().get(frame.block).map_or(function.end(), |b| b.start)
    }

    /// Whether it would go on in user mode: in a user function, and not in the middle of one of
    /// its kernel-mode blocks.
    fn resumes_in_user_mode(&self) -> bool {
        let Some(frame) = self.frames.last().filter(|f| !f.kernel) else { return false };
        let block = self.program.function(frame.function).blocks().get(frame.block);
        !(frame.remaining.is_some() && block.is_some_and(|b| b.ring == Ring::Kernel))
    }

    /// The function and block it executes next (`block` may be one past the function's last
    /// block when it is about to return), or `None` once exited.
    pub fn position(&self) -> Option<(FunctionId, usize)> {
        self.frames.last().map(|f| (f.function, f.block))
    }

    /// The address it executes next: the start of its next block (the end of the function when
    /// it is about to return), or `None` once exited.
    pub fn pc(&self) -> Option<u64> {
        Some(self.frame_pc(self.frames.last()?))
    }

    /// Its frame pointer (the innermost frame record), or `None` once exited.
    pub fn frame_pointer(&self) -> Option<u64> {
        self.frames.last().map(|f| f.fp)
    }

    /// Its stack pointer (equal to the frame pointer: frames have no locals).
    pub fn stack_pointer(&self) -> Option<u64> {
        self.frame_pointer()
    }

    fn top(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("a live thread has a frame")
    }

    /// The frame of an interruption at `pc` in `ring`: the innermost frame's pointer when it is
    /// of that mode (a kernel-mode block of a user function has no kernel frame: 0).
    fn trap_frame(&self, pc: u64, ring: Ring) -> TrapFrame {
        let user = ring == Ring::User;
        let fp = self.frames.last().filter(|f| f.kernel != user).map_or(0, |f| f.fp);
        TrapFrame { pc, fp, sp: fp, user }
    }
}

#[derive(Debug, Clone, Default)]
struct ProcessRecord {
    parent: Option<Pid>,
    children: Vec<Pid>,
    threads: Vec<Tid>,
    truth: GroundTruth,
    alive: bool,
}

#[derive(Debug, Clone)]
struct CpuState {
    current: Option<Tid>,
    truth: GroundTruth,
    /// The narrowest counter width of this CPU's PMU, if it has one.
    wrap_width: Option<u32>,
    slots_per_cycle: u8,
}

/// A thread switched in, as recorded in [`Machine::trace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dispatch {
    /// The tick (1 for the first).
    pub tick: u64,
    /// The CPU.
    pub cpu: Cpu,
    /// The process.
    pub pid: Pid,
    /// The thread.
    pub tid: Tid,
}

/// Counters of what the machine did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MachineStats {
    /// Ticks run.
    pub ticks: u64,
    /// Threads switched in.
    pub switches: u64,
    /// Threads switched in on another CPU than the one they last ran on.
    pub migrations: u64,
    /// PMIs delivered to the driver.
    pub pmis: u64,
    /// PMIs the driver claimed.
    pub pmis_claimed: u64,
    /// Forks.
    pub forks: u64,
    /// Execs.
    pub execs: u64,
    /// Threads created (not counting a process's first thread).
    pub threads_created: u64,
    /// Process exits.
    pub exits: u64,
}

/// What a hook sees of the machine that runs it (the context itself is in `hook.rs`, so that
/// programs are described without the machine).
impl<'a> HookContext<'a> {
    fn on(machine: &'a Machine, pid: Pid, tid: Tid, cpu: Cpu) -> Self {
        HookContext { machine, pid, tid, cpu }
    }

    /// The machine (read-only).
    pub fn machine(&self) -> &'a Machine {
        // Only `HookContext::on` above makes a context, always from a `Machine`.
        self.machine.downcast_ref().expect("a hook context is made from a Machine")
    }

    /// The hwpmc system call as the calling process.
    pub fn client(&self) -> PmcClient<'a> {
        self.machine().client(self.pid)
    }

    /// The calling thread.
    pub fn thread(&self) -> &'a Thread {
        &self.machine().threads[&self.tid]
    }
}

/// PMIs handled per poll at most (each handler may unmask the LVT entry and let a held PMI in).
const MAX_PMIS_PER_POLL: usize = 8;
/// [`Machine::run_until_idle`] gives up after this many ticks.
pub const MAX_TICKS: u64 = 1_000_000;

/// The simulated machine: the driver on N simulated CPUs, a scheduler, and the workloads' threads.
pub struct Machine {
    driver: Rc<SimDriver>,
    rng: SplitMix64,
    quantum: u64,
    idle_work: Option<Work>,
    cpus: Vec<CpuState>,
    threads: BTreeMap<Tid, Thread>,
    processes: BTreeMap<Pid, ProcessRecord>,
    run_queue: VecDeque<Tid>,
    /// The processes stopped at fork and exec (see [`Machine::stop_at_fork_and_exec`]).
    stopped_at_fork_and_exec: Vec<Pid>,
    /// The kernel's count of log-writer requests when the writer last ran.
    writer_wakeups: u64,
    trace: Vec<Dispatch>,
    stats: MachineStats,
    tool: Rc<Program>,
    delays: PmiDelays,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let running: Vec<Option<Tid>> = self.cpus.iter().map(|c| c.current).collect();
        f.debug_struct("Machine")
            .field("tick", &self.stats.ticks)
            .field("quantum", &self.quantum)
            .field("running", &running)
            .field("run_queue", &self.run_queue)
            .field("threads", &self.threads.len())
            .field("processes", &self.processes.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Machine {
    /// Builds the hardware, loads the driver and starts with no process.
    ///
    /// # Panics
    /// If the driver refuses to load, or the quantum is 0.
    pub fn new(config: MachineConfig) -> Self {
        let driver = load_driver(config.model, config.cpus, config.tunables);
        let mut machine = Machine::with_driver(driver, config.seed, config.quantum);
        machine.idle_work = config.idle_work;
        machine.delays = PmiDelays::new(config.timing, config.seed, config.cpus);
        if machine.delays.timing().driver_work_percent > 0 {
            assert!(!config.pmi_at_every_msr_access, "driver work serves PMIs at MSR accesses");
            crate::timing::install_driver_work(
                Rc::downgrade(&machine.driver),
                machine.kernel().clone(),
                machine.delays.driver_work_hook(),
                DRIVER_PC,
            );
        }
        for cpu in 0..config.cpus {
            machine.hardware().pmu(cpu).set_masked_pmi(config.masked_pmi);
        }
        if config.pmi_at_every_msr_access {
            machine.deliver_pmis_at_msr_accesses(None);
        } else if let Some(seed) = config.pmi_seed {
            machine.deliver_pmis_at_msr_accesses(Some(seed));
        }
        machine
    }

    /// Has the hardware call the driver's interrupt entry after every MSR and counter access
    /// the driver makes outside it (`seed` `None`), or after the ones `seed` chooses, on the
    /// CPU it is on, with a kernel-mode frame (see [`MachineConfig::pmi_at_every_msr_access`]
    /// and [`MachineConfig::pmi_seed`]).
    fn deliver_pmis_at_msr_accesses(&self, seed: Option<u64>) {
        let driver = Rc::downgrade(&self.driver);
        let kernel = self.kernel().clone();
        let hw = self.hardware().clone();
        let chooser = seed.map(|seed| Cell::new(SplitMix64(seed)));
        hw.clone().after_each_access(Some(Rc::new(move || {
            let Some(driver) = driver.upgrade() else { return };
            // NMIs do not nest.
            if kernel.is_in_interrupt() {
                return;
            }
            if let Some(chooser) = &chooser {
                let mut rng = chooser.get();
                let chosen = rng.below(SEEDED_PMI_ONE_IN) == 0;
                chooser.set(rng);
                if !chosen {
                    return;
                }
            }
            let cpu = hw.current_cpu();
            let _held = hw.pmu(cpu).take_pmi();
            let frame = TrapFrame { pc: DRIVER_PC, fp: 0, sp: 0, user: false };
            kernel.in_interrupt(|| driver.interrupt(cpu as Cpu, &frame));
        })));
    }

    /// A machine around a driver already loaded on simulated hardware (for example on CPUs of
    /// different models).
    ///
    /// # Panics
    /// If the quantum is 0.
    pub fn with_driver(driver: SimDriver, seed: u64, quantum: u64) -> Self {
        assert!(quantum > 0, "the quantum must be at least one block execution");
        let hw = driver.kernel().hardware().clone();
        let cpus = (0..hw.cpu_count())
            .map(|cpu| {
                let pmu = hw.pmu(cpu);
                let model = pmu.model();
                let mut widths = Vec::new();
                if model.has_pmu() && model.gp_counter_count() > 0 {
                    widths.push(u32::from(model.gp_width));
                }
                if model.has_pmu() && model.has_global_ctrl() && model.fixed_mask() != 0 {
                    widths.push(u32::from(model.fixed_width));
                }
                CpuState {
                    current: None,
                    truth: GroundTruth::default(),
                    wrap_width: widths.into_iter().min(),
                    slots_per_cycle: model.topdown_slots_per_cycle,
                }
            })
            .collect();
        let tool = ProgramBuilder::new("/usr/sbin/pmctool").function("main", |f| f.sleep()).build();
        let delays = PmiDelays::new(PmiTiming::exact(), seed, hw.cpu_count());
        Machine {
            delays,
            driver: Rc::new(driver),
            rng: SplitMix64(seed),
            quantum,
            idle_work: None,
            cpus,
            threads: BTreeMap::new(),
            processes: BTreeMap::new(),
            run_queue: VecDeque::new(),
            stopped_at_fork_and_exec: Vec::new(),
            writer_wakeups: 0,
            trace: Vec::new(),
            stats: MachineStats::default(),
            tool,
        }
    }

    /// The driver.
    pub fn driver(&self) -> &SimDriver {
        &self.driver
    }

    /// The simulated kernel.
    pub fn kernel(&self) -> &SimKernel {
        self.driver.kernel()
    }

    /// The simulated hardware.
    pub fn hardware(&self) -> &SimHardware {
        self.driver.kernel().hardware()
    }

    /// The number of CPUs.
    pub fn cpu_count(&self) -> usize {
        self.cpus.len()
    }

    /// The hwpmc system call as process `pid`.
    pub fn client(&self, pid: Pid) -> PmcClient<'_> {
        PmcClient::new(&self.driver, pid)
    }

    /// Changes the quantum from the next time slice on.
    ///
    /// # Panics
    /// If `quantum` is 0.
    pub fn set_quantum(&mut self, quantum: u64) {
        assert!(quantum > 0, "the quantum must be at least one block execution");
        self.quantum = quantum;
    }

    /// Changes the idle work.
    pub fn set_idle_work(&mut self, work: Option<Work>) {
        self.idle_work = work;
    }

    /// Starts a process with `credentials` whose main thread runs `program` from its entry; it
    /// is runnable from the next tick. No driver hook runs (it is not forked from a process the
    /// driver knows).
    pub fn spawn(&mut self, program: &Rc<Program>, credentials: Credentials) -> Pid {
        let pid = self.kernel().spawn(None, credentials);
        self.map_program(pid, program);
        let tid = self.kernel().threads(pid)[0];
        self.processes.insert(pid, ProcessRecord { alive: true, ..ProcessRecord::default() });
        self.new_thread(pid, tid, program.clone(), program.entry(), true);
        self.run_queue.push_back(tid);
        pid
    }

    /// Starts a process with `credentials` whose only thread sleeps: a tool (like pmcstat) that
    /// tests drive with [`Machine::client`] between ticks. Woken, it exits.
    pub fn spawn_tool(&mut self, credentials: Credentials) -> Pid {
        let pid = self.kernel().spawn(None, credentials);
        let tid = self.kernel().threads(pid)[0];
        self.processes.insert(pid, ProcessRecord { alive: true, ..ProcessRecord::default() });
        let program = self.tool.clone();
        let entry = program.entry();
        self.new_thread(pid, tid, program, entry, true);
        self.thread_mut(tid).state = ThreadState::Sleeping;
        pid
    }

    /// As a tracer stops them: the thread of each process that one of `pids` forks from now on
    /// starts asleep, and a thread of `pids` that executes a program falls asleep right after
    /// the exec, so the tracer (pctx) sees the fork or exec before the new process or image
    /// runs; [`Machine::wake`] lets them go. An empty list stops none.
    pub fn stop_at_fork_and_exec(&mut self, pids: &[Pid]) {
        self.stopped_at_fork_and_exec = pids.to_vec();
    }

    /// Makes sleeping thread `tid` runnable (nothing if it is not asleep).
    pub fn wake(&mut self, tid: Tid) {
        let Some(thread) = self.threads.get_mut(&tid) else { return };
        if thread.state == ThreadState::Sleeping {
            thread.state = ThreadState::Runnable;
            self.run_queue.push_back(tid);
        }
    }

    /// Makes process `pid` exit now, wherever its threads are (as if killed by a signal).
    /// Nothing if it has already exited.
    pub fn kill(&mut self, pid: Pid) {
        if self.process_alive(pid) {
            self.exit_process(pid, None);
        }
    }

    /// Runs one tick; returns whether any thread ran.
    pub fn step(&mut self) -> bool {
        self.stats.ticks += 1;
        for cpu in 0..self.cpus.len() as Cpu {
            self.poll_pmi(cpu, &idle_frame());
        }
        let mut order: Vec<Cpu> = (0..self.cpus.len() as Cpu)
            .filter(|&c| hwpmc::Kernel::cpu_active(self.kernel(), c))
            .collect();
        for i in (1..order.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let mut ran = false;
        for cpu in order {
            self.schedule(cpu);
            let busy = self.run_slice(cpu);
            if !busy {
                if let Some(work) = self.idle_work.clone() {
                    self.retire(cpu, None, Ring::Kernel, &work, 1);
                    self.poll_pmi(cpu, &idle_frame());
                }
            }
            ran |= busy;
        }
        self.timer_work();
        ran
    }

    /// What the kernel's timer and its log-writer thread do after each tick: every active CPU's
    /// samples go into their owners' logs, and the writer runs when the driver asked for it.
    fn timer_work(&mut self) {
        let hw = self.hardware().clone();
        for cpu in 0..self.cpus.len() as Cpu {
            if hwpmc::Kernel::cpu_active(self.kernel(), cpu) {
                hw.set_current_cpu(cpu as usize);
                self.driver.tick(cpu);
            }
        }
        let wakeups = self.kernel().writer_wakeups();
        if wakeups != self.writer_wakeups {
            self.writer_wakeups = wakeups;
            self.driver.write_logs();
        }
    }

    /// Runs up to `ticks` ticks, stopping early when the machine is idle; returns the ticks run.
    pub fn run_for(&mut self, ticks: u64) -> u64 {
        let mut run = 0;
        while run < ticks && !self.is_idle() {
            self.step();
            run += 1;
        }
        run
    }

    /// Runs until no thread is runnable or running (every thread has exited or sleeps); returns
    /// the ticks run.
    ///
    /// # Panics
    /// After [`MAX_TICKS`] ticks.
    pub fn run_until_idle(&mut self) -> u64 {
        let mut run = 0;
        while !self.is_idle() {
            assert!(run < MAX_TICKS, "the machine is still busy after {MAX_TICKS} ticks");
            self.step();
            run += 1;
        }
        run
    }

    /// Runs until `done` holds (checked before each tick) or the machine is idle; returns whether
    /// `done` held.
    ///
    /// # Panics
    /// After [`MAX_TICKS`] ticks.
    pub fn run_until(&mut self, mut done: impl FnMut(&Machine) -> bool) -> bool {
        let mut run = 0;
        loop {
            if done(self) {
                return true;
            }
            if self.is_idle() {
                return false;
            }
            assert!(run < MAX_TICKS, "the condition still fails after {MAX_TICKS} ticks");
            self.step();
            run += 1;
        }
    }

    /// Whether no thread is runnable or running.
    pub fn is_idle(&self) -> bool {
        self.run_queue.is_empty() && self.cpus.iter().all(|c| c.current.is_none())
    }

    /// Ticks run so far.
    pub fn tick(&self) -> u64 {
        self.stats.ticks
    }

    /// Every switch-in so far, in order.
    pub fn trace(&self) -> &[Dispatch] {
        &self.trace
    }

    /// What the machine did so far.
    pub fn stats(&self) -> MachineStats {
        self.stats
    }

    /// The thread on `cpu`, if any.
    pub fn running_on(&self, cpu: Cpu) -> Option<&Thread> {
        self.cpus.get(cpu as usize)?.current.map(|tid| &self.threads[&tid])
    }

    /// Thread `tid` (kept after it exits).
    pub fn thread(&self, tid: Tid) -> Option<&Thread> {
        self.threads.get(&tid)
    }

    /// Every thread process `pid` ever had, in creation order.
    pub fn threads_of(&self, pid: Pid) -> Vec<Tid> {
        self.processes.get(&pid).map(|p| p.threads.clone()).unwrap_or_default()
    }

    /// The threads of `pid` that have not exited.
    pub fn live_threads(&self, pid: Pid) -> Vec<Tid> {
        self.threads_of(pid)
            .into_iter()
            .filter(|t| self.threads[t].state != ThreadState::Exited)
            .collect()
    }

    /// Whether process `pid` was started by this machine and has not exited.
    pub fn process_alive(&self, pid: Pid) -> bool {
        self.processes.get(&pid).is_some_and(|p| p.alive)
    }

    /// The parent `pid` was forked from.
    pub fn parent(&self, pid: Pid) -> Option<Pid> {
        self.processes.get(&pid)?.parent
    }

    /// The processes `pid` forked, in order.
    pub fn children(&self, pid: Pid) -> Vec<Pid> {
        self.processes.get(&pid).map(|p| p.children.clone()).unwrap_or_default()
    }

    /// Every process forked from `pid`, directly or not, depth first.
    pub fn descendants(&self, pid: Pid) -> Vec<Pid> {
        let mut out = Vec::new();
        for child in self.children(pid) {
            out.push(child);
            out.extend(self.descendants(child));
        }
        out
    }

    /// Every event thread `tid` retired.
    ///
    /// # Panics
    /// If the machine never had the thread.
    pub fn thread_truth(&self, tid: Tid) -> GroundTruth {
        self.threads.get(&tid).unwrap_or_else(|| panic!("no thread {tid}")).truth.clone()
    }

    /// Every event the threads of process `pid` retired.
    ///
    /// # Panics
    /// If the machine never had the process.
    pub fn process_truth(&self, pid: Pid) -> GroundTruth {
        self.processes.get(&pid).unwrap_or_else(|| panic!("no process {pid}")).truth.clone()
    }

    /// Every event `pid` and its descendants retired.
    pub fn tree_truth(&self, pid: Pid) -> GroundTruth {
        std::iter::once(pid).chain(self.descendants(pid)).map(|p| self.process_truth(p)).sum()
    }

    /// Every event retired on `cpu` (threads and idle work).
    ///
    /// # Panics
    /// If there is no such CPU.
    pub fn cpu_truth(&self, cpu: Cpu) -> GroundTruth {
        self.cpus[cpu as usize].truth.clone()
    }

    /// Every event retired on the machine.
    pub fn total_truth(&self) -> GroundTruth {
        self.cpus.iter().map(|c| &c.truth).sum()
    }

    /// What retired on `cpu` while a PMI waited to be served (included in the thread, process
    /// and CPU truths): the most a frozen PMU lost there ([`PmiTiming::max_latency`]).
    pub fn late_truth(&self, cpu: Cpu) -> GroundTruth {
        self.delays.late(cpu as usize).clone()
    }

    /// What retired on the whole machine while a PMI waited to be served.
    pub fn total_late_truth(&self) -> GroundTruth {
        (0..self.cpus.len()).map(|cpu| self.delays.late(cpu).clone()).sum()
    }

    /// The driver's own ring-0 work on `cpu` ([`PmiTiming::driver_work_percent`]): in the PMU's
    /// ground truth, not in the machine's thread, process or CPU truths.
    pub fn driver_truth(&self, cpu: Cpu) -> GroundTruth {
        self.delays.driver_truth(cpu as usize)
    }

    /// The GLOBAL_STATUS bits of other PMU users set on `cpu` so far
    /// ([`PmiTiming::foreign_status_percent`]).
    pub fn foreign_status(&self, cpu: Cpu) -> u64 {
        self.delays.foreign(cpu as usize)
    }

    // ----- scheduling and execution -----

    fn thread_mut(&mut self, tid: Tid) -> &mut Thread {
        self.threads.get_mut(&tid).expect("a known thread")
    }

    fn schedule(&mut self, cpu: Cpu) {
        if self.run_queue.is_empty() {
            return;
        }
        if let Some(tid) = self.cpus[cpu as usize].current {
            self.switch_out(cpu, tid);
            self.run_queue.push_back(tid);
        }
        let window = self.run_queue.len().min(self.cpus.len()).max(1);
        let index = self.rng.below(window as u64) as usize;
        let tid = self.run_queue.remove(index).expect("index within the queue");
        self.switch_in(cpu, tid);
    }

    fn switch_in(&mut self, cpu: Cpu, tid: Tid) {
        let thread = self.thread_mut(tid);
        let pid = thread.pid;
        let migrated = thread.last_cpu.is_some_and(|c| c != cpu);
        thread.state = ThreadState::Running(cpu);
        thread.last_cpu = Some(cpu);
        self.cpus[cpu as usize].current = Some(tid);
        self.stats.switches += 1;
        self.stats.migrations += u64::from(migrated);
        self.trace.push(Dispatch { tick: self.stats.ticks, cpu, pid, tid });
        self.hardware().set_current_cpu(cpu as usize);
        self.kernel().set_running(cpu, Some(tid));
        self.driver.switch_in(cpu, pid, tid);
        self.poll_pmi(cpu, &idle_frame());
        if self.threads[&tid].resumes_in_user_mode() {
            self.return_to_user(cpu, tid, None);
        }
    }

    /// Switches `tid` out of `cpu`; it becomes runnable (the caller queues it or changes that).
    fn switch_out(&mut self, cpu: Cpu, tid: Tid) {
        let thread = self.thread_mut(tid);
        let pid = thread.pid;
        thread.state = ThreadState::Runnable;
        self.cpus[cpu as usize].current = None;
        self.hardware().set_current_cpu(cpu as usize);
        self.driver.switch_out(cpu, pid, tid);
        self.kernel().set_running(cpu, None);
        self.poll_pmi(cpu, &idle_frame());
    }

    /// Thread `tid` returns to user mode on `cpu`, to its [`Thread::user_frame`] (at `pc`
    /// instead when given): the driver completes its samples that wait for the user stack.
    fn return_to_user(&mut self, cpu: Cpu, tid: Tid, pc: Option<u64>) {
        let thread = &self.threads[&tid];
        let Some(mut frame) = thread.user_frame() else { return };
        frame.pc = pc.unwrap_or(frame.pc);
        let pid = thread.pid;
        self.hardware().set_current_cpu(cpu as usize);
        self.kernel().set_caller(pid);
        self.driver.user_return(cpu, pid, tid, &frame);
    }

    /// Runs `cpu`'s thread(s) for one quantum; returns whether a thread ran.
    fn run_slice(&mut self, cpu: Cpu) -> bool {
        let mut budget = self.quantum;
        let mut ran = false;
        while budget > 0 {
            let Some(tid) = self.cpus[cpu as usize].current else { break };
            ran = true;
            self.advance(cpu, tid, &mut budget);
        }
        ran
    }

    /// Executes (part of) the thread's next block and its control flow.
    fn advance(&mut self, cpu: Cpu, tid: Tid, budget: &mut u64) {
        let (program, function, index, remaining) = {
            let thread = &self.threads[&tid];
            let frame = thread.frames.last().expect("a running thread has a frame");
            (thread.program.clone(), frame.function, frame.block, frame.remaining)
        };
        let Some(block) = program.function(function).blocks().get(index) else {
            self.return_from_function(cpu, tid);
            return;
        };
        let to_run = remaining.unwrap_or(block.repeat);
        if to_run > 0 {
            // Stopping at the next interrupting overflow delivers each PMI where it happens.
            let next_pmi =
                self.hardware().pmu(cpu as usize).executions_to_next_pmi(block.ring, &block.work);
            // While a PMI waits to be served, one execution at a time.
            let step = if self.delays.waiting(cpu as usize) { 1 } else { u64::MAX };
            let n = to_run
                .min(*budget)
                .min(self.chunk(cpu, &block.work))
                .min(next_pmi.unwrap_or(u64::MAX))
                .min(step);
            self.retire(cpu, Some(tid), block.ring, &block.work, n);
            *budget -= n;
            if !self.pmi_waits(cpu, block.ring, &block.work, n) {
                let frame = self.threads[&tid].trap_frame(block.start, block.ring);
                self.poll_pmi(cpu, &frame);
            }
            if n < to_run {
                self.thread_mut(tid).top().remaining = Some(to_run - n);
                return;
            }
            if block.ring == Ring::Kernel && !self.threads[&tid].in_kernel_function() {
                // The end of a kernel excursion of a user function.
                self.return_to_user(cpu, tid, Some(block.end()));
            }
        } else {
            *budget -= 1;
        }
        let top = self.thread_mut(tid).top();
        top.remaining = None;
        match &block.flow {
            Flow::Next => top.block += 1,
            Flow::Loop { to, times } => {
                let left = top.loops.entry(index).or_insert(times.saturating_sub(1));
                if *left > 0 {
                    *left -= 1;
                    top.block = *to;
                } else {
                    top.loops.remove(&index);
                    top.block += 1;
                }
            }
            Flow::Call(callee) | Flow::Syscall(callee) => {
                top.block += 1;
                self.push_frame(tid, *callee, Some(block.end()));
            }
            Flow::Return => self.return_from_function(cpu, tid),
            Flow::System(action) => {
                top.block += 1;
                self.act(cpu, tid, action, budget);
            }
        }
    }

    /// The most executions of `work` to retire at once on `cpu`: no counter may advance by more
    /// than half its range, so the driver sees every wrap in a PMI.
    fn chunk(&self, cpu: Cpu, work: &Work) -> u64 {
        let state = &self.cpus[cpu as usize];
        let Some(width) = state.wrap_width else { return u64::MAX };
        let arch = ArchEvent::ALL.iter().map(|&e| work.arch(e, state.slots_per_cycle)).max();
        let raw = work.raw.iter().fold(0u64, |sum, r| sum.saturating_add(r.count));
        let per_execution = arch.unwrap_or(0).saturating_add(raw).saturating_add(1);
        let half = 1u128 << (width - 1);
        u64::try_from((half / u128::from(per_execution)).max(1)).unwrap_or(u64::MAX)
    }

    fn retire(&mut self, cpu: Cpu, tid: Option<Tid>, ring: Ring, work: &Work, repeat: u64) {
        self.hardware().pmu(cpu as usize).retire_repeated(ring, work, repeat);
        let slots = self.cpus[cpu as usize].slots_per_cycle;
        self.cpus[cpu as usize].truth.record(ring, work, repeat, slots);
        if let Some(tid) = tid {
            let thread = self.thread_mut(tid);
            thread.truth.record(ring, work, repeat, slots);
            let pid = thread.pid;
            if let Some(process) = self.processes.get_mut(&pid) {
                process.truth.record(ring, work, repeat, slots);
            }
        }
    }

    /// After `repeat` executions of `work` in `ring` on `cpu`: maybe another PMU user's status
    /// bit; then whether a PMI pending there waits longer before it is served
    /// ([`PmiTiming::max_latency`]).
    fn pmi_waits(&mut self, cpu: Cpu, ring: Ring, work: &Work, repeat: u64) -> bool {
        let hw = self.hardware().clone();
        let mut pmu = hw.pmu(cpu as usize);
        self.delays.maybe_foreign_status(cpu as usize, &mut pmu);
        self.delays.defer(cpu as usize, &pmu, Some((ring, work, repeat)))
    }

    /// Delivers the PMIs `cpu`'s local APIC has for it to the driver.
    fn poll_pmi(&mut self, cpu: Cpu, frame: &TrapFrame) {
        self.delays.served(cpu as usize);
        for _ in 0..MAX_PMIS_PER_POLL {
            let pmi = self.hardware().pmu(cpu as usize).take_pmi();
            if pmi.is_none() {
                return;
            }
            self.hardware().set_current_cpu(cpu as usize);
            let claimed = self.kernel().in_interrupt(|| self.driver.interrupt(cpu, frame));
            self.stats.pmis += 1;
            self.stats.pmis_claimed += u64::from(claimed);
            // Back to user mode: the thread's context, where its stack can be read.
            let running = self.running_on(cpu).map(|t| (t.pid(), t.tid()));
            if let (true, Some((pid, tid))) = (frame.user, running) {
                self.kernel().set_caller(pid);
                self.driver.user_return(cpu, pid, tid, frame);
            }
        }
    }

    fn new_thread(
        &mut self,
        pid: Pid,
        tid: Tid,
        program: Rc<Program>,
        entry: FunctionId,
        main: bool,
    ) {
        self.kernel().with_process(pid, |p| p.memory.map(stack_base(tid), STACK_SIZE as usize));
        let thread = Thread {
            pid,
            tid,
            program,
            frames: Vec::new(),
            state: ThreadState::Runnable,
            main,
            last_cpu: None,
            truth: GroundTruth::default(),
        };
        self.threads.insert(tid, thread);
        if let Some(process) = self.processes.get_mut(&pid) {
            process.threads.push(tid);
        }
        self.push_frame(tid, entry, None);
    }

    /// Calls `function`: pushes its frame and writes the frame record on the user stack, or on
    /// the kernel stack for a kernel function (the outermost kernel frame's record is two zeros:
    /// it returns to user mode through the trap frame).
    fn push_frame(&mut self, tid: Tid, function: FunctionId, return_address: Option<u64>) {
        let thread = self.thread_mut(tid);
        let kernel = thread.program.function(function).is_kernel();
        let (base, size) = if kernel {
            (kernel_stack_base(tid), KERNEL_STACK_SIZE)
        } else {
            (stack_base(tid), STACK_SIZE)
        };
        let caller = thread.frames.iter().rev().find(|f| f.kernel == kernel);
        let depth = thread.frames.iter().filter(|f| f.kernel == kernel).count() as u64;
        let fp = (base + size).checked_sub(16 * (depth + 1)).filter(|&fp| fp >= base);
        let fp = fp.unwrap_or_else(|| panic!("thread {tid}: stack overflow (depth {depth})"));
        let caller_fp = caller.map_or(0, |f| f.fp);
        let recorded_return = caller.and(return_address).unwrap_or(0);
        thread.frames.push(Frame {
            function,
            kernel,
            block: 0,
            remaining: None,
            loops: BTreeMap::new(),
            return_address,
            fp,
        });
        let pid = thread.pid;
        let mut record = [0u8; 16];
        record[..8].copy_from_slice(&caller_fp.to_le_bytes());
        record[8..].copy_from_slice(&recorded_return.to_le_bytes());
        let written = if kernel {
            self.kernel().write_kernel_stack(tid, fp, &record)
        } else {
            self.kernel().write_memory(pid, fp, &record)
        };
        written.unwrap_or_else(|e| panic!("thread {tid}: its stack is not mapped ({e:?})"));
    }

    /// Returns from the innermost function of `tid` (running on `cpu`); a system call returns
    /// to user mode.
    fn return_from_function(&mut self, cpu: Cpu, tid: Tid) {
        let thread = self.thread_mut(tid);
        let returned = thread.frames.pop();
        if returned.is_some_and(|f| f.kernel) && !thread.in_kernel_function() {
            self.return_to_user(cpu, tid, None);
        }
        let thread = self.thread_mut(tid);
        if thread.frames.is_empty() {
            let (pid, main) = (thread.pid, thread.main);
            if main {
                self.exit_process(pid, Some(tid));
            } else {
                self.exit_thread(tid);
            }
        }
    }

    fn act(&mut self, cpu: Cpu, tid: Tid, action: &Action, budget: &mut u64) {
        let pid = self.threads[&tid].pid;
        match action {
            Action::Fork { child } => self.fork(cpu, tid, *child),
            Action::Exec { program, set_id } => {
                self.exec(cpu, tid, program, set_id.as_ref());
                if self.stopped_at_fork_and_exec.contains(&pid) {
                    self.switch_out(cpu, tid);
                    self.thread_mut(tid).state = ThreadState::Sleeping;
                }
            }
            Action::Exit => self.exit_process(pid, Some(tid)),
            Action::ExitThread => self.exit_thread(tid),
            Action::SpawnThread { entry } => {
                let new = self.kernel().add_thread(pid).expect("the process exists");
                self.hardware().set_current_cpu(cpu as usize);
                self.driver.thread_create(pid, new);
                let program = self.threads[&tid].program.clone();
                self.new_thread(pid, new, program, *entry, false);
                self.run_queue.push_back(new);
                self.stats.threads_created += 1;
            }
            Action::Yield => *budget = 0,
            Action::Sleep => {
                self.switch_out(cpu, tid);
                self.thread_mut(tid).state = ThreadState::Sleeping;
            }
            Action::Hook(hook) => {
                self.hardware().set_current_cpu(cpu as usize);
                hook(&HookContext::on(self, pid, tid, cpu));
            }
        }
    }

    fn fork(&mut self, cpu: Cpu, tid: Tid, child_entry: FunctionId) {
        let (pid, program) = {
            let thread = &self.threads[&tid];
            (thread.pid, thread.program.clone())
        };
        let child = self.kernel().fork(pid).expect("the parent exists");
        self.hardware().set_current_cpu(cpu as usize);
        self.driver.process_fork(pid, child);
        self.processes.insert(
            child,
            ProcessRecord { parent: Some(pid), alive: true, ..ProcessRecord::default() },
        );
        if let Some(parent) = self.processes.get_mut(&pid) {
            parent.children.push(child);
        }
        let child_tid = self.kernel().threads(child)[0];
        self.new_thread(child, child_tid, program, child_entry, true);
        if self.stopped_at_fork_and_exec.contains(&pid) {
            self.thread_mut(child_tid).state = ThreadState::Sleeping;
        } else {
            self.run_queue.push_back(child_tid);
        }
        self.stats.forks += 1;
    }

    /// Makes `program` process `pid`'s executable: its path, and its text as the process's only
    /// executable mapping (what MAP_IN records and PMCATTACH paths report).
    fn map_program(&self, pid: Pid, program: &Program) {
        let path = program.path().as_bytes().to_vec();
        let start = program.user_functions().map(|f| f.start()).min().unwrap_or(0);
        let end = program.user_functions().map(|f| f.end()).max().unwrap_or(start);
        self.kernel().with_process(pid, |p| {
            p.path = path.clone();
            p.mappings = vec![(start, end, path)];
        });
    }

    fn exec(&mut self, cpu: Cpu, tid: Tid, program: &Rc<Program>, set_id: Option<&Credentials>) {
        let pid = self.threads[&tid].pid;
        if let Some(credentials) = set_id {
            self.kernel().with_process(pid, |p| {
                p.credentials = credentials.clone();
                p.set_id = true;
            });
        }
        for other in self.live_threads(pid) {
            if other != tid {
                self.end_thread(other);
            }
        }
        self.hardware().set_current_cpu(cpu as usize);
        let info = ExecInfo {
            path: program.path().as_bytes(),
            base_addr: 0,
            dyn_addr: 0,
            credentials_changed: set_id.is_some(),
        };
        self.map_program(pid, program);
        self.driver.process_exec(pid, &info);
        let thread = self.thread_mut(tid);
        thread.program = program.clone();
        thread.frames.clear();
        thread.main = true;
        self.push_frame(tid, program.entry(), None);
        self.stats.execs += 1;
    }

    /// Thread `tid` exits; the process exits with its last thread.
    fn exit_thread(&mut self, tid: Tid) {
        let pid = self.threads[&tid].pid;
        if self.live_threads(pid).iter().all(|&t| t == tid) {
            self.exit_process(pid, Some(tid));
        } else {
            self.end_thread(tid);
        }
    }

    /// Takes `tid` off its CPU or the run queue and lets it exit (not the last thread).
    fn end_thread(&mut self, tid: Tid) {
        let (pid, state) = (self.threads[&tid].pid, self.threads[&tid].state);
        self.unschedule(tid, state);
        self.driver.thread_exit(pid, tid);
        self.kernel().remove_thread(pid, tid);
        self.kernel().with_process(pid, |p| p.memory.unmap(stack_base(tid)));
        let thread = self.thread_mut(tid);
        thread.state = ThreadState::Exited;
        thread.frames.clear();
    }

    /// Takes `tid` off its CPU (switching it out) or out of the run queue; returns its CPU.
    fn unschedule(&mut self, tid: Tid, state: ThreadState) -> Option<Cpu> {
        match state {
            ThreadState::Running(cpu) => {
                self.switch_out(cpu, tid);
                Some(cpu)
            }
            ThreadState::Runnable => {
                self.run_queue.retain(|&t| t != tid);
                None
            }
            ThreadState::Sleeping | ThreadState::Exited => None,
        }
    }

    /// Process `pid` exits from thread `exiting` (any of its threads when `None`).
    fn exit_process(&mut self, pid: Pid, exiting: Option<Tid>) {
        let live = self.live_threads(pid);
        let exiting = exiting.or_else(|| live.first().copied());
        self.kernel().begin_exit(pid);
        for &other in &live {
            if Some(other) != exiting {
                self.end_thread(other);
            }
        }
        let mut cpu = None;
        if let Some(tid) = exiting {
            let state = self.threads[&tid].state;
            cpu = self.unschedule(tid, state);
        }
        if let Some(cpu) = cpu {
            self.hardware().set_current_cpu(cpu as usize);
        }
        self.driver.process_exit(pid);
        if let Some(tid) = exiting {
            self.driver.thread_exit(pid, tid);
            let thread = self.thread_mut(tid);
            thread.state = ThreadState::Exited;
            thread.frames.clear();
        }
        self.kernel().reap(pid);
        if let Some(process) = self.processes.get_mut(&pid) {
            process.alive = false;
        }
        self.stats.exits += 1;
    }
}

/// The trap frame of a PMI taken in the scheduler or on an idle CPU.
fn idle_frame() -> TrapFrame {
    TrapFrame { pc: KERNEL_IDLE_PC, fp: 0, sp: 0, user: false }
}
