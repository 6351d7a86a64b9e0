//! The driver's bookkeeping: PMCs, their owners, the processes they are attached to, and who may
//! use each row. All of it lives behind one lock taken in thread context only (system calls and
//! the fork, exec, exit and thread hooks); the context-switch hooks see only what it publishes
//! for them (load lists, see [`crate::loads`]) and hand counts back through credit cells (see
//! [`crate::credits`]); the interrupt path never touches it.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::abi::{Caps, Mode, PmcFlags, PmcId, State};
use crate::class::HwConfig;
use crate::credits::{CellAllocator, Credits};
use crate::errno::Errno;
use crate::kernel::{Cpu, Pid, Tid};
use crate::loads::{ALL_THREADS, LoadMap, LoadSpec};
use crate::mux::{MuxPmc, NOT_MULTIPLEXED, TargetTurns};
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
    /// The credit cell of every process it was ever attached to (see [`crate::credits`]):
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
        let each = |&tid: &Tid| per_thread.clone().map(move |spec| LoadSpec { tid, ..spec });
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
            Some(&tid) => LoadSpec { tid, ..spec },
            None => spec,
        })
    }

    /// How to load `config` on the CPUs of `core_type` (0: every CPU).
    fn load_spec(&self, handle: PmcHandle, cell: u32, core_type: u8, config: HwConfig) -> LoadSpec {
        LoadSpec {
            row: self.slot_row,
            turn: self.mux.turn,
            core_type,
            tid: ALL_THREADS,
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

/// A process that PMCs are attached to (FreeBSD's `pmc_process`): at most one PMC per row,
/// indexed by row so the context-switch hooks find them without searching.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    rows: Vec<Option<TargetRow>>,
    /// The rows that have a PMC, in attach order.
    attached: Vec<u32>,
    /// What the context-switch hook loads: the running PMCs, with everything loading needs,
    /// rebuilt whenever one of them changes ([`Core::refresh_target`]) and never changed in
    /// place: every CPU gets the new list (`Driver::publish_loads`) and its hooks read it with
    /// no lock.
    pub(crate) running: Arc<[LoadSpec]>,
    /// The turns of its multiplexed PMCs (see [`crate::mux`]).
    pub(crate) turns: TargetTurns,
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

impl Target {
    fn new(rows: u32) -> Self {
        Target {
            rows: alloc::vec![None; rows as usize],
            attached: Vec::new(),
            running: Arc::from(Vec::new()),
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
    /// Counting modes: what the PMC counted for this process (`pp_pmcval`), besides what its
    /// credit cell holds.
    pub(crate) value: u64,
    /// The link's credit cell (see [`crate::credits`]).
    cell: u32,
}

/// A process that owns PMCs (FreeBSD's `pmc_owner`).
#[derive(Debug, Clone, Default)]
struct Owner {
    pmcs: Vec<PmcHandle>,
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
struct PmcTable {
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

/// Everything under the driver's lock, changed only through its methods.
#[derive(Debug)]
pub(crate) struct Core {
    pmcs: PmcTable,
    owners: BTreeMap<Pid, Owner>,
    targets: BTreeMap<Pid, Target>,
    /// Per row: 0 free, n > 0 used by n process PMCs, n < 0 used by −n system PMCs.
    disposition: Vec<i32>,
    /// Per (cpu, row): disabled by PMCADMIN.
    disabled: Vec<bool>,
    rows: u32,
    soft_events: Vec<SoftEvent>,
    /// Which processes have running PMCs (see [`Core::publish_running_pids`]), shared with the
    /// driver, whose context-switch hooks read it without the lock.
    running_pids: Arc<AtomicU64>,
    /// The credit cells, shared with the context-switch hooks, and which of them are given out.
    credits: Arc<Credits>,
    cells: CellAllocator,
    /// The newest load map given to the CPUs (see [`crate::loads`]).
    published: Arc<LoadMap>,
}

/// A process's bit in [`Core::running_pids`].
#[inline]
pub(crate) fn running_pid_bit(pid: Pid) -> u64 {
    1 << (pid as u32 % 64)
}

impl Core {
    pub(crate) fn new(
        cpus: u32,
        rows: u32,
        running_pids: Arc<AtomicU64>,
        credits: Arc<Credits>,
    ) -> Self {
        Core {
            pmcs: PmcTable::default(),
            owners: BTreeMap::new(),
            targets: BTreeMap::new(),
            disposition: alloc::vec![0; rows as usize],
            disabled: alloc::vec![false; cpus as usize * rows as usize],
            rows,
            soft_events: Vec::new(),
            running_pids,
            credits,
            cells: CellAllocator::default(),
            published: Arc::new(LoadMap::default()),
        }
    }

    pub(crate) fn pmc(&self, handle: PmcHandle) -> Option<&Pmc> {
        self.pmcs.get(handle)
    }

    pub(crate) fn pmc_mut(&mut self, handle: PmcHandle) -> Option<&mut Pmc> {
        self.pmcs.get_mut(handle)
    }

    /// Process `pid` as a target of PMCs, if any is attached to it.
    pub(crate) fn target_mut(&mut self, pid: Pid) -> Option<&mut Target> {
        self.targets.get_mut(&pid)
    }

    /// The PMCs attached to process `pid`.
    pub(crate) fn target(&self, pid: Pid) -> Option<&Target> {
        self.targets.get(&pid)
    }

    /// The PMCs `owner` owns (none if it owns none).
    pub(crate) fn owned(&self, owner: Pid) -> &[PmcHandle] {
        self.owners.get(&owner).map_or(&[], |o| &o.pmcs)
    }

    /// Whether `pid` owns PMCs.
    pub(crate) fn owns_any(&self, pid: Pid) -> bool {
        self.owners.contains_key(&pid)
    }

    /// The processes that own PMCs.
    pub(crate) fn owner_pids(&self) -> Vec<Pid> {
        self.owners.keys().copied().collect()
    }

    /// How `row` is used: 0 free, n > 0 by n process PMCs, n < 0 by −n system PMCs.
    pub(crate) fn disposition(&self, row: u32) -> i32 {
        self.disposition.get(row as usize).copied().unwrap_or(0)
    }

    /// The registered software events.
    pub(crate) fn soft_events(&self) -> &[SoftEvent] {
        &self.soft_events
    }

    /// Registers software event `name` and returns its code (the same for the same name);
    /// ENOMEM when every code is used.
    pub(crate) fn register_soft_event(&mut self, name: &str) -> Result<u32, Errno> {
        if let Some(existing) = self.soft_events.iter().find(|e| e.name == name) {
            return Ok(existing.code);
        }
        let code = crate::abi::event::SOFT_FIRST + self.soft_events.len() as u32;
        if code > crate::abi::event::SOFT_LAST {
            return Err(Errno::NoMem);
        }
        self.soft_events.push(SoftEvent { name: String::from(name), code });
        Ok(code)
    }

    /// Stores a new PMC (its row chosen), registers it with its owner and counts it on its row.
    pub(crate) fn insert(&mut self, pmc: Pmc) -> PmcHandle {
        let owner = pmc.owner;
        if let Some(disposition) = self.disposition.get_mut(pmc.row as usize) {
            *disposition += if pmc.mode().is_system() { -1 } else { 1 };
        }
        let handle = self.pmcs.insert(pmc);
        self.owners.entry(owner).or_default().pmcs.push(handle);
        handle
    }

    /// Removes a PMC (already unloaded and detached) and forgets an owner left with nothing.
    /// Its credit cells are free again: no CPU loads it any more, so no hook reaches them.
    pub(crate) fn remove(&mut self, handle: PmcHandle) -> Option<Pmc> {
        let pmc = self.pmcs.remove(handle)?;
        if let Some(disposition) = self.disposition.get_mut(pmc.row as usize) {
            *disposition -= if pmc.mode().is_system() { -1 } else { 1 };
        }
        for &(_, cell) in &pmc.cells {
            self.cells.free(cell);
        }
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

    /// Attaches PMC `handle` (at `row`) to process `pid`, with the flags that says. ENOMEM
    /// when no credit cell is left for the link.
    pub(crate) fn link_target(
        &mut self,
        handle: PmcHandle,
        row: u32,
        pid: Pid,
    ) -> Result<(), Errno> {
        let Some(pmc) = self.pmcs.get_mut(handle) else { return Ok(()) };
        let cell = match pmc.cell_of(pid) {
            Some(cell) => cell,
            None => {
                let cell = self.cells.allocate(&self.credits, pmc.start).ok_or(Errno::NoMem)?;
                pmc.cells.push((pid, cell));
                cell
            }
        };
        if !pmc.targets.contains(&pid) {
            pmc.targets.push(pid);
        }
        pmc.flags |= PmcFlags::ATTACH_DONE;
        if pid == pmc.owner {
            pmc.flags |= PmcFlags::ATTACHED_TO_OWNER;
        } else if pmc.mode().is_sampling() {
            pmc.flags |= PmcFlags::NEEDS_LOGFILE;
        }
        self.attach(pid, row, handle, cell);
        Ok(())
    }

    /// Attaches thread PMC `handle` (at `row`) to thread `tid` of process `pid` (see
    /// [`PmcFlags::THREAD_FLAGS`]); ENOMEM as [`Core::link_target`].
    pub(crate) fn link_thread(
        &mut self,
        handle: PmcHandle,
        row: u32,
        pid: Pid,
        tid: Tid,
    ) -> Result<(), Errno> {
        let Some(pmc) = self.pmcs.get_mut(handle) else { return Ok(()) };
        // Before the link, whose load list it shapes.
        pmc.threads = alloc::vec![tid];
        let linked = self.link_target(handle, row, pid);
        if linked.is_err() {
            if let Some(pmc) = self.pmcs.get_mut(handle) {
                pmc.threads.clear();
            }
        }
        linked
    }

    /// Thread `creator` of process `pid` created thread `new`: the inheriting thread PMCs that
    /// count `creator` count `new` too. Returns whether one did (the caller publishes `pid`'s
    /// load list).
    pub(crate) fn thread_created(&mut self, pid: Pid, creator: Tid, new: Tid) -> bool {
        let Some(target) = self.targets.get(&pid) else { return false };
        let handles: Vec<PmcHandle> = target.iter().map(|(_, r)| r.pmc).collect();
        let mut changed = false;
        for handle in handles {
            let Some(pmc) = self.pmcs.get_mut(handle) else { continue };
            let inherits = pmc.flags.contains(PmcFlags::THREAD_INHERIT);
            if inherits && pmc.threads.contains(&creator) && !pmc.threads.contains(&new) {
                pmc.threads.push(new);
                changed = true;
            }
        }
        if changed {
            self.refresh_target(pid);
        }
        changed
    }

    /// Thread `tid` of process `pid` exited: the thread PMCs attached to `pid` stop counting
    /// it. Returns whether one did (the caller publishes `pid`'s load list) and those that
    /// counted no other thread (the caller detaches them).
    pub(crate) fn thread_exited(&mut self, pid: Pid, tid: Tid) -> (bool, Vec<PmcHandle>) {
        let Some(target) = self.targets.get(&pid) else { return (false, Vec::new()) };
        let handles: Vec<PmcHandle> = target.iter().map(|(_, r)| r.pmc).collect();
        let (mut changed, mut orphaned) = (false, Vec::new());
        for handle in handles {
            let Some(pmc) = self.pmcs.get_mut(handle) else { continue };
            if !pmc.threads.contains(&tid) {
                continue;
            }
            if pmc.threads.len() == 1 {
                // Left as it is for the detach, which settles what the thread counted.
                orphaned.push(handle);
            } else {
                pmc.threads.retain(|&t| t != tid);
                changed = true;
            }
        }
        if changed {
            self.refresh_target(pid);
        }
        (changed, orphaned)
    }

    /// Detaches PMC `handle` (at `row`) from process `pid`.
    pub(crate) fn unlink_target(&mut self, handle: PmcHandle, row: u32, pid: Pid) {
        if let Some(pmc) = self.pmc_mut(handle) {
            pmc.targets.retain(|&t| t != pid);
            // A thread PMC has one target: its threads go with it.
            pmc.threads.clear();
            if pid == pmc.owner {
                pmc.flags.remove(PmcFlags::ATTACHED_TO_OWNER);
            }
        }
        self.detach(pid, row, handle);
    }

    /// Moves what the context-switch hooks handed back for PMC `handle` (its credit cells) into
    /// its count, its targets' shares and its lost samples; returns the samples lost.
    pub(crate) fn settle(&mut self, handle: PmcHandle) -> u64 {
        let Some(pmc) = self.pmcs.get_mut(handle) else { return 0 };
        let mut lost = 0;
        for link in 0..pmc.cells.len() {
            let (pid, cell) = pmc.cells[link];
            let Some((delta, dropped)) = self.credits.get(cell).map(|c| c.take()) else { continue };
            lost += dropped;
            pmc.credit(handle, self.targets.get_mut(&pid), delta);
        }
        pmc.dropped += lost;
        lost
    }

    /// Takes what the hooks handed back to PMC `handle`'s cell for `pid`: (events, lost
    /// samples).
    pub(crate) fn take_cell(&self, handle: PmcHandle, pid: Pid) -> (u64, u64) {
        let cell = self.pmcs.get(handle).and_then(|p| p.cell_of(pid));
        cell.and_then(|c| self.credits.get(c)).map_or((0, 0), |c| c.take())
    }

    /// Adds `delta` counted events to PMC `handle` and to target `pid`'s share of it, and
    /// `dropped` lost samples.
    pub(crate) fn credit(&mut self, handle: PmcHandle, pid: Pid, delta: u64, dropped: u64) {
        if let Some(pmc) = self.pmcs.get_mut(handle) {
            pmc.credit(handle, self.targets.get_mut(&pid), delta);
            pmc.dropped += dropped;
        }
    }

    /// Attaches `pmc` at `row` of process `pid`, with credit cell `cell`.
    fn attach(&mut self, pid: Pid, row: u32, pmc: PmcHandle, cell: u32) {
        let rows = self.rows;
        let target = self.targets.entry(pid).or_insert_with(|| Target::new(rows));
        target.insert(row, TargetRow { pmc, value: 0, cell });
        self.refresh_target(pid);
    }

    /// Rebuilds what the context-switch hook loads for process `pid` (the caller then
    /// publishes it to every CPU).
    pub(crate) fn refresh_target(&mut self, pid: Pid) {
        let Core { pmcs, targets, credits, .. } = self;
        let Some(target) = targets.get_mut(&pid) else { return };
        let mut running = Vec::with_capacity(target.running.len() + 1);
        for (_, row) in target.iter() {
            if let Some(pmc) = pmcs.get(row.pmc).filter(|p| p.is_running() && !p.hosted) {
                for spec in pmc.load_specs(row.pmc, row.cell) {
                    // A PMC that kept running with the same reload keeps its place in the
                    // period; one that starts (again) begins a whole one. (It is not loaded
                    // anywhere when it starts, so no switch-out writes the cell meanwhile.)
                    let kept = target
                        .running
                        .iter()
                        .any(|p| p.handle == spec.handle && p.start == spec.start);
                    if !kept {
                        if let Some(cell) = credits.get(row.cell) {
                            cell.set_resume(spec.start);
                        }
                    }
                    running.push(spec);
                }
            }
        }
        // PMCs that are not multiplexed first: the switch-in loads them before any multiplexed
        // one could take their counter.
        running.sort_by_key(|s| s.turn != NOT_MULTIPLEXED);
        target.turns = TargetTurns::of(running.iter().map(|s| s.turn), target.turns);
        target.running = Arc::from(running);
        self.publish_running_pids();
    }

    /// Sets a PMC's state and refreshes its targets' load lists; returns the targets (whose
    /// lists the caller publishes).
    pub(crate) fn set_state(&mut self, handle: PmcHandle, state: State) -> Vec<Pid> {
        let Some(pmc) = self.pmcs.get_mut(handle) else { return Vec::new() };
        pmc.state = state;
        self.refresh_targets_of(handle)
    }

    /// Refreshes the load lists of every process `handle` is attached to (after a change to the
    /// PMC that loading depends on); returns them.
    pub(crate) fn refresh_targets_of(&mut self, handle: PmcHandle) -> Vec<Pid> {
        let targets = self.pmcs.get(handle).map(|p| p.targets.clone()).unwrap_or_default();
        for &pid in &targets {
            self.refresh_target(pid);
        }
        targets
    }

    /// A new version of the load map with the current lists of processes `pids`, for the
    /// caller to give every CPU (see [`crate::loads`]).
    pub(crate) fn publish_loads(&mut self, pids: &[Pid]) -> Arc<LoadMap> {
        let changes = pids.iter().map(|&pid| {
            let list = self.targets.get(&pid).map(|t| Arc::clone(&t.running));
            (pid, list.filter(|r| !r.is_empty()))
        });
        let map = Arc::new(self.published.with(changes));
        self.published = Arc::clone(&map);
        map
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
