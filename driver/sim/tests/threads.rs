//! The driver embedded in this test process and driven by real threads at once: threads issue
//! random operations as processes, while one thread per simulated CPU calls the context-switch
//! hooks, the interrupt entry, software events and the drain. The kernel checks its critical
//! sections (never in the interrupt path, left in order); the run must end within a time bound
//! (no deadlock) with no panic, every row free and every log decoding.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hwpmc::abi::{
    Disposition, Mode, Op, PmcFlags, PmcInfo, PmcOpConfigureLog, PmcOpGetPmcInfo, PmcOpPmcAttach,
    PmcOpPmcRw, PmcOpSimple,
};
use hwpmc::hw::{Hardware, Lapic, Msrs};
use hwpmc::{
    Cpu, CriticalSection, Driver, Errno, Kernel, LogFile, Pid, Privilege, ProcessState, Signal,
    TrapFrame, Tunables, UserPtr,
};
use hwpmc_sim::{AllocateRequest, ArchEvent, CpuidModel, PmuModel};
use hwpmc_test_support::prng::XorShift64;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

const CPUS: u32 = 2;
const PROCESSES: usize = 3;
/// Where each process's system-call arguments are, and how much memory it has there.
const ARGS: u64 = 0x1000;
const MEMORY: usize = 64 * 1024;

thread_local! {
    /// The CPU and process the calling thread is (the CPU of a process thread is nominal).
    static CURRENT: Cell<(Cpu, Pid)> = const { Cell::new((0, 0)) };
    /// The critical sections the thread is in.
    static DEPTH: Cell<u64> = const { Cell::new(0) };
    /// Whether the thread runs the driver's interrupt entry.
    static IN_INTERRUPT: Cell<bool> = const { Cell::new(false) };
}

/// A kernel whose every service is safe to call from several threads.
struct ThreadKernel {
    /// Held by whoever runs on the CPU: its scheduler thread, or `run_on_cpu`.
    cpus: Vec<Mutex<()>>,
    memory: Mutex<HashMap<Pid, Vec<u8>>>,
    logs: Mutex<HashMap<u64, Vec<u8>>>,
    next_log: AtomicU64,
    sections: AtomicU64,
}

impl ThreadKernel {
    fn new() -> Self {
        let memory = (0..PROCESSES).map(|p| (pid_of(p), vec![0; MEMORY])).collect();
        ThreadKernel {
            cpus: (0..CPUS).map(|_| Mutex::new(())).collect(),
            memory: Mutex::new(memory),
            logs: Mutex::new(HashMap::new()),
            next_log: AtomicU64::new(1),
            sections: AtomicU64::new(0),
        }
    }

    /// Runs `f` as the thread on `cpu` (holding it).
    fn on_cpu<R>(&self, cpu: Cpu, f: impl FnOnce() -> R) -> R {
        let _held = self.cpus[cpu as usize].lock().unwrap();
        let saved = CURRENT.get();
        CURRENT.set((cpu, saved.1));
        let result = f();
        CURRENT.set(saved);
        result
    }
}

fn pid_of(process: usize) -> Pid {
    1000 + process as Pid
}

impl Kernel for ThreadKernel {
    fn cpu_count(&self) -> u32 {
        CPUS
    }
    fn cpu_active(&self, cpu: Cpu) -> bool {
        cpu < CPUS
    }
    fn current_cpu(&self) -> Cpu {
        CURRENT.get().0
    }
    fn run_on_cpu(&self, cpu: Cpu, f: &mut dyn FnMut()) {
        self.on_cpu(cpu, f);
    }
    fn current_pid(&self) -> Pid {
        CURRENT.get().1
    }
    fn has_privilege(&self, _: Privilege) -> bool {
        true
    }
    fn is_jailed(&self) -> bool {
        false
    }
    fn unprivileged_syspmcs(&self) -> bool {
        true
    }
    fn can_debug(&self, _: Pid) -> Result<(), Errno> {
        Ok(())
    }
    fn may_debug(&self, _: Pid, _: Pid) -> bool {
        true
    }
    fn process_state(&self, pid: Pid) -> ProcessState {
        if (0..PROCESSES).any(|p| pid_of(p) == pid) {
            ProcessState::Alive
        } else {
            ProcessState::NotFound
        }
    }
    fn for_each_child(&self, _: Pid, _: &mut dyn FnMut(Pid)) {}
    fn copy_in(&self, src: UserPtr, dst: &mut [u8]) -> Result<(), Errno> {
        let memory = self.memory.lock().unwrap();
        let mine = memory.get(&self.current_pid()).ok_or(Errno::Fault)?;
        let at = usize::try_from(src.0.checked_sub(ARGS).ok_or(Errno::Fault)?).unwrap();
        dst.copy_from_slice(mine.get(at..at + dst.len()).ok_or(Errno::Fault)?);
        Ok(())
    }
    fn copy_out(&self, src: &[u8], dst: UserPtr) -> Result<(), Errno> {
        let mut memory = self.memory.lock().unwrap();
        let mine = memory.get_mut(&self.current_pid()).ok_or(Errno::Fault)?;
        let at = usize::try_from(dst.0.checked_sub(ARGS).ok_or(Errno::Fault)?).unwrap();
        mine.get_mut(at..at + src.len()).ok_or(Errno::Fault)?.copy_from_slice(src);
        Ok(())
    }
    fn read_kernel_stack(&self, _: Cpu, _: u64, _: &mut [u8]) -> bool {
        false
    }
    fn signal(&self, _: Pid, _: Signal) {}
    fn set_user_rdpmc(&self, _: bool) {}
    fn log_open(&self, _: i32) -> Result<LogFile, Errno> {
        let file = self.next_log.fetch_add(1, Ordering::Relaxed);
        self.logs.lock().unwrap().insert(file, Vec::new());
        Ok(LogFile(file))
    }
    fn log_write(&self, file: LogFile, bytes: &[u8]) -> Result<(), Errno> {
        let mut logs = self.logs.lock().unwrap();
        logs.get_mut(&file.0).ok_or(Errno::Badf)?.extend_from_slice(bytes);
        Ok(())
    }
    fn log_close(&self, _: LogFile) {}
    fn wake_log_writer(&self) {}
    fn process_path(&self, _: Pid, _: &mut [u8]) -> usize {
        0
    }
    fn for_each_executable_mapping(&self, _: Pid, _: &mut dyn FnMut(u64, u64, &[u8])) {}
    fn for_each_process(&self, f: &mut dyn FnMut(Pid)) {
        (0..PROCESSES).for_each(|p| f(pid_of(p)));
    }
    fn nanotime(&self) -> (i64, i64) {
        (1_700_000_000, 0)
    }
    fn tsc_frequency(&self) -> u64 {
        1_000_000_000
    }
    fn enter_critical_section(&self) -> CriticalSection {
        assert!(!IN_INTERRUPT.get(), "the driver took a lock in the interrupt path");
        self.sections.fetch_add(1, Ordering::Relaxed);
        let depth = DEPTH.get() + 1;
        DEPTH.set(depth);
        CriticalSection(depth)
    }
    fn exit_critical_section(&self, section: CriticalSection) {
        assert_eq!(section.0, DEPTH.get(), "critical sections left out of order");
        DEPTH.set(section.0 - 1);
    }
}

/// A PMU that says its first GP counter overflowed at every PMI, and counts time in its TSC.
struct ThreadHardware {
    cpuid: CpuidModel,
    tsc: AtomicU64,
}

// The driver only ever calls these as the trait's contract asks; nothing here touches a CPU.
impl Msrs for ThreadHardware {
    unsafe fn read_msr(&self, msr: u32) -> u64 {
        use hwpmc::arch::x86::{amd::msr::PERF_CNTR_GLOBAL_STATUS, msr::IA32_PERF_GLOBAL_STATUS};
        u64::from(msr == IA32_PERF_GLOBAL_STATUS || msr == PERF_CNTR_GLOBAL_STATUS)
    }
    unsafe fn write_msr(&self, _: u32, _: u64) {}
    unsafe fn read_pmc(&self, _: u32) -> u64 {
        self.tsc.load(Ordering::Relaxed)
    }
}

impl Lapic for ThreadHardware {
    fn unmask_pmi(&self) {}
    fn mask_pmi(&self) {}
}

impl Hardware for ThreadHardware {
    type Cpuid = CpuidModel;
    fn cpuid(&self) -> CpuidModel {
        self.cpuid
    }
    fn read_tsc(&self) -> u64 {
        self.tsc.fetch_add(1, Ordering::Relaxed)
    }
}

type ThreadDriver = Driver<ThreadKernel, ThreadHardware>;

/// The system call `op` with argument `arg` as the calling thread's process.
fn call<T: IntoBytes + FromBytes + Immutable + KnownLayout>(
    driver: &ThreadDriver,
    op: Op,
    arg: &mut T,
) -> Result<(), Errno> {
    let kernel = driver.kernel();
    kernel.copy_out(arg.as_bytes(), UserPtr(ARGS)).unwrap();
    let result = driver.syscall(op.as_u32(), UserPtr(ARGS));
    kernel.copy_in(UserPtr(ARGS), arg.as_mut_bytes()).unwrap();
    result
}

fn simple(driver: &ThreadDriver, op: Op, id: u32) -> Result<(), Errno> {
    call(driver, op, &mut PmcOpSimple { pm_pmcid: id })
}

/// A process issuing random operations on its PMCs until `stop`; then it releases them all
/// and closes its log.
fn process(
    driver: &ThreadDriver,
    index: usize,
    soft: u32,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> u64 {
    let model = *driver.hardware().cpuid.model();
    let pid = pid_of(index);
    CURRENT.set((index as Cpu % CPUS, pid));
    let mut rng = XorShift64(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1));
    call(driver, Op::ConfigureLog, &mut PmcOpConfigureLog { pm_flags: 0, pm_logfd: 3 }).unwrap();
    let mut ids: Vec<u32> = Vec::new();
    let mut operations = 0;
    while !stop.load(Ordering::Relaxed) {
        operations += 1;
        progress.store(operations, Ordering::Relaxed);
        let pick = ids.get(rng.below(ids.len().max(1) as u64) as usize).copied();
        match (rng.below(8), pick) {
            (0, _) | (_, None) if ids.len() < 4 => {
                let request = match rng.below(4) {
                    0 => AllocateRequest::arch(&model, ArchEvent::Instructions, 0),
                    1 => AllocateRequest::arch(&model, ArchEvent::CoreCycles, 0)
                        .in_mode(Mode::ThreadSampling, None)
                        .with_count(1000)
                        .with_flags(PmcFlags::CALLCHAIN),
                    2 => AllocateRequest::soft(soft).in_mode(Mode::ThreadSampling, None),
                    // A thread PMC: attached when the process's thread is the one its CPU
                    // switched in (this kernel does not say), else EOPNOTSUPP.
                    _ => AllocateRequest::arch(&model, ArchEvent::Instructions, 0)
                        .with_flags(PmcFlags::THREAD | PmcFlags::THREAD_INHERIT),
                };
                let mut op = request.to_op();
                if call(driver, Op::PmcAllocate, &mut op).is_ok() {
                    ids.push(op.pm_pmcid);
                }
            }
            (1, Some(id)) => {
                let mut op = PmcOpPmcAttach { pm_pmc: id, pm_pid: 0 };
                let _ = call(driver, Op::PmcAttach, &mut op);
            }
            (2 | 3, Some(id)) => _ = simple(driver, Op::PmcStart, id),
            (4, Some(id)) => _ = simple(driver, Op::PmcStop, id),
            (5, Some(id)) => {
                let mut op = PmcOpPmcRw::new_zeroed();
                op.pm_pmcid = id;
                op.pm_flags = PmcFlags::OLDVALUE.bits();
                let _ = call(driver, Op::PmcRw, &mut op);
            }
            (6, Some(id)) => {
                simple(driver, Op::PmcRelease, id).unwrap();
                ids.retain(|&i| i != id);
            }
            _ => driver.write_logs(),
        }
    }
    for id in ids {
        simple(driver, Op::PmcRelease, id).unwrap();
    }
    driver.syscall(Op::CloseLog.as_u32(), UserPtr::NULL).unwrap();
    operations
}

/// A CPU's scheduler: switches the processes in and out, with PMIs and software events while
/// one runs, and drains its samples.
fn cpu(driver: &ThreadDriver, cpu: Cpu, soft: u32, stop: &AtomicBool, progress: &AtomicU64) -> u64 {
    let mut rng = XorShift64(0xD1B5_4A32_D192_ED03 ^ u64::from(cpu + 1));
    let mut switches = 0;
    while !stop.load(Ordering::Relaxed) {
        switches += 1;
        progress.store(switches, Ordering::Relaxed);
        let pid = pid_of(rng.below(PROCESSES as u64) as usize);
        driver.kernel().on_cpu(cpu, || {
            CURRENT.set((cpu, pid));
            driver.switch_in(cpu, pid, pid);
            let frame = TrapFrame { pc: 0x40_1000, fp: 0, sp: 0, user: true };
            IN_INTERRUPT.set(true);
            driver.interrupt(cpu, &frame);
            driver.soft_event(cpu, soft, &frame);
            IN_INTERRUPT.set(false);
            driver.user_return(cpu, pid, pid, &frame);
            driver.switch_out(cpu, pid, pid);
            driver.tick(cpu);
        });
    }
    switches
}

/// A kernel that does not say which thread calls (no `Kernel::current_tid`): the driver takes
/// the thread switched in on the caller's CPU if it is the caller's, else a thread PMC cannot
/// attach (EOPNOTSUPP).
#[test]
fn thread_pmcs_attach_to_the_thread_switched_in_when_the_kernel_does_not_say() {
    let model = PmuModel::skylake();
    let hardware = ThreadHardware { cpuid: CpuidModel::new(model, 0), tsc: AtomicU64::new(0) };
    let driver = Driver::load(ThreadKernel::new(), hardware, Tunables::default()).unwrap();
    let pid = pid_of(0);
    CURRENT.set((0, pid));
    let request = AllocateRequest::arch(&model, ArchEvent::Instructions, 0);
    let mut op = request.with_flags(PmcFlags::THREAD).to_op();
    call(&driver, Op::PmcAllocate, &mut op).unwrap();
    let mut attach = PmcOpPmcAttach { pm_pmc: op.pm_pmcid, pm_pid: 0 };
    assert_eq!(call(&driver, Op::PmcAttach, &mut attach), Err(Errno::OpNotSupp));
    assert_eq!(simple(&driver, Op::PmcStart, op.pm_pmcid), Err(Errno::OpNotSupp));
    driver.switch_in(0, pid_of(1), 77);
    assert_eq!(call(&driver, Op::PmcAttach, &mut attach), Err(Errno::OpNotSupp), "not ours");
    driver.switch_out(0, pid_of(1), 77);
    driver.switch_in(0, pid, 42);
    call(&driver, Op::PmcAttach, &mut attach).unwrap();
    simple(&driver, Op::PmcStart, op.pm_pmcid).unwrap();
    // The thread exits before its last switch-out: its PMC is detached (and unloaded) at once.
    driver.thread_exit(pid, 42);
    driver.switch_out(0, pid, 42);
    let mut read = PmcOpPmcRw::new_zeroed();
    read.pm_pmcid = op.pm_pmcid;
    read.pm_flags = PmcFlags::OLDVALUE.bits();
    call(&driver, Op::PmcRw, &mut read).expect("its count stays readable");
    let mut detach = PmcOpPmcAttach { pm_pmc: op.pm_pmcid, pm_pid: 0 };
    assert_eq!(call(&driver, Op::PmcDetach, &mut detach), Err(Errno::Srch), "detached already");
    simple(&driver, Op::PmcRelease, op.pm_pmcid).unwrap();
}

#[test]
fn threads_issuing_operations_and_hooks_at_once_never_panic_deadlock_or_leak() {
    at_once(PmuModel::skylake());
}

#[test]
fn threads_issuing_operations_and_hooks_at_once_on_zen4_never_panic_deadlock_or_leak() {
    at_once(PmuModel::zen4());
}

/// The operations or switches each thread does at least before the threads are stopped.
const MIN_WORK: u64 = 10;

fn at_once(model: PmuModel) {
    let hardware = ThreadHardware { cpuid: CpuidModel::new(model, 0), tsc: AtomicU64::new(0) };
    let driver =
        Arc::new(Driver::load(ThreadKernel::new(), hardware, Tunables::default()).unwrap());
    let soft = driver.register_soft_event("CLOCK.HARD").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let threads = PROCESSES + CPUS as usize;
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..threads).map(|_| AtomicU64::new(0)).collect());
    let (done, finished) = mpsc::channel();
    for index in 0..PROCESSES {
        let (driver, stop, done) = (Arc::clone(&driver), Arc::clone(&stop), done.clone());
        let progress = Arc::clone(&progress);
        std::thread::spawn(move || {
            done.send(("process", process(&driver, index, soft, &stop, &progress[index])))
        });
    }
    for c in 0..CPUS {
        let (driver, stop, done) = (Arc::clone(&driver), Arc::clone(&stop), done.clone());
        let progress = Arc::clone(&progress);
        let slot = PROCESSES + c as usize;
        std::thread::spawn(move || {
            done.send(("cpu", cpu(&driver, c, soft, &stop, &progress[slot])))
        });
    }
    drop(done);
    // The threads run together for a while, and on until each has done its share of work
    // (on a loaded machine a thread may get little time at first): a thread that makes no
    // progress for a minute is stuck (a deadlock) and fails the test below.
    std::thread::sleep(Duration::from_millis(1500));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while progress.iter().any(|p| p.load(Ordering::Relaxed) <= MIN_WORK)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let mut work = Vec::new();
    for _ in 0..PROCESSES + CPUS as usize {
        // A thread that panicked drops its sender: the channel closes early.
        let (who, count) = finished
            .recv_timeout(Duration::from_secs(60))
            .expect("every thread finishes in time (no deadlock, no panic)");
        work.push((who, count));
    }
    assert!(
        work.iter().all(|&(_, count)| count > MIN_WORK),
        "every thread did work (none stuck for a minute): {work:?}"
    );
    // Every row of every CPU is free again.
    CURRENT.set((0, pid_of(0)));
    for c in 0..CPUS {
        let mut head = PmcOpGetPmcInfo { pm_cpu: c as i32, pm_pad: 0 };
        call(&driver, Op::GetPmcInfo, &mut head).unwrap();
        let rows = driver.kernel().memory.lock().unwrap()[&pid_of(0)].clone();
        let infos = <[PmcInfo]>::ref_from_prefix_with_elems(&rows[8..], 32).unwrap().0;
        for (row, info) in infos.iter().enumerate().filter(|(_, i)| i.pm_class != 0) {
            assert_eq!(info.pm_rowdisp, Disposition::Free.as_u32(), "CPU {c} row {row} is free");
            assert_eq!(info.pm_ownerpid, -1, "CPU {c} row {row} has no owner");
        }
    }
    // Every log decodes.
    let logs = driver.kernel().logs.lock().unwrap();
    assert_eq!(logs.len(), PROCESSES);
    let mut samples = 0;
    for bytes in logs.values() {
        let records: Vec<_> =
            pmclog::Records::new(bytes).map(|e| e.expect("the log decodes").record).collect();
        assert!(matches!(records[0], pmclog::Record::Initialize(_)));
        samples += records.iter().filter(|r| matches!(r, pmclog::Record::Callchain(_))).count();
    }
    assert!(samples > 0, "PMCs ran on the CPUs and sampled");
    assert!(driver.kernel().sections.load(Ordering::Relaxed) > 0);
}
