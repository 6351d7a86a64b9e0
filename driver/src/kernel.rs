//! What the driver needs from the kernel that hosts it, and nothing more.
//!
//! A kernel implements [`Kernel`] once; the driver calls it from system calls (thread context)
//! and from hooks. Methods marked "thread context" may be slow (they may sleep or take kernel
//! locks); the driver never calls them from the interrupt path and never while holding its own
//! locks, except where a method's documentation says otherwise.

use crate::errno::Errno;

pub use crate::types::{Cpu, Pid, Tid, UserPtr};

/// A log file: the kernel's own reference to the descriptor a process gave CONFIGURELOG, so the
/// log goes on if the process closes its descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogFile(pub u64);

/// A privilege the driver checks (FreeBSD's `priv_check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Privilege {
    /// `PRIV_PMC_SYSTEM`: allocate system-scope PMCs.
    PmcSystem,
    /// `PRIV_PMC_MANAGE`: PMCADMIN (enable and disable rows).
    PmcManage,
    /// Use AnyThread counting, which observes the sibling hyperthread (a driver-specific rule;
    /// a kernel maps it to `PRIV_PMC_SYSTEM` or stricter).
    PmcAnyThread,
}

/// Whether a process exists and can be measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessState {
    /// Alive.
    Alive,
    /// Exiting: it can no longer be attached to (FreeBSD's `P_WEXIT`).
    Exiting,
    /// No such process.
    NotFound,
}

/// A signal the driver sends to a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// A PMC lost its last target, or the log writer failed.
    Io,
    /// The driver is unloading while the process owns PMCs.
    Bus,
}

/// The interrupted context the PMI or a software event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrapFrame {
    /// The interrupted program counter.
    pub pc: u64,
    /// The frame pointer at the interruption.
    pub fp: u64,
    /// The stack pointer at the interruption.
    pub sp: u64,
    /// Whether the CPU was in user mode.
    pub user: bool,
}

/// What [`Kernel::enter_critical_section`] saved, handed back to
/// [`Kernel::exit_critical_section`] (for example the interrupt flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CriticalSection(pub u64);

/// Services of the host kernel.
///
/// "The caller" is the thread that issued the current system call; "current" is what runs on the
/// CPU executing the method.
pub trait Kernel {
    /// Number of CPU slots (`mp_maxid + 1`); CPUs are numbered below it.
    fn cpu_count(&self) -> u32;
    /// Whether `cpu` exists and is online.
    fn cpu_active(&self, cpu: Cpu) -> bool;
    /// The CPU executing the caller.
    fn current_cpu(&self) -> Cpu;
    /// Runs `f` on `cpu` with preemption disabled there (FreeBSD binds the thread and enters a
    /// critical section; a kernel may also use an IPI) and returns when it has run. On the
    /// current CPU it may run `f` directly. Thread context. `f` never runs while a
    /// context-switch hook of the driver runs on `cpu` (the hooks run with preemption disabled
    /// too): the driver updates each CPU's load lists this way, without a lock the hooks share.
    fn run_on_cpu(&self, cpu: Cpu, f: &mut dyn FnMut());

    /// The calling process.
    fn current_pid(&self) -> Pid;
    /// The calling thread, for PMCs of the thread scope ([`PmcFlags::THREAD`]). The default
    /// (`None`) leaves it to the driver's record of the thread each CPU switched in, which is
    /// the caller when the caller's process runs on the current CPU (a kernel that calls the
    /// context-switch hooks for every thread); without either, such PMCs are EOPNOTSUPP.
    ///
    /// [`PmcFlags::THREAD`]: crate::abi::PmcFlags::THREAD
    fn current_tid(&self) -> Option<Tid> {
        None
    }
    /// Whether the caller holds `privilege`.
    fn has_privilege(&self, privilege: Privilege) -> bool;
    /// Whether the caller is in a jail (system-scope PMCs are refused to jailed callers).
    fn is_jailed(&self) -> bool;
    /// `security.bsd.unprivileged_syspmcs`: whether unprivileged users may use system-scope PMCs.
    fn unprivileged_syspmcs(&self) -> bool;
    /// Whether the caller may debug (and so attach PMCs to) `target` (FreeBSD's `p_candebug`):
    /// `Ok`, or `Err(Errno::Perm)`, or `Err(Errno::Srch)` if it does not exist. Thread context.
    fn can_debug(&self, target: Pid) -> Result<(), Errno>;
    /// Whether process `debugger` may debug `target` with their current credentials (checked
    /// again when `target` executes a set-id program).
    fn may_debug(&self, debugger: Pid, target: Pid) -> bool;
    /// The state of process `pid`.
    fn process_state(&self, pid: Pid) -> ProcessState;
    /// Calls `f` for each child of `pid` (for PMC_F_DESCENDANTS attach). Thread context.
    fn for_each_child(&self, pid: Pid, f: &mut dyn FnMut(Pid));

    /// Copies `dst.len()` bytes from the caller's memory at `src`; `Err(Errno::Fault)` for a bad
    /// address, with `dst` unspecified. Thread context.
    fn copy_in(&self, src: UserPtr, dst: &mut [u8]) -> Result<(), Errno>;
    /// Copies `src` to the caller's memory at `dst`; `Err(Errno::Fault)` for a bad address.
    /// Thread context.
    fn copy_out(&self, src: &[u8], dst: UserPtr) -> Result<(), Errno>;
    /// Copies the `dst.len()` bytes at `addr` of the kernel stack of the thread interrupted on
    /// `cpu` (the CPU executing the call) into `dst` and returns true. Returns false, with `dst`
    /// unspecified, unless all of `addr..addr + dst.len()` lies within that thread's kernel
    /// stack, and when no thread was running there (an idle CPU, the scheduler between two
    /// threads).
    ///
    /// Interrupt path: the driver calls it from the performance-monitoring interrupt (an NMI
    /// on x86), once per frame record, to walk a kernel callchain through saved frame pointers.
    /// It must take no lock, allocate nothing, never sleep and never fault. The addresses come
    /// from the stack itself and may be garbage (a function built without frame pointers, a
    /// corrupted stack), so an implementation checks the whole range against the thread's
    /// stack bounds, without overflow, before it copies (FreeBSD's bounds are `td_kstack` and
    /// `td_kstack + td_kstack_pages * PAGE_SIZE`); memory outside them is never touched.
    fn read_kernel_stack(&self, cpu: Cpu, addr: u64, dst: &mut [u8]) -> bool;
    /// Sends `signal` to process `pid` (ignored if it no longer exists).
    fn signal(&self, pid: Pid, signal: Signal);

    /// Allows or forbids RDPMC in user mode on the current CPU (CR4.PCE on x86). The driver
    /// allows it while a process that PMCGETMSR gave direct access to runs, and forbids it when
    /// that process switches out.
    fn set_user_rdpmc(&self, allowed: bool);

    /// Takes a reference to the caller's descriptor `fd` to write a log to: `Err(Errno::Badf)`
    /// unless it is open for writing and is a file, a pipe or a socket (not a directory). The
    /// driver holds the reference until [`Kernel::log_close`]. Thread context.
    fn log_open(&self, fd: i32) -> Result<LogFile, Errno>;
    /// Writes all of `bytes` to `file`, or fails with the write's errno (EIO, ENOSPC, …). Thread
    /// context; may sleep. Called by [`Driver::write_logs`](crate::Driver::write_logs) and by
    /// FLUSHLOG and CLOSELOG.
    fn log_write(&self, file: LogFile, bytes: &[u8]) -> Result<(), Errno>;
    /// Drops the driver's reference to `file`. Thread context.
    fn log_close(&self, file: LogFile);
    /// Asks the kernel to call [`Driver::write_logs`](crate::Driver::write_logs) soon from a
    /// thread context (where writing may sleep): full log buffers are waiting. Called from any
    /// context but the NMI; must not call back into the driver.
    fn wake_log_writer(&self);
    /// The path of process `pid`'s executable, copied into `buf`; returns its length (0 if
    /// unknown). For PMCATTACH records. Thread context.
    fn process_path(&self, pid: Pid, buf: &mut [u8]) -> usize;

    /// Calls `f(start, end, path)` for each executable mapping of process `pid` (for MAP_IN
    /// records when a sampling PMC attaches or a system-sampling PMC starts). Thread context.
    fn for_each_executable_mapping(&self, pid: Pid, f: &mut dyn FnMut(u64, u64, &[u8]));
    /// Calls `f` for each live process. Thread context.
    fn for_each_process(&self, f: &mut dyn FnMut(Pid));
    /// Calls `f(start, path)` for the kernel and each loaded module (MAP_IN records of process
    /// −1 when an owner first starts a sampling PMC). Thread context. The default has none.
    fn for_each_kernel_image(&self, f: &mut dyn FnMut(u64, &[u8])) {
        let _ = f;
    }

    /// Wall-clock time as (seconds, nanoseconds) since the epoch.
    fn nanotime(&self) -> (i64, i64);
    /// The TSC's frequency in Hz (0 if unknown).
    fn tsc_frequency(&self) -> u64;

    /// Enters the critical section the driver holds its locks in (thread context only: system
    /// calls, the fork, exec, exit and thread hooks, the drain — never the interrupt path). A
    /// kernel disables preemption here (and interrupts, if it calls the driver's thread-context
    /// entry points from interrupt handlers), so that no thread holding a driver lock is
    /// preempted while another spins for it. Sections nest. The default does nothing, for hosts
    /// whose threads may spin a while.
    fn enter_critical_section(&self) -> CriticalSection {
        CriticalSection::default()
    }
    /// Leaves the section [`Kernel::enter_critical_section`] entered, restoring what it saved.
    fn exit_critical_section(&self, section: CriticalSection) {
        let _ = section;
    }

    /// Keeps `text` as the calling thread's extended error: why the system call it is making
    /// fails (FreeBSD keeps it per thread and hands it to `uexterr_gettext(3)`). The driver
    /// calls it once for every failing system call, just before returning the errno: with the
    /// cause's text, or `None` for a failure without one (an errno from the kernel's own
    /// services), which clears a text an earlier failure left. It does not call it for a call
    /// that succeeds. Thread context. The default keeps nothing.
    fn set_error_text(&self, text: Option<&'static str>) {
        let _ = text;
    }

    /// The PMC classes this kernel counts itself, and how (see [`crate::hosted`]): `None`, the
    /// default, for a kernel whose PMU the driver programs.
    fn host_counters(&self) -> Option<&dyn crate::hosted::HostCounters> {
        None
    }
}

/// Load-time tunables (FreeBSD's `kern.hwpmc.*` loader tunables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunables {
    /// `kern.hwpmc.nsamples`: per-CPU sample ring size, a power of two from 2 to 65536.
    pub nsamples: u32,
    /// `kern.hwpmc.callchaindepth`: frames per callchain, 1 to 512.
    pub callchain_depth: u32,
    /// `kern.hwpmc.logbuffersize`: KiB per log buffer, 1 to 16384.
    pub log_buffer_kib: u32,
    /// `kern.hwpmc.nbuffers_pcpu`: log buffers per CPU.
    pub log_buffers_per_cpu: u32,
    /// `kern.hwpmc.mincount`: the smallest sampling reload for hardware events.
    pub min_count: u64,
    /// `kern.hwpmc.freeze` (this driver's own): whether the PMU freezes its counters when it
    /// raises a PMI, where it can (bare-metal perfmon v2 and later; never under a hypervisor,
    /// whose vPMU may not implement the freeze bit). Freezing stops every counter at the
    /// overflow, but what retires between the PMI's raising and its handler is then lost to
    /// every counter of the CPU (see the crate documentation, "Freezing counters on a PMI").
    pub freeze_on_pmi: bool,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            nsamples: 256,
            callchain_depth: 128,
            log_buffer_kib: 256,
            log_buffers_per_cpu: 32,
            min_count: 1000,
            freeze_on_pmi: false,
        }
    }
}

/// Why the driver refused to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadError {
    /// `nsamples` is not a power of two between 2 and 65536.
    BadSampleRingSize(u32),
    /// `callchain_depth` is not between 1 and 512.
    BadCallchainDepth(u32),
    /// The log buffer tunables are out of range (size 1..=16384 KiB, at most 32 MiB per CPU).
    BadLogBuffers {
        /// `log_buffer_kib`.
        kib: u32,
        /// `log_buffers_per_cpu`.
        count: u32,
    },
    /// The kernel reports no CPU.
    NoCpus,
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            LoadError::BadSampleRingSize(n) => {
                write!(f, "kern.hwpmc.nsamples={n}: it must be a power of two from 2 to 65536")
            }
            LoadError::BadCallchainDepth(n) => {
                write!(f, "kern.hwpmc.callchaindepth={n}: it must be from 1 to 512")
            }
            LoadError::BadLogBuffers { kib, count } => write!(
                f,
                "kern.hwpmc.logbuffersize={kib} with nbuffers_pcpu={count}: the size must be \
                 1..16384 KiB and size x count at most 32768 KiB per CPU"
            ),
            LoadError::NoCpus => f.write_str("the kernel reports no CPU"),
        }
    }
}

impl Tunables {
    /// Checks every tunable (FreeBSD checks some and silently aliases others, such as a ring
    /// size that is not a power of two).
    pub fn validate(&self) -> Result<(), LoadError> {
        if !(2..=65536).contains(&self.nsamples) || !self.nsamples.is_power_of_two() {
            return Err(LoadError::BadSampleRingSize(self.nsamples));
        }
        if !(1..=512).contains(&self.callchain_depth) {
            return Err(LoadError::BadCallchainDepth(self.callchain_depth));
        }
        let kib = self.log_buffer_kib;
        let count = self.log_buffers_per_cpu;
        if !(1..=16384).contains(&kib) || count == 0 || u64::from(kib) * u64::from(count) > 32768 {
            return Err(LoadError::BadLogBuffers { kib, count });
        }
        Ok(())
    }
}
