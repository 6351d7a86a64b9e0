//! What the context-switch hooks load: each target's list of running PMCs, rebuilt when one of
//! them changes, the versioned load map the lists are published in, and the running pids.

use super::Book;
use crate::abi::State;
use crate::kernel::Pid;
use crate::mux::{NOT_MULTIPLEXED, TargetTurns};
use crate::publish::LoadMap;
use crate::publish::running_pid_bit;
use crate::types::PmcHandle;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

impl Book {
    /// Rebuilds what the context-switch hook loads for process `pid` (the caller then
    /// publishes it to every CPU).
    pub(crate) fn refresh_target(&mut self, pid: Pid) {
        let Book { pmcs, targets, credits, .. } = self;
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
    /// caller to give every CPU (see [`crate::publish`]).
    pub(crate) fn publish_loads(&mut self, pids: &[Pid]) -> Arc<LoadMap> {
        let changes = pids.iter().map(|&pid| {
            let list = self.targets.get(&pid).map(|t| Arc::clone(&t.running));
            (pid, list.filter(|r| !r.is_empty()))
        });
        let map = Arc::new(self.published.with(changes));
        self.published = Arc::clone(&map);
        map
    }

    /// Publishes which processes have running PMCs for the context-switch hooks to read
    /// without the lock: bit `pid mod 64` of [`Book::running_pids`] is set for each (a clear
    /// bit means none; a set one may be another process's).
    pub(super) fn publish_running_pids(&self) {
        let mut bits = 0u64;
        for (pid, target) in &self.targets {
            if !target.running.is_empty() {
                bits |= running_pid_bit(*pid);
            }
        }
        // SeqCst: see `Driver::switch_in`.
        self.running_pids.store(bits, Ordering::SeqCst);
    }
}
