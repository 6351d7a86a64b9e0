//! The driver's bookkeeping: PMCs, their owners, the processes they are attached to, and who may
//! use each row. All of it lives behind one lock taken in thread context only (system calls and
//! the fork, exec, exit and thread hooks); the context-switch hooks see only what it publishes
//! for them (load lists, see [`crate::publish`]) and hand counts back through credit cells (see
//! [`crate::publish`]); the interrupt path never touches it.

mod links;
mod load_lists;
mod pmc;
mod table;
mod target;

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::AtomicU64;

use crate::errno::Errno;
use crate::kernel::{Cpu, Pid};
use crate::publish::LoadMap;
use crate::publish::{CellAllocator, Credits};
use crate::refusal::Cause;
use crate::types::PmcHandle;

pub(crate) use self::pmc::{Pmc, SecondEncoding, core_type_of};
use self::table::PmcTable;
pub(crate) use self::target::Target;

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

/// The bookkeeping (FreeBSD's owner, PMC and process tables): everything under the driver's
/// lock, changed only through its methods.
#[derive(Debug)]
pub(crate) struct Book {
    pmcs: PmcTable,
    owners: BTreeMap<Pid, Owner>,
    targets: BTreeMap<Pid, Target>,
    /// Per row: 0 free, n > 0 used by n process PMCs, n < 0 used by −n system PMCs.
    disposition: Vec<i32>,
    /// Per (cpu, row): disabled by PMCADMIN.
    disabled: Vec<bool>,
    rows: u32,
    soft_events: Vec<SoftEvent>,
    /// Which processes have running PMCs (see [`Book::publish_running_pids`]), shared with the
    /// driver, whose context-switch hooks read it without the lock.
    running_pids: Arc<AtomicU64>,
    /// The credit cells, shared with the context-switch hooks, and which of them are given out.
    credits: Arc<Credits>,
    cells: CellAllocator,
    /// The newest load map given to the CPUs (see [`crate::publish`]).
    published: Arc<LoadMap>,
}

impl Book {
    pub(crate) fn new(
        cpus: u32,
        rows: u32,
        running_pids: Arc<AtomicU64>,
        credits: Arc<Credits>,
    ) -> Self {
        Book {
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
    pub(crate) fn find(&self, owner: Pid, id: u32) -> Result<PmcHandle, Cause> {
        let owned = self.owners.get(&owner).ok_or(Cause::NoPmcs)?;
        owned
            .pmcs
            .iter()
            .copied()
            .find(|&h| self.pmc(h).is_some_and(|p| p.id.to_u32() == id))
            .ok_or(Cause::UnknownPmc)
    }

    /// Every live PMC.
    pub(crate) fn handles(&self) -> impl Iterator<Item = PmcHandle> + '_ {
        self.pmcs.handles()
    }

    /// The system PMC allocated on `row` of `cpu`, if any.
    pub(crate) fn system_pmc_on(&self, cpu: Cpu, row: u32) -> Option<PmcHandle> {
        self.handles().find(|&h| self.pmc(h).is_some_and(|p| p.row == row && p.cpu() == Some(cpu)))
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
