//! The driver object: load and unload, the system call entry, and the hooks a kernel calls.

use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, LoadError, Pid, Tid, TrapFrame, Tunables, UserPtr};

/// What a kernel tells the driver about an `execve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecInfo<'a> {
    /// The new executable's path.
    pub path: &'a [u8],
    /// AT_BASE: where the dynamic loader was mapped (0 for a static executable).
    pub base_addr: u64,
    /// The load base of a position-independent executable (0 otherwise).
    pub dyn_addr: u64,
    /// Whether the exec changed the process's credentials (a set-id program).
    pub credentials_changed: bool,
}

/// The hwpmc driver, embedded in a kernel.
///
/// `K` is the kernel's services, `H` the CPU hardware (see [`crate::hw::native::NativeCpu`] for
/// real x86_64 CPUs). The driver is `Sync` when they are: system calls may come from any CPU, and
/// each hook is called on the CPU it concerns.
pub struct Driver<K: Kernel, H: Hardware> {
    kernel: K,
    hw: H,
    tunables: Tunables,
}

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Loads the driver: checks the tunables, discovers the PMU of every active CPU and
    /// initialises each CPU's counters (all stopped).
    pub fn load(kernel: K, hw: H, tunables: Tunables) -> Result<Self, LoadError> {
        tunables.validate()?;
        if kernel.cpu_count() == 0 {
            return Err(LoadError::NoCpus);
        }
        Ok(Driver { kernel, hw, tunables })
    }

    /// Unloads the driver: releases every PMC (sending SIGBUS to owners that still had PMCs) and
    /// returns every CPU's counters to their reset state.
    pub fn unload(&self) {}

    /// The kernel services the driver was loaded with.
    pub fn kernel(&self) -> &K {
        &self.kernel
    }

    /// The hardware the driver was loaded with.
    pub fn hardware(&self) -> &H {
        &self.hw
    }

    /// The tunables the driver was loaded with.
    pub fn tunables(&self) -> &Tunables {
        &self.tunables
    }

    /// The hwpmc system call: `op` is a `PMC_OP_*` number and `arg` the caller's argument
    /// pointer. Returns the errno hwpmc(4) documents on failure; a failed call changes nothing.
    pub fn syscall(&self, op: u32, arg: UserPtr) -> Result<(), Errno> {
        let _ = (op, arg);
        Err(Errno::NoSys)
    }

    /// Scheduler hook: thread `tid` of process `pid` starts running on `cpu` (called on `cpu`).
    pub fn switch_in(&self, cpu: Cpu, pid: Pid, tid: Tid) {
        let _ = (cpu, pid, tid);
    }

    /// Scheduler hook: thread `tid` of process `pid` stops running on `cpu` (called on `cpu`).
    pub fn switch_out(&self, cpu: Cpu, pid: Pid, tid: Tid) {
        let _ = (cpu, pid, tid);
    }

    /// Process `parent` forked `child` (called after the child exists, before it runs).
    pub fn process_fork(&self, parent: Pid, child: Pid) {
        let _ = (parent, child);
    }

    /// Process `pid` executed a new program (called after the new image is in place).
    pub fn process_exec(&self, pid: Pid, exec: &ExecInfo<'_>) {
        let _ = (pid, exec);
    }

    /// Process `pid` is exiting (called once, from its last thread, after it switched out for
    /// the last time or while it runs its exit path).
    pub fn process_exit(&self, pid: Pid) {
        let _ = pid;
    }

    /// Thread `tid` was created in process `pid`.
    pub fn thread_create(&self, pid: Pid, tid: Tid) {
        let _ = (pid, tid);
    }

    /// Thread `tid` of process `pid` exited.
    pub fn thread_exit(&self, pid: Pid, tid: Tid) {
        let _ = (pid, tid);
    }

    /// The performance-monitoring interrupt (an NMI on x86) on `cpu`, called on `cpu` with the
    /// interrupted context. Returns whether a counter of the driver overflowed (whether the NMI
    /// is claimed). Takes no lock and allocates nothing.
    pub fn interrupt(&self, cpu: Cpu, frame: &TrapFrame) -> bool {
        let _ = (cpu, frame);
        false
    }

    /// A software event `event` (a code from [`Driver::register_soft_event`]) happened on `cpu`.
    /// Interrupt-safe: takes no lock and allocates nothing.
    pub fn soft_event(&self, cpu: Cpu, event: u32, frame: &TrapFrame) {
        let _ = (cpu, event, frame);
    }

    /// Registers a software event named `name` (e.g. `CLOCK.HARD`, `PAGE_FAULT.ALL`) and returns
    /// its event code. Registering a name twice returns the same code.
    pub fn register_soft_event(&self, name: &str) -> Result<u32, Errno> {
        let _ = name;
        Err(Errno::NoSys)
    }
}
