//! The context-switch hooks: switch-in loads a process's PMCs from its CPU's image map,
//! switch-out unloads them and hands their counts back to the credit cells; no lock shared with
//! system calls, nothing allocated.

use core::sync::atomic::Ordering;

use crate::backend::{CounterMask, PmuBackend};
use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, Tid};
use crate::machine::{self, PerCpu, Slot, Undo};
use crate::mux::NOT_MULTIPLEXED;
use crate::publish::{ImageEntry, LoadImage, LoadSpec};
use crate::types::PmcHandle;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Scheduler hook: thread `tid` of process `pid` starts running on `cpu` (called on `cpu`,
    /// with preemption disabled). Loads the running PMCs attached to `pid` on this CPU and
    /// starts them together, from the process's image in this CPU's image map (see the crate's
    /// concurrency contract): no lock. A thread of a process without running PMCs costs a few
    /// instructions.
    // An entry point the scheduler calls, kept small: the loading is out of line.
    #[inline(never)]
    pub fn switch_in(&self, cpu: Cpu, pid: Pid, tid: Tid) {
        let Some(state) = self.machine.cpu(cpu) else { return };
        state.set_current(pid, tid);
        // SeqCst, as the stores of the running pid here and of the filter by PMCSTART, which
        // then looks at the running pids: one of the two sees the other, so a PMC started while
        // its target switches in is loaded by one of them.
        if self.published.may_have_running_pmcs(pid) {
            self.load_or_restart(cpu, state, pid);
        }
    }

    /// [`Self::switch_in`] of a process that may have running PMCs: starts again what this CPU
    /// parked for it (see `parking.rs`), or loads its image.
    // Out of line, so that `switch_in` stays as short for a thread without PMCs (a tail call).
    #[inline(never)]
    fn load_or_restart(&self, cpu: Cpu, state: &PerCpu, pid: Pid) {
        if !self.restart_parked(cpu, state, pid) {
            self.load_process_pmcs(cpu, state, pid);
        }
    }

    /// [`Self::switch_in`] of a process that may have running PMCs: loads its image (see
    /// [`crate::publish`]) in one pass.
    #[inline(never)]
    fn load_process_pmcs(&self, cpu: Cpu, state: &PerCpu, pid: Pid) {
        let Some(table) = self.published.load_table(cpu) else { return };
        let Some(map) = table.read() else { return };
        self.evict_parked(state);
        let Some(image) = map.get(pid) else { return };
        let free = (state.published.counters().bits() & image.counters().bits()) == 0;
        let to_start = if free && !image.by_thread() {
            let to_start = self.load_image(state, image, pid);
            if image.parkable() && state.parks {
                state.loaded_parkable(pid, map.version());
            }
            to_start
        } else {
            // A counter of the image holds another PMC (which the rows' dispositions rule
            // out), or the process has thread PMCs: PMC by PMC, those of this thread.
            // (The thread is read back here, not passed: `switch_in` stays as short.)
            self.load_for_thread(state, image.specs(), pid, state.current_tid())
        };
        if !to_start.is_empty() {
            self.backend.start(&self.hw, &state.pmu, to_start);
        }
        if image.multiplexed() {
            // Out of line, under the bookkeeping lock: the turn due now, and its times.
            self.mux_switch_in(cpu);
        }
        if image.user_rdpmc() {
            state.allow_rdpmc();
            self.kernel.set_user_rdpmc(true);
        }
    }

    /// Loads `image` for process `pid` on `state`'s CPU, whose counters are all free: claims
    /// the slots and writes the counters, publishes them with one store, programs their
    /// control registers in one pass and starts them, then loads the other rows. Returns the
    /// counters still to start (those the other rows programmed: none, as their PMCs are
    /// software ones).
    // Inlined into its one caller: a call of its own costs a second prologue per switch-in.
    #[inline(always)]
    fn load_image(&self, state: &PerCpu, image: &LoadImage, pid: Pid) -> CounterMask {
        for (entry, counter) in image.hardware() {
            let Some(slot) = state.slots.get(entry.row as usize) else { continue };
            let load = self.load_value(entry);
            slot.claim(entry.handle, pid, (entry.start, load), entry.sample_flags, entry.cell);
            self.backend.write_counter(&self.hw, *counter, load);
        }
        if !image.counters().is_empty() {
            state.loaded_pmcs();
            state.set_current_counters(image.counters());
            state.published.publish(image.counters());
        }
        self.backend.program_and_start(&self.hw, &state.pmu, image.regs());
        let mut started = CounterMask::EMPTY;
        for (entry, armed) in image.others() {
            let Some(slot) = state.slots.get(entry.row as usize) else { continue };
            if slot.handle().is_none() {
                let load = self.load_value(entry);
                slot.claim(entry.handle, pid, (entry.start, load), entry.sample_flags, entry.cell);
                let counters = machine::program(&self.backend, &self.hw, state, slot, armed, load);
                started = started.union(counters);
                state.add_current(entry.row, slot.counter().mask());
            }
        }
        started
    }

    /// The value `entry`'s counter is loaded with: a sampling PMC continues the process's
    /// period where it stands.
    #[inline]
    fn load_value(&self, entry: &ImageEntry) -> u64 {
        if entry.sample_flags.is_sampling() {
            self.published.credit_cell(entry.cell).map_or(entry.start, |c| c.resume())
        } else {
            entry.start
        }
    }

    /// Loads the PMCs of `specs` that run here and whose slots are free, one by one, for
    /// thread `tid` of process `pid` on `state`'s CPU. Returns the counters to start.
    // Out of line: only processes with thread PMCs need it (the rows' dispositions keep the
    // others from it).
    #[inline(never)]
    fn load_for_thread(
        &self,
        state: &PerCpu,
        specs: &[LoadSpec],
        pid: Pid,
        tid: Tid,
    ) -> CounterMask {
        let mut counters = CounterMask::EMPTY;
        for spec in specs {
            let here = spec.runs_on(state.core_type) && spec.counts_thread(tid);
            if spec.turn != NOT_MULTIPLEXED || !here {
                continue;
            }
            let Some(slot) = state.slots.get(spec.row as usize) else { continue };
            if slot.handle().is_none() {
                let entry = spec.image_entry();
                let load = self.load_value(&entry);
                counters = counters.union(self.program_pmc(state, slot, spec, load, pid));
                state.add_current(spec.row, slot.counter().mask());
            }
        }
        counters
    }

    /// Scheduler hook: thread `tid` of process `pid` stops running on `cpu` (called on `cpu`,
    /// with preemption disabled). Stops its PMCs together, then unloads them and hands what
    /// they counted back to their credit cells (see the crate's concurrency contract): no lock,
    /// but for a PMC with PMC_F_LOG_PROCCSW, whose PROCCSW record goes to its owner's log.
    // An entry point the scheduler calls, kept small: the unloading is out of line.
    #[inline(never)]
    pub fn switch_out(&self, cpu: Cpu, pid: Pid, tid: Tid) {
        let Some(state) = self.machine.cpu(cpu) else { return };
        if state.holds_anything() {
            // Parking (see `parking.rs`) is short enough to stay in the hook.
            if state.may_park() {
                self.park(state, pid);
            } else {
                self.unload_process_pmcs(state, pid, tid);
            }
        }
        // After the counters stopped: a PMI served while they are being stopped (an NMI can
        // land anywhere in the scheduler) samples the thread that is still leaving.
        state.clear_current();
    }

    /// [`Self::switch_out`] of a thread that has PMCs loaded (or RDPMC allowed) here: stops
    /// its counters and clears their control registers in one backend call, hides them from
    /// the interrupt path with one store, then folds each PMC and hands its count back.
    #[inline(never)]
    fn unload_process_pmcs(&self, state: &PerCpu, pid: Pid, tid: Tid) {
        state.left(pid);
        self.mux_switch_out(state, pid);
        let undo = state.take_undo();
        if undo.contains(Undo::RDPMC) {
            self.kernel.set_user_rdpmc(false);
        }
        if !undo.contains(Undo::PMCS) {
            return;
        }
        let counters = state.take_current_counters();
        self.backend.stop_and_unprogram(&self.hw, &state.pmu, counters);
        // Hidden from the interrupt path once stopped and unprogrammed: an interrupt before
        // this store may still fold and reload them (their overflow indications are cleared
        // now, so a later one finds nothing of theirs), and the final reads below take
        // everything.
        state.published.unpublish(counters);
        self.unload_slots(state, counters, pid, tid);
    }

    /// Unloads the PMCs of thread `tid` of process `pid` in the slots of `counters` (stopped,
    /// unprogrammed, hidden) and of the rows without a hardware counter loaded for it (the list
    /// is empty afterwards), and hands their counts back: a switch-out's last step, and an
    /// eviction's (`parking.rs`).
    #[inline(always)]
    pub(crate) fn unload_slots(&self, state: &PerCpu, counters: CounterMask, pid: Pid, tid: Tid) {
        // Inlined wherever it is called: no closure is built in memory.
        counters.for_each_bit(
            #[inline(always)]
            |bit| {
                if let Some(slot) = state.slot_of_counter(bit) {
                    self.unload_slot(slot, pid, tid);
                }
            },
        );
        for row in state.take_current_rows() {
            if let Some(slot) = state.slots.get(row as usize) {
                // A SOFT or TSC row's own flag (a hardware counter's went with the CPU's word).
                slot.unpublish();
                self.unload_slot(slot, pid, tid);
            }
        }
    }

    /// Switch-out of thread `tid` of process `pid`: unloads the PMC in `slot` (hidden from the
    /// interrupt path, its counter stopped and unprogrammed) if it is `pid`'s, and hands what it
    /// counted back to its credit cell.
    #[inline(always)]
    fn unload_slot(&self, slot: &Slot, pid: Pid, tid: Tid) {
        let Some(handle) = slot.handle() else { return };
        if slot.pid() != pid {
            return;
        }
        let flags = slot.sample_flags();
        if flags.is_plain_counting() {
            // The common case, with one test: a counting PMC that logs nothing hands back its
            // count and nothing else.
            let delta = slot.take_final(machine::read(&self.backend, &self.hw, slot));
            if let Some(cell) = self.published.credit_cell(slot.cell()) {
                cell.add(delta);
            }
            slot.release();
            return;
        }
        let (delta, dropped, resume) = self.finish_unload(slot, flags);
        // Handed back before the slot empties: a system call that finds it empty finds this
        // in the cell (see `publish/credits.rs`).
        if let Some(cell) = self.published.credit_cell(slot.cell()) {
            cell.add(delta);
            if let Some(resume) = resume {
                // The next switch-in continues the period where this one left it.
                cell.set_resume(resume);
            }
            if dropped != 0 {
                cell.add_dropped(dropped);
                self.stats.unreported_drops.store(true, Ordering::Relaxed);
            }
        }
        if flags.logs_context_switches() {
            self.log_context_switch(handle, pid, tid, delta);
        }
        slot.release();
    }

    /// Logs a PROCCSW record of `delta` events counted by `handle` for thread `tid` of `pid`.
    // Out of line: only PMC_F_LOG_PROCCSW PMCs take the locks it takes.
    #[inline(never)]
    fn log_context_switch(&self, handle: PmcHandle, pid: Pid, tid: Tid, delta: u64) {
        let book = self.book.lock(&self.kernel);
        if let Some(pmc) = book.pmc(handle) {
            self.log_proc_csw(pmc, pid, tid, delta);
        }
    }
}
