//! The driver's bookkeeping: PMCs, their owners, the processes they are attached to, and who may
//! use each row. All of it lives behind one lock taken in thread context only (system calls and
//! the fork, exec, exit and context-switch hooks); the interrupt path never touches it.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::abi::{Caps, Mode, PmcFlags, PmcId, State};
use crate::class::HwConfig;
use crate::errno::Errno;
use crate::kernel::{Cpu, Pid};
use crate::mux::{MuxPmc, NOT_MULTIPLEXED, TargetTurns};
use crate::percpu::{PmcHandle, SampleFlags};

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
    /// Whether PMCGETMSR gave its owner direct RDPMC access.
    pub(crate) msr_granted: bool,
    /// Samples lost to a full ring and not yet reported by a DROPNOTIFY record.
    pub(crate) dropped: u64,
    /// Whether the host kernel counts it (see [`crate::hosted`]): the context-switch hooks
    /// never load it.
    pub(crate) hosted: bool,
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

/// A process that PMCs are attached to (FreeBSD's `pmc_process`): at most one PMC per row,
/// indexed by row so the context-switch hooks find them without searching.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    rows: Vec<Option<TargetRow>>,
    /// The rows that have a PMC, in attach order.
    attached: Vec<u32>,
    /// What the context-switch hook loads: the running PMCs, with everything loading needs,
    /// rebuilt whenever one of them changes ([`Core::refresh_target`]).
    pub(crate) running: Vec<LoadSpec>,
    /// The turns of its multiplexed PMCs (see [`crate::mux`]).
    pub(crate) turns: TargetTurns,
}

/// How to load one PMC on its row: all the context-switch hook needs, without looking the PMC
/// up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadSpec {
    /// The row of the slot (counter) it is loaded on.
    pub(crate) row: u32,
    /// Its multiplexing turn, or [`NOT_MULTIPLEXED`].
    pub(crate) turn: u8,
    /// The only core type it is loaded on (leaf 0x1A numbering), or 0 for every CPU.
    pub(crate) core_type: u8,
    pub(crate) handle: PmcHandle,
    /// The PMC's configuration as loading writes it ([`HwConfig::armed`]).
    pub(crate) armed: HwConfig,
    /// The value the counter is reloaded with after an overflow.
    pub(crate) start: u64,
    /// The value the counter is loaded with at switch-in: `start`, or for a sampling PMC where
    /// the process left off at its last switch-out (FreeBSD's `pt_pmcval`), so that every
    /// `reload` events of the process give one sample however often it is switched.
    pub(crate) resume: u64,
    /// Whether the owner may read the counter with RDPMC.
    pub(crate) user_rdpmc: bool,
    /// How the PMC samples.
    pub(crate) sample_flags: SampleFlags,
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

impl LoadSpec {
    /// Whether it is loaded on a CPU of core type `core_type` (see [`core_type_of`]).
    #[inline]
    pub(crate) fn runs_on(&self, core_type: u8) -> bool {
        self.core_type == 0 || self.core_type == core_type
    }

    pub(crate) fn of(handle: PmcHandle, pmc: &Pmc) -> Self {
        LoadSpec {
            row: pmc.slot_row,
            turn: pmc.mux.turn,
            core_type: core_type_of(pmc.flags),
            handle,
            armed: pmc.config.armed(),
            start: pmc.start,
            resume: pmc.start,
            user_rdpmc: pmc.msr_granted,
            sample_flags: SampleFlags::new(
                pmc.mode().is_sampling(),
                pmc.flags.contains(PmcFlags::CALLCHAIN),
                pmc.flags.contains(PmcFlags::USERCALLCHAIN),
            ),
        }
    }
}

impl Target {
    fn new(rows: u32) -> Self {
        Target {
            rows: alloc::vec![None; rows as usize],
            attached: Vec::new(),
            running: Vec::new(),
            turns: TargetTurns::default(),
        }
    }

    /// The PMC attached at `row`.
    pub(crate) fn get(&self, row: u32) -> Option<&TargetRow> {
        self.rows.get(row as usize)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, row: u32) -> Option<&mut TargetRow> {
        self.rows.get_mut(row as usize)?.as_mut()
    }

    fn insert(&mut self, row: u32, entry: TargetRow) {
        if let Some(slot) = self.rows.get_mut(row as usize) {
            if slot.replace(entry).is_none() {
                self.attached.push(row);
            }
        }
    }

    fn remove(&mut self, row: u32) {
        if let Some(slot) = self.rows.get_mut(row as usize) {
            if slot.take().is_some() {
                self.attached.retain(|&r| r != row);
            }
        }
    }

    /// The attached PMCs with their rows.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &TargetRow)> {
        self.attached.iter().filter_map(|&row| Some((row, self.get(row)?)))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.attached.is_empty()
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct TargetRow {
    pub(crate) pmc: PmcHandle,
    /// Counting modes: what the PMC counted for this process (`pp_pmcval`).
    pub(crate) value: u64,
}

/// A process that owns PMCs (FreeBSD's `pmc_owner`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Owner {
    pub(crate) pmcs: Vec<PmcHandle>,
}

/// A registered software event.
#[derive(Debug, Clone)]
pub(crate) struct SoftEvent {
    pub(crate) name: String,
    pub(crate) code: u32,
}

#[derive(Debug, Clone)]
struct Entry {
    generation: u32,
    pmc: Option<Pmc>,
}

/// The PMCs, addressed by handle; a stale handle (of a freed, reused entry) finds nothing.
#[derive(Debug, Default)]
pub(crate) struct PmcTable {
    entries: Vec<Entry>,
}

impl PmcTable {
    #[inline]
    pub(crate) fn get(&self, handle: PmcHandle) -> Option<&Pmc> {
        let entry = self.entries.get(handle.index())?;
        if PmcHandle::new(handle.index(), entry.generation) != handle {
            return None;
        }
        entry.pmc.as_ref()
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, handle: PmcHandle) -> Option<&mut Pmc> {
        let entry = self.entries.get_mut(handle.index())?;
        if PmcHandle::new(handle.index(), entry.generation) != handle {
            return None;
        }
        entry.pmc.as_mut()
    }

    fn insert(&mut self, pmc: Pmc) -> PmcHandle {
        match self.entries.iter().position(|e| e.pmc.is_none()) {
            Some(index) => {
                let entry = &mut self.entries[index];
                entry.generation = entry.generation.wrapping_add(1);
                entry.pmc = Some(pmc);
                PmcHandle::new(index, entry.generation)
            }
            None => {
                self.entries.push(Entry { generation: 0, pmc: Some(pmc) });
                PmcHandle::new(self.entries.len() - 1, 0)
            }
        }
    }

    fn remove(&mut self, handle: PmcHandle) -> Option<Pmc> {
        let index = handle.index();
        let entry = self.entries.get_mut(index)?;
        if PmcHandle::new(index, entry.generation) != handle {
            return None;
        }
        entry.pmc.take()
    }

    fn handles(&self) -> impl Iterator<Item = PmcHandle> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.pmc.as_ref().map(|_| PmcHandle::new(i, e.generation)))
    }
}

/// Everything under the driver's lock.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) pmcs: PmcTable,
    pub(crate) owners: BTreeMap<Pid, Owner>,
    pub(crate) targets: BTreeMap<Pid, Target>,
    /// Per row: 0 free, n > 0 used by n process PMCs, n < 0 used by −n system PMCs.
    pub(crate) disposition: Vec<i32>,
    /// Per (cpu, row): disabled by PMCADMIN.
    disabled: Vec<bool>,
    rows: u32,
    pub(crate) soft_events: Vec<SoftEvent>,
    /// Which processes have running PMCs (see [`Core::publish_running_pids`]), shared with the
    /// driver, whose context-switch hooks read it without the lock.
    running_pids: Arc<AtomicU64>,
}

/// A process's bit in [`Core::running_pids`].
#[inline]
pub(crate) fn running_pid_bit(pid: Pid) -> u64 {
    1 << (pid as u32 % 64)
}

impl Core {
    pub(crate) fn new(cpus: u32, rows: u32, running_pids: Arc<AtomicU64>) -> Self {
        Core {
            pmcs: PmcTable::default(),
            owners: BTreeMap::new(),
            targets: BTreeMap::new(),
            disposition: alloc::vec![0; rows as usize],
            disabled: alloc::vec![false; cpus as usize * rows as usize],
            rows,
            soft_events: Vec::new(),
            running_pids,
        }
    }

    pub(crate) fn pmc(&self, handle: PmcHandle) -> Option<&Pmc> {
        self.pmcs.get(handle)
    }

    pub(crate) fn pmc_mut(&mut self, handle: PmcHandle) -> Option<&mut Pmc> {
        self.pmcs.get_mut(handle)
    }

    /// Stores a new PMC and registers it with its owner.
    pub(crate) fn insert(&mut self, pmc: Pmc) -> PmcHandle {
        let owner = pmc.owner;
        let handle = self.pmcs.insert(pmc);
        self.owners.entry(owner).or_default().pmcs.push(handle);
        handle
    }

    /// Removes a PMC (already unloaded and detached) and forgets an owner left with nothing.
    pub(crate) fn remove(&mut self, handle: PmcHandle) -> Option<Pmc> {
        let pmc = self.pmcs.remove(handle)?;
        if let Some(owner) = self.owners.get_mut(&pmc.owner) {
            owner.pmcs.retain(|&h| h != handle);
            if owner.pmcs.is_empty() {
                self.owners.remove(&pmc.owner);
            }
        }
        Some(pmc)
    }

    /// The caller's PMC with this id: ESRCH if the caller owns no PMC, EINVAL if none has the id.
    pub(crate) fn find(&self, owner: Pid, id: u32) -> Result<PmcHandle, Errno> {
        let owned = self.owners.get(&owner).ok_or(Errno::Srch)?;
        owned
            .pmcs
            .iter()
            .copied()
            .find(|&h| self.pmc(h).is_some_and(|p| p.id.to_u32() == id))
            .ok_or(Errno::Inval)
    }

    /// Every live PMC.
    pub(crate) fn handles(&self) -> impl Iterator<Item = PmcHandle> + '_ {
        self.pmcs.handles()
    }

    /// The system PMC allocated on `row` of `cpu`, if any.
    pub(crate) fn system_pmc_on(&self, cpu: Cpu, row: u32) -> Option<PmcHandle> {
        self.handles().find(|&h| self.pmc(h).is_some_and(|p| p.row == row && p.cpu() == Some(cpu)))
    }

    /// Attaches PMC `handle` (at `row`) to process `pid`, with the flags that says.
    pub(crate) fn link_target(&mut self, handle: PmcHandle, row: u32, pid: Pid) {
        let Some(pmc) = self.pmc_mut(handle) else { return };
        if !pmc.targets.contains(&pid) {
            pmc.targets.push(pid);
        }
        pmc.flags |= PmcFlags::ATTACH_DONE;
        if pid == pmc.owner {
            pmc.flags |= PmcFlags::ATTACHED_TO_OWNER;
        } else if pmc.mode().is_sampling() {
            pmc.flags |= PmcFlags::NEEDS_LOGFILE;
        }
        self.attach(pid, row, handle);
    }

    /// Detaches PMC `handle` (at `row`) from process `pid`.
    pub(crate) fn unlink_target(&mut self, handle: PmcHandle, row: u32, pid: Pid) {
        if let Some(pmc) = self.pmc_mut(handle) {
            pmc.targets.retain(|&t| t != pid);
            if pid == pmc.owner {
                pmc.flags.remove(PmcFlags::ATTACHED_TO_OWNER);
            }
        }
        self.detach(pid, row, handle);
    }

    /// Adds `delta` counted events to PMC `handle` and to target `pid`'s share of it, and
    /// `dropped` lost samples.
    pub(crate) fn credit(&mut self, handle: PmcHandle, pid: Pid, delta: u64, dropped: u64) {
        if let Some(pmc) = self.pmcs.get_mut(handle) {
            pmc.credit(handle, self.targets.get_mut(&pid), delta);
            pmc.dropped += dropped;
        }
    }

    /// Attaches `pmc` at `row` of process `pid`.
    pub(crate) fn attach(&mut self, pid: Pid, row: u32, pmc: PmcHandle) {
        let rows = self.rows;
        let target = self.targets.entry(pid).or_insert_with(|| Target::new(rows));
        target.insert(row, TargetRow { pmc, value: 0 });
        self.refresh_target(pid);
    }

    /// Rebuilds what the context-switch hook loads for process `pid`.
    pub(crate) fn refresh_target(&mut self, pid: Pid) {
        let Core { pmcs, targets, .. } = self;
        let Some(target) = targets.get_mut(&pid) else { return };
        let previous = core::mem::take(&mut target.running);
        let mut running = Vec::with_capacity(previous.len() + 1);
        for (_, row) in target.iter() {
            if let Some(pmc) = pmcs.get(row.pmc).filter(|p| p.is_running() && !p.hosted) {
                let mut spec = LoadSpec::of(row.pmc, pmc);
                // A PMC that kept running with the same reload keeps its place in the period.
                let kept =
                    previous.iter().find(|p| p.handle == spec.handle && p.start == spec.start);
                spec.resume = kept.map_or(spec.start, |p| p.resume);
                running.push(spec);
            }
        }
        // PMCs that are not multiplexed first: the switch-in loads them before any multiplexed
        // one could take their counter.
        running.sort_by_key(|s| s.turn != NOT_MULTIPLEXED);
        target.turns = TargetTurns::of(&running, target.turns);
        target.running = running;
        self.publish_running_pids();
    }

    /// Sets a PMC's state and refreshes its targets' load lists.
    pub(crate) fn set_state(&mut self, handle: PmcHandle, state: State) {
        let Some(pmc) = self.pmcs.get_mut(handle) else { return };
        pmc.state = state;
        self.refresh_targets_of(handle);
    }

    /// Refreshes the load lists of every process `handle` is attached to (after a change to the
    /// PMC that loading depends on).
    pub(crate) fn refresh_targets_of(&mut self, handle: PmcHandle) {
        let targets = self.pmcs.get(handle).map(|p| p.targets.clone()).unwrap_or_default();
        for pid in targets {
            self.refresh_target(pid);
        }
    }

    /// Detaches whatever is at `row` of process `pid` if it is `pmc`; forgets a process left
    /// with nothing attached.
    pub(crate) fn detach(&mut self, pid: Pid, row: u32, pmc: PmcHandle) {
        let Some(target) = self.targets.get_mut(&pid) else { return };
        if target.get(row).is_some_and(|r| r.pmc == pmc) {
            target.remove(row);
        }
        if target.is_empty() {
            self.targets.remove(&pid);
            self.publish_running_pids();
        } else {
            self.refresh_target(pid);
        }
    }

    /// Publishes which processes have running PMCs for the context-switch hooks to read
    /// without the lock: bit `pid mod 64` of [`Core::running_pids`] is set for each (a clear
    /// bit means none; a set one may be another process's).
    fn publish_running_pids(&self) {
        let mut bits = 0u64;
        for (pid, target) in &self.targets {
            if !target.running.is_empty() {
                bits |= running_pid_bit(*pid);
            }
        }
        // SeqCst: see `Driver::switch_in`.
        self.running_pids.store(bits, Ordering::SeqCst);
    }

    pub(crate) fn is_disabled(&self, cpu: Cpu, row: u32) -> bool {
        self.disabled.get(cpu as usize * self.rows as usize + row as usize).copied().unwrap_or(true)
    }

    pub(crate) fn set_disabled(&mut self, cpu: Cpu, row: u32, disabled: bool) {
        if let Some(flag) = self.disabled.get_mut(cpu as usize * self.rows as usize + row as usize)
        {
            *flag = disabled;
        }
    }
}
