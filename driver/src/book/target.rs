//! A process PMCs are attached to: its PMCs by row, and what its switch-in loads.

use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::mux::TargetTurns;
use crate::publish::LoadSpec;
use crate::types::PmcHandle;

/// A process that PMCs are attached to (FreeBSD's `pmc_process`): at most one PMC per row,
/// indexed by row so the context-switch hooks find them without searching.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    rows: Vec<Option<TargetRow>>,
    /// The rows that have a PMC, in attach order.
    attached: Vec<u32>,
    /// What the context-switch hook loads: the running PMCs, with everything loading needs,
    /// rebuilt whenever one of them changes ([`Book::refresh_target`]) and never changed in
    /// place: every CPU gets the new list (`Driver::publish_loads`) and its hooks read it with
    /// no lock.
    ///
    /// [`Book::refresh_target`]: super::Book::refresh_target
    pub(crate) running: Arc<[LoadSpec]>,
    /// The turns of its multiplexed PMCs (see [`crate::mux`]).
    pub(crate) turns: TargetTurns,
}

impl Target {
    pub(super) fn new(rows: u32) -> Self {
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

    pub(super) fn insert(&mut self, row: u32, entry: TargetRow) {
        if let Some(slot) = self.rows.get_mut(row as usize) {
            if slot.replace(entry).is_none() {
                self.attached.push(row);
            }
        }
    }

    pub(super) fn remove(&mut self, row: u32) {
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
    /// The link's credit cell (see [`crate::publish`]).
    pub(super) cell: u32,
}
