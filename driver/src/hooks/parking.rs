//! Parking: a switch-out that only stops its counters, so that the process switching back in
//! on the same CPU only starts them again.
//!
//! A thread very often comes back to the CPU it left with nothing else measured in between (it
//! blocked, the CPU idled or ran threads of unmeasured processes, then woke it up). Unloading its
//! PMCs at every switch-out and loading them again at every switch-in costs, per PMC, a counter
//! read and write and a control register cleared and written again, beside the driver's own
//! work. So a switch-out whose thread had only a *parkable* image loaded (counting PMCs on
//! hardware counters or software events that log nothing at context switches, no multiplexing,
//! no RDPMC, no thread PMCs: see [`LoadImage::parkable`](crate::publish::LoadImage::parkable)),
//! of a process that came back to this CPU with no other process's PMCs loaded here in between
//! (the last switch-out here that unloaded PMCs was its own), stops the counters and hides them
//! from the interrupt path, and leaves the slots claimed and the control registers programmed:
//! the PMCs are *parked* there for their process. Processes that take turns on a CPU with PMCs
//! of their own are not parked: each switch-in would only evict what the other left, which costs
//! more than unloading at the switch-out.
//!
//! * The next switch-in of a thread of that process on this CPU, if the CPU's image map is still
//!   the one they were loaded from (so the process's load list did not change), publishes and
//!   starts them again: no counter, slot or control register is written.
//! * Anything else that loads PMCs on this CPU evicts them first — the switch-in of another
//!   process with PMCs (or of the same one under a newer map), a PMC started for the thread
//!   running here, a multiplexing turn, a system PMC on a parked slot: their counters are
//!   unprogrammed and each PMC hands its count back to its credit cell, as a switch-out does.
//! * A system call that reads, stops, detaches or releases a parked PMC finds its slot held, as
//!   it finds the slot of one that runs: it peeks at it or unloads it on this CPU
//!   ([`Kernel::run_on_cpu`](crate::Kernel::run_on_cpu)), which forgets it here.
//! * A CPU going offline evicts what it parked ([`Driver::cpu_offline`]).
//!
//! A parked counter is stopped, so nothing it counts belongs to another process. If it
//! overflowed just before it stopped and the interrupt is served only after it was hidden (an
//! NMI held up by another one), the overflow is acknowledged without a reload and the counter
//! goes on from where it wrapped. The modular fold still counts that exactly if the PMC is
//! unloaded or evicted before it counts 2^(width − 1) more events (at least 2^47 on today's
//! 48-bit counters: hours of a CPU's cycles); its next overflow comes a whole counter range
//! later, too late to fold it. A sampling PMC is never parked: its lost overflow would delay its
//! next sample by a whole counter range.

use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid};
use crate::machine::PerCpu;

use crate::backend::PmuBackend;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Switch-out of process `pid`, whose thread had a parkable image loaded on `state`'s CPU
    /// and nothing else: stops its counters, hides its slots from the interrupt path and
    /// parks them.
    #[inline]
    pub(crate) fn park(&self, state: &PerCpu, pid: Pid) {
        let counters = state.running_counters();
        self.backend.stop(&self.hw, &state.pmu, counters);
        // After they stopped: an interrupt before this store may still fold a stopped counter.
        state.published.unpublish(counters);
        Self::show_rows(state, false);
        state.park(pid);
    }

    /// Switch-in of process `pid` on `state`'s CPU `cpu`: starts again what the CPU parked for
    /// it, if it was loaded from the image map the CPU has now. Returns whether it did (the
    /// caller otherwise evicts what is parked and loads the image).
    #[inline]
    pub(crate) fn restart_parked(&self, cpu: Cpu, state: &PerCpu, pid: Pid) -> bool {
        let Some(table) = self.published.load_table(cpu) else { return false };
        let Some(counters) = state.unpark(pid, table.version()) else { return false };
        state.published.publish(counters);
        Self::show_rows(state, true);
        self.backend.start(&self.hw, &state.pmu, counters);
        true
    }

    /// Publishes (`shown`) or hides the slots of the rows without a hardware counter loaded on
    /// `state`'s CPU (a hardware counter's go with the CPU's published-counters word).
    #[inline]
    fn show_rows(state: &PerCpu, shown: bool) {
        for row in state.running_rows() {
            if let Some(slot) = state.slots.get(row as usize) {
                if shown { slot.publish() } else { slot.unpublish() }
            }
        }
    }

    /// Evicts what is parked on `state`'s CPU, if anything: unprograms the (stopped, hidden)
    /// counters and hands each PMC's count back to its credit cell. Called on that CPU, before
    /// anything else is loaded there.
    #[inline]
    pub(crate) fn evict_parked(&self, state: &PerCpu) {
        if state.has_parked() {
            self.evict(state);
        }
    }

    /// [`Self::evict_parked`] once something is known to be parked.
    // Out of line: the switch-in of the parked process does not need it.
    #[inline(never)]
    fn evict(&self, state: &PerCpu) {
        let pid = state.take_parked();
        let counters = state.take_current_counters();
        self.backend.unprogram(&self.hw, &state.pmu, counters);
        // A parked PMC counts and logs nothing: the thread is not needed.
        self.unload_slots(state, counters, pid, -1);
    }

    /// Scheduler hook: `cpu` stops running threads (it goes offline). Called on `cpu` after its
    /// last switch-out, with preemption disabled. What it parked hands its counts back, so that
    /// no count waits on a CPU that no longer runs the driver's closures.
    pub fn cpu_offline(&self, cpu: Cpu) {
        if let Some(state) = self.machine.cpu(cpu) {
            self.evict_parked(state);
        }
    }
}
