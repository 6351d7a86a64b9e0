//! Ground truth: every event a simulated CPU retired, split by ring ([`GroundTruth`]), as the
//! machine keeps it per thread, per process and per CPU.
//!
//! Its own module so that the machine and its PMI timing ([`crate::timing`]) share it without
//! naming each other.

use std::ops::{Add, AddAssign};

use crate::arch_event::ArchEvent;
use crate::pmu::{EventTotals, Ring, Work};

/// The events of one ring: the PMU's own [`EventTotals`].
pub type RingTruth = EventTotals;

/// Ground truth: every event retired, split by ring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroundTruth {
    rings: [RingTruth; 2],
}

impl GroundTruth {
    /// The events of one ring.
    pub fn ring(&self, ring: Ring) -> &RingTruth {
        &self.rings[ring.index()]
    }

    /// Occurrences of architectural event `event` in both rings.
    pub fn arch(&self, event: ArchEvent) -> u128 {
        self.rings.iter().map(|r| r.arch(event)).sum()
    }

    /// Occurrences of architectural event `event` in `ring`.
    pub fn arch_in(&self, ring: Ring, event: ArchEvent) -> u128 {
        self.ring(ring).arch(event)
    }

    /// Occurrences of raw event (`event_select`, `umask`) in both rings.
    pub fn raw(&self, event_select: u8, umask: u8) -> u128 {
        self.rings.iter().map(|r| r.raw(event_select, umask)).sum()
    }

    /// Block executions in both rings.
    pub fn blocks(&self) -> u128 {
        self.rings.iter().map(RingTruth::blocks).sum()
    }

    /// Adds `repeat` executions of `work` in `ring` (TOPDOWN.SLOTS at `slots_per_cycle` per core
    /// cycle).
    pub fn record(&mut self, ring: Ring, work: &Work, repeat: u64, slots_per_cycle: u8) {
        self.rings[ring.index()].record(work, repeat, slots_per_cycle);
    }

    /// What happened since the snapshot `earlier` of the same totals.
    ///
    /// # Panics
    /// If `earlier` has more of something than `self` (it is not an earlier snapshot).
    pub fn since(&self, earlier: &GroundTruth) -> GroundTruth {
        GroundTruth {
            rings: [self.rings[0].since(&earlier.rings[0]), self.rings[1].since(&earlier.rings[1])],
        }
    }
}

impl AddAssign<&GroundTruth> for GroundTruth {
    fn add_assign(&mut self, other: &GroundTruth) {
        for (mine, theirs) in self.rings.iter_mut().zip(&other.rings) {
            mine.merge(theirs);
        }
    }
}

impl Add<&GroundTruth> for GroundTruth {
    type Output = GroundTruth;
    fn add(mut self, other: &GroundTruth) -> GroundTruth {
        self += other;
        self
    }
}

impl<'a> std::iter::Sum<&'a GroundTruth> for GroundTruth {
    fn sum<I: Iterator<Item = &'a GroundTruth>>(iter: I) -> GroundTruth {
        iter.fold(GroundTruth::default(), |sum, t| sum + t)
    }
}

impl std::iter::Sum<GroundTruth> for GroundTruth {
    fn sum<I: Iterator<Item = GroundTruth>>(iter: I) -> GroundTruth {
        iter.fold(GroundTruth::default(), |sum, t| sum + &t)
    }
}
