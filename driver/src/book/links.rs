//! Links between PMCs and the processes (and threads) they are attached to, and what the
//! context-switch hooks hand back for each link through its credit cell.

use super::Book;
use super::target::{Target, TargetRow};
use crate::abi::PmcFlags;
use crate::errno::Errno;
use crate::kernel::{Pid, Tid};
use crate::types::PmcHandle;
use alloc::vec::Vec;

impl Book {
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
    /// [`PmcFlags::THREAD_FLAGS`]); ENOMEM as [`Book::link_target`].
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

    /// Attaches `pmc` at `row` of process `pid`, with credit cell `cell`.
    fn attach(&mut self, pid: Pid, row: u32, pmc: PmcHandle, cell: u32) {
        let rows = self.rows;
        let target = self.targets.entry(pid).or_insert_with(|| Target::new(rows));
        target.insert(row, TargetRow { pmc, value: 0, cell });
        self.refresh_target(pid);
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
}
