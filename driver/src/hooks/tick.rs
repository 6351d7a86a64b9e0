//! The tick: drains its CPU's sample rings into the owners' logs, reports lost samples with
//! DROPNOTIFY records and rotates multiplexed PMCs.

use crate::book::Book;
use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel};
use crate::machine::PerCpu;
use crate::machine::{PendingView, SampleHeader};
use crate::types::PmcHandle;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use pmclog::{Callchain, CallchainFlags, ProgramCounters, Record};

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// The periodic drain of `cpu`, called on `cpu` from thread context (a per-CPU kernel thread
    /// or a softclock run by the timer, never the NMI or a hard interrupt handler, since it
    /// takes the driver's locks): moves the CPU's samples into their owners' logs as CALLCHAIN
    /// records, and sends a DROPNOTIFY to owners whose samples were lost to a full ring. A tick
    /// with nothing to do takes no lock.
    pub fn tick(&self, cpu: Cpu) {
        self.mux_tick(cpu);
        let Some(state) = self.machine.cpu(cpu) else { return };
        let quiet = state.ring.is_empty()
            && state.soft_ring.is_empty()
            && !state.pending.any_pending()
            && !state.slot_drops.load(Ordering::Relaxed)
            && !self.stats.unreported_drops.load(Ordering::Relaxed);
        if quiet {
            // A quiet tick takes no lock.
            return;
        }
        let mut scratch = state.scratch.lock(&self.kernel);
        let book = self.book.lock(&self.kernel);
        let mut drained = false;
        for ring in [&state.ring, &state.soft_ring] {
            while ring.pop(|sample| {
                scratch.clear();
                scratch.extend(sample.frames());
                self.log_sample_locked(&book, cpu, sample.header, &scratch);
            }) {
                drained = true;
            }
        }
        drop(book);
        drop(scratch);
        if drained {
            state.stats.log_sweeps.fetch_add(1, Ordering::Relaxed);
        }
        // A sample whose thread has not returned to user mode for two ticks (it sleeps in the
        // kernel, exited, or went on to another CPU) is logged with the frames it has (the
        // sampled PC, or a kernel callchain) rather than lost.
        state.pending.take_stale(2, |sample| self.log_pending_as_is(cpu, state, sample));
        self.report_drops(state);
    }

    /// Logs every sample of `handle` still waiting on the current CPU `cpu` (with the rest of
    /// the ring, which is drained in order).
    pub(crate) fn drain_samples_of(&self, cpu: Cpu, handle: PmcHandle) {
        self.tick(cpu);
        let Some(state) = self.machine.cpu(cpu) else { return };
        state.pending.take_pmc(handle.raw(), |sample| self.log_pending_as_is(cpu, state, sample));
    }

    /// Logs a waiting sample without its user stack.
    fn log_pending_as_is(&self, cpu: Cpu, state: &PerCpu, sample: &PendingView<'_>) {
        let mut frames = state.scratch.lock(&self.kernel);
        frames.clear();
        frames.extend(sample.frames());
        self.log_sample(cpu, sample.header, &frames);
    }

    /// Logs one sample as a CALLCHAIN record in its PMC owner's log.
    pub(super) fn log_sample(&self, cpu: Cpu, header: SampleHeader, frames: &[u64]) {
        self.log_sample_locked(&self.book.lock(&self.kernel), cpu, header, frames);
    }

    /// [`Self::log_sample`] with the bookkeeping lock held. A sample of a PMC released since is
    /// dropped (release logs a PMC's samples first, so none should be left).
    fn log_sample_locked(&self, book: &Book, cpu: Cpu, header: SampleHeader, frames: &[u64]) {
        let Some(pmc) = PmcHandle::from_raw(header.pmc).and_then(|h| book.pmc(h)) else {
            return;
        };
        let record = Record::Callchain(Callchain {
            pid: header.pid,
            tid: header.tid,
            pmcid: pmc.id.to_u32(),
            cpuflags: CallchainFlags::new(cpu as u16, header.flags as u16),
            pcs: ProgramCounters::from_words(frames),
        });
        self.log_record_at(pmc.owner, cpu, &record, header.tsc);
    }

    /// Moves the loaded slots' lost-sample counts to their PMCs and writes a DROPNOTIFY for
    /// each PMC that lost samples.
    fn report_drops(&self, state: &PerCpu) {
        let mut book = self.book.lock(&self.kernel);
        if state.slot_drops.swap(false, Ordering::Relaxed) {
            for slot in state.slots.iter() {
                let dropped = slot.take_drops();
                let pmc = slot.handle().and_then(|h| book.pmc_mut(h)).filter(|_| dropped > 0);
                if let Some(pmc) = pmc {
                    pmc.dropped += dropped;
                    self.stats.unreported_drops.store(true, Ordering::Relaxed);
                }
            }
        }
        if !self.stats.unreported_drops.swap(false, Ordering::Relaxed) {
            return;
        }
        // Samples lost by PMCs switched out are in their credit cells.
        let handles: Vec<PmcHandle> = book.handles().collect();
        for &handle in &handles {
            book.settle(handle);
        }
        let lossy: Vec<PmcHandle> =
            handles.into_iter().filter(|&h| book.pmc(h).is_some_and(|p| p.dropped > 0)).collect();
        let mut owners = Vec::with_capacity(lossy.len());
        for handle in lossy {
            if let Some(pmc) = book.pmc_mut(handle) {
                pmc.dropped = 0;
                owners.push(pmc.owner);
            }
        }
        drop(book);
        for owner in owners {
            self.log_record(owner, &Record::DropNotify);
        }
    }
}
