//! The per-CPU runtime: each CPU's slots (a row's PMC as loaded there), its sample rings and
//! the samples waiting for user callchains, its statistics, and what its switch-out has to undo.

mod cpu;
mod pending;
mod ring;
mod slot;
mod stats;

use crate::kernel::Cpu;

pub(crate) use self::cpu::{MAX_ROWS, PerCpu, Undo, program};
pub(crate) use self::pending::{PendingView, UserStack};
pub(crate) use self::ring::{FrameWriter, SampleHeader, SampleRing};
pub(crate) use self::slot::{Slot, read};
pub(crate) use self::stats::CpuStats;

/// The CPUs' state, one per CPU the kernel has (active or not).
#[derive(Debug)]
pub(crate) struct Machine {
    cpus: alloc::boxed::Box<[PerCpu]>,
}

impl Machine {
    pub(crate) fn new(cpus: alloc::vec::Vec<PerCpu>) -> Self {
        Machine { cpus: cpus.into_boxed_slice() }
    }

    /// The state of CPU `cpu`.
    #[inline]
    pub(crate) fn cpu(&self, cpu: Cpu) -> Option<&PerCpu> {
        self.cpus.get(cpu as usize)
    }

    /// Every CPU's state, in CPU order.
    #[inline]
    pub(crate) fn cpus(&self) -> &[PerCpu] {
        &self.cpus
    }

    /// The slot of `row` on `cpu`.
    pub(crate) fn slot(&self, cpu: Cpu, row: u32) -> Option<&Slot> {
        self.cpu(cpu)?.slots.get(row as usize)
    }

    /// The statistics of CPU `cpu` (of CPU 0 for a CPU beyond the machine's).
    pub(crate) fn stats_of(&self, cpu: Cpu) -> &CpuStats {
        &self.cpu(cpu).unwrap_or(&self.cpus[0]).stats
    }
}
