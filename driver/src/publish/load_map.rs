//! What the bookkeeping publishes for the switch-in: how to load each PMC ([`LoadSpec`]), and
//! every process's list of them in an immutable, versioned map ([`LoadMap`]).

use alloc::collections::BTreeMap;
use alloc::sync::Arc;

use crate::class::HwConfig;
use crate::kernel::{Pid, Tid};
use crate::types::{PmcHandle, SampleFlags};

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
    /// The only thread it is loaded for (a thread PMC's, see `PmcFlags::THREAD`); `None` for
    /// every thread of its process.
    pub(crate) tid: Option<Tid>,
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
    /// [`crate::book::core_type_of`]).
    #[inline]
    pub(crate) fn runs_on(&self, core_type: u8) -> bool {
        self.core_type == 0 || self.core_type == core_type
    }

    /// What a switch-in claims its slot with.
    #[inline]
    pub(crate) fn image_entry(&self) -> ImageEntry {
        ImageEntry {
            row: self.row,
            handle: self.handle,
            start: self.start,
            cell: self.cell,
            sample_flags: self.sample_flags,
        }
    }

    /// Whether it is loaded when thread `tid` of its process switches in.
    #[inline]
    pub(crate) fn counts_thread(&self, tid: Tid) -> bool {
        self.tid.is_none_or(|only| only == tid)
    }
}

/// The cell of a PMC no hook hands anything back for (a system PMC).
pub(crate) const NO_CELL: u32 = u32::MAX;

/// The processes switch-in loads PMCs for, as of one version of the bookkeeping.
#[derive(Debug, Default, Clone)]
pub(crate) struct LoadMap {
    /// Increases with every map the bookkeeping builds: a CPU never goes back to an older one.
    pub(super) version: u64,
    pub(super) processes: BTreeMap<Pid, Arc<[LoadSpec]>>,
}

impl LoadMap {
    /// What to load for process `pid`.
    #[cfg(all(test, not(loom)))]
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

/// One PMC as a switch-in loads it: what its slot is claimed with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImageEntry {
    /// The row of the slot.
    pub(crate) row: u32,
    pub(crate) handle: PmcHandle,
    /// The value the counter is reloaded with after an overflow.
    pub(crate) start: u64,
    /// The link's credit cell (see [`LoadSpec::cell`]).
    pub(crate) cell: u32,
    pub(crate) sample_flags: SampleFlags,
}
