//! The interrupt path: the performance-monitoring interrupt folds and reloads the counters
//! that overflowed and leaves a sample in its CPU's ring; software events do the same for SOFT
//! PMCs. No lock, no allocation.

use crate::abi::Class;
use crate::backend::PmuBackend;
use crate::class::RowCounter;
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, TrapFrame};
use crate::machine::{PerCpu, Slot};
use crate::machine::{SampleHeader, SampleRing};
use crate::types::SampleFlags;
use core::sync::atomic::Ordering;
use pmclog::CallchainFlags;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// The performance-monitoring interrupt (an NMI on x86) on `cpu`, called on `cpu` with the
    /// interrupted context. Returns whether a counter of the driver overflowed (whether the NMI
    /// is claimed). Leaves the PMI entry of the local APIC unmasked whatever it returns. Takes
    /// no lock and allocates nothing; a CPU without a PMU never has its MSRs read here.
    ///
    /// The backend's PMI handler (`PmuBackend::pmi`) finds the overflowed counters and
    /// acknowledges them; each one is handled here, in one straight line for the common case
    /// (one counter, a sample of the PC alone).
    // An entry point the NMI handler calls; kept out of line so its cost is its own.
    #[inline(never)]
    pub fn interrupt(&self, cpu: Cpu, frame: &TrapFrame) -> bool {
        let Some(state) = self.machine.cpu(cpu) else {
            crate::backend::cold_path();
            return false;
        };
        let claimed = self.backend.pmi(
            &self.hw,
            &state.pmu,
            // Inlined wherever the backend calls it: no closure is built in memory.
            #[inline(always)]
            move |bit| {
                let slot = state.slot_of_bit(bit);
                slot.is_some_and(|slot| self.counter_overflowed(state, slot, frame))
            },
        );
        let stats = &state.stats;
        let counted = if claimed { &stats.intr_processed } else { &stats.intr_ignored };
        counted.fetch_add(1, Ordering::Relaxed);
        claimed
    }

    /// Handles the overflow of `slot`'s counter on the CPU whose state is `state`, if a PMC is
    /// loaded there: a sampling PMC's overflow is a sample; every counter is folded
    /// and reloaded with its period, so the next fold is again less than 2^width away. Returns
    /// whether a PMC was loaded.
    #[inline(always)]
    fn counter_overflowed(&self, state: &PerCpu, slot: &Slot, frame: &TrapFrame) -> bool {
        // (The caller found the slot published: see `PerCpu::slot_of_bit`.)
        let RowCounter::Hardware(counter) = slot.counter_ref() else {
            crate::backend::cold_path();
            return false;
        };
        self.record_sample(state, &state.ring, slot, slot.sample_flags(), frame);
        let counter = *counter;
        let now = self.backend.read(&self.hw, counter);
        slot.fold_and_reload(now, |start| self.backend.write_counter(&self.hw, counter, start));
        true
    }

    /// The header of a sample of `slot`'s PMC taken at `tsc` in the interruption `frame` on
    /// the CPU whose state is `state`.
    #[inline]
    pub(super) fn sample_header(
        state: &PerCpu,
        slot: &Slot,
        frame: &TrapFrame,
        tsc: u64,
    ) -> SampleHeader {
        let pid = slot.pid();
        SampleHeader {
            pmc: slot.raw_handle(),
            // A system PMC samples whichever process runs.
            pid: if pid >= 0 { pid } else { state.current_pid() },
            tid: state.current_tid(),
            flags: if frame.user { CallchainFlags::USERSPACE } else { 0 },
            tsc,
        }
    }

    /// Counts a sample of `slot`'s PMC lost to a full ring (interrupt path).
    #[inline]
    pub(super) fn count_lost_sample(state: &PerCpu, slot: &Slot) {
        // Rare: the compiler lays the common sample out as one straight line.
        crate::backend::cold_path();
        slot.count_drop();
        state.slot_drops.store(true, Ordering::Relaxed);
        state.stats.intr_bufferfull.fetch_add(1, Ordering::Relaxed);
    }

    /// Puts a sample of `slot`'s PMC (on the CPU whose state is `state`) in `ring`, or counts it
    /// lost if the ring is full; nothing if the PMC does not sample (`flags`). Interrupt path:
    /// no lock, no allocation.
    ///
    /// Without PMC_F_CALLCHAIN the sample is the interrupted PC alone (the common sample, tested
    /// first). With it, see [`Self::record_callchain`].
    ///
    /// `ring` is the one whose only producer is the caller's context (the PMI's, or software
    /// events'); the pending table's entries are claimed with a compare-and-swap, so both may
    /// hold samples there.
    #[inline(always)]
    fn record_sample(
        &self,
        state: &PerCpu,
        ring: &SampleRing,
        slot: &Slot,
        flags: SampleFlags,
        frame: &TrapFrame,
    ) {
        if flags.samples_pc_alone() {
            let header = Self::sample_header(state, slot, frame, self.hw.read_tsc());
            if !ring.push_pc(header, frame.pc) {
                Self::count_lost_sample(state, slot);
            }
        } else if flags.records_callchains() {
            self.record_callchain(state, ring, slot, frame);
        }
    }

    /// A software event `event` (a code from [`Driver::register_soft_event`]) happened on `cpu`.
    /// Interrupt-safe: takes no lock and allocates nothing.
    /// A sampling SOFT PMC takes a sample when its counter overflows (every `reload` events),
    /// through the same path as a hardware sample.
    pub fn soft_event(&self, cpu: Cpu, event: u32, frame: &TrapFrame) {
        let Some(state) = self.machine.cpu(cpu) else { return };
        let Some(soft) = self.layout.class(Class::Soft) else { return };
        let rows = soft.first_row as usize..(soft.first_row + soft.rows) as usize;
        for slot in &state.slots[rows] {
            if !slot.is_running() || slot.soft_event() != event {
                continue;
            }
            let before = slot.soft_counter().fetch_add(1, Ordering::Relaxed);
            if slot.is_sampling() && before == u64::MAX {
                self.record_sample(state, &state.soft_ring, slot, slot.sample_flags(), frame);
                slot.soft_counter().store(slot.start(), Ordering::Relaxed);
            }
        }
    }

    /// Registers a software event named `name` (e.g. `CLOCK.HARD`, `PAGE_FAULT.ALL`) and returns
    /// its event code (from `PMC_EV_SOFT_FIRST`). Registering a name again returns the same code;
    /// EINVAL for an empty name or one of 64 bytes or more, ENOMEM when all 4096 codes are used.
    pub fn register_soft_event(&self, name: &str) -> Result<u32, Errno> {
        if name.is_empty() || name.len() >= crate::abi::PMC_NAME_MAX || name.contains('\0') {
            return Err(Errno::Inval);
        }
        self.book.lock(&self.kernel).register_soft_event(name)
    }
}
