//! The image maps: each process's load list worked out, in thread context, for each flavor of
//! CPU into what a switch-in loads in one pass, and each CPU's reference to the map its hooks
//! read.

use alloc::sync::Arc;
use alloc::vec::Vec;

use super::load_map::{ImageEntry, LoadMap, LoadSpec};
use crate::arch::Backend;
use crate::backend::{CounterMask, PmuBackend};
use crate::class::{HwConfig, RowCounter};
use crate::kernel::Pid;
use crate::mux::NOT_MULTIPLEXED;
use crate::sync::{AtomicU64, Ordering};

/// What a switch-in loads for one process on CPUs of one flavor, worked out from the process's
/// [`LoadSpec`]s in thread context: the PMCs not multiplexed that run on the flavor's core type,
/// one per row, those on hardware counters apart with their counters and the backend's image
/// of their control registers, so that loading them is claiming their slots, writing their
/// counters, one pass over the control registers and one start.
#[derive(Debug)]
pub(crate) struct LoadImage {
    /// PMCs on a hardware counter, with it.
    hardware: Vec<(ImageEntry, <Backend as PmuBackend>::Counter)>,
    /// The others (SOFT, TSC, or a row without its counter on this flavor), with what they load.
    others: Vec<(ImageEntry, HwConfig)>,
    /// The control registers of `hardware`'s counters.
    regs: <Backend as PmuBackend>::Image,
    /// `hardware`'s counters.
    counters: CounterMask,
    /// Whether one of the PMCs lets its owner read its counter with RDPMC.
    user_rdpmc: bool,
    /// Whether the process has multiplexed PMCs (which the switch-in loads by their turn).
    multiplexed: bool,
    /// Whether the process has thread PMCs: it has no image then (the rest is empty), and a
    /// switch-in loads its specs one by one for the thread that switches in.
    by_thread: bool,
    /// Whether a switch-out may park it (see `hooks/parking.rs`): counting PMCs on hardware
    /// counters or software events only, that log nothing, with no RDPMC, multiplexing or
    /// thread PMCs.
    parkable: bool,
    /// The list it was made from (an unchanged list keeps its image).
    specs: Arc<[LoadSpec]>,
}

impl LoadImage {
    /// The image of `specs` for CPUs of core type `core_type` whose rows have the counters
    /// `row_counter` gives (`None`: a row they do not have). Thread context: it allocates.
    pub(crate) fn build(
        specs: &Arc<[LoadSpec]>,
        core_type: u8,
        row_counter: impl Fn(u32) -> Option<RowCounter>,
    ) -> Self {
        let mut image = LoadImage {
            hardware: Vec::new(),
            others: Vec::new(),
            regs: Default::default(),
            counters: CounterMask::EMPTY,
            user_rdpmc: false,
            multiplexed: specs.iter().any(|s| s.turn != NOT_MULTIPLEXED),
            by_thread: specs.iter().any(|s| s.tid.is_some()),
            parkable: false,
            specs: Arc::clone(specs),
        };
        if image.by_thread {
            return image;
        }
        for spec in specs.iter() {
            // A multiplexed PMC waits for its turn, which the bookkeeping keeps (see `crate::mux`);
            // a PMC of one core type runs only on CPUs of that type.
            if spec.turn != NOT_MULTIPLEXED {
                continue;
            }
            if !spec.runs_on(core_type) || image.has_row(spec.row) {
                continue;
            }
            let Some(counter) = row_counter(spec.row) else { continue };
            let entry = spec.image_entry();
            image.user_rdpmc |= spec.user_rdpmc;
            match (spec.armed, counter) {
                (HwConfig::Hardware(config), RowCounter::Hardware(counter)) => {
                    Backend::add_to_image(&mut image.regs, counter, config);
                    image.counters = image.counters.union(Backend::counter_mask(counter));
                    image.hardware.push((entry, counter));
                }
                (armed, _) => image.others.push((entry, armed)),
            }
        }
        // A parked software counter counts nothing (its slot is hidden from the events); a TSC
        // would go on.
        image.parkable = !image.multiplexed
            && !image.user_rdpmc
            && image.hardware.iter().all(|(e, _)| e.sample_flags.is_plain_counting())
            && image.others.iter().all(|(e, armed)| {
                e.sample_flags.is_plain_counting() && matches!(armed, HwConfig::Soft { .. })
            });
        image
    }

    fn has_row(&self, row: u32) -> bool {
        self.hardware.iter().any(|(e, _)| e.row == row)
            || self.others.iter().any(|(e, _)| e.row == row)
    }

    /// The PMCs on hardware counters, with them.
    #[inline]
    pub(crate) fn hardware(&self) -> &[(ImageEntry, <Backend as PmuBackend>::Counter)] {
        &self.hardware
    }

    /// The PMCs on rows without a hardware counter, with what they load.
    #[inline]
    pub(crate) fn others(&self) -> &[(ImageEntry, HwConfig)] {
        &self.others
    }

    /// The control registers of [`LoadImage::hardware`]'s counters.
    #[inline]
    pub(crate) fn regs(&self) -> &<Backend as PmuBackend>::Image {
        &self.regs
    }

    /// [`LoadImage::hardware`]'s counters.
    #[inline]
    pub(crate) fn counters(&self) -> CounterMask {
        self.counters
    }

    #[inline]
    pub(crate) fn user_rdpmc(&self) -> bool {
        self.user_rdpmc
    }

    #[inline]
    pub(crate) fn multiplexed(&self) -> bool {
        self.multiplexed
    }

    /// Whether a switch-out may park it (see `hooks/parking.rs`).
    #[inline]
    pub(crate) fn parkable(&self) -> bool {
        self.parkable
    }

    /// Whether the process has thread PMCs (and so no image: see [`LoadImage::specs`]).
    #[inline]
    pub(crate) fn by_thread(&self) -> bool {
        self.by_thread
    }

    /// The list it was made from.
    #[inline]
    pub(crate) fn specs(&self) -> &[LoadSpec] {
        &self.specs
    }
}

/// An entry of an [`ImageMap`]'s table: a process and its image.
type ImageSlot = Option<(Pid, Arc<LoadImage>)>;

/// A [`LoadMap`] imaged for one flavor of CPU: what its switch-ins load, in a table indexed by
/// pid (open addressing, at most half full, probed in order), so that a switch-in finds its
/// process's image with a few instructions.
#[derive(Debug)]
pub(crate) struct ImageMap {
    /// The version of the [`LoadMap`] it images.
    version: u64,
    table: alloc::boxed::Box<[ImageSlot]>,
}

impl Default for ImageMap {
    fn default() -> Self {
        ImageMap { version: 0, table: alloc::boxed::Box::new([None]) }
    }
}

impl ImageMap {
    /// What to load for process `pid`.
    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<&LoadImage> {
        // The table's length is a power of two, and it has an empty entry that ends the probe.
        let mask = self.table.len().wrapping_sub(1);
        let mut index = pid as usize & mask;
        loop {
            match self.table.get(index)? {
                Some((p, image)) if *p == pid => return Some(image),
                Some(_) => index = (index + 1) & mask,
                None => return None,
            }
        }
    }

    /// The version of the load map it images.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// The image of `map`, sharing this one's images of the lists that did not change and
    /// making the others with `build`. Thread context.
    pub(crate) fn rebuilt(
        &self,
        map: &LoadMap,
        build: impl Fn(&Arc<[LoadSpec]>) -> LoadImage,
    ) -> ImageMap {
        let size = (2 * map.processes.len()).max(1).next_power_of_two();
        let mut table: alloc::boxed::Box<[ImageSlot]> = (0..size).map(|_| None).collect();
        for (&pid, specs) in &map.processes {
            let image = match self.entry(pid) {
                Some(image) if Arc::ptr_eq(&image.specs, specs) => Arc::clone(image),
                _ => Arc::new(build(specs)),
            };
            let mut index = pid as usize & (size - 1);
            while table[index].is_some() {
                index = (index + 1) & (size - 1);
            }
            table[index] = Some((pid, image));
        }
        ImageMap { version: map.version, table }
    }

    /// The shared image of process `pid`.
    fn entry(&self, pid: Pid) -> Option<&Arc<LoadImage>> {
        self.table.iter().flatten().find(|(p, _)| *p == pid).map(|(_, image)| image)
    }
}

/// One CPU's reference to the image map its hooks read, on cache lines of its own.
#[repr(align(64))]
#[derive(Debug, Default)]
pub(crate) struct LoadTable {
    map: spin::Mutex<Arc<ImageMap>>,
    /// The version of `map`, for a switch-in that only needs to know whether it changed
    /// (written with `map`, on this CPU).
    version: AtomicU64,
}

impl LoadTable {
    /// The map, for the switch hooks of its CPU. `None` would mean a closure of the driver is
    /// running on this CPU at the same time, which the kernel's contract rules out; the hooks
    /// then load nothing rather than wait.
    #[inline]
    pub(crate) fn read(&self) -> Option<spin::MutexGuard<'_, Arc<ImageMap>>> {
        self.map.try_lock()
    }

    /// Makes `map` the one this CPU's hooks read, unless it has a newer one already; returns the
    /// map it no longer holds (the old one, or `map`), for the caller to drop. Called on this
    /// CPU.
    pub(crate) fn install(&self, map: Arc<ImageMap>) -> Arc<ImageMap> {
        let mut current = self.map.lock();
        if map.version > current.version {
            self.version.store(map.version, Ordering::Relaxed);
            core::mem::replace(&mut *current, map)
        } else {
            map
        }
    }

    /// The version of the image map this CPU's hooks read (called on this CPU).
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::load_map::{LoadMap, LoadSpec, NO_CELL};
    use super::{ImageMap, LoadImage, LoadTable};
    use crate::class::{HwConfig, RowCounter};
    use crate::types::{PmcHandle, SampleFlags};
    use alloc::sync::Arc;

    fn spec(row: u32, armed: HwConfig) -> LoadSpec {
        LoadSpec {
            row,
            turn: crate::mux::NOT_MULTIPLEXED,
            core_type: 0,
            tid: None,
            handle: PmcHandle::new(row as usize, 0),
            armed,
            start: 0,
            cell: NO_CELL,
            user_rdpmc: false,
            sample_flags: SampleFlags::default(),
        }
    }

    fn list(row: u32) -> Arc<[LoadSpec]> {
        Arc::from([spec(row, HwConfig::Tsc)])
    }

    /// Images for CPUs whose rows 0..8 are all TSC rows.
    fn images(map: &LoadMap, previous: &ImageMap) -> ImageMap {
        previous.rebuilt(map, |specs| {
            LoadImage::build(specs, 0, |row| (row < 8).then_some(RowCounter::Tsc))
        })
    }

    #[test]
    fn a_cpu_takes_a_newer_map_only_and_gives_back_the_one_it_drops() {
        let table = LoadTable::default();
        let first = LoadMap::default().with([(7, Some(list(1)))]);
        let second = first.with([(8, Some(list(2))), (7, None)]);
        assert_eq!(first.get(7).map(|l| l[0].row), Some(1));
        assert!(second.get(7).is_none() && second.get(8).is_some(), "the next version changed");
        assert!(first.get(8).is_none(), "an older version never changes");
        let first = Arc::new(images(&first, &ImageMap::default()));
        let second = Arc::new(images(&second, &first));
        let replaced = table.install(Arc::clone(&second));
        assert!(replaced.get(7).is_none() && replaced.get(8).is_none(), "the empty map goes back");
        let refused = table.install(Arc::clone(&first));
        assert!(Arc::ptr_eq(&refused, &first), "an older map is given back, not installed");
        let map = table.read().expect("nobody else holds it");
        assert!(map.get(8).is_some(), "the CPU reads the newest map");
    }

    #[test]
    fn unchanged_lists_are_shared_between_versions() {
        let first = LoadMap::default().with([(7, Some(list(1)))]);
        let second = first.with([(8, Some(list(2)))]);
        let (a, b) = (first.processes.get(&7).unwrap(), second.processes.get(&7).unwrap());
        assert!(Arc::ptr_eq(a, b));
    }

    #[test]
    fn an_unchanged_list_keeps_its_image_and_a_changed_one_is_imaged_again() {
        let first = LoadMap::default().with([(7, Some(list(1))), (8, Some(list(2)))]);
        let second = first.with([(8, Some(list(3)))]);
        let (old, new) =
            (images(&first, &ImageMap::default()), images(&second, &ImageMap::default()));
        let next = images(&second, &old);
        assert_eq!(next.version(), second.version, "it images the newer map");
        assert!(Arc::ptr_eq(old.entry(7).unwrap(), next.entry(7).unwrap()), "7's list is the same");
        assert!(!Arc::ptr_eq(old.entry(8).unwrap(), next.entry(8).unwrap()), "8's changed");
        assert_eq!(
            next.get(8).map(|i| i.others()[0].0.row),
            new.get(8).map(|i| i.others()[0].0.row)
        );
        assert_eq!(next.get(8).map(|i| i.others()[0].0.row), Some(3));
    }

    #[test]
    fn an_image_holds_what_runs_on_its_flavor_once_per_row() {
        let core_only = LoadSpec { core_type: 0x40, user_rdpmc: true, ..spec(3, HwConfig::Tsc) };
        // The same PMC's encoding for the other core type, on the same row.
        let atom_only = LoadSpec { core_type: 0x20, handle: PmcHandle::new(99, 0), ..core_only };
        let multiplexed = LoadSpec { turn: 0, ..spec(4, HwConfig::Tsc) };
        let soft = spec(1, HwConfig::Soft { event: 5 });
        let twice = LoadSpec { handle: PmcHandle::new(77, 0), ..soft };
        let missing = spec(9, HwConfig::Tsc);
        let specs: Arc<[LoadSpec]> =
            Arc::from([atom_only, multiplexed, soft, twice, core_only, missing]);
        let rows = |row: u32| {
            (row < 8).then_some(if row == 1 { RowCounter::Soft } else { RowCounter::Tsc })
        };
        let on_core = LoadImage::build(&specs, 0x40, rows);
        let loaded: alloc::vec::Vec<_> =
            on_core.others().iter().map(|(e, _)| (e.row, e.handle)).collect();
        assert_eq!(
            loaded,
            [(1, soft.handle), (3, core_only.handle)],
            "one PMC per row, of its type"
        );
        assert!(on_core.multiplexed(), "the switch-in then loads the turn due");
        assert!(on_core.user_rdpmc());
        assert!(on_core.hardware().is_empty() && on_core.counters().is_empty());
        assert_eq!(on_core.specs().len(), 6);
        let on_atom = LoadImage::build(&specs, 0x20, rows);
        let loaded: alloc::vec::Vec<_> =
            on_atom.others().iter().map(|(e, _)| (e.row, e.handle)).collect();
        assert_eq!(loaded, [(3, atom_only.handle), (1, soft.handle)]);
        assert!(on_atom.user_rdpmc(), "the other encoding's owner reads it too");
    }

    #[test]
    fn processes_whose_pids_collide_in_the_table_are_all_found() {
        // Three processes in a table of 8: pids 1, 9 and 17 all start their probe at entry 1.
        let map =
            LoadMap::default().with([(1, Some(list(1))), (9, Some(list(2))), (17, Some(list(3)))]);
        let images = images(&map, &ImageMap::default());
        for (pid, row) in [(1, 1), (9, 2), (17, 3)] {
            assert_eq!(images.get(pid).map(|i| i.others()[0].0.row), Some(row), "pid {pid}");
        }
        assert!(images.get(25).is_none() && images.get(2).is_none(), "the probe ends at a hole");
        assert!(ImageMap::default().get(1).is_none());
    }
}
