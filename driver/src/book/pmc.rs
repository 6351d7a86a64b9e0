//! One allocated PMC as the bookkeeping keeps it, and how it is loaded.

use alloc::vec::Vec;

use super::target::Target;
use crate::abi::{Caps, Mode, PmcFlags, PmcId, State};
use crate::class::HwConfig;
use crate::kernel::{Cpu, Pid, Tid};
use crate::mux::MuxPmc;
use crate::publish::LoadSpec;
use crate::types::{PmcHandle, SampleFlags};

/// One allocated PMC.
#[derive(Debug, Clone)]
pub(crate) struct Pmc {
    pub(crate) id: PmcId,
    pub(crate) owner: Pid,
    pub(crate) state: State,
    /// The event as allocated (`pm_ev`).
    pub(crate) event: u32,
    pub(crate) caps: Caps,
    pub(crate) flags: PmcFlags,
    pub(crate) config: HwConfig,
    /// On a hybrid machine, its second encoding, for an event both core types have but encode
    /// differently: `config` is then loaded on CPUs of one core type only.
    pub(crate) second: Option<SecondEncoding>,
    /// Global row index (a virtual row for a multiplexed PMC: see [`crate::mux`]).
    pub(crate) row: u32,
    /// The row whose counter (slot) it is loaded on: `row`, or a multiplexed PMC's counter row.
    pub(crate) slot_row: u32,
    /// Its turn and times, if multiplexed.
    pub(crate) mux: MuxPmc,
    /// Row index within the class.
    pub(crate) class_row: u32,
    /// Mask of the counter width.
    pub(crate) width_mask: u64,
    /// Counting modes: the 64-bit count (for process PMCs, summed over every target and CPU).
    /// Sampling modes: unused.
    pub(crate) value: u64,
    /// Sampling modes: the reload count.
    pub(crate) reload: u64,
    /// The value its counter is loaded with at every (re)load: 2^width − period for hardware
    /// counters (see `Driver::counter_start`), 0 for software ones. Kept in step with `reload`.
    pub(crate) start: u64,
    /// The processes a process-mode PMC is attached to.
    pub(crate) targets: Vec<Pid>,
    /// A thread PMC's ([`PmcFlags::THREAD`]) counted threads, in its one target; empty for a
    /// PMC of FreeBSD's process scope (and a thread PMC not attached).
    pub(crate) threads: Vec<Tid>,
    /// Whether PMCGETMSR gave its owner direct RDPMC access.
    pub(crate) msr_granted: bool,
    /// Samples lost to a full ring and not yet reported by a DROPNOTIFY record.
    pub(crate) dropped: u64,
    /// Whether the host kernel counts it (see [`crate::hosted`]): the context-switch hooks
    /// never load it.
    pub(crate) hosted: bool,
    /// The credit cell of every process it was ever attached to (see [`crate::publish`]):
    /// where the context-switch hooks hand back what it counted there. Kept until it is freed,
    /// when no hook can reach them any more.
    pub(crate) cells: Vec<(Pid, u32)>,
}

/// A PMC's second encoding (see [`crate::backend::OtherCoreType`]): `config` on CPUs of core
/// type `other`, the PMC's own configuration on those of core type `primary`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SecondEncoding {
    pub(crate) primary: u8,
    pub(crate) other: u8,
    pub(crate) config: HwConfig,
}

impl Pmc {
    #[inline]
    pub(crate) fn mode(&self) -> Mode {
        self.id.mode
    }
    pub(crate) fn cpu(&self) -> Option<Cpu> {
        self.id.cpu.map(Cpu::from)
    }
    pub(crate) fn is_running(&self) -> bool {
        self.state == State::Running
    }
    /// Whether the host kernel counts it right now (see [`crate::hosted`]).
    pub(crate) fn runs_on_host(&self) -> bool {
        self.hosted && self.is_running()
    }

    /// Whether it counts thread `tid` of a target (a PMC of the process scope counts them all).
    pub(crate) fn counts_thread(&self, tid: Tid) -> bool {
        self.threads.is_empty() || self.threads.contains(&tid)
    }

    /// How to load it (`handle`) for the link whose credit cell is `cell`: one spec, or with a
    /// second encoding one per core type (same row, handle and cell, so the counts of both add
    /// up in the cell); a thread PMC has that for each thread it counts.
    pub(crate) fn load_specs(&self, handle: PmcHandle, cell: u32) -> Vec<LoadSpec> {
        let per_thread = self.core_type_specs(handle, cell);
        if self.threads.is_empty() {
            return per_thread.collect();
        }
        let each =
            |&tid: &Tid| per_thread.clone().map(move |spec| LoadSpec { tid: Some(tid), ..spec });
        self.threads.iter().flat_map(each).collect()
    }

    /// Its spec for each core type it has an encoding of (one, or two on a hybrid machine),
    /// for every thread.
    fn core_type_specs(
        &self,
        handle: PmcHandle,
        cell: u32,
    ) -> impl Iterator<Item = LoadSpec> + Clone + use<'_> {
        let first = match self.second {
            Some(second) => self.load_spec(handle, cell, second.primary, self.config),
            None => self.load_spec(handle, cell, core_type_of(self.flags), self.config),
        };
        let second =
            self.second.map(|second| self.load_spec(handle, cell, second.other, second.config));
        core::iter::once(first).chain(second)
    }

    /// The spec of [`Pmc::load_specs`] a CPU of core type `core_type` loads, if any.
    pub(crate) fn load_spec_on(
        &self,
        handle: PmcHandle,
        cell: u32,
        core_type: u8,
    ) -> Option<LoadSpec> {
        // The first of `load_specs` that runs there, without making the list (the tick loads
        // multiplexing turns with this).
        let spec = self.core_type_specs(handle, cell).find(|spec| spec.runs_on(core_type))?;
        Some(match self.threads.first() {
            Some(&tid) => LoadSpec { tid: Some(tid), ..spec },
            None => spec,
        })
    }

    /// How to load `config` on the CPUs of `core_type` (0: every CPU).
    fn load_spec(&self, handle: PmcHandle, cell: u32, core_type: u8, config: HwConfig) -> LoadSpec {
        LoadSpec {
            row: self.slot_row,
            turn: self.mux.turn,
            core_type,
            tid: None,
            handle,
            armed: config.armed(),
            start: self.start,
            cell,
            user_rdpmc: self.msr_granted,
            sample_flags: SampleFlags::new(
                self.mode().is_sampling(),
                self.flags.contains(PmcFlags::CALLCHAIN),
                self.flags.contains(PmcFlags::USERCALLCHAIN),
            )
            .logging_context_switches(self.flags.contains(PmcFlags::LOG_PROCCSW)),
        }
    }

    /// The credit cell of its link to process `pid`, if it was ever attached to it.
    pub(crate) fn cell_of(&self, pid: Pid) -> Option<u32> {
        self.cells.iter().find(|(p, _)| *p == pid).map(|&(_, cell)| cell)
    }

    /// Adds `delta` counted events to this PMC (`handle`) and, when it logs PROCEXIT records
    /// (the only use of per-process shares), to `target`'s share of it. Sampling PMCs count
    /// samples, not events, so they take nothing.
    #[inline]
    pub(crate) fn credit(&mut self, handle: PmcHandle, target: Option<&mut Target>, delta: u64) {
        if self.mode().is_sampling() {
            return;
        }
        self.value = self.value.wrapping_add(delta);
        if !self.flags.contains(PmcFlags::LOG_PROCEXIT) {
            return;
        }
        let share = target.and_then(|t| t.get_mut(self.row)).filter(|s| s.pmc == handle);
        if let Some(share) = share {
            share.value = share.value.wrapping_add(delta);
        }
    }
}

/// The core type a PMC with `flags` is restricted to (leaf 0x1A numbering), 0 for none.
pub(crate) fn core_type_of(flags: PmcFlags) -> u8 {
    if flags.contains(PmcFlags::CORE_TYPE_CORE) {
        0x40
    } else if flags.contains(PmcFlags::CORE_TYPE_ATOM) {
        0x20
    } else {
        0
    }
}
