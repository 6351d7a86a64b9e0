//! The PMCs, addressed by handle.

use alloc::vec::Vec;

use super::pmc::Pmc;
use crate::types::PmcHandle;

#[derive(Debug, Clone)]
struct Entry {
    generation: u32,
    pmc: Option<Pmc>,
}

/// The PMCs, addressed by handle; a stale handle (of a freed, reused entry) finds nothing.
#[derive(Debug, Default)]
pub(super) struct PmcTable {
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

    pub(super) fn insert(&mut self, pmc: Pmc) -> PmcHandle {
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

    pub(super) fn remove(&mut self, handle: PmcHandle) -> Option<Pmc> {
        let index = handle.index();
        let entry = self.entries.get_mut(index)?;
        if PmcHandle::new(index, entry.generation) != handle {
            return None;
        }
        entry.pmc.take()
    }

    pub(super) fn handles(&self) -> impl Iterator<Item = PmcHandle> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.pmc.as_ref().map(|_| PmcHandle::new(i, e.generation)))
    }
}
