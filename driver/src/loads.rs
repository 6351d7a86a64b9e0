//! Each CPU's copy of what its context-switch hooks load: for every process with running PMCs,
//! the immutable list the bookkeeping built for it ([`LoadSpec`]s, shared by every CPU's copy).
//!
//! A CPU's table is written only on that CPU, by a closure the driver runs there through
//! [`Kernel::run_on_cpu`](crate::Kernel::run_on_cpu) (`Driver::publish_loads`), and read only
//! there, by the switch hooks; both run with preemption disabled, so they never overlap and the
//! hooks take no lock shared with system calls. (The mutex only proves that to the compiler: the
//! hooks `try_lock` it and it is never held by anyone else when they do.) This is RCU by
//! rendezvous, as FreeBSD updates per-CPU data: once the closure has run on every CPU, no hook
//! anywhere loads from the old list — the writer waits for that before it unloads a PMC that
//! left the list — and the old list is freed by whichever closure drops its last reference, in
//! thread context, never by a hook.

use alloc::collections::BTreeMap;
use alloc::sync::Arc;

use crate::kernel::Pid;
use crate::state::LoadSpec;

/// The processes a CPU's switch-in loads PMCs for.
#[derive(Debug, Default)]
pub(crate) struct CpuLoads {
    processes: BTreeMap<Pid, Arc<[LoadSpec]>>,
}

impl CpuLoads {
    /// What to load for process `pid`.
    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<&[LoadSpec]> {
        self.processes.get(&pid).map(|list| &**list)
    }
}

/// One CPU's [`CpuLoads`], on cache lines of its own.
#[repr(align(64))]
#[derive(Debug, Default)]
pub(crate) struct LoadTable {
    table: spin::Mutex<CpuLoads>,
}

impl LoadTable {
    /// The table, for the switch hooks of its CPU. `None` would mean a closure of the driver
    /// is running on this CPU at the same time, which the kernel's contract rules out; the
    /// hooks then load nothing rather than wait.
    #[inline]
    pub(crate) fn read(&self) -> Option<spin::MutexGuard<'_, CpuLoads>> {
        self.table.try_lock()
    }

    /// Installs `list` as what process `pid` loads here (`None`: nothing). Called on this CPU.
    pub(crate) fn install(&self, pid: Pid, list: Option<Arc<[LoadSpec]>>) {
        let mut table = self.table.lock();
        match list {
            Some(list) => {
                table.processes.insert(pid, list);
            }
            None => {
                table.processes.remove(&pid);
            }
        }
    }
}
