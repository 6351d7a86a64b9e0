//! The published state itself: which processes have running PMCs, each CPU's image map, and the
//! credit cells, owned in one place. The bookkeeping writes the running pids and gives out the
//! cells under its lock; the driver images the bookkeeping's load maps here and installs them on
//! each CPU; the hooks read all three with no lock.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use super::credits::{CreditCell, Credits};
use super::image::{ImageMap, LoadImage, LoadTable};
use super::load_map::LoadMap;
use crate::kernel::{Cpu, Kernel, Pid};
use crate::lock::Lock;
use crate::machine::PerCpu;
use core::sync::atomic::{AtomicU64, Ordering};

/// A process's bit in the running pids word ([`Published::may_have_running_pmcs`]).
#[inline]
pub(crate) fn running_pid_bit(pid: Pid) -> u64 {
    1 << (pid as u32 % 64)
}

/// What the bookkeeping publishes for the context-switch hooks.
#[derive(Debug)]
pub(crate) struct Published {
    /// Which processes have running PMCs, written by the bookkeeping for the context-switch
    /// hooks: a thread whose bit is clear has nothing to load, and its switch takes no lock.
    running_pids: Arc<AtomicU64>,
    /// Each CPU's image map, which its switch-in reads (see [`crate::publish`]).
    loads: Box<[LoadTable]>,
    /// Each CPU's flavor: CPUs of one flavor have the same counters and share images.
    flavors: Box<[usize]>,
    /// The first CPU of each flavor, whose counters its images are made from.
    flavor_cpus: Box<[usize]>,
    /// The newest image map of each flavor, which the next one shares unchanged images with
    /// (thread context; taken alone).
    images: Lock<Vec<Arc<ImageMap>>>,
    /// Where switch-out hands back what PMCs counted (see [`crate::publish`]).
    credits: Arc<Credits>,
}

/// The image maps of one load map, one per flavor of CPU, with the maps they replace as the
/// newest (kept until the caller has installed the new ones, then dropped in thread context).
pub(crate) struct Images {
    new: Vec<Arc<ImageMap>>,
    _previous: Vec<Arc<ImageMap>>,
}

impl Published {
    /// Nothing published yet, for the CPUs `cpus`.
    pub(crate) fn new(cpus: &[PerCpu]) -> Self {
        let (flavors, flavor_cpus) = flavors_of(cpus);
        Published {
            running_pids: Arc::new(AtomicU64::new(0)),
            loads: cpus.iter().map(|_| LoadTable::default()).collect(),
            images: Lock::new(flavor_cpus.iter().map(|_| Arc::default()).collect()),
            flavors,
            flavor_cpus,
            credits: Arc::new(Credits::default()),
        }
    }

    /// The running pids word, for the bookkeeping to write.
    pub(crate) fn running_pids(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.running_pids)
    }

    /// The credit cells, for the bookkeeping to give out and settle.
    pub(crate) fn credits(&self) -> Arc<Credits> {
        Arc::clone(&self.credits)
    }

    /// Whether process `pid` may have running PMCs to load (a clear answer is exact; see
    /// [`Driver::switch_in`](crate::Driver::switch_in) for the ordering against PMCSTART).
    #[inline]
    pub(crate) fn may_have_running_pmcs(&self, pid: Pid) -> bool {
        self.running_pids.load(Ordering::SeqCst) & running_pid_bit(pid) != 0
    }

    /// `cpu`'s load lists, for its context-switch hooks.
    #[inline]
    pub(crate) fn load_table(&self, cpu: Cpu) -> Option<&LoadTable> {
        self.loads.get(cpu as usize)
    }

    /// Credit cell `index` (none for [`crate::publish::NO_CELL`]).
    #[inline]
    pub(crate) fn credit_cell(&self, index: u32) -> Option<&CreditCell> {
        self.credits.get(index)
    }

    /// Images `map` for each flavor of CPU (`cpus`), from the newest maps, and makes them the
    /// newest. Thread context, outside the bookkeeping lock (it allocates).
    pub(crate) fn image<K: Kernel>(&self, kernel: &K, cpus: &[PerCpu], map: &LoadMap) -> Images {
        let previous: Vec<Arc<ImageMap>> = self.images.lock(kernel).clone();
        let images: Vec<Arc<ImageMap>> = previous
            .iter()
            .zip(self.flavor_cpus.iter())
            .map(|(previous, &cpu)| {
                let state = &cpus[cpu];
                Arc::new(previous.rebuilt(map, |specs| {
                    LoadImage::build(specs, state.core_type, |row| state.row_counter(row))
                }))
            })
            .collect();
        {
            let mut newest = self.images.lock(kernel);
            for (newest, image) in newest.iter_mut().zip(&images) {
                if image.version() > newest.version() {
                    *newest = Arc::clone(image);
                }
            }
        }
        Images { new: images, _previous: previous }
    }

    /// `cpu`'s load table and the map of `images` it is to install (on `cpu`, with
    /// [`LoadTable::install`]).
    pub(crate) fn for_cpu<'a>(
        &'a self,
        cpu: Cpu,
        images: &'a Images,
    ) -> Option<(&'a LoadTable, &'a Arc<ImageMap>)> {
        let table = self.loads.get(cpu as usize)?;
        let image = self.flavors.get(cpu as usize).and_then(|&f| images.new.get(f))?;
        Some((table, image))
    }
}

/// Each CPU's flavor (an index), and the first CPU of each: CPUs whose rows have the same
/// counters on the same core type share a flavor, and so the images of the processes' loads.
fn flavors_of(cpus: &[PerCpu]) -> (Box<[usize]>, Box<[usize]>) {
    let mut firsts: Vec<usize> = Vec::new();
    let mut flavors = Vec::with_capacity(cpus.len());
    for (index, cpu) in cpus.iter().enumerate() {
        let flavor = firsts.iter().position(|&first| cpus[first].same_counters(cpu));
        flavors.push(flavor.unwrap_or_else(|| {
            firsts.push(index);
            firsts.len() - 1
        }));
    }
    (flavors.into_boxed_slice(), firsts.into_boxed_slice())
}
