//! Handles for the C API's parsers: opaque values that name a slot and its generation, so that
//! a closed handle (or any value that was never a handle) is told apart from a live one in
//! memory bounded by the parsers open at once.
//!
//! FreeBSD's `pmclog_open` returns the parser's address, and a second `pmclog_close` of it
//! corrupts the heap. Returning an address and keeping every closed parser's address reserved
//! makes that safe, but costs memory for every parser ever opened; a handle that carries a
//! generation number costs a slot per parser open at the same time, reused after close. A slot
//! is reused 2^32 times before a handle's generation can repeat.

use std::sync::Mutex;

/// Bits of a handle below the slot index: a constant tag, so that no handle is 0 or small.
const TAG_BITS: u32 = 4;
const TAG: usize = 0b1000;
/// Bits of a handle for the slot index (the rest, on 64-bit targets, is the generation).
const INDEX_BITS: u32 = if usize::BITS >= 64 { 28 } else { 16 };
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;

/// What a slot holds.
enum Slot<T> {
    /// Nothing: free for the next open.
    Free,
    /// A live value, not in use by a call.
    Open(Box<T>),
    /// A live value that a call has checked out.
    Busy,
}

struct Entry<T> {
    generation: usize,
    slot: Slot<T>,
}

/// Why a handle names no value that can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Never a handle, or closed since.
    Unknown,
    /// Checked out by a call in progress (a caller using one handle from two threads).
    Busy,
}

/// A table of values named by handles.
pub(crate) struct HandleTable<T> {
    entries: Mutex<(Vec<Entry<T>>, Vec<usize>)>,
}

impl<T> HandleTable<T> {
    /// An empty table.
    pub(crate) const fn new() -> Self {
        HandleTable { entries: Mutex::new((Vec::new(), Vec::new())) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<Entry<T>>, Vec<usize>)> {
        // A panic while the lock was held left the table consistent (every change is one
        // assignment), so a poisoned lock is used as it is.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `value` and returns its handle; `None` if the table is full.
    pub(crate) fn insert(&self, value: Box<T>) -> Option<usize> {
        let mut guard = self.lock();
        let (entries, free) = &mut *guard;
        let index = match free.pop() {
            Some(index) => index,
            None if entries.len() <= INDEX_MASK => {
                entries.push(Entry { generation: 0, slot: Slot::Free });
                entries.len() - 1
            }
            None => return None,
        };
        let entry = &mut entries[index];
        entry.slot = Slot::Open(value);
        Some(handle(index, entry.generation))
    }

    /// The entry `handle` names, if it is live.
    fn entry(entries: &mut [Entry<T>], handle: usize) -> Option<&mut Entry<T>> {
        if handle & ((1 << TAG_BITS) - 1) != TAG {
            return None;
        }
        let index = (handle >> TAG_BITS) & INDEX_MASK;
        let entry = entries.get_mut(index)?;
        (handle == self::handle(index, entry.generation)).then_some(entry)
    }

    /// Checks the value out for a call: nobody else gets it until [`HandleTable::check_in`].
    pub(crate) fn check_out(&self, handle: usize) -> Result<Box<T>, Refused> {
        let mut guard = self.lock();
        let entry = Self::entry(&mut guard.0, handle).ok_or(Refused::Unknown)?;
        match std::mem::replace(&mut entry.slot, Slot::Busy) {
            Slot::Open(value) => Ok(value),
            other => {
                let busy = matches!(other, Slot::Busy);
                entry.slot = other;
                Err(if busy { Refused::Busy } else { Refused::Unknown })
            }
        }
    }

    /// Returns a value checked out of `handle`.
    pub(crate) fn check_in(&self, handle: usize, value: Box<T>) {
        let mut guard = self.lock();
        if let Some(entry) = Self::entry(&mut guard.0, handle) {
            entry.slot = Slot::Open(value);
        }
    }

    /// Removes the value of `handle`: the handle is dead from now on, and its slot free.
    pub(crate) fn remove(&self, handle: usize) -> Result<Box<T>, Refused> {
        let mut guard = self.lock();
        let (entries, free) = &mut *guard;
        let entry = Self::entry(entries, handle).ok_or(Refused::Unknown)?;
        let value = match std::mem::replace(&mut entry.slot, Slot::Free) {
            Slot::Open(value) => value,
            other => {
                let busy = matches!(other, Slot::Busy);
                entry.slot = other;
                return Err(if busy { Refused::Busy } else { Refused::Unknown });
            }
        };
        entry.generation = entry.generation.wrapping_add(1) & generation_mask();
        free.push((handle >> TAG_BITS) & INDEX_MASK);
        Ok(value)
    }

    /// How many slots the table has (live or free): the memory it takes.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.lock().0.len()
    }
}

/// The generations a handle can carry.
const fn generation_mask() -> usize {
    usize::MAX >> (TAG_BITS + INDEX_BITS)
}

/// The handle of slot `index` at `generation`.
fn handle(index: usize, generation: usize) -> usize {
    (generation << (TAG_BITS + INDEX_BITS)) | (index << TAG_BITS) | TAG
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_handle_is_dead_even_after_its_slot_is_reused() {
        let table = HandleTable::new();
        let first = table.insert(Box::new(1)).unwrap();
        assert_eq!(*table.remove(first).unwrap(), 1);
        assert_eq!(table.remove(first).unwrap_err(), Refused::Unknown);
        let second = table.insert(Box::new(2)).unwrap();
        assert_ne!(first, second, "a reused slot has a new generation");
        assert_eq!(table.check_out(first).unwrap_err(), Refused::Unknown);
        assert_eq!(table.remove(first).unwrap_err(), Refused::Unknown);
        assert_eq!(*table.remove(second).unwrap(), 2);
        assert_eq!(table.slots(), 1);
    }

    #[test]
    fn memory_is_bounded_by_the_values_live_at_once() {
        let table = HandleTable::new();
        let mut dead = Vec::new();
        for i in 0..100_000 {
            let handle = table.insert(Box::new(i)).unwrap();
            table.remove(handle).unwrap();
            dead.push(handle);
        }
        assert_eq!(table.slots(), 1);
        let live: Vec<usize> = (0..8).map(|i| table.insert(Box::new(i)).unwrap()).collect();
        assert_eq!(table.slots(), 8);
        // Every handle ever closed stays dead.
        assert!(dead.iter().all(|&h| table.check_out(h) == Err(Refused::Unknown)));
        for (i, handle) in live.into_iter().enumerate() {
            assert_eq!(*table.remove(handle).unwrap(), i);
        }
    }

    #[test]
    fn values_that_were_never_handles_are_refused() {
        let table = HandleTable::new();
        let live = table.insert(Box::new(7)).unwrap();
        for bogus in [0, 1, 8, live + 1, live ^ (1 << 40), usize::MAX, 0xdead_beef_0000] {
            if bogus != live {
                assert_eq!(table.check_out(bogus).unwrap_err(), Refused::Unknown, "{bogus:#x}");
            }
        }
        assert_eq!(*table.check_out(live).unwrap(), 7);
    }

    #[test]
    fn a_checked_out_value_is_busy_until_checked_in() {
        let table = HandleTable::new();
        let handle = table.insert(Box::new(5)).unwrap();
        let value = table.check_out(handle).unwrap();
        assert_eq!(table.check_out(handle).unwrap_err(), Refused::Busy);
        assert_eq!(table.remove(handle).unwrap_err(), Refused::Busy);
        table.check_in(handle, value);
        assert_eq!(*table.remove(handle).unwrap(), 5);
    }
}
