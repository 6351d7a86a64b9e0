//! What the context-switch hooks load: for every process with running PMCs, the immutable list
//! the bookkeeping built for it ([`LoadSpec`]s), gathered in an immutable, versioned map.
//!
//! The bookkeeping builds a new map under its lock whenever a list changes (copy on write:
//! unchanged lists are shared) and gives it to every CPU. Each CPU keeps its own reference to the
//! map its hooks read; it is replaced only on that CPU, by a closure the driver runs there through
//! [`Kernel::run_on_cpu`](crate::Kernel::run_on_cpu) (`Driver::publish_loads`), and read only
//! there, by the switch hooks. Both run with preemption disabled, so they never overlap and the
//! hooks take no lock shared with system calls (the mutex only proves that to the compiler: the
//! hooks `try_lock` it, and nobody else holds it when they do). This is RCU by rendezvous, as
//! FreeBSD updates per-CPU data: once the closure has run on every CPU, no hook anywhere loads
//! from an older map — the writer waits for that before it unloads a PMC that left its list. The
//! closure only swaps two references: the map it replaces goes back to the writer, which drops it
//! in thread context, so nothing is allocated or freed on the CPU it runs on, and never by a hook.

use alloc::collections::BTreeMap;
use alloc::sync::Arc;

use crate::class::HwConfig;
use crate::kernel::Pid;
use crate::percpu::{PmcHandle, SampleFlags};

/// How to load one PMC on its row: all the context-switch hook needs, without looking the PMC
/// up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadSpec {
    /// The row of the slot (counter) it is loaded on.
    pub(crate) row: u32,
    /// Its multiplexing turn, or [`crate::mux::NOT_MULTIPLEXED`].
    pub(crate) turn: u8,
    /// The only core type it is loaded on (leaf 0x1A numbering), or 0 for every CPU.
    pub(crate) core_type: u8,
    pub(crate) handle: PmcHandle,
    /// The PMC's configuration as loading writes it ([`HwConfig::armed`]).
    pub(crate) armed: HwConfig,
    /// The value the counter is reloaded with after an overflow.
    pub(crate) start: u64,
    /// The link's credit cell: where switch-out hands back what the PMC counted, and where a
    /// sampling PMC's period stands between two switches of the process (the counter is
    /// loaded with its resume value, so that every `reload` events of the process give one
    /// sample however often it is switched). [`NO_CELL`] for a system PMC.
    pub(crate) cell: u32,
    /// Whether the owner may read the counter with RDPMC.
    pub(crate) user_rdpmc: bool,
    /// How the PMC samples.
    pub(crate) sample_flags: SampleFlags,
}

impl LoadSpec {
    /// Whether it is loaded on a CPU of core type `core_type` (see
    /// [`crate::state::core_type_of`]).
    #[inline]
    pub(crate) fn runs_on(&self, core_type: u8) -> bool {
        self.core_type == 0 || self.core_type == core_type
    }
}

/// The cell of a PMC no hook hands anything back for (a system PMC).
pub(crate) const NO_CELL: u32 = u32::MAX;

/// The processes switch-in loads PMCs for, as of one version of the bookkeeping.
#[derive(Debug, Default, Clone)]
pub(crate) struct LoadMap {
    /// Increases with every map the bookkeeping builds: a CPU never goes back to an older one.
    version: u64,
    processes: BTreeMap<Pid, Arc<[LoadSpec]>>,
}

impl LoadMap {
    /// What to load for process `pid`.
    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<&[LoadSpec]> {
        self.processes.get(&pid).map(|list| &**list)
    }

    /// The next version of this map, with `list` as what process `pid` loads (`None`: nothing).
    pub(crate) fn with(
        &self,
        changes: impl IntoIterator<Item = (Pid, Option<Arc<[LoadSpec]>>)>,
    ) -> Self {
        let mut next = LoadMap { version: self.version + 1, processes: self.processes.clone() };
        for (pid, list) in changes {
            match list {
                Some(list) => next.processes.insert(pid, list),
                None => next.processes.remove(&pid),
            };
        }
        next
    }
}

/// One CPU's reference to the map its hooks read, on cache lines of its own.
#[repr(align(64))]
#[derive(Debug, Default)]
pub(crate) struct LoadTable {
    map: spin::Mutex<Arc<LoadMap>>,
}

impl LoadTable {
    /// The map, for the switch hooks of its CPU. `None` would mean a closure of the driver is
    /// running on this CPU at the same time, which the kernel's contract rules out; the hooks
    /// then load nothing rather than wait.
    #[inline]
    pub(crate) fn read(&self) -> Option<spin::MutexGuard<'_, Arc<LoadMap>>> {
        self.map.try_lock()
    }

    /// Makes `map` the one this CPU's hooks read, unless it has a newer one already; returns the
    /// map it no longer holds (the old one, or `map`), for the caller to drop. Called on this
    /// CPU.
    pub(crate) fn install(&self, map: Arc<LoadMap>) -> Arc<LoadMap> {
        let mut current = self.map.lock();
        if map.version > current.version { core::mem::replace(&mut *current, map) } else { map }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{LoadMap, LoadSpec, LoadTable, NO_CELL};
    use crate::class::HwConfig;
    use crate::percpu::{PmcHandle, SampleFlags};
    use alloc::sync::Arc;

    fn list(row: u32) -> Arc<[LoadSpec]> {
        let spec = LoadSpec {
            row,
            turn: crate::mux::NOT_MULTIPLEXED,
            core_type: 0,
            handle: PmcHandle::new(row as usize, 0),
            armed: HwConfig::Tsc,
            start: 0,
            cell: NO_CELL,
            user_rdpmc: false,
            sample_flags: SampleFlags::default(),
        };
        Arc::from([spec])
    }

    #[test]
    fn a_cpu_takes_a_newer_map_only_and_gives_back_the_one_it_drops() {
        let table = LoadTable::default();
        let first = Arc::new(LoadMap::default().with([(7, Some(list(1)))]));
        let second = Arc::new(first.with([(8, Some(list(2))), (7, None)]));
        assert_eq!(first.get(7).map(|l| l[0].row), Some(1));
        assert!(second.get(7).is_none() && second.get(8).is_some(), "the next version changed");
        assert!(first.get(8).is_none(), "an older version never changes");
        let replaced = table.install(Arc::clone(&second));
        assert!(replaced.get(7).is_none() && replaced.get(8).is_none(), "the empty map goes back");
        let refused = table.install(Arc::clone(&first));
        assert!(Arc::ptr_eq(&refused, &first), "an older map is given back, not installed");
        let map = table.read().expect("nobody else holds it");
        assert!(map.get(8).is_some(), "the CPU reads the newest map");
    }

    #[test]
    fn unchanged_lists_are_shared_between_versions() {
        let first = LoadMap::default().with([(7, Some(list(1)))]);
        let second = first.with([(8, Some(list(2)))]);
        let (a, b) = (first.processes.get(&7).unwrap(), second.processes.get(&7).unwrap());
        assert!(Arc::ptr_eq(a, b));
    }
}
