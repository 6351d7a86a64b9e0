//! What the context-switch hooks hand back without the bookkeeping lock: one cell of atomics per
//! (PMC, target process) link, where switch-out adds what the PMC counted and lost for that
//! process, and leaves where a sampling PMC's period stands.
//!
//! The cells live in an arena that only grows (chunks allocated once, in thread context, and kept
//! until the driver goes): a cell is named by its index, so a hook reaches it with no lock and no
//! reference count, and no memory is ever freed under a reader. The bookkeeping gives a cell to a
//! link when a PMC is attached to a process and takes it back when the PMC is freed — after it
//! has been unloaded from every CPU, so no hook can still add to it — and moves what the cells
//! hold into the PMC's count under its lock ([`Book::settle`](crate::book::Book::settle)).
//!
//! The protocol between a switch-out and a system call that settles or frees the cells: the
//! switch-out adds to the cell *before* it empties the slot (Release), so a system call that sees
//! the slot empty (Acquire) sees the addition, and one that sees it full unloads the PMC on that
//! CPU after the switch-out (the hooks run with preemption disabled). The `loom` model below
//! checks it.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::sync::{AtomicU64, Ordering};

/// Cells per chunk (a power of two: a cell's chunk and place are two bit operations away, which
/// the context-switch hooks pay at every switch).
const CHUNK: usize = 1024;
/// Chunks: 1 048 576 cells in all, far more (PMC, process) links than a machine has.
const CHUNKS: usize = 1024;

/// One (PMC, target) link's counts, handed back by the hooks.
#[derive(Debug, Default)]
pub(crate) struct CreditCell {
    /// Events counted for the target and not yet in the PMC's count.
    value: AtomicU64,
    /// Samples lost to a full ring and not yet in the PMC's count.
    dropped: AtomicU64,
    /// The value a sampling PMC resumes with at the target's next switch-in (FreeBSD's
    /// `pt_pmcval`, one per process whatever CPU its threads run on).
    resume: AtomicU64,
}

impl CreditCell {
    /// Switch-out: adds what the PMC counted while loaded.
    #[inline]
    pub(crate) fn add(&self, delta: u64) {
        self.value.fetch_add(delta, Ordering::Relaxed);
    }

    /// Switch-out: adds samples the PMC lost while loaded.
    #[inline]
    pub(crate) fn add_dropped(&self, dropped: u64) {
        self.dropped.fetch_add(dropped, Ordering::Relaxed);
    }

    /// Takes what the hooks added: (events, lost samples).
    pub(crate) fn take(&self) -> (u64, u64) {
        (self.value.swap(0, Ordering::Relaxed), self.dropped.swap(0, Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn resume(&self) -> u64 {
        self.resume.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_resume(&self, value: u64) {
        self.resume.store(value, Ordering::Relaxed);
    }
}

/// One chunk of cells: fixed size, so that a cell's place in it needs no bounds check.
type Chunk = [CreditCell; CHUNK];

/// The arena of cells.
#[derive(Debug)]
pub(crate) struct Credits {
    chunks: Box<[spin::Once<Box<Chunk>>]>,
}

impl Default for Credits {
    fn default() -> Self {
        Credits { chunks: (0..CHUNKS).map(|_| spin::Once::new()).collect() }
    }
}

/// The chunk of cell `index` and its place there.
#[inline]
fn locate(index: u32) -> (usize, usize) {
    (index as usize / CHUNK, index as usize % CHUNK)
}

impl Credits {
    /// Cell `index`, if its chunk exists (lock-free: one Acquire load).
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&CreditCell> {
        let (chunk, offset) = locate(index);
        // `offset` is below CHUNK (`locate`), the chunk's length: indexed without a check.
        Some(&self.chunks.get(chunk)?.get()?[offset % CHUNK])
    }

    /// Makes cell `index` exist, allocating its chunk if needed (thread context); false when the
    /// index is beyond the arena.
    fn ensure(&self, index: u32) -> bool {
        let (chunk, _) = locate(index);
        let Some(once) = self.chunks.get(chunk) else { return false };
        once.call_once(|| {
            let cells: Box<[CreditCell]> = (0..CHUNK).map(|_| CreditCell::default()).collect();
            // The slice has CHUNK cells: the conversion to a fixed-size chunk cannot fail.
            cells.try_into().unwrap_or_else(|_| unreachable!("a chunk has CHUNK cells"))
        });
        true
    }
}

/// Which cells are given out (kept under the bookkeeping lock).
#[derive(Debug, Default)]
pub(crate) struct CellAllocator {
    free: Vec<u32>,
    next: u32,
}

impl CellAllocator {
    /// A cell for a new link, emptied, with `resume` as its resume value; `None` when the arena
    /// is exhausted.
    pub(crate) fn allocate(&mut self, credits: &Credits, resume: u64) -> Option<u32> {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                if !credits.ensure(self.next) {
                    return None;
                }
                self.next += 1;
                self.next - 1
            }
        };
        let cell = credits.get(index)?;
        cell.take();
        cell.set_resume(resume);
        Some(index)
    }

    /// Takes cell `index` back: no hook may reach it any more.
    pub(crate) fn free(&mut self, index: u32) {
        self.free.push(index);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{CellAllocator, Credits, locate};

    #[test]
    fn cells_fill_the_chunks_in_order_and_freed_ones_are_reused_empty() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(1023), (0, 1023));
        assert_eq!(locate(1024), (1, 0));
        assert_eq!(locate(u32::MAX), (4_194_303, 1023), "beyond the arena: no chunk");
        let credits = Credits::default();
        let mut cells = CellAllocator::default();
        let first = cells.allocate(&credits, 5).unwrap();
        let second = cells.allocate(&credits, 6).unwrap();
        assert_eq!((first, second), (0, 1));
        credits.get(first).unwrap().add(10);
        credits.get(first).unwrap().add_dropped(2);
        assert_eq!(credits.get(first).unwrap().resume(), 5);
        cells.free(first);
        assert_eq!(cells.allocate(&credits, 7), Some(first), "a freed cell is reused");
        assert_eq!(credits.get(first).unwrap().take(), (0, 0), "emptied when reused");
        assert_eq!(credits.get(first).unwrap().resume(), 7);
        assert!(credits.get(5000).is_none(), "no chunk, no cell");
        assert!(credits.get(u32::MAX).is_none(), "no cell for a system PMC");
    }
}

/// The switch-out's hand-back against a system call that settles the cell once the slot is
/// empty (and may then free it).
#[cfg(all(test, loom))]
mod loom_models {
    use super::CreditCell;
    use crate::machine::Slot;
    use crate::sync::{AtomicU64, Ordering};
    use crate::types::{PmcHandle, SampleFlags};
    use loom::sync::Arc;
    use loom::thread;

    #[test]
    fn a_system_call_that_sees_the_slot_empty_sees_everything_the_switch_out_handed_back() {
        loom::model(|| {
            let slot = Arc::new(Slot::with_mask(0xFF));
            slot.claim(PmcHandle::new(0, 0), 7, (0, 0), SampleFlags::default(), 0);
            slot.publish();
            let cell = Arc::new(CreditCell::default());
            let switch_out = {
                let (slot, cell) = (Arc::clone(&slot), Arc::clone(&cell));
                thread::spawn(move || {
                    slot.unpublish();
                    let delta = slot.fold_all(30);
                    cell.add(delta);
                    cell.add_dropped(1);
                    slot.release();
                })
            };
            // The system call (release, detach): a PMC no slot holds any more is settled from
            // its cell, which is then free for another link.
            let settled = Arc::new(AtomicU64::new(0));
            if slot.handle().is_none() {
                let (value, dropped) = cell.take();
                assert_eq!((value, dropped), (30, 1), "nothing handed back is missed");
                settled.store(value, Ordering::Relaxed);
            }
            switch_out.join().unwrap();
            // Settled either now or by the next settle: exactly once in all.
            let (late, _) = cell.take();
            assert_eq!(settled.load(Ordering::Relaxed) + late, 30);
        });
    }
}
