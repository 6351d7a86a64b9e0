//! What one execution of a basic block does ([`Work`]): its architectural events, raw
//! (model-specific) events and offcore requests.
//!
//! A leaf of the crate (it names only [`crate::arch_event`]): the PMU retires it, the workloads
//! are made of it and the offcore-response MSRs select from it.

use crate::arch_event::ArchEvent;

/// A count of a non-architectural (model-specific) event, identified by its event select and unit
/// mask, in a [`Work`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawCount {
    /// Event select (IA32_PERFEVTSELx bits 7:0).
    pub event_select: u8,
    /// Unit mask (bits 15:8).
    pub umask: u8,
    /// Second unit mask (bits 47:40, on models with UMASK2; 0 otherwise).
    pub umask2: u8,
    /// Occurrences per execution of the block.
    pub count: u64,
}

/// What one execution of a basic block does, in architectural events (SDM Vol. 3B Table 21-1)
/// plus any raw events. TOPDOWN.SLOTS is derived: `core_cycles ×`
/// [`PmuModel::topdown_slots_per_cycle`](crate::cpuid::PmuModel::topdown_slots_per_cycle).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Work {
    /// Instructions retired (0xC0/0x00; fixed counter 0).
    pub instructions: u64,
    /// Unhalted core cycles (0x3C/0x00; fixed counter 1). The CMASK / INV / EDGE model spreads
    /// every event of the block over these cycles.
    pub core_cycles: u64,
    /// Unhalted reference cycles (0x3C/0x01; fixed counter 2); the TSC advances by the same amount.
    pub ref_cycles: u64,
    /// LLC references (0x2E/0x4F).
    pub llc_references: u64,
    /// LLC misses (0x2E/0x41).
    pub llc_misses: u64,
    /// Branch instructions retired (0xC4/0x00).
    pub branches: u64,
    /// Mispredicted branches retired (0xC5/0x00).
    pub branch_mispredicts: u64,
    /// Model-specific events.
    pub raw: Vec<RawCount>,
    /// Offcore requests, by the response value that selects them (see [`crate::offcore`]).
    pub offcore: Vec<OffcoreCount>,
}

impl Work {
    /// A block with every architectural event and no two counts equal (1 000 instructions in
    /// 1 700 core and 1 300 reference cycles, 40 LLC references, 9 misses, 180 branches, 11
    /// mispredicted), so that a counter of the wrong event shows.
    pub fn every_event_distinct() -> Work {
        Work {
            instructions: 1_000,
            core_cycles: 1_700,
            ref_cycles: 1_300,
            llc_references: 40,
            llc_misses: 9,
            branches: 180,
            branch_mispredicts: 11,
            raw: Vec::new(),
            offcore: Vec::new(),
        }
    }

    /// A kernel-mode companion of [`Work::every_event_distinct`], with counts of its own (300
    /// instructions in 650 core and 500 reference cycles, 25 LLC references, 7 misses, 41
    /// branches, 3 mispredicted), so that the two rings' shares of a count are told apart.
    pub fn kernel_events_distinct() -> Work {
        Work {
            instructions: 300,
            core_cycles: 650,
            ref_cycles: 500,
            llc_references: 25,
            llc_misses: 7,
            branches: 41,
            branch_mispredicts: 3,
            raw: Vec::new(),
            offcore: Vec::new(),
        }
    }

    /// The block plus `count` occurrences of raw event (`event_select`, `umask`).
    pub fn with_raw(self, event_select: u8, umask: u8, count: u64) -> Self {
        self.with_raw_umask2(event_select, umask, 0, count)
    }

    /// The block plus `count` occurrences of raw event (`event_select`, `umask`, `umask2`).
    pub fn with_raw_umask2(mut self, event_select: u8, umask: u8, umask2: u8, count: u64) -> Self {
        self.raw.push(RawCount { event_select, umask, umask2, count });
        self
    }

    /// The block plus `count` offcore requests selected by the response value `response`.
    pub fn with_offcore(mut self, response: u64, count: u64) -> Self {
        self.offcore.push(OffcoreCount { response, count });
        self
    }

    /// Occurrences of architectural event `event` per execution, with TOPDOWN.SLOTS at
    /// `slots_per_cycle` per core cycle.
    pub fn arch(&self, event: ArchEvent, slots_per_cycle: u8) -> u64 {
        match event {
            ArchEvent::CoreCycles => self.core_cycles,
            ArchEvent::Instructions => self.instructions,
            ArchEvent::RefCycles => self.ref_cycles,
            ArchEvent::LlcReferences => self.llc_references,
            ArchEvent::LlcMisses => self.llc_misses,
            ArchEvent::Branches => self.branches,
            ArchEvent::BranchMispredicts => self.branch_mispredicts,
            ArchEvent::TopdownSlots => self.core_cycles.saturating_mul(u64::from(slots_per_cycle)),
        }
    }
}

/// Offcore requests of one execution of a block, selected by an exact response value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OffcoreCount {
    /// The MSR_OFFCORE_RSP_x value that selects these requests.
    pub response: u64,
    /// How many per execution.
    pub count: u64,
}
