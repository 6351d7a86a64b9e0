//! The simulator host: the `hwpmc` driver itself, embedded, on `hwpmc-sim`'s deterministic
//! machine. The calling program is a tool process of that machine (root); the programs it
//! measures are the built-in simulated programs below, launched with [`Host::spawn`] by name and
//! run to their end by [`Host::wait`]. Counts and samples are exact.
//!
//! Configuration, read once per thread from libpmc's settings ([`crate::config::SimConfig`],
//! from the environment variables of the same names for the tools and C programs):
//! * `PMC_SIM_CPUS` — CPUs of the machine, 1 to 64 (default 2);
//! * `PMC_SIM_MODEL` — `skylake` (default), `icelake`, `nehalem`, `core2`, `vm` (no PMU),
//!   `arrowlake` (its P-core: UMASK2, fixed counter 3), the hybrid `alderlake` and `meteorlake`
//!   (the first half of the CPUs P-cores, the rest E-cores), or the AMD machines `zen4`
//!   (PerfMonV2), `zen2` and `k10` (the 4 legacy counters);
//! * `PMC_SIM_SEED` — the scheduler's seed (default 1).
//!
//! A value that is none of these is an error (`EINVAL`) that says what the setting may be.
//!
//! The machine is single-threaded by construction, so each thread of the calling process has
//! its own; a program drives it from one thread.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicI32, Ordering};

use hwpmc::UserPtr;
use hwpmc::abi::{Op, PmcOpConfigureLog};
use hwpmc_sim::kernel::{SCRATCH_BASE, SCRATCH_LEN};
use hwpmc_sim::machine::{Machine, MachineConfig};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::workload::{Program, ProgramBuilder};
use hwpmc_sim::{Credentials, PmuModel, SinkId, SinkKind};
use zerocopy::FromBytes;

use super::{ChildPid, Host, HostKind, op_name};
use crate::config::{PMC_SIM_CPUS_VAR, PMC_SIM_MODEL_VAR, PMC_SIM_SEED_VAR, SimConfig};
use crate::error::{Error, Result};

/// Work of one block of the built-in programs: 10 000 instructions.
pub const BLOCK_INSTRUCTIONS: u64 = 10_000;

/// The offcore requests of one block, by the MSR_OFFCORE_RSP value that selects them (see
/// `hwpmc_sim::offcore`): 40 demand data reads (0x10001, any response) and 8 demand RFOs
/// (0x10002).
pub const BLOCK_OFFCORE: [(u64, u64); 2] = [(0x1_0001, 40), (0x1_0002, 8)];

/// Second-level TLB hits of one block's instruction fetches: Arrow Lake's ITLB_MISSES.STLB_HIT
/// (event 0x11, umask 0x20, UMASK2 0x01), an event with a second unit mask.
pub const BLOCK_STLB_HITS: u64 = 3;

/// Front-end resteers of one block as Alder Lake's BACLEARS.ANY counts them, an event its core
/// types encode differently: 7 of its P-cores' encoding (event 0x60, umask 0x01) and 4 of its
/// E-cores' (0xE6/0x01), so that a PMC loading one core type's encoding on the other shows.
pub const BLOCK_BACLEARS: [(u8, u8, u64); 2] = [(0x60, 0x01, 7), (0xE6, 0x01, 4)];

fn block() -> Work {
    let work = Work {
        instructions: BLOCK_INSTRUCTIONS,
        core_cycles: 12_500,
        ref_cycles: 10_000,
        branches: 1_000,
        branch_mispredicts: 10,
        llc_references: 50,
        llc_misses: 5,
        ..Work::default()
    };
    let work = work.with_raw_umask2(0x11, 0x20, 0x01, BLOCK_STLB_HITS);
    let work = BLOCK_BACLEARS
        .iter()
        .fold(work, |work, &(event, umask, count)| work.with_raw(event, umask, count));
    BLOCK_OFFCORE.iter().fold(work, |work, &(response, count)| work.with_offcore(response, count))
}

/// The built-in programs: (name, description).
pub const PROGRAMS: &[(&str, &str)] = &[
    (
        "hot-cold",
        "main calls hot (900 blocks) then cold (100 blocks), each block 10 000 user \
         instructions: 10 000 000 instructions in all, 90% of them in hot",
    ),
    ("forker", "forks a child; parent and child each run hot (900 blocks)"),
    (
        "execer",
        "main calls cold (100 blocks, 1 000 000 instructions), then executes hot-cold \
         (/usr/sim/bin/hot-cold)",
    ),
    (
        "spin",
        "main loops over one block 20 000 000 times (200 000 000 000 instructions, seconds of \
         simulation): a program to interrupt",
    ),
    (
        "threads",
        "main starts a second thread; each thread runs hot (up to 900 blocks: a thread still \
         running when main exits ends with the process)",
    ),
];

/// A signal number that the simulated machine's current or next wait for a command is to act
/// on (0: none).
static INTERRUPT: AtomicI32 = AtomicI32::new(0);

/// Asks the simulated machine, which runs a command to its end inside the thread that waits
/// for it, to end that command as `signal` would: the wait stops the machine, kills the
/// simulated process and returns 128 + `signal` as its exit status. Safe to call from any
/// thread (a signal-catching one); a command that has already ended is not affected.
pub fn interrupt(signal: i32) {
    INTERRUPT.store(signal, Ordering::Relaxed);
}

/// How many times `spin` runs its block.
const SPIN_BLOCKS: u64 = 20_000_000;

/// The built-in program `name`.
pub fn program(name: &str) -> Option<Rc<Program>> {
    let (hot, cold) = (block(), block());
    let path = format!("{PROGRAM_DIR}{name}");
    let builder = ProgramBuilder::new(&path)
        .function("hot", move |f| f.repeat(Ring::User, hot.clone(), 900).ret())
        .function("cold", move |f| f.repeat(Ring::User, cold.clone(), 100).ret());
    let program = match name {
        "hot-cold" => builder.function("main", |f| f.call("hot").call("cold").exit()),
        "execer" => {
            let image = program("hot-cold")?;
            builder.function("main", move |f| f.call("cold").exec(image.clone(), None))
        }
        "forker" => builder
            .function("main", |f| f.fork("child").call("hot").exit())
            .function("child", |f| f.call("hot").exit()),
        // One block per execution (not a repeat, retired at once): thousands of ticks.
        "spin" => builder
            .function("main", |f| f.block(Ring::User, block()).loop_to(0, SPIN_BLOCKS).exit()),
        "threads" => builder
            .function("main", |f| f.spawn_thread("worker").call("hot").exit())
            .function("worker", |f| f.call("hot").exit_thread()),
        _ => return None,
    };
    Some(program.entry("main").build())
}

/// Where the simulator says its programs live: `/usr/sim/bin/<name>`.
pub const PROGRAM_DIR: &str = "/usr/sim/bin/";

/// The function symbols of the simulated program at `path` (`/usr/sim/bin/<name>`), as
/// (start, end, name) in its absolute addresses: what a log reader needs to name sampled
/// functions of a program that has no file.
pub fn symbols(path: &str) -> Option<Vec<(u64, u64, String)>> {
    let program = program(path.strip_prefix(PROGRAM_DIR)?)?;
    Some(program.functions().iter().map(|f| (f.start(), f.end(), f.name().to_string())).collect())
}

/// The number in setting `name` (whose text is `value`), `default` when it is unset or empty;
/// `what` and the range `min..=max` name it in the error for anything else.
fn setting_number<T>(
    name: &'static str,
    value: Option<&str>,
    what: &str,
    default: T,
    min: T,
    max: T,
) -> Result<T>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    match value.filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(text) => match text.parse::<T>() {
            Ok(v) if v >= min && v <= max => Ok(v),
            _ => Err(Error::with_detail(
                name,
                libc::EINVAL,
                format!("{text:?} is not {what}: use a number from {min} to {max}"),
            )),
        },
    }
}

/// Makes a simulated CPU model.
type MakeModel = fn() -> PmuModel;

/// The simulated CPU models `PMC_SIM_MODEL` names.
const MODELS: [(&str, MakeModel); 11] = [
    ("skylake", PmuModel::skylake),
    ("icelake", PmuModel::icelake),
    ("nehalem", PmuModel::nehalem),
    ("core2", PmuModel::core2),
    ("vm", PmuModel::no_pmu_vm),
    ("arrowlake", PmuModel::arrowlake_p),
    ("alderlake", PmuModel::alder_lake_p),
    ("meteorlake", PmuModel::meteor_lake_p),
    ("zen4", PmuModel::zen4),
    ("zen2", PmuModel::zen2),
    ("k10", PmuModel::k10),
];

/// The E-core of the hybrid part whose P-core is `p_core`, if it is one.
fn e_core_of(p_core: &PmuModel) -> Option<PmuModel> {
    let parts = [
        (PmuModel::alder_lake_p(), PmuModel::alder_lake_e()),
        (PmuModel::meteor_lake_p(), PmuModel::meteor_lake_e()),
    ];
    parts.into_iter().find(|(p, _)| p == p_core).map(|(_, e)| e)
}

/// The model the `PMC_SIM_MODEL` setting `name` names (Skylake when it is unset or empty); an
/// unknown name is an error that lists the known ones.
fn model_named(name: Option<&str>) -> Result<PmuModel> {
    let name = name.filter(|v| !v.is_empty());
    let Some(name) = name else { return Ok(PmuModel::skylake()) };
    match MODELS.iter().find(|(known, _)| *known == name) {
        Some((_, model)) => Ok(model()),
        None => {
            let known: Vec<&str> = MODELS.iter().map(|(n, _)| *n).collect();
            Err(Error::with_detail(
                PMC_SIM_MODEL_VAR,
                libc::EINVAL,
                format!("unknown simulated CPU {name:?}: use {}", known.join(", ")),
            ))
        }
    }
}

/// The log: the simulated descriptor the driver writes to, and the caller's real one its bytes
/// are copied to.
struct LogPipe {
    sink: SinkId,
    file: File,
    copied: usize,
}

/// The simulator host.
pub struct SimHost {
    machine: RefCell<Machine>,
    tool: i32,
    /// The programs [`Host::spawn`] started and nobody has waited for yet.
    children: RefCell<Vec<i32>>,
    model: PmuModel,
    /// Whether the machine has P-cores and E-cores (a hybrid model on two CPUs or more).
    hybrid: bool,
    log: RefCell<Option<LogPipe>>,
    /// The processes [`next_process_event`] watches, by pid.
    watched: RefCell<std::collections::BTreeMap<i32, Watch>>,
    /// Forked children and exec'd processes [`next_process_event`] reported, asleep until it
    /// or `wait` runs again.
    held: RefCell<Vec<i32>>,
    /// The machine's quantum (block executions per time slice), which
    /// [`next_process_event_until`] shortens while it runs.
    quantum: u64,
}

/// What [`next_process_event`] last reported of a watched process.
#[derive(Debug, Default)]
struct Watch {
    /// Its live threads, as machine thread ids.
    threads: Vec<i32>,
    /// How many of its forked children were reported.
    children: usize,
    /// The exit status a signal (see [`interrupt`]) gave it.
    killed: Option<i32>,
    /// Its exit was reported.
    gone: bool,
    /// The path of its program, as last reported.
    path: Vec<u8>,
}

/// A change in a process the simulated machine runs, as [`next_process_event`] reports it.
/// LWP ids are the simulator's per-process numbers: 1 for the first thread, then in creation
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessEvent {
    /// `parent` forked `child` (before the child ran).
    Fork {
        /// The forking process.
        parent: i32,
        /// The new process.
        child: i32,
    },
    /// Process `pid` started LWP `lwp` (before it ran).
    LwpCreate {
        /// The process.
        pid: i32,
        /// The new LWP.
        lwp: i32,
    },
    /// LWP `lwp` of process `pid` exited (the process goes on).
    LwpExit {
        /// The process.
        pid: i32,
        /// The LWP that ended.
        lwp: i32,
    },
    /// Process `pid` executed a new program ([`process_program`] names it); its other LWPs
    /// ended without LWP events.
    Exec {
        /// The process.
        pid: i32,
    },
    /// Process `pid` exited with `status` (128 + signal if it was interrupted).
    Exit {
        /// The process.
        pid: i32,
        /// Its exit status.
        status: i32,
    },
    /// The caller's stop condition held after a tick ([`next_process_event_until`]).
    Stopped,
}

/// Runs this thread's simulated machine until one of the processes `pids` forks, starts or ends
/// an LWP, executes a program, or exits, and reports that (the machine stops after the tick it
/// happened in; a forked child, and the thread that executed a program, are held asleep until
/// the next call, so neither the child nor the new image has run when the fork or exec is
/// reported, while a new LWP may have run on another CPU in that tick). `None` when the machine went idle with nothing to
/// report; `ESRCH` for a pid the machine never ran. A process is watched from the first call
/// that names it; an exit is reported once.
pub fn next_process_event(pids: &[i32]) -> Result<Option<ProcessEvent>> {
    with(|host| host.next_process_event(pids, None))
}

/// [`next_process_event`], also stopping with [`ProcessEvent::Stopped`] as soon as `stop`
/// holds: it is asked after every tick, and the ticks are one block execution long meanwhile
/// (the quantum is 1), so the processes stop right after the execution that made it hold —
/// e.g. the one whose counter overflow put a sample in the log (libcpc's overflow signals).
/// `stop` may make system calls of this host (read PMCs, flush the log).
pub fn next_process_event_until(
    pids: &[i32],
    stop: &mut dyn FnMut() -> bool,
) -> Result<Option<ProcessEvent>> {
    with(|host| host.next_process_event(pids, Some(stop)))
}

thread_local! {
    /// This thread's machine, and the process that made it.
    static SIM: RefCell<Option<(u32, Rc<SimHost>)>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's simulator host. A process forked from the one that made the
/// machine gets a machine of its own: as on FreeBSD, the child owns none of its parent's PMCs
/// (its calls on them fail as for a process that owns no PMC), and the parent's keep working.
pub(crate) fn with<R>(f: impl FnOnce(&SimHost) -> Result<R>) -> Result<R> {
    // Cached (a getpid system call would double the cost of a read); the child's after a fork.
    #[cfg(unix)]
    let me = super::current_pid::current_pid() as u32;
    #[cfg(not(unix))]
    let me = std::process::id();
    let host = SIM.with(|cell| -> Result<Rc<SimHost>> {
        let mut cell = cell.borrow_mut();
        Ok(match cell.as_ref() {
            Some((owner, host)) if *owner == me => host.clone(),
            _ => {
                let config = crate::config::with(|config| config.sim.clone());
                cell.insert((me, Rc::new(SimHost::from_config(&config)?))).1.clone()
            }
        })
    })?;
    f(&host)
}

impl SimHost {
    /// A machine configured by `config` (see the module documentation); `EINVAL` naming the
    /// setting and what it may be for a value that is not.
    pub fn from_config(config: &SimConfig) -> Result<SimHost> {
        let cpus = config.cpus.as_deref();
        let seed = config.seed.as_deref();
        Ok(SimHost::new(
            model_named(config.model.as_deref())?,
            setting_number(PMC_SIM_CPUS_VAR, cpus, "a number of CPUs", 2usize, 1, 64)?,
            setting_number(PMC_SIM_SEED_VAR, seed, "a seed", 1u64, 0, u64::MAX)?,
        ))
    }

    /// A machine of `cpus` CPUs of `model`, scheduling with `seed`. A hybrid model (a P-core's,
    /// with a leaf 0x1A core type) gets the matching E-cores for the second half of its CPUs.
    pub fn new(model: PmuModel, cpus: usize, seed: u64) -> SimHost {
        let quantum = MachineConfig::new(model, cpus).quantum;
        let mut machine = match e_core_of(&model) {
            Some(e_core) => {
                let p_cores = cpus.div_ceil(2);
                let models = (0..cpus).map(|cpu| if cpu < p_cores { model } else { e_core });
                let pmus = models
                    .enumerate()
                    .map(|(i, m)| hwpmc_sim::SimPmu::new(m).with_apic_id(i as u32))
                    .collect();
                let hw = hwpmc_sim::SimHardware::from_pmus(pmus);
                let kernel = hwpmc_sim::SimKernel::new(hw.clone());
                let driver = hwpmc::Driver::load(kernel, hw, hwpmc::Tunables::default())
                    .unwrap_or_else(|e| panic!("the driver refused to load: {e}"));
                Machine::with_driver(driver, seed, quantum)
            }
            None => Machine::new(MachineConfig::new(model, cpus).seed(seed)),
        };
        let tool = machine.spawn_tool(Credentials::root());
        SimHost {
            machine: RefCell::new(machine),
            tool,
            children: RefCell::new(Vec::new()),
            model,
            hybrid: e_core_of(&model).is_some() && cpus >= 2,
            log: RefCell::new(None),
            watched: RefCell::default(),
            held: RefCell::default(),
            quantum,
        }
    }

    /// The machine (for tests that compare with its ground truth).
    pub fn machine(&self) -> std::cell::Ref<'_, Machine> {
        self.machine.borrow()
    }

    fn raw_call(&self, op: Op, arg: &mut [u8]) -> std::result::Result<(), hwpmc::Errno> {
        self.raw_call_number(op.as_u32(), arg)
    }

    /// [`Self::raw_call`] of operation number `op` (FreeBSD's or an extension's).
    fn raw_call_number(&self, op: u32, arg: &mut [u8]) -> std::result::Result<(), hwpmc::Errno> {
        let machine = self.machine.borrow();
        let kernel = machine.kernel();
        let len = arg.len().min(SCRATCH_LEN);
        let ptr = if arg.is_empty() { UserPtr::NULL } else { UserPtr(SCRATCH_BASE) };
        kernel.write_memory(self.tool, SCRATCH_BASE, &arg[..len])?;
        let result = machine.client(self.tool).call_raw(op, ptr);
        let back = kernel.read_memory(self.tool, SCRATCH_BASE, len)?;
        arg[..len].copy_from_slice(&back);
        result
    }

    /// Copies what the driver wrote to the simulated log since the last call to the real one.
    fn pump_log(&self) -> Result<()> {
        let mut log = self.log.borrow_mut();
        let Some(pipe) = log.as_mut() else { return Ok(()) };
        let bytes = self.machine.borrow().kernel().sink_bytes(pipe.sink);
        if bytes.len() > pipe.copied {
            pipe.file.write_all(&bytes[pipe.copied..]).map_err(|e| Error::os("log write", &e))?;
            pipe.copied = bytes.len();
        }
        Ok(())
    }

    fn configure_log(&self, arg: &mut [u8]) -> Result<()> {
        let (mut req, _) = PmcOpConfigureLog::read_from_prefix(arg)
            .map_err(|_| Error::new("CONFIGURELOG", libc::EFAULT))?;
        let real_fd = req.pm_logfd;
        let machine_fd = if real_fd < 0 || req.pm_flags != 0 {
            real_fd
        } else {
            let file = dup_for_writing(real_fd)?;
            let kernel = self.machine.borrow().kernel().clone();
            let fd = kernel.open_sink(self.tool, SinkKind::Writable);
            let sink = kernel
                .sink_of(self.tool, fd)
                .ok_or_else(|| Error::new("CONFIGURELOG", libc::EBADF))?;
            let previous = self.log.borrow_mut().replace(LogPipe { sink, file, copied: 0 });
            if let Some(previous) = previous {
                // A log is active: the driver says EBUSY below; keep the active one.
                *self.log.borrow_mut() = Some(previous);
            }
            fd
        };
        req.pm_logfd = machine_fd;
        let mut bytes = zerocopy::IntoBytes::as_bytes(&req).to_vec();
        let result = self.raw_call(Op::ConfigureLog, &mut bytes);
        self.pump_log()?;
        if real_fd < 0 && result.is_ok() {
            *self.log.borrow_mut() = None;
        }
        result.map_err(|e| Error::driver("CONFIGURELOG", e))
    }
}

impl SimHost {
    fn next_process_event(
        &self,
        pids: &[i32],
        stop: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Option<ProcessEvent>> {
        {
            let machine = self.machine.borrow();
            let mut watched = self.watched.borrow_mut();
            for &pid in pids {
                if machine.threads_of(pid).is_empty() {
                    return Err(Error::with_detail(
                        "process event",
                        libc::ESRCH,
                        format!("the simulated machine has no process {pid}"),
                    ));
                }
                watched.entry(pid).or_insert_with(|| Watch {
                    threads: machine.live_threads(pid),
                    children: machine.children(pid).len(),
                    killed: None,
                    gone: false,
                    path: process_path(&machine, pid),
                });
            }
        }
        self.release_held();
        self.machine.borrow_mut().stop_at_fork_and_exec(pids);
        if stop.is_some() {
            self.machine.borrow_mut().set_quantum(1);
        }
        let result = self.watch_until_change(pids, stop);
        let mut machine = self.machine.borrow_mut();
        machine.set_quantum(self.quantum);
        machine.stop_at_fork_and_exec(&[]);
        drop(machine);
        match result {
            // Held asleep until the next call (or wait) lets it run.
            Ok(Some(ProcessEvent::Fork { child, .. })) => self.held.borrow_mut().push(child),
            Ok(Some(ProcessEvent::Exec { pid })) => self.held.borrow_mut().push(pid),
            _ => {}
        }
        result
    }

    /// Lets the forked children and exec'd processes reported so far run.
    fn release_held(&self) {
        let held = std::mem::take(&mut *self.held.borrow_mut());
        let mut machine = self.machine.borrow_mut();
        for child in held {
            for tid in machine.live_threads(child) {
                machine.wake(tid);
            }
        }
    }

    fn watch_until_change(
        &self,
        pids: &[i32],
        mut stop: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Option<ProcessEvent>> {
        loop {
            if let Some(event) = self.process_change(pids) {
                return Ok(Some(event));
            }
            let signal = INTERRUPT.swap(0, Ordering::Relaxed);
            if signal != 0 {
                let mut machine = self.machine.borrow_mut();
                let mut watched = self.watched.borrow_mut();
                for &pid in pids {
                    if machine.process_alive(pid) {
                        machine.kill(pid);
                        if let Some(w) = watched.get_mut(&pid) {
                            w.killed = Some(128 + signal);
                        }
                    }
                }
                continue;
            }
            if self.machine.borrow().is_idle() {
                return Ok(None);
            }
            self.machine.borrow_mut().step();
            self.pump_log()?;
            if stop.as_mut().is_some_and(|stop| stop()) {
                return Ok(Some(ProcessEvent::Stopped));
            }
        }
    }

    /// The first change in processes `pids` since it was last reported.
    fn process_change(&self, pids: &[i32]) -> Option<ProcessEvent> {
        let machine = self.machine.borrow();
        let mut watched = self.watched.borrow_mut();
        let lwp_of = |pid: i32, tid: i32| {
            machine.threads_of(pid).iter().position(|&t| t == tid).map_or(0, |i| i as i32 + 1)
        };
        for &pid in pids {
            let Some(watch) = watched.get_mut(&pid).filter(|w| !w.gone) else { continue };
            let children = machine.children(pid);
            if let Some(&child) = children.get(watch.children) {
                watch.children += 1;
                return Some(ProcessEvent::Fork { parent: pid, child });
            }
            if !machine.process_alive(pid) {
                watch.gone = true;
                let status = watch.killed.unwrap_or(0);
                return Some(ProcessEvent::Exit { pid, status });
            }
            let path = process_path(&machine, pid);
            if path != watch.path {
                watch.path = path;
                watch.threads = machine.live_threads(pid);
                return Some(ProcessEvent::Exec { pid });
            }
            let live = machine.live_threads(pid);
            if let Some(&tid) = live.iter().find(|t| !watch.threads.contains(t)) {
                watch.threads.push(tid);
                return Some(ProcessEvent::LwpCreate { pid, lwp: lwp_of(pid, tid) });
            }
            if let Some(at) = watch.threads.iter().position(|t| !live.contains(t)) {
                let tid = watch.threads.remove(at);
                return Some(ProcessEvent::LwpExit { pid, lwp: lwp_of(pid, tid) });
            }
        }
        None
    }

    /// Where `pid` is among the programs spawned and not waited for; ECHILD otherwise (as
    /// waitpid(2) says of a process that is not the caller's child).
    fn child(&self, op: &'static str, pid: ChildPid) -> Result<usize> {
        self.children.borrow().iter().position(|&c| c == pid).ok_or_else(|| {
            Error::with_detail(
                op,
                libc::ECHILD,
                format!("{pid} is not a program this host spawned"),
            )
        })
    }
}

/// The path of process `pid`'s program (empty once it is gone).
fn process_path(machine: &Machine, pid: i32) -> Vec<u8> {
    machine.kernel().with_process(pid, |p| p.path.clone()).unwrap_or_default()
}

/// The program path of simulated process `pid` of this thread's machine (`ESRCH` if it is
/// gone), as exec changes it.
pub fn process_program(pid: i32) -> Result<String> {
    with(|host| {
        let path = process_path(&host.machine.borrow(), pid);
        if path.is_empty() {
            return Err(Error::with_detail(
                "process program",
                libc::ESRCH,
                format!("the simulated machine has no process {pid}"),
            ));
        }
        Ok(String::from_utf8_lossy(&path).into_owned())
    })
}

/// The caller's descriptor `fd` duplicated for the host's own writes; EBADF unless open for
/// writing.
fn dup_for_writing(fd: RawFd) -> Result<File> {
    // SAFETY: F_GETFL on any int is safe; an invalid descriptor gives -1/EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || flags & libc::O_ACCMODE == libc::O_RDONLY {
        return Err(Error::with_detail(
            "CONFIGURELOG",
            libc::EBADF,
            format!("descriptor {fd} is not open for writing"),
        ));
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates an open descriptor; the copy is ours alone.
    let own = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if own < 0 {
        return Err(Error::os("CONFIGURELOG", &std::io::Error::last_os_error()));
    }
    // SAFETY: `own` is a fresh descriptor nothing else owns.
    Ok(unsafe { File::from_raw_fd(own) })
}

impl Host for SimHost {
    fn kind(&self) -> HostKind {
        HostKind::Sim
    }

    fn syscall(&self, op: Op, arg: &mut [u8]) -> Result<()> {
        if op == Op::ConfigureLog {
            return self.configure_log(arg);
        }
        let result = self.raw_call(op, arg).map_err(|e| Error::driver(op_name(op), e));
        self.pump_log()?;
        if op == Op::CloseLog && result.is_ok() {
            *self.log.borrow_mut() = None;
        }
        result
    }

    fn extension_call(&self, op: u32, arg: &mut [u8]) -> Result<()> {
        let result = self.raw_call_number(op, arg).map_err(|e| Error::driver("extension op", e));
        self.pump_log()?;
        result
    }

    fn missing_hardware_reason(&self) -> Option<String> {
        (!self.model.has_pmu()).then(|| {
            "no hardware PMU: the simulated CPU reports perfmon version 0 (PMC_SIM_MODEL=vm)".into()
        })
    }

    fn is_hybrid(&self) -> bool {
        self.hybrid
    }

    fn arch_perfmon_leaf(&self) -> Option<(u32, u32)> {
        use hwpmc::hw::CpuIdReader;
        let leaf = hwpmc_sim::CpuidModel::new(self.model, 0).cpuid1(0xA);
        (self.model.has_pmu() && !self.model.is_amd()).then_some((leaf.eax, leaf.ebx))
    }

    fn intel_model(&self) -> Option<String> {
        let (family, model) = (self.model.family, self.model.model);
        if self.model.is_amd() {
            Some(format!("AuthenticAMD-{family}-{model:02X}-{}", self.model.stepping))
        } else {
            Some(format!("GenuineIntel-{family}-{model:X}"))
        }
    }

    fn spawn(&self, argv: &[OsString]) -> Result<ChildPid> {
        let name = argv.first().and_then(|a| a.to_str()).unwrap_or_default();
        let name = name.rsplit('/').next().unwrap_or(name);
        let program = program(name).ok_or_else(|| {
            let known: Vec<&str> = PROGRAMS.iter().map(|(n, _)| *n).collect();
            Error::with_detail(
                "spawn",
                libc::ENOENT,
                format!(
                    "{name:?} is not a simulated program; the simulator runs: {}",
                    known.join(", ")
                ),
            )
        })?;
        let pid = self.machine.borrow_mut().spawn(&program, Credentials::user(1000));
        self.children.borrow_mut().push(pid);
        Ok(pid)
    }

    fn resume(&self, pid: ChildPid) -> Result<()> {
        // Simulated processes run when the machine does: in `wait`.
        self.child("resume", pid).map(drop)
    }

    fn wait(&self, pid: ChildPid) -> Result<i32> {
        let at = self.child("wait", pid)?;
        self.children.borrow_mut().swap_remove(at);
        self.release_held();
        let interrupted = || INTERRUPT.load(Ordering::Relaxed) != 0;
        self.machine.borrow_mut().run_until(|m| !m.process_alive(pid) || interrupted());
        // A signal (see `interrupt`) ends the command as it would end a real one.
        let signal = INTERRUPT.swap(0, Ordering::Relaxed);
        let status = match signal {
            0 => 0,
            _ if self.machine.borrow().process_alive(pid) => {
                self.machine.borrow_mut().kill(pid);
                128 + signal
            }
            _ => 0,
        };
        self.machine.borrow_mut().run_until_idle();
        self.pump_log()?;
        Ok(status)
    }
}
