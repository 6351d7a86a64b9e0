//! One address space's executable mappings, as the log's MAP_IN, MAP_OUT, PROCEXEC and
//! PROCFORK records build it, and the look-up of the mapping that covers a program counter.
//!
//! A JIT maps a region per compiled function, so a long log holds millions of MAP_IN records for
//! one process: each record costs O(log n) (a search tree by start address), and a fork shares
//! its parent's table until one of them changes it.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use super::image::Image;

/// User-space addresses end here on x86-64 (the canonical lower half).
pub(crate) const USER_END: u64 = 0x0000_8000_0000_0000;

/// How many mappings below a program counter are tried (mappings rarely overlap).
const OVERLAP_SCAN: usize = 8;

/// One executable mapping of a process: `[lo, hi)` in run-time addresses.
#[derive(Debug, Clone)]
pub(crate) struct Mapping {
    pub(crate) lo: u64,
    /// `None` when the image could not be read (or is not read yet): it then reaches to the
    /// next mapping.
    pub(crate) hi: Option<u64>,
    /// How its run-time addresses become the image's link-time addresses.
    pub(crate) place: Place,
    /// The image's name, as an index into the builder's names.
    pub(crate) name: u32,
    pub(crate) image: Option<Arc<Image>>,
    /// The path of an image not read yet: MAP_IN records name every mapping of a process,
    /// and most are never sampled, so an image is read when a program counter first falls in
    /// its mapping.
    pub(crate) pending: Option<Arc<[u8]>>,
}

/// Where an image is in an address space: how a run-time address in its mapping becomes one of
/// the image's link-time addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Moved as a whole: the run-time address minus this bias (0 for an `ET_EXEC` image; a
    /// PIE's `pl_dyn`, a run-time linker's `pl_base`).
    Moved(u64),
    /// Mapped from its file: the run-time address minus this base is a file offset (a MAP_IN
    /// start, where the mapping's file offset 0 would be), made an address through the image's
    /// `PT_LOAD` headers.
    FileBase(u64),
}

/// The mappings of one address space by start address (one per start: a MAP_IN at the start
/// of another replaces it). Cloning shares the table until either copy changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct AddressSpace {
    maps: Arc<BTreeMap<u64, Mapping>>,
}

impl AddressSpace {
    /// Adds `mapping`, replacing the one that starts where it does.
    pub(crate) fn insert(&mut self, mapping: Mapping) {
        Arc::make_mut(&mut self.maps).insert(mapping.lo, mapping);
    }

    /// MAP_OUT: removes the mappings that start in `[start, end)`.
    pub(crate) fn unmap(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let doomed: Vec<u64> = self.maps.range(start..end).map(|(&lo, _)| lo).collect();
        if doomed.is_empty() {
            return;
        }
        let maps = Arc::make_mut(&mut self.maps);
        for lo in doomed {
            maps.remove(&lo);
        }
    }

    /// The mapping that covers `pc`. A mapping of an unreadable image reaches to the next
    /// mapping (and, in a process (`user_space`), not past the user half of the address space).
    pub(crate) fn find(&self, pc: u64, user_space: bool) -> Option<&Mapping> {
        for (&lo, m) in self.maps.range(..=pc).rev().take(OVERLAP_SCAN) {
            let hi = match m.hi {
                Some(hi) => hi,
                None => {
                    let next = self.maps.range((Bound::Excluded(lo), Bound::Unbounded)).next();
                    let limit = if user_space && lo < USER_END { USER_END } else { u64::MAX };
                    next.map_or(limit, |(&n, _)| n.min(limit))
                }
            };
            if pc < hi {
                return Some(m);
            }
        }
        None
    }

    /// Takes the pending image path of the mapping that covers `pc`, if that mapping's image
    /// was not read yet; with its start and place.
    pub(crate) fn take_pending(
        &mut self,
        pc: u64,
        user_space: bool,
    ) -> Option<(u64, Place, Arc<[u8]>)> {
        let lo = self.find(pc, user_space).filter(|m| m.pending.is_some())?.lo;
        let mapping = Arc::make_mut(&mut self.maps).get_mut(&lo)?;
        Some((lo, mapping.place, mapping.pending.take()?))
    }

    /// Replaces the mapping that starts at `lo` with `mapping` (which may start elsewhere: an
    /// `ET_EXEC` image moves to its link-time address once read).
    pub(crate) fn replace(&mut self, lo: u64, mapping: Mapping) {
        let maps = Arc::make_mut(&mut self.maps);
        maps.remove(&lo);
        maps.insert(mapping.lo, mapping);
    }

    /// The number of mappings.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.maps.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unread(lo: u64, name: u32) -> Mapping {
        Mapping {
            lo,
            hi: None,
            place: Place::FileBase(lo),
            name,
            image: None,
            pending: Some(Arc::from(&b"x"[..])),
        }
    }

    fn sized(lo: u64, hi: u64, name: u32) -> Mapping {
        Mapping { lo, hi: Some(hi), place: Place::Moved(0), name, image: None, pending: None }
    }

    fn name_at(space: &AddressSpace, pc: u64) -> Option<u32> {
        space.find(pc, true).map(|m| m.name)
    }

    #[test]
    fn an_unread_mapping_reaches_to_the_next_one_and_not_past_user_space() {
        let mut space = AddressSpace::default();
        space.insert(unread(0x2000, 2));
        space.insert(unread(0x1000, 1));
        assert_eq!(name_at(&space, 0xfff), None);
        assert_eq!(name_at(&space, 0x1fff), Some(1));
        assert_eq!(name_at(&space, 0x2000), Some(2));
        assert_eq!(name_at(&space, USER_END - 1), Some(2));
        assert_eq!(name_at(&space, USER_END), None);
        assert_eq!(space.find(USER_END, false).map(|m| m.name), Some(2));
    }

    #[test]
    fn a_sized_mapping_ends_at_its_end_and_lower_overlapping_ones_are_found() {
        let mut space = AddressSpace::default();
        space.insert(sized(0x1000, 0x9000, 1));
        space.insert(sized(0x2000, 0x3000, 2));
        assert_eq!(name_at(&space, 0x2500), Some(2));
        // Past the inner mapping, the outer one below it still covers the address.
        assert_eq!(name_at(&space, 0x3500), Some(1));
        assert_eq!(name_at(&space, 0x9000), None);
    }

    #[test]
    fn a_mapping_at_the_same_start_replaces_the_old_one() {
        let mut space = AddressSpace::default();
        space.insert(sized(0x1000, 0x2000, 1));
        space.insert(sized(0x1000, 0x2000, 2));
        assert_eq!(space.len(), 1);
        assert_eq!(name_at(&space, 0x1800), Some(2));
    }

    #[test]
    fn unmap_removes_the_mappings_that_start_in_the_range_only() {
        let mut space = AddressSpace::default();
        for (i, lo) in [0x1000, 0x2000, 0x3000, 0x4000].into_iter().enumerate() {
            space.insert(sized(lo, lo + 0x1000, i as u32));
        }
        space.unmap(0x2000, 0x4000);
        assert_eq!(space.len(), 2);
        assert_eq!(name_at(&space, 0x2800), None);
        assert_eq!(name_at(&space, 0x4800), Some(3));
        // An empty or reversed range (a damaged record) changes nothing and does not panic.
        space.unmap(0x4000, 0x4000);
        space.unmap(0x5000, 0x1000);
        assert_eq!(space.len(), 2);
    }

    #[test]
    fn a_forked_copy_is_independent_of_its_parent() {
        let mut parent = AddressSpace::default();
        parent.insert(sized(0x1000, 0x2000, 1));
        let mut child = parent.clone();
        child.insert(sized(0x5000, 0x6000, 2));
        parent.unmap(0x1000, 0x2000);
        assert_eq!(name_at(&child, 0x1800), Some(1));
        assert_eq!(name_at(&child, 0x5800), Some(2));
        assert_eq!(name_at(&parent, 0x1800), None);
        assert_eq!(name_at(&parent, 0x5800), None);
    }

    #[test]
    fn a_pending_image_is_taken_once_and_its_mapping_replaced() {
        let mut space = AddressSpace::default();
        space.insert(unread(0x1000, 1));
        let (lo, place, path) = space.take_pending(0x1800, true).unwrap();
        assert_eq!((lo, place, &*path), (0x1000, Place::FileBase(0x1000), &b"x"[..]));
        assert!(space.take_pending(0x1800, true).is_none());
        space.replace(lo, sized(0x400, 0x1400, 7));
        assert_eq!(space.len(), 1);
        assert_eq!(name_at(&space, 0x500), Some(7));
        assert_eq!(name_at(&space, 0x1800), None);
    }
}
