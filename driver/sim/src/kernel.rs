//! The simulated kernel's services to the driver: CPUs, processes with credentials and user
//! memory, threads with kernel stacks, signals, time. [`SimKernel`] implements
//! [`hwpmc::Kernel`].
//!
//! Every thread has a kernel stack of [`KERNEL_STACK_SIZE`] bytes at
//! [`kernel_stack_base`]`(tid)`, outside every process's address space (`copy_in` cannot read
//! it); the machine keeps the frame records of kernel functions there and tells the kernel which
//! thread runs on each CPU, so [`Kernel::read_kernel_stack`] reads only the stack of the thread
//! the interrupt came from.
//!
//! The state is shared (`Rc<RefCell<…>>`) between the kernel handle the driver owns and the
//! machine that runs workloads. A method borrows it only for its own duration, never across a
//! call back into the driver, so the driver can call the kernel from anywhere.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use hwpmc::{
    Cpu, CriticalSection, Errno, HostCounters, Kernel, Pid, Privilege, ProcessState, Signal, Tid,
    UserPtr,
};

use crate::pmu::SimHardware;

/// Who a process runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Real user id.
    pub uid: u32,
    /// Effective user id (differs after a set-uid exec).
    pub euid: u32,
    /// Privileges held (root holds all).
    pub privileges: BTreeSet<PrivilegeKind>,
    /// Whether the process is jailed.
    pub jailed: bool,
}

/// [`hwpmc::Privilege`] as an ordered key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PrivilegeKind {
    /// `PRIV_PMC_SYSTEM`.
    PmcSystem,
    /// `PRIV_PMC_MANAGE`.
    PmcManage,
    /// AnyThread counting.
    PmcAnyThread,
}

impl From<Privilege> for PrivilegeKind {
    fn from(p: Privilege) -> Self {
        match p {
            Privilege::PmcSystem => PrivilegeKind::PmcSystem,
            Privilege::PmcManage => PrivilegeKind::PmcManage,
            Privilege::PmcAnyThread => PrivilegeKind::PmcAnyThread,
        }
    }
}

impl Credentials {
    /// An ordinary user.
    pub fn user(uid: u32) -> Self {
        Credentials { uid, euid: uid, privileges: BTreeSet::new(), jailed: false }
    }

    /// The superuser: every privilege.
    pub fn root() -> Self {
        let privileges =
            [PrivilegeKind::PmcSystem, PrivilegeKind::PmcManage, PrivilegeKind::PmcAnyThread]
                .into_iter()
                .collect();
        Credentials { uid: 0, euid: 0, privileges, jailed: false }
    }

    /// Whether these credentials hold every privilege (root outside a jail).
    pub fn is_root(&self) -> bool {
        self.euid == 0 && !self.jailed
    }
}

/// A simulated process.
#[derive(Debug, Clone)]
pub struct Process {
    /// Its id.
    pub pid: Pid,
    /// Its parent, if any.
    pub parent: Option<Pid>,
    /// Its credentials.
    pub credentials: Credentials,
    /// Whether it executed a set-id program (then only root may debug it).
    pub set_id: bool,
    /// Whether it is exiting (can no longer be attached to).
    pub exiting: bool,
    /// Its threads.
    pub threads: Vec<Tid>,
    /// Its user memory.
    pub memory: UserMemory,
    /// Its executable's path.
    pub path: Vec<u8>,
    /// Its open descriptors: descriptor → sink.
    pub files: BTreeMap<i32, SinkId>,
    /// Its executable mappings: (start, end, path).
    pub mappings: Vec<(u64, u64, Vec<u8>)>,
}

/// What a descriptor refers to, for CONFIGURELOG: only writable files, pipes and sockets may
/// take a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    /// A writable file (or pipe or socket): writes append to its bytes.
    Writable,
    /// A file opened read-only.
    ReadOnly,
    /// A directory.
    Directory,
}

/// A sink: the object behind a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SinkId(pub usize);

#[derive(Debug, Clone)]
struct Sink {
    kind: SinkKind,
    bytes: Vec<u8>,
    /// Writes fail with this errno (a full disk, a broken pipe) while it is set.
    failure: Option<Errno>,
}

/// A process's user address space: mapped regions of bytes, each readable and optionally
/// writable. Access to anything unmapped, or a write to a read-only region, faults.
#[derive(Debug, Clone, Default)]
pub struct UserMemory {
    regions: BTreeMap<u64, Region>,
}

#[derive(Debug, Clone)]
struct Region {
    bytes: Vec<u8>,
    writable: bool,
}

impl UserMemory {
    /// Maps `len` zero bytes at `start`, writable (replacing any region starting there).
    pub fn map(&mut self, start: u64, len: usize) {
        self.regions.insert(start, Region { bytes: vec![0; len], writable: true });
    }

    /// Unmaps the region starting at `start`.
    pub fn unmap(&mut self, start: u64) {
        self.regions.remove(&start);
    }

    /// Makes the region starting at `start` writable or read-only.
    pub fn protect(&mut self, start: u64, writable: bool) {
        if let Some(region) = self.regions.get_mut(&start) {
            region.writable = writable;
        }
    }

    fn region_mut(&mut self, addr: u64, len: usize) -> Option<(&mut [u8], bool)> {
        let (&start, region) = self.regions.range_mut(..=addr).next_back()?;
        let offset = usize::try_from(addr - start).ok()?;
        let writable = region.writable;
        Some((region.bytes.get_mut(offset..offset.checked_add(len)?)?, writable))
    }

    /// Reads `dst.len()` bytes at `addr`; `Err(Fault)` unless all are mapped in one region.
    pub fn read(&mut self, addr: u64, dst: &mut [u8]) -> Result<(), Errno> {
        let (src, _) = self.region_mut(addr, dst.len()).ok_or(Errno::Fault)?;
        dst.copy_from_slice(src);
        Ok(())
    }

    /// Writes `src` at `addr`; `Err(Fault)` unless all of it is mapped, writable, in one region.
    pub fn write(&mut self, addr: u64, src: &[u8]) -> Result<(), Errno> {
        match self.region_mut(addr, src.len()) {
            Some((dst, true)) => {
                dst.copy_from_slice(src);
                Ok(())
            }
            _ => Err(Errno::Fault),
        }
    }

    /// Writes `src` at `addr` even into a read-only region (what a test does to set up memory).
    pub fn poke(&mut self, addr: u64, src: &[u8]) -> Result<(), Errno> {
        let (dst, _) = self.region_mut(addr, src.len()).ok_or(Errno::Fault)?;
        dst.copy_from_slice(src);
        Ok(())
    }
}

/// The kernel's mutable state.
#[derive(Debug)]
pub struct KernelState {
    cpus_active: Vec<bool>,
    /// The thread running on each CPU.
    running: Vec<Option<Tid>>,
    /// Each live thread's kernel stack ([`KERNEL_STACK_SIZE`] bytes at its
    /// [`kernel_stack_base`]).
    kernel_stacks: BTreeMap<Tid, Vec<u8>>,
    caller: Pid,
    processes: BTreeMap<Pid, Process>,
    next_pid: Pid,
    next_tid: Tid,
    unprivileged_syspmcs: bool,
    unprivileged_proc_debug: bool,
    signals: Vec<(Pid, Signal)>,
    user_rdpmc: Vec<bool>,
    sinks: Vec<Sink>,
    /// The driver's log references: log file → sink.
    log_files: BTreeMap<u64, SinkId>,
    next_log_file: u64,
    writer_wakeups: u64,
    /// The kernel image reported to the driver, if any: (start, path).
    kernel_image: Option<(u64, Vec<u8>)>,
    nanotime: (i64, i64),
    tsc_frequency: u64,
    /// Each thread's extended error: the text of its last failed system call, if it had one
    /// (thread 0 for a caller without threads).
    error_texts: BTreeMap<Tid, &'static str>,
}

/// The simulated kernel: a cheap handle to shared state. The driver owns one; the machine and
/// the tests keep clones.
#[derive(Debug, Clone)]
pub struct SimKernel {
    state: Rc<RefCell<KernelState>>,
    /// The driver's critical sections, kept apart from `state` so that checking them costs the
    /// context-switch hooks as little as a real kernel's preemption counter would.
    critical: Rc<CriticalSections>,
    hw: SimHardware,
    host: HostCountersRef,
}

/// The critical sections the driver is in now (they nest) and has entered so far, and whether
/// its interrupt entry is running (see [`SimKernel::in_interrupt`]).
#[derive(Debug, Default)]
struct CriticalSections {
    depth: Cell<u64>,
    entered: Cell<u64>,
    in_interrupt: Cell<bool>,
}

/// The classes a test's host counts itself, if any (see [`SimKernel::with_host_counters`]).
#[derive(Clone, Default)]
struct HostCountersRef(Option<Rc<dyn HostCounters>>);

impl std::fmt::Debug for HostCountersRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "HostCounters" } else { "None" })
    }
}

/// Where [`SimKernel::spawn`] maps each process's scratch memory for system-call arguments.
pub const SCRATCH_BASE: u64 = 0x7fff_0000_0000;
/// Size of the scratch memory (big enough for GETDYNEVENTINFO's 278 536 bytes).
pub const SCRATCH_LEN: usize = 512 * 1024;
/// Size of each thread's kernel stack (FreeBSD/amd64's four pages).
pub const KERNEL_STACK_SIZE: u64 = 16 * 1024;
/// Where kernel stacks are (see [`kernel_stack_base`]): kernel addresses, in no process's
/// address space.
pub const KERNEL_STACKS_BASE: u64 = 0xffff_fe00_0000_0000;

/// The lowest address of thread `tid`'s kernel stack: [`KERNEL_STACKS_BASE`] + (`tid` mod
/// 65536) × 2 × [`KERNEL_STACK_SIZE`] (an unmapped guard gap separates stacks).
pub fn kernel_stack_base(tid: Tid) -> u64 {
    KERNEL_STACKS_BASE + (tid as u64 % 0x1_0000) * 2 * KERNEL_STACK_SIZE
}

/// The offset of `addr..addr + len` in a kernel stack based at `base`, if all of it lies there.
fn kernel_stack_offset(base: u64, addr: u64, len: usize) -> Option<usize> {
    let offset = addr.checked_sub(base)?;
    let end = offset.checked_add(len as u64)?;
    (end <= KERNEL_STACK_SIZE).then_some(offset as usize)
}

impl SimKernel {
    /// A kernel for the CPUs of `hw`, all active, with no process.
    pub fn new(hw: SimHardware) -> Self {
        let state = KernelState {
            cpus_active: vec![true; hw.cpu_count()],
            running: vec![None; hw.cpu_count()],
            kernel_stacks: BTreeMap::new(),
            caller: 0,
            processes: BTreeMap::new(),
            next_pid: 100,
            next_tid: 100_000,
            unprivileged_syspmcs: false,
            unprivileged_proc_debug: true,
            signals: Vec::new(),
            user_rdpmc: vec![false; hw.cpu_count()],
            sinks: Vec::new(),
            log_files: BTreeMap::new(),
            next_log_file: 1,
            writer_wakeups: 0,
            kernel_image: None,
            nanotime: (1_700_000_000, 0),
            tsc_frequency: 2_000_000_000,
            error_texts: BTreeMap::new(),
        };
        SimKernel {
            state: Rc::new(RefCell::new(state)),
            critical: Rc::default(),
            hw,
            host: HostCountersRef::default(),
        }
    }

    /// This kernel, counting the classes `host` says it counts itself (as Linux's perf does
    /// for the Linux host), for tests of the driver's host-counted PMCs.
    pub fn with_host_counters(mut self, host: Rc<dyn HostCounters>) -> Self {
        self.host = HostCountersRef(Some(host));
        self
    }

    /// Reports a kernel image at `start` named `path` to the driver (none by default, so the
    /// logs of the simulator's scenarios hold only their programs' mappings).
    pub fn set_kernel_image(&self, start: u64, path: &str) {
        self.state.borrow_mut().kernel_image = Some((start, path.as_bytes().to_vec()));
    }

    /// The hardware this kernel runs on.
    pub fn hardware(&self) -> &SimHardware {
        &self.hw
    }

    /// Creates a process with one thread (with its kernel stack), `credentials`, and
    /// [`SCRATCH_LEN`] bytes of memory at [`SCRATCH_BASE`]; returns its pid.
    pub fn spawn(&self, parent: Option<Pid>, credentials: Credentials) -> Pid {
        let mut s = self.state.borrow_mut();
        let pid = s.next_pid;
        s.next_pid += 1;
        let tid = s.next_tid;
        s.next_tid += 1;
        s.kernel_stacks.insert(tid, vec![0; KERNEL_STACK_SIZE as usize]);
        let mut memory = UserMemory::default();
        memory.map(SCRATCH_BASE, SCRATCH_LEN);
        let process = Process {
            pid,
            parent,
            credentials,
            set_id: false,
            exiting: false,
            threads: vec![tid],
            memory,
            path: b"/usr/bin/simulated".to_vec(),
            files: BTreeMap::new(),
            mappings: Vec::new(),
        };
        s.processes.insert(pid, process);
        pid
    }

    /// Forks `parent`: a new process with its credentials, a copy of its memory and one thread.
    pub fn fork(&self, parent: Pid) -> Option<Pid> {
        let (credentials, memory, set_id, path, files, mappings) = {
            let s = self.state.borrow();
            let p = s.processes.get(&parent)?;
            let copy = (p.memory.clone(), p.path.clone(), p.files.clone(), p.mappings.clone());
            (p.credentials.clone(), copy.0, p.set_id, copy.1, copy.2, copy.3)
        };
        let child = self.spawn(Some(parent), credentials);
        self.with_process(child, |p| {
            p.memory = memory;
            p.set_id = set_id;
            p.path = path;
            p.files = files;
            p.mappings = mappings;
        });
        Some(child)
    }

    /// Adds a thread (with its kernel stack) to `pid` and returns its id.
    pub fn add_thread(&self, pid: Pid) -> Option<Tid> {
        let mut s = self.state.borrow_mut();
        let tid = s.next_tid;
        s.processes.get_mut(&pid)?.threads.push(tid);
        s.next_tid += 1;
        s.kernel_stacks.insert(tid, vec![0; KERNEL_STACK_SIZE as usize]);
        Some(tid)
    }

    /// Removes thread `tid` from `pid` and frees its kernel stack.
    pub fn remove_thread(&self, pid: Pid, tid: Tid) {
        self.with_process(pid, |p| p.threads.retain(|&t| t != tid));
        self.state.borrow_mut().kernel_stacks.remove(&tid);
    }

    /// Records that thread `tid` runs on `cpu` (`None`: no thread does), as the scheduler
    /// switches: the kernel stack an interrupt on `cpu` may read is `tid`'s.
    pub fn set_running(&self, cpu: Cpu, tid: Option<Tid>) {
        if let Some(running) = self.state.borrow_mut().running.get_mut(cpu as usize) {
            *running = tid;
        }
    }

    /// The thread running on `cpu`, as [`SimKernel::set_running`] recorded it.
    pub fn running(&self, cpu: Cpu) -> Option<Tid> {
        self.state.borrow().running.get(cpu as usize).copied().flatten()
    }

    /// Writes `bytes` at `addr` of thread `tid`'s kernel stack (what the machine does to push a
    /// frame record, and a test to corrupt one); `Err(Fault)` unless all of it lies in the stack,
    /// `Err(Srch)` without such a thread.
    pub fn write_kernel_stack(&self, tid: Tid, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
        let mut s = self.state.borrow_mut();
        let stack = s.kernel_stacks.get_mut(&tid).ok_or(Errno::Srch)?;
        let offset =
            kernel_stack_offset(kernel_stack_base(tid), addr, bytes.len()).ok_or(Errno::Fault)?;
        stack[offset..offset + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    /// Reads `len` bytes at `addr` of thread `tid`'s kernel stack.
    pub fn read_kernel_stack_of(&self, tid: Tid, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let s = self.state.borrow();
        let stack = s.kernel_stacks.get(&tid).ok_or(Errno::Srch)?;
        let offset = kernel_stack_offset(kernel_stack_base(tid), addr, len).ok_or(Errno::Fault)?;
        Ok(stack[offset..offset + len].to_vec())
    }

    /// Marks `pid` as exiting (the driver's exit hook runs after this).
    pub fn begin_exit(&self, pid: Pid) {
        self.with_process(pid, |p| p.exiting = true);
    }

    /// Removes `pid` (reaped) and its threads' kernel stacks; its children are re-parented to
    /// nobody.
    pub fn reap(&self, pid: Pid) {
        let mut s = self.state.borrow_mut();
        if let Some(process) = s.processes.remove(&pid) {
            for tid in process.threads {
                s.kernel_stacks.remove(&tid);
            }
        }
        for p in s.processes.values_mut() {
            if p.parent == Some(pid) {
                p.parent = None;
            }
        }
    }

    /// Runs `f` on process `pid`'s record, if it exists.
    pub fn with_process<R>(&self, pid: Pid, f: impl FnOnce(&mut Process) -> R) -> Option<R> {
        self.state.borrow_mut().processes.get_mut(&pid).map(f)
    }

    /// Whether `pid` exists.
    pub fn exists(&self, pid: Pid) -> bool {
        self.state.borrow().processes.contains_key(&pid)
    }

    /// The threads of `pid`.
    pub fn threads(&self, pid: Pid) -> Vec<Tid> {
        self.with_process(pid, |p| p.threads.clone()).unwrap_or_default()
    }

    /// The process issuing system calls from now on.
    pub fn set_caller(&self, pid: Pid) {
        self.state.borrow_mut().caller = pid;
    }

    /// The process issuing system calls.
    pub fn caller(&self) -> Pid {
        self.state.borrow().caller
    }

    /// Thread `tid`'s extended error, as `uexterr_gettext(3)` reads it: the text the driver gave
    /// its last failed system call, empty if that failure had none (or none failed yet).
    pub fn error_text(&self, tid: Tid) -> &'static str {
        self.state.borrow().error_texts.get(&tid).copied().unwrap_or("")
    }

    /// Takes a CPU online or offline.
    pub fn set_cpu_active(&self, cpu: Cpu, active: bool) {
        if let Some(flag) = self.state.borrow_mut().cpus_active.get_mut(cpu as usize) {
            *flag = active;
        }
    }

    /// `security.bsd.unprivileged_syspmcs`.
    pub fn set_unprivileged_syspmcs(&self, allowed: bool) {
        self.state.borrow_mut().unprivileged_syspmcs = allowed;
    }

    /// `security.bsd.unprivileged_proc_debug`: whether unprivileged users may debug (and attach
    /// PMCs to) their own other processes.
    pub fn set_unprivileged_proc_debug(&self, allowed: bool) {
        self.state.borrow_mut().unprivileged_proc_debug = allowed;
    }

    /// Opens a new sink of `kind` as a descriptor of `pid`; returns the descriptor.
    pub fn open_sink(&self, pid: Pid, kind: SinkKind) -> i32 {
        let mut s = self.state.borrow_mut();
        let sink = SinkId(s.sinks.len());
        s.sinks.push(Sink { kind, bytes: Vec::new(), failure: None });
        let Some(process) = s.processes.get_mut(&pid) else { return -1 };
        let fd = (3..).find(|fd| !process.files.contains_key(fd)).unwrap_or(3);
        process.files.insert(fd, sink);
        fd
    }

    /// The sink behind `pid`'s descriptor `fd`.
    pub fn sink_of(&self, pid: Pid, fd: i32) -> Option<SinkId> {
        self.state.borrow().processes.get(&pid)?.files.get(&fd).copied()
    }

    /// Closes `pid`'s descriptor `fd` (the sink lives on while the driver holds a reference).
    pub fn close_fd(&self, pid: Pid, fd: i32) {
        self.with_process(pid, |p| p.files.remove(&fd));
    }

    /// The bytes written to `sink`.
    pub fn sink_bytes(&self, sink: SinkId) -> Vec<u8> {
        self.state.borrow().sinks.get(sink.0).map(|s| s.bytes.clone()).unwrap_or_default()
    }

    /// Makes writes to `sink` fail with `errno` (or succeed again with `None`).
    pub fn set_sink_failure(&self, sink: SinkId, errno: Option<Errno>) {
        if let Some(s) = self.state.borrow_mut().sinks.get_mut(sink.0) {
            s.failure = errno;
        }
    }

    /// The critical sections the driver has entered so far (to take its locks).
    pub fn critical_sections(&self) -> u64 {
        self.critical.entered.get()
    }

    /// Runs `f` as the interrupt context (the NMI that calls the driver's interrupt entry): a
    /// critical section entered meanwhile is the driver taking a lock in the interrupt path,
    /// which panics.
    pub fn in_interrupt<R>(&self, f: impl FnOnce() -> R) -> R {
        self.critical.in_interrupt.set(true);
        let result = f();
        self.critical.in_interrupt.set(false);
        result
    }

    /// Whether the driver's interrupt entry is running (inside [`SimKernel::in_interrupt`]).
    pub fn is_in_interrupt(&self) -> bool {
        self.critical.in_interrupt.get()
    }

    /// How many times the driver asked for its log writer to run.
    pub fn writer_wakeups(&self) -> u64 {
        self.state.borrow().writer_wakeups
    }

    /// Log files the driver holds open.
    pub fn open_log_files(&self) -> usize {
        self.state.borrow().log_files.len()
    }

    /// Whether user-mode RDPMC is allowed on `cpu` (the simulated CR4.PCE).
    pub fn user_rdpmc(&self, cpu: Cpu) -> bool {
        self.state.borrow().user_rdpmc.get(cpu as usize).copied().unwrap_or(false)
    }

    /// The signals sent so far, oldest first, and forgets them.
    pub fn take_signals(&self) -> Vec<(Pid, Signal)> {
        std::mem::take(&mut self.state.borrow_mut().signals)
    }

    /// Writes `bytes` into `pid`'s memory at `addr` (also into read-only regions).
    pub fn write_memory(&self, pid: Pid, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
        self.with_process(pid, |p| p.memory.poke(addr, bytes)).unwrap_or(Err(Errno::Srch))
    }

    /// Maps `len` bytes at `start` in `pid`, writable or read-only.
    pub fn map_memory(&self, pid: Pid, start: u64, len: usize, writable: bool) {
        self.with_process(pid, |p| {
            p.memory.map(start, len);
            p.memory.protect(start, writable);
        });
    }

    /// Reads `len` bytes of `pid`'s memory at `addr`.
    pub fn read_memory(&self, pid: Pid, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut out = vec![0; len];
        self.with_process(pid, |p| p.memory.read(addr, &mut out)).unwrap_or(Err(Errno::Srch))?;
        Ok(out)
    }

    /// FreeBSD's `p_candebug` between two processes' credentials.
    fn debug_allowed(&self, debugger: Pid, target: Pid) -> Result<(), Errno> {
        let s = self.state.borrow();
        let d = s.processes.get(&debugger).ok_or(Errno::Srch)?;
        let t = s.processes.get(&target).ok_or(Errno::Srch)?;
        if d.credentials.is_root() {
            return Ok(());
        }
        let same_user = d.credentials.uid == t.credentials.uid
            && d.credentials.euid == t.credentials.euid
            && d.credentials.uid == t.credentials.euid;
        if same_user && !t.set_id && s.unprivileged_proc_debug && !d.credentials.jailed {
            Ok(())
        } else {
            Err(Errno::Perm)
        }
    }

    fn caller_credentials(&self) -> Option<Credentials> {
        let s = self.state.borrow();
        s.processes.get(&s.caller).map(|p| p.credentials.clone())
    }
}

impl Kernel for SimKernel {
    /// Checks the driver's use of its locks: never in the interrupt path, and left in the
    /// order entered.
    fn enter_critical_section(&self) -> CriticalSection {
        let critical = &*self.critical;
        assert!(!critical.in_interrupt.get(), "the driver took a lock in the interrupt path");
        let depth = critical.depth.get() + 1;
        critical.depth.set(depth);
        critical.entered.set(critical.entered.get() + 1);
        CriticalSection(depth)
    }

    fn exit_critical_section(&self, section: CriticalSection) {
        let depth = self.critical.depth.get();
        assert_eq!(section.0, depth, "critical sections left out of order");
        self.critical.depth.set(depth - 1);
    }

    fn cpu_count(&self) -> u32 {
        self.state.borrow().cpus_active.len() as u32
    }

    fn cpu_active(&self, cpu: Cpu) -> bool {
        self.state.borrow().cpus_active.get(cpu as usize).copied().unwrap_or(false)
    }

    fn current_cpu(&self) -> Cpu {
        self.hw.current_cpu() as Cpu
    }

    fn run_on_cpu(&self, cpu: Cpu, f: &mut dyn FnMut()) {
        let previous = self.hw.current_cpu();
        self.hw.set_current_cpu(cpu as usize);
        f();
        self.hw.set_current_cpu(previous);
    }

    fn current_pid(&self) -> Pid {
        self.caller()
    }

    /// Kept per thread, as FreeBSD does; a failure without a text clears the thread's.
    fn set_error_text(&self, text: Option<&'static str>) {
        let tid = self.current_tid().unwrap_or(0);
        let mut s = self.state.borrow_mut();
        match text {
            Some(text) => s.error_texts.insert(tid, text),
            None => s.error_texts.remove(&tid),
        };
    }

    /// The caller's thread on the current CPU; a caller not on it (a tool issuing requests
    /// from outside the simulated programs) is its first thread.
    fn current_tid(&self) -> Option<Tid> {
        let caller = self.caller();
        let running = self.running(self.current_cpu());
        let threads = self.threads(caller);
        running.filter(|t| threads.contains(t)).or_else(|| threads.first().copied())
    }

    fn has_privilege(&self, privilege: Privilege) -> bool {
        self.caller_credentials().is_some_and(|c| {
            !c.jailed && (c.is_root() || c.privileges.contains(&PrivilegeKind::from(privilege)))
        })
    }

    fn is_jailed(&self) -> bool {
        self.caller_credentials().is_some_and(|c| c.jailed)
    }

    fn unprivileged_syspmcs(&self) -> bool {
        self.state.borrow().unprivileged_syspmcs
    }

    fn can_debug(&self, target: Pid) -> Result<(), Errno> {
        self.debug_allowed(self.caller(), target)
    }

    fn may_debug(&self, debugger: Pid, target: Pid) -> bool {
        self.debug_allowed(debugger, target).is_ok()
    }

    fn process_state(&self, pid: Pid) -> ProcessState {
        match self.state.borrow().processes.get(&pid) {
            None => ProcessState::NotFound,
            Some(p) if p.exiting => ProcessState::Exiting,
            Some(_) => ProcessState::Alive,
        }
    }

    fn for_each_child(&self, pid: Pid, f: &mut dyn FnMut(Pid)) {
        let children: Vec<Pid> = self
            .state
            .borrow()
            .processes
            .values()
            .filter(|p| p.parent == Some(pid))
            .map(|p| p.pid)
            .collect();
        for child in children {
            f(child);
        }
    }

    fn copy_in(&self, src: UserPtr, dst: &mut [u8]) -> Result<(), Errno> {
        let caller = self.caller();
        self.with_process(caller, |p| p.memory.read(src.0, dst)).unwrap_or(Err(Errno::Fault))
    }

    fn copy_out(&self, src: &[u8], dst: UserPtr) -> Result<(), Errno> {
        let caller = self.caller();
        self.with_process(caller, |p| p.memory.write(dst.0, src)).unwrap_or(Err(Errno::Fault))
    }

    fn read_kernel_stack(&self, cpu: Cpu, addr: u64, dst: &mut [u8]) -> bool {
        let s = self.state.borrow();
        let Some(tid) = s.running.get(cpu as usize).copied().flatten() else { return false };
        let Some(stack) = s.kernel_stacks.get(&tid) else { return false };
        let Some(offset) = kernel_stack_offset(kernel_stack_base(tid), addr, dst.len()) else {
            return false;
        };
        dst.copy_from_slice(&stack[offset..offset + dst.len()]);
        true
    }

    fn signal(&self, pid: Pid, signal: Signal) {
        let mut s = self.state.borrow_mut();
        if s.processes.contains_key(&pid) {
            s.signals.push((pid, signal));
        }
    }

    fn set_user_rdpmc(&self, allowed: bool) {
        let cpu = self.hw.current_cpu();
        if let Some(flag) = self.state.borrow_mut().user_rdpmc.get_mut(cpu) {
            *flag = allowed;
        }
    }

    fn log_open(&self, fd: i32) -> Result<hwpmc::LogFile, Errno> {
        let caller = self.caller();
        let sink = self.sink_of(caller, fd).ok_or(Errno::Badf)?;
        let mut s = self.state.borrow_mut();
        if s.sinks[sink.0].kind != SinkKind::Writable {
            return Err(Errno::Badf);
        }
        let file = s.next_log_file;
        s.next_log_file += 1;
        s.log_files.insert(file, sink);
        Ok(hwpmc::LogFile(file))
    }

    fn log_write(&self, file: hwpmc::LogFile, bytes: &[u8]) -> Result<(), Errno> {
        let mut s = self.state.borrow_mut();
        let sink = *s.log_files.get(&file.0).ok_or(Errno::Badf)?;
        let sink = &mut s.sinks[sink.0];
        if let Some(errno) = sink.failure {
            return Err(errno);
        }
        sink.bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn log_close(&self, file: hwpmc::LogFile) {
        self.state.borrow_mut().log_files.remove(&file.0);
    }

    fn wake_log_writer(&self) {
        self.state.borrow_mut().writer_wakeups += 1;
    }

    fn process_path(&self, pid: Pid, buf: &mut [u8]) -> usize {
        let s = self.state.borrow();
        let Some(path) = s.processes.get(&pid).map(|p| &p.path) else { return 0 };
        let len = path.len().min(buf.len());
        buf[..len].copy_from_slice(&path[..len]);
        len
    }

    fn for_each_executable_mapping(&self, pid: Pid, f: &mut dyn FnMut(u64, u64, &[u8])) {
        let mappings = self.with_process(pid, |p| p.mappings.clone()).unwrap_or_default();
        for (start, end, path) in &mappings {
            f(*start, *end, path);
        }
    }

    fn for_each_process(&self, f: &mut dyn FnMut(Pid)) {
        let pids: Vec<Pid> = self.state.borrow().processes.keys().copied().collect();
        for pid in pids {
            f(pid);
        }
    }

    fn for_each_kernel_image(&self, f: &mut dyn FnMut(u64, &[u8])) {
        let image = self.state.borrow().kernel_image.clone();
        if let Some((start, path)) = image {
            f(start, &path);
        }
    }

    fn nanotime(&self) -> (i64, i64) {
        self.state.borrow().nanotime
    }

    fn tsc_frequency(&self) -> u64 {
        self.state.borrow().tsc_frequency
    }

    fn host_counters(&self) -> Option<&dyn HostCounters> {
        self.host.0.as_deref()
    }
}
