//! PMCSTART and PMCSTOP: a PMC's state, published to the context-switch hooks, and loaded or
//! unloaded where it runs now.

use crate::abi::{Mode, PmcFlags, PmcOpSimple, State};
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, UserPtr};
use crate::publish::NO_CELL;
use crate::refusal::{Cause, Refusal};
use crate::types::PmcHandle;
use alloc::vec::Vec;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// PMCSTART.
    pub(super) fn op_start(&self, arg: UserPtr) -> Result<(), Refusal> {
        let request: PmcOpSimple = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, pmc) = self.find_cloned(caller, request.pm_pmcid)?;
        match pmc.state {
            State::Running => return Ok(()),
            State::Allocated | State::Stopped => {}
            _ => return Err(Cause::NotStartable.into()),
        }
        if pmc.flags.contains(PmcFlags::NEEDS_LOGFILE) && !self.has_log(pmc.owner) {
            return Err(Cause::NeedsLog.into());
        }
        if pmc.mode().is_sampling() {
            self.log_kernel_images(pmc.owner);
        }
        let multiplexed = pmc.mux.is_multiplexed();
        if let Some(cpu) = pmc.cpu() {
            if !self.kernel.cpu_active(cpu) {
                return Err(Cause::CpuOffline.into());
            }
            if pmc.mode() == Mode::SystemSampling {
                self.log_initial_mappings(pmc.owner);
            }
            if pmc.hosted {
                return Ok(self.start_hosted(handle, pmc.state, &[])?);
            }
            if multiplexed {
                // The others' times up to now, then the turn due on the CPU.
                self.mux_checkpoint();
                self.set_state(handle, State::Running);
                self.mux_reschedule(handle);
                return Ok(());
            }
            self.set_state(handle, State::Running);
            self.on_cpu(cpu, || {
                let book = self.book.lock(&self.kernel);
                if let Some(pmc) = book.pmc(handle).filter(|p| p.is_running()) {
                    self.load_pmc(cpu, handle, pmc, -1, NO_CELL);
                }
            });
            return Ok(());
        }
        if multiplexed {
            self.mux_checkpoint();
        }
        // The thread a thread PMC attaches to, if PMCSTART attaches it.
        let thread = if pmc.flags.contains(PmcFlags::THREAD) && pmc.targets.is_empty() {
            Some(self.calling_thread(caller).ok_or(Cause::ThreadUnknown)?)
        } else {
            None
        };
        let (self_attached, targets) = {
            let mut book = self.book.lock(&self.kernel);
            let current = book.pmc(handle).ok_or(Cause::UnknownPmc)?;
            let attach_self = current.targets.is_empty();
            if attach_self {
                if current.flags.contains(PmcFlags::ATTACH_DONE) {
                    return Err(Cause::TargetsGone.into());
                }
                let row = current.row;
                let holder = book.target(caller).and_then(|t| t.get(row));
                if holder.is_some_and(|r| r.pmc != handle)
                    || self.mux_attach_conflict(&book, handle, caller)
                {
                    return Err(Cause::RowInUse.into());
                }
                match thread {
                    Some(tid) => book.link_thread(handle, row, caller, tid)?,
                    None => book.link_target(handle, row, caller)?,
                }
            }
            let targets =
                if pmc.hosted { Vec::new() } else { book.set_state(handle, State::Running) };
            (attach_self, targets)
        };
        self.publish_loads(&targets);
        if pmc.hosted {
            let targets = self.book.lock(&self.kernel).pmc(handle).map(|p| p.targets.clone());
            let started = self.start_hosted(handle, pmc.state, &targets.unwrap_or_default());
            if started.is_err() && self_attached {
                // PMCSTART attached the PMC to its owner: undone, flags included.
                let mut book = self.book.lock(&self.kernel);
                book.unlink_target(handle, pmc.row, caller);
                if let Some(p) = book.pmc_mut(handle) {
                    p.flags = pmc.flags;
                }
            }
            return Ok(started?);
        }
        if multiplexed {
            // Threads of the targets that are on a CPU right now count from their turn.
            self.mux_reschedule(handle);
            return Ok(());
        }
        // Threads of the targets that are on a CPU right now start counting at once.
        for cpu in 0..self.kernel.cpu_count() {
            let current = self.machine.cpu(cpu).map_or(-1, |c| c.current_pid());
            let running_target = current >= 0
                && self
                    .book
                    .lock(&self.kernel)
                    .pmc(handle)
                    .is_some_and(|p| p.targets.contains(&current));
            if running_target {
                self.on_cpu(cpu, || self.load_for_current(cpu, handle));
            }
        }
        Ok(())
    }

    /// Starts a host-counted PMC that was in state `previous` on `targets`: it is running as
    /// the host starts it (a sample that comes at once belongs to it), and back in `previous`
    /// if the host refuses.
    fn start_hosted(
        &self,
        handle: PmcHandle,
        previous: State,
        targets: &[Pid],
    ) -> Result<(), Errno> {
        self.set_state(handle, State::Running);
        let started = self.hosted_start(handle, targets);
        if started.is_err() {
            self.set_state(handle, previous);
        }
        started
    }

    /// Loads `handle` on the current CPU `cpu` if it runs and a target runs here.
    fn load_for_current(&self, cpu: Cpu, handle: PmcHandle) {
        let (pid, tid) = (
            self.machine.cpus()[cpu as usize].current_pid(),
            self.machine.cpus()[cpu as usize].current_tid(),
        );
        let book = self.book.lock(&self.kernel);
        let Some(pmc) = book.pmc(handle) else { return };
        // What another process parked here leaves first (see `crate::hooks::parking`).
        if let Some(state) = self.machine.cpu(cpu) {
            self.evict_parked(state);
        }
        let free = self.machine.slot(cpu, pmc.slot_row).is_some_and(|s| s.handle().is_none());
        if pmc.is_running() && pmc.targets.contains(&pid) && pmc.counts_thread(tid) && free {
            let cell = pmc.cell_of(pid).unwrap_or(NO_CELL);
            self.load_pmc(cpu, handle, pmc, pid, cell);
        }
    }

    /// Sets `handle`'s state and gives every CPU its targets' new load lists.
    fn set_state(&self, handle: PmcHandle, state: State) {
        let targets = self.book.lock(&self.kernel).set_state(handle, state);
        self.publish_loads(&targets);
    }

    /// PMCSTOP: the PMC leaves every CPU at once and its count is final until restarted.
    pub(super) fn op_stop(&self, arg: UserPtr) -> Result<(), Refusal> {
        let request: PmcOpSimple = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, pmc) = self.find_cloned(caller, request.pm_pmcid)?;
        if pmc.state != State::Running {
            return Ok(());
        }
        if let Some(cpu) = pmc.cpu() {
            if !self.kernel.cpu_active(cpu) {
                return Err(Cause::CpuOffline.into());
            }
        }
        let multiplexed = pmc.mux.is_multiplexed();
        if multiplexed {
            // Its times and the others' end here.
            self.mux_checkpoint();
        }
        self.set_state(handle, State::Stopped);
        if pmc.hosted {
            self.hosted_stop(handle);
        } else {
            self.unload_everywhere(handle);
        }
        if multiplexed {
            self.mux_reschedule(handle);
        }
        Ok(())
    }
}
